//! `ingot run`: tokenize a prompt, prefill, then stream sampled tokens to stdout.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use ingot_engine::{BackendKind, OpenOptions};
use ingot_gguf::{GgufFile, OutputFile, OutputPolicy};
use ingot_model::trace::{Phase, TraceHeader, TraceRecord, TraceWriter};
use ingot_model::{Decoder, GenerateOptions, Generator, ModelConfig, SamplerConfig};
use ingot_tokenizer::{ChatRequest, ChatTemplate, Role, Tokenizer};

#[derive(clap::Args, Clone)]
pub struct Args {
    /// The GGUF model file.
    #[arg(short, long)]
    pub model: PathBuf,
    /// The prompt.
    #[arg(short, long, default_value = "")]
    pub prompt: String,
    /// Tokens to generate.
    #[arg(short = 'n', long = "n-predict", default_value_t = 64)]
    pub n_predict: usize,
    /// Wrap the prompt in the model's chat template: the file's `tokenizer.chat_template`, or the
    /// built-in deepseek2 format ("User: ...\n\nAssistant:") when it has none.
    #[arg(long)]
    pub chat: bool,
    /// System prompt for --chat.
    #[arg(long, requires = "chat")]
    pub system: Option<String>,
    /// Context size in tokens (prompt + generated): default 4096 or the model's training context
    /// when that is smaller; 0 takes the training context; more than it is refused.
    #[arg(short = 'c', long = "ctx")]
    pub ctx: Option<usize>,
    #[arg(long, value_enum, default_value_t = BackendKind::Auto)]
    pub backend: BackendKind,
    #[command(flatten)]
    pub experts: super::experts::ExpertArgs,
    #[command(flatten)]
    pub cache: super::cache::CacheArgs,
    #[command(flatten)]
    pub mla: super::cache::MlaArgs,
    #[command(flatten)]
    pub draft: super::draft::DraftArgs,
    /// Never choose an end-of-generation token: generate all --n-predict tokens (as llama.cpp's
    /// --ignore-eos). Not with --draft.
    #[arg(long)]
    pub ignore_eos: bool,
    /// Sampling temperature; 0 is greedy (argmax, lowest id on ties).
    #[arg(long, default_value_t = 0.8)]
    pub temp: f32,
    /// Keep the k most likely tokens (0 = off).
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    /// Nucleus sampling threshold (1 = off).
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f32,
    /// Drop tokens below min_p times the best one's probability (0 = off).
    #[arg(long, default_value_t = 0.05)]
    pub min_p: f32,
    /// Penalize recently seen tokens (1 = off).
    #[arg(long, default_value_t = 1.0)]
    pub repeat_penalty: f32,
    /// How many recent tokens the repetition penalty looks at.
    #[arg(long, default_value_t = 64)]
    pub repeat_last_n: usize,
    /// Random seed; the same seed and arguments give the same output. Default: from the clock
    /// (printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print the model config, backend and per-token time to stderr.
    #[arg(short, long)]
    pub verbose: bool,
    /// Record every MoE layer's chosen experts and weights for each token (prompt and generated)
    /// into FILE: the routing-trace format of docs/routing-trace.md, which numpy can memory-map.
    /// CPU backend only. An existing FILE is refused unless --force (the model, and anything but a
    /// regular file, always are).
    #[arg(long, value_name = "FILE")]
    pub trace_routing: Option<PathBuf>,
    /// Replace an existing --trace-routing file.
    #[arg(long, requires = "trace_routing")]
    pub force: bool,
}

impl Args {
    fn sampler_config(&self, seed: u64) -> SamplerConfig {
        SamplerConfig {
            temperature: self.temp,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            repeat_last_n: self.repeat_last_n,
            seed,
            ..SamplerConfig::default()
        }
    }
}

/// The prompt's tokens: with `--chat`, the file's own chat template (`tokenizer.chat_template`), or
/// the built-in DeepSeek-V2 format when the file has none or its template does not render (said on
/// stderr).
fn tokenize(tok: &Tokenizer, template: &ChatTemplate, a: &Args) -> Vec<u32> {
    if a.chat {
        let (bos, eos) = tok.chat_specials();
        let text = template.render(&ChatRequest {
            bos,
            eos: &eos,
            system: a.system.as_deref(),
            turns: &[(Role::User, &a.prompt)],
            add_generation_prompt: true,
        });
        tok.encode(&text, true, true)
    } else {
        tok.encode(&a.prompt, true, false)
    }
}

