//! `ingot plan`: the decode plan (or with `--prefill N` a prefill chunk's) as a table of
//! simulator counts, and with `--predict` a card's predicted time per node and tok/s (the
//! model: `ingot_bench::predict`). With `--measure` the
//! GPU's time of every node sits beside the prediction (`ingot_bench::predict::measured`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use ingot_bench::decode::{fill, token_at};
use ingot_bench::predict::routing_overlap::{Routing, RoutingOverlap};
use ingot_bench::predict::{
    card_named, card_names, constants_for, measured, plan_and_predict_speculative, plan_table,
    SpecOptions, TableOptions,
};
use ingot_engine::BackendKind;
use ingot_gguf::GgufFile;
use ingot_graph::exec::cuda::StepTiming;
use ingot_graph::Plan;
use ingot_model::{CacheType, Decoder};
use ingot_synth::{Layout, Preset, QuantMix, SynthOptions};

/// Default timed repetitions of `--measure`.
const DEFAULT_REPS: usize = 20;
/// Most repetitions accepted: beyond this a typo, not a measurement.
const MAX_REPS: usize = 10_000;
/// Back-to-back graph replays per sample of the graph's step time.
const GRAPH_REPLAYS: usize = 10;

#[derive(clap::Args)]
pub struct Args {
    /// The GGUF model (only its header is read).
    #[arg(
        short,
        long,
        required_unless_present = "synth",
        conflicts_with = "synth"
    )]
    model: Option<PathBuf>,
    /// Plan a synthetic model from its header alone, no file written: any `ingot synth` preset,
    /// including the full-size header-only v3, k2 and glm-4.7-flash.
    #[arg(long)]
    synth: Option<Preset>,
    /// Quant mix of `--synth`.
    #[arg(long, default_value = "q4_k_m", requires = "synth")]
    quant: QuantMix,
    /// Attention layout of `--synth`.
    #[arg(long, default_value = "mla", requires = "synth")]
    layout: Layout,
    /// Positions the cache holds (default: depth + 128).
    #[arg(long)]
    ctx: Option<usize>,
    /// Cached positions before the decoded token (with --prefill: before the chunk).
    #[arg(long, default_value_t = 0)]
    depth: usize,
    /// Plan, count and predict a prefill chunk of N prompt tokens (a bucket: 16, 64, 256 or
    /// 512) instead of a decode step; --predict then gives ppN in tok/s.
    #[arg(long, value_name = "N", conflicts_with_all = ["measure", "vram_budget"])]
    prefill: Option<usize>,
    /// Predict the time on a card: 3090, a6000, 4090, h100, h200.
    #[arg(long, value_name = "CARD")]
    predict: Option<String>,
    /// Most blocks simulated per node; larger grids are sampled and scaled.
    #[arg(long, default_value_t = 64)]
    max_blocks: u64,
    /// Print the table as JSON.
    #[arg(long)]
    json: bool,
    /// Time every node of one decode step on the GPU (needs -m MODEL; the cache is first
    /// filled to --depth by decoding) and print it beside the prediction, with the graph
    /// replay and the eager step measured in the same run.
    #[arg(long, requires = "model")]
    measure: bool,
    /// Backend of --measure; only cuda times nodes [default: cuda].
    #[arg(long, value_enum, requires = "measure")]
    backend: Option<BackendKind>,
    /// Timed repetitions of the step with --measure; per node the median is shown [default: 20].
    #[arg(long, requires = "measure")]
    reps: Option<usize>,
    /// GiB of VRAM the plan may use: routed experts beyond it are read over the host link (the
    /// simulator runs the expert cache cold; see --expert-hit-rate).
    #[arg(long, value_name = "GB", conflicts_with = "measure")]
    vram_budget: Option<f64>,
    /// Share of the routed experts found in VRAM slots, e.g. `ingot replay`'s hit rate (0: cold).
    #[arg(long, default_value_t = 0.0, requires = "vram_budget")]
    expert_hit_rate: f64,
    /// With --predict: also predict speculative decoding with the model's NextN/MTP block for
    /// 1 to K drafts per step (PREDICTED: a batched verify step, uniformly routed experts,
    /// independent acceptance; see `ingot_bench::predict::speculative`).
    #[arg(
        long,
        value_name = "K",
        requires = "predict",
        conflicts_with_all = ["prefill", "measure", "vram_budget"]
    )]
    draft_mtp: Option<usize>,
    /// Acceptance per draft assumed by --draft-mtp, 0 to 1.
    #[arg(long, default_value_t = 0.8, requires = "draft_mtp")]
    acceptance: f64,
    /// With --draft-mtp: take the verify's distinct experts per layer from a routing trace of
    /// the model (`ingot run --backend cpu --trace-routing FILE`: windows of consecutive
    /// generated tokens) instead of assuming uniform, independent routing.
    #[arg(long, value_name = "FILE", requires = "draft_mtp")]
    routing_trace: Option<PathBuf>,
    /// With --draft-mtp: the speed-up whose needs are solved for (the most distinct experts per
    /// layer a verify may read to reach it).
    #[arg(long, default_value_t = 1.5, requires = "draft_mtp")]
    speedup_target: f64,
    /// With --draft-mtp: drafts among the first N token ids only (`ingot run --draft-vocab`), the
    /// MTP head's rows scaled to N (DERIVED).
    #[arg(long, value_name = "N", requires = "draft_mtp")]
    draft_vocab: Option<usize>,
    #[command(flatten)]
    cache: super::cache::CacheArgs,
}

