//! `ingot bench`: prompt processing (`pp`) and decode (`tg`) throughput at given cache depths, as a
//! table shaped like llama-bench's (or one JSON object). The measuring lives in
//! `ingot_bench::decode`; this file reads the flags.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use ingot_bench::decode::{self, DecodeBench, Meta};
use ingot_engine::{BackendKind, OpenOptions};
use ingot_gguf::GgufFile;
use ingot_model::ModelConfig;

#[derive(clap::Args)]
pub struct Args {
    /// The GGUF model file.
    #[arg(short, long)]
    model: PathBuf,
    /// Cache depths, comma-separated: tokens already in the cache before the timed tokens
    /// (llama-bench's `-d`/`--n-depth`).
    #[arg(
        short = 'd',
        long,
        visible_alias = "n-depth",
        value_delimiter = ',',
        default_value = "0"
    )]
    depths: Vec<usize>,
    /// Prompt lengths, comma-separated: a `ppP` test feeds P tokens at once per repetition (0:
    /// none).
    #[arg(
        short = 'p',
        long = "n-prompt",
        value_delimiter = ',',
        default_value = "512"
    )]
    n_prompt: Vec<usize>,
    /// Tokens decoded one by one (and timed) per repetition of the `tg` test (0: no `tg` test).
    #[arg(short = 'n', long = "n-gen", default_value_t = 64)]
    n_gen: usize,
    /// Repetitions per depth; the table shows their mean and standard deviation.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    #[arg(long, value_enum, default_value_t = BackendKind::Cpu)]
    backend: BackendKind,
    #[command(flatten)]
    experts: super::experts::ExpertArgs,
    #[command(flatten)]
    cache: super::cache::CacheArgs,
    #[command(flatten)]
    mla: super::cache::MlaArgs,
    /// With --draft: greedy generation of -n tokens after a prompt of the first -p value, with and
    /// without drafts (tokens/s, acceptance, tokens per verify step), instead of the pp/tg tests.
    #[command(flatten)]
    draft: super::draft::DraftArgs,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Most repetitions or timed tokens accepted: beyond this a typo, not a bench.
const MAX_COUNT: usize = 100_000;

/// The first output line: the GPU's state from NVML, or the CPU model and thread count.
fn witness(backend: BackendKind) -> String {
    match backend {
        BackendKind::Cuda => ingot_bench::witness::gpu(0)
            .unwrap_or_else(|e| format!("gpu: state unknown (NVML: {e})")),
        _ => ingot_bench::witness::cpu(ingot_bench::witness::rayon_threads()),
    }
}

fn check_args(a: &Args) -> Result<()> {
    ensure!(!a.depths.is_empty(), "--depths is empty");
    ensure!(
        a.n_gen <= MAX_COUNT,
        "-n {} is out of range 0..={MAX_COUNT}",
        a.n_gen
    );
    if let Some(p) = a.n_prompt.iter().find(|&&p| p > MAX_COUNT) {
        anyhow::bail!("-p {p} is out of range 0..={MAX_COUNT}");
    }
    ensure!(
        a.n_gen > 0 || a.n_prompt.iter().any(|&p| p > 0),
        "-p 0 and -n 0: nothing to measure"
    );
    ensure!(
        (1..=MAX_COUNT).contains(&a.reps),
        "--reps {} is out of range 1..={MAX_COUNT}",
        a.reps
    );
    Ok(())
}

pub fn run(a: Args) -> Result<()> {
    check_args(&a)?;
    let (backend, why_cpu) = a.backend.resolve();
    if let Some(why) = why_cpu {
        eprintln!("bench: backend auto: cpu ({why})");
    }
    let file =
        GgufFile::open(&a.model).with_context(|| format!("reading {}", a.model.display()))?;
    let config = ModelConfig::from_gguf(file.header()).context("model config")?;
    let max_depth = a.depths.iter().copied().max().unwrap_or(0);
    let timed = if a.draft.draft.is_some() {
        // The drafted bench generates after a prompt of the first -p value.
        a.n_prompt.first().copied().unwrap_or(0) + a.n_gen
    } else {
        a.n_prompt.iter().copied().fold(a.n_gen, usize::max)
    };
    let ctx = max_depth
        .checked_add(timed)
        .filter(|&c| c <= config.n_ctx_train)
        .with_context(|| {
            format!(
                "depth {max_depth} + {timed} tokens exceeds the model's training context {}",
                config.n_ctx_train
            )
        })?;
    let meta = Meta {
        witness: witness(backend),
        model: config
            .name
            .clone()
            .unwrap_or_else(|| "deepseek2".to_string()),
        size_bytes: file.header().total_tensor_bytes(),
        params: file.header().tensors.iter().map(|t| t.n_elements()).sum(),
        backend: backend.name().to_uppercase(),
        threads: match backend {
            // The host thread only enqueues graph replays.
            BackendKind::Cuda => 1,
            _ => ingot_bench::witness::rayon_threads(),
        },
        type_k: a.cache.cache_type.name().to_string(),
    };
    // The witness goes first, before minutes of loading and filling.
    if !a.json {
        println!("{}", meta.witness);
        std::io::stdout().flush()?;
    }
    let load = Instant::now();
    let drafts = a.draft.drafts()?;
    let mut engine = OpenOptions {
        backend,
        ctx,
        progress: true,
        vram_budget: a.experts.budget()?,
        cache_type: a.cache.cache_type,
        mla_form: a.mla.mla_form,
        mtp_head_rows: drafts.and_then(|d| d.vocab),
    }
    .open(&file)
    .map_err(super::engine_error)?;
    eprintln!("bench: {}", engine.description);
    eprintln!(
        "bench: loaded {} in {:.1} s; depths {:?}, prompts {:?}, {} generated tokens, {} reps each",
        meta.model,
        load.elapsed().as_secs_f64(),
        a.depths,
        a.n_prompt,
        a.n_gen,
        a.reps
    );
    if let Some(drafts) = drafts {
        ensure!(!a.json, "--json is not available with --draft");
        let bench = ingot_bench::speculative::SpecBench {
            n_prompt: a.n_prompt.first().copied().unwrap_or(0),
            n_gen: a.n_gen,
            reps: a.reps,
            drafts,
            ctx,
        };
        let results = bench
            .run(engine.decoder.as_mut(), |line| eprintln!("bench: {line}"))
            .with_context(|| format!("--draft mtp on backend {backend}"))?;
        print!(
            "{}",
            ingot_bench::speculative::table(&meta, a.n_gen, &results)
        );
        return Ok(());
    }
    let bench = DecodeBench {
        depths: a.depths.clone(),
        n_prompt: a.n_prompt.clone(),
        n_gen: a.n_gen,
        reps: a.reps,
    };
    let results = bench.run(engine.decoder.as_mut(), |line| eprintln!("bench: {line}"))?;
    if a.json {
        println!("{}", decode::json(&meta, &results));
    } else {
        print!("{}", decode::table(&meta, &results));
    }
    Ok(())
}