pub fn run(mut a: Args) -> Result<()> {
    // The server's validator: flags it would refuse in a request are refused here, before the model
    // loads.
    a.sampler_config(0)
        .validate()
        .map_err(|e| anyhow::anyhow!(e.message(e.param.flag())))?;
    let drafts = a.draft.drafts()?;
    if drafts.is_some() && a.ignore_eos {
        bail!("--draft mtp and --ignore-eos cannot be combined: the drafts' verify does not mask tokens");
    }
    if drafts.is_some() && a.trace_routing.is_some() {
        bail!("--draft mtp and --trace-routing cannot be combined: the trace records one token per step");
    }
    let (backend, why_cpu) = a.backend.resolve();
    if let (Some(why), true) = (why_cpu, a.verbose) {
        eprintln!("backend auto: cpu ({why})");
    }
    a.backend = backend;
    let file =
        GgufFile::open(&a.model).with_context(|| format!("reading {}", a.model.display()))?;
    let config = ModelConfig::from_gguf(file.header()).context("model config")?;
    let ctx = config.context_size(a.ctx).context("--ctx")?;
    // The trace path is checked before the model loads, and its file created only once the backend
    // is known to report routing.
    let trace_policy = OutputPolicy {
        force: a.force,
        inputs: &[&a.model],
    };
    if let Some(path) = &a.trace_routing {
        ingot_gguf::output::check_output(path, &trace_policy).context("--trace-routing")?;
    }
    let tok = Tokenizer::from_gguf(file.header()).context("tokenizer")?;
    let template = ChatTemplate::from_gguf(file.header());
    let prompt = tokenize(&tok, &template, &a);
    if prompt.is_empty() {
        bail!("the prompt is empty and the model adds no BOS token: give a prompt with -p");
    }
    if prompt.len() >= ctx {
        bail!(
            "the prompt is {} tokens, longer than the context of {} (raise --ctx, at most {})",
            prompt.len(),
            ctx,
            config.n_ctx_train
        );
    }
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let load_start = Instant::now();
    let engine = OpenOptions {
        backend: a.backend,
        ctx,
        progress: true,
        vram_budget: a.experts.budget()?,
        cache_type: a.cache.cache_type,
        mla_form: a.mla.mla_form,
        mtp_head_rows: drafts.and_then(|d| d.vocab),
    }
    .open(&file)
    .map_err(super::engine_error)?;
    let mut dec = engine.decoder;
    if a.verbose {
        eprintln!("{}", engine.description);
        eprintln!(
            "backend {}: loaded in {:.2} s; {} layers, vocab {}, ctx {}, seed {seed}",
            a.backend,
            load_start.elapsed().as_secs_f64(),
            config.n_layer,
            config.vocab,
            ctx
        );
    }
    let mut out = std::io::stdout().lock();
    let mut trace = match &a.trace_routing {
        Some(path) => {
            if dec.routing().is_none() {
                bail!(
                    "--trace-routing: backend {} does not report its routing; use --backend cpu",
                    a.backend
                );
            }
            let header = TraceHeader::new(file.header(), &config);
            let out = OutputFile::create(path, &trace_policy).context("--trace-routing")?;
            Some(TraceWriter::create_output(out, header)?)
        }
        None => None,
    };
    if drafts.is_some() {
        // Refused before anything is printed: a model without a block, or a backend that cannot run
        // it.
        dec.mtp_ready()
            .with_context(|| format!("--draft mtp on backend {}", a.backend))?;
    }
    let opts = GenerateOptions {
        sampler: a.sampler_config(seed),
        max_tokens: Some(a.n_predict),
        stops: Vec::new(),
        draft: drafts,
        ignore_eos: a.ignore_eos,
    };
    let t0 = Instant::now();
    let mut gen = match trace.as_mut() {
        // Token by token (the chunked prefill does not record routing), recording each token's
        // routing.
        Some(trace) => {
            Generator::start_stepwise(dec.as_mut(), &tok, ctx, &prompt, opts, |d, t, pos| {
                record(trace, d, Phase::Prefill, t, pos)
            })?
        }
        None => Generator::start(dec.as_mut(), &tok, ctx, &prompt, &[], opts)?,
    };
    let prefill_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let mut t_step = Instant::now();
    while let Some(piece) = gen.step()? {
        if let Some((token, pos)) = piece.decoded {
            if let (Some(trace), Some(d)) = (trace.as_mut(), gen.decoder()) {
                record(trace, d, Phase::Decode, token, pos)?;
            }
            if a.verbose {
                eprintln!(
                    "[token {}: {:.2} ms]",
                    pos + 1 - prompt.len(),
                    t_step.elapsed().as_secs_f64() * 1e3
                );
            }
        }
        if !piece.text.is_empty() {
            out.write_all(piece.text.as_bytes())?;
            out.flush()?;
        }
        t_step = Instant::now();
    }
    out.write_all(gen.finish().0.as_bytes())?;
    writeln!(out)?;
    let decode_s = t1.elapsed().as_secs_f64();
    let generated = gen.generated();
    let stats = gen.draft_stats();
    drop(gen);
    if let (Some(trace), Some(path)) = (trace, &a.trace_routing) {
        trace.finish()?;
        eprintln!("routing trace: {}", path.display());
    }
    // Tokens decoded after the prefill: the first generated token came from the prefill's logits.
    let decoded = generated.saturating_sub(1);
    let context_full =
        stats.is_none() && generated == ctx - prompt.len() && generated < a.n_predict;
    eprintln!(
        "prompt tokens: {}, prefill: {:.1} tok/s, decode: {:.1} tok/s ({} tokens generated, backend {}, seed {seed}){}",
        prompt.len(),
        prompt.len() as f64 / prefill_s,
        if decoded > 0 { decoded as f64 / decode_s } else { 0.0 },
        generated,
        a.backend,
        if context_full { "; stopped: context full" } else { "" }
    );
    if let (Some(d), Some(st)) = (drafts, stats) {
        let vocab = d
            .vocab
            .map_or(String::new(), |n| format!(" among the first {n} ids"));
        eprintln!(
            "draft mtp, up to {} per step{vocab}: {} verify steps, {} of {} drafts accepted ({:.1}%), {:.2} tokens per step",
            d.k,
            st.steps,
            st.accepted,
            st.drafted,
            100.0 * st.acceptance(),
            st.tokens_per_step()
        );
    }
    Ok(())
}

/// Appends the routing of the step `dec` just ran (session 0, turn 0: one `ingot run` is one turn).
fn record(
    trace: &mut TraceWriter,
    dec: &dyn Decoder,
    phase: Phase,
    token: u32,
    pos: usize,
) -> Result<()> {
    let routing = dec
        .routing()
        .context("the backend stopped reporting routing")?;
    trace.record(&TraceRecord {
        session: 0,
        turn: 0,
        pos: pos as u32,
        token,
        phase,
        routing: routing.to_vec(),
    })?;
    Ok(())
}