/// What `--measure` took on the GPU.
struct Measured {
    device: String,
    plan: Plan,
    timing: StepTiming,
}

/// Opens the CUDA backend on `path`, decodes the fixed sequence of `ingot bench` up to `depth` and
/// times one step at `depth` `reps` times
/// ([`ingot_graph::exec::cuda::CudaExecutor::measure_step`]).
fn measure(
    path: &Path,
    backend: BackendKind,
    ctx: usize,
    depth: usize,
    reps: usize,
    cache_type: CacheType,
) -> Result<Measured> {
    let (backend, why_cpu) = backend.resolve();
    if backend != BackendKind::Cuda {
        bail!(
            "--measure times nodes on a GPU: only --backend cuda{}",
            why_cpu.map_or_else(String::new, |why| format!(" (auto chose cpu: {why})"))
        );
    }
    ensure!(
        depth.checked_add(GRAPH_REPLAYS).is_some_and(|end| end <= ctx),
        "--measure replays the graph {GRAPH_REPLAYS} times from depth {depth}: --ctx must be at least {}",
        depth.saturating_add(GRAPH_REPLAYS)
    );
    let file = GgufFile::open(path).with_context(|| format!("reading {}", path.display()))?;
    let load = Instant::now();
    let (mut exec, info) = ingot_engine::OpenOptions {
        cache_type,
        ..ingot_engine::OpenOptions::new(BackendKind::Cuda, ctx)
    }
    .open_cuda(&file)
    .map_err(super::engine_error)?;
    eprintln!(
        "plan: measuring on {}: {} nodes, loaded in {:.1} s{}",
        info.device,
        info.nodes,
        load.elapsed().as_secs_f64(),
        if info.eager {
            " (INGOT_EAGER=1: no graph captured, no graph replay time)"
        } else {
            ""
        }
    );
    let mut filled = 0;
    fill(&mut exec, &mut filled, depth, &mut |line: &str| {
        eprintln!("plan: {line}")
    })?;
    let vocab = exec.config().vocab;
    let timing = exec.measure_step(token_at(depth, vocab), depth, reps, GRAPH_REPLAYS)?;
    // Said at once: the simulator's counts that follow take a while.
    let sum_us: f64 = (0..exec.plan().nodes.len())
        .map(|i| {
            let mut v: Vec<f64> = timing.node_ms.iter().map(|r| f64::from(r[i])).collect();
            ingot_bench::gpu::median(&mut v).unwrap_or(f64::NAN) * 1e3
        })
        .sum();
    let med = |v: &[f32]| {
        let mut v: Vec<f64> = v.iter().map(|&x| f64::from(x) * 1e3).collect();
        ingot_bench::gpu::median(&mut v).map_or_else(|| "-".into(), |m| format!("{m:.1}"))
    };
    eprintln!(
        "plan: measured d{depth}: node sum {sum_us:.1} us, graph replay {} us, eager {} us per \
         token ({} reps, {} host-bound, {} filler copies); counting in the simulator next",
        med(&timing.graph_ms),
        med(&timing.eager_ms),
        timing.node_ms.len(),
        timing.host_bound_reps,
        timing.filler_copies
    );
    Ok(Measured {
        device: exec.device_name().to_string(),
        plan: exec.plan().clone(),
        timing,
    })
}

pub fn run(a: Args) -> Result<()> {
    let ctx = a.ctx.unwrap_or(a.depth + 128 + a.prefill.unwrap_or(0));
    if let Some(k) = a.draft_mtp {
        let max = ingot_model::speculative::MAX_DRAFT;
        ensure!(
            (1..=max).contains(&k),
            "--draft-mtp {k} is out of range 1..={max}"
        );
        ensure!(
            (0.0..=1.0).contains(&a.acceptance),
            "--acceptance {} is not in 0..=1",
            a.acceptance
        );
        ensure!(
            a.speedup_target.is_finite() && a.speedup_target > 0.0,
            "--speedup-target {} is not a positive speed-up",
            a.speedup_target
        );
    }
    if let Some(n) = a.prefill {
        ensure!(
            ingot_graph::PREFILL_BUCKETS.contains(&n),
            "--prefill {n} is not a chunk size the executors plan (one of {:?})",
            ingot_graph::PREFILL_BUCKETS
        );
    }
    // The GPU first: without one, --measure fails at once, before minutes of simulation.
    let measured = match (&a.model, a.measure) {
        (Some(path), true) => {
            let reps = a.reps.unwrap_or(DEFAULT_REPS);
            ensure!(
                (1..=MAX_REPS).contains(&reps),
                "--reps {reps} is out of range 1..={MAX_REPS}"
            );
            let backend = a.backend.unwrap_or(BackendKind::Cuda);
            Some(measure(
                path,
                backend,
                ctx,
                a.depth,
                reps,
                a.cache.cache_type,
            )?)
        }
        (None, true) => bail!("--measure needs a model file: -m FILE"),
        _ => None,
    };
    let header = match (&a.model, a.synth) {
        (Some(path), _) => GgufFile::open(path)
            .with_context(|| format!("reading {}", path.display()))?
            .header()
            .clone(),
        (None, Some(preset)) => ingot_synth::header(&SynthOptions {
            preset,
            layout: a.layout,
            mix: a.quant,
            seed: 0,
        })?,
        (None, None) => bail!("pass a model with -m FILE or --synth PRESET"),
    };
    let card = match &a.predict {
        Some(name) => Some(card_named(name).with_context(|| {
            format!(
                "unknown card `{name}` for --predict (known: {})",
                card_names()
            )
        })?),
        None => None,
    };
    let expert_cache = match a.vram_budget {
        None => None,
        Some(gb) => {
            ensure!(
                gb.is_finite() && gb > 0.0,
                "--vram-budget {gb} must be a positive number of GiB"
            );
            ensure!(
                (0.0..=1.0).contains(&a.expert_hit_rate),
                "--expert-hit-rate {} is not in 0..=1",
                a.expert_hit_rate
            );
            let bytes = (gb * (1u64 << 30) as f64) as u64;
            match ingot_engine::expert_slots(&header, ctx, bytes)? {
                Some(slots) => {
                    eprintln!(
                        "plan: --vram-budget {gb} GiB keeps {slots} experts per MoE layer in VRAM; \
                         the rest are read over the host link ({:.0}% hits assumed)",
                        100.0 * a.expert_hit_rate
                    );
                    Some((
                        ingot_graph::ExpertCacheOptions {
                            slots,
                            policy: ingot_engine::Policy::Lru,
                            route_bonus: 0.0,
                        },
                        a.expert_hit_rate,
                    ))
                }
                None => {
                    eprintln!("plan: the whole plan fits in --vram-budget {gb} GiB");
                    None
                }
            }
        }
    };
    let opts = TableOptions {
        ctx,
        depth: a.depth,
        card,
        max_blocks: a.max_blocks,
        constants: constants_for(card),
        expert_cache,
        cache_type: a.cache.cache_type,
        prefill: a.prefill,
    };
    if let Some(k) = a.draft_mtp {
        let routing = match &a.routing_trace {
            Some(path) => Routing::Measured(RoutingOverlap::for_model(path, &header, k + 1)?),
            None => Routing::Uniform,
        };
        let spec = SpecOptions {
            max_k: k,
            acceptance: a.acceptance,
            routing,
            target: a.speedup_target,
            draft_vocab: a.draft_vocab,
        };
        let (table, spec) = plan_and_predict_speculative(&header, opts, &spec)?;
        let mut out = std::io::stdout().lock();
        if a.json {
            let both = serde_json::json!({ "plan": table, "speculative": spec });
            serde_json::to_writer_pretty(&mut out, &both)?;
            writeln!(out)?;
        } else {
            writeln!(out, "{table}\n{spec}")?;
        }
        return Ok(());
    }
    let mut table = plan_table(&header, opts)?;
    if let Some(m) = &measured {
        let warnings = measured::attach(&mut table, &m.device, &m.plan, &m.timing)?;
        if let Some(first) = warnings.first() {
            eprintln!(
                "plan: warning: {} node(s) have another grid on the device than in the table \
                 (pass the --predict card matching the device); first: {first}",
                warnings.len()
            );
        }
    }
    let mut out = std::io::stdout().lock();
    if a.json {
        serde_json::to_writer_pretty(&mut out, &table)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{table}")?;
    }
    Ok(())
}
