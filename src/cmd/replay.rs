//! `ingot replay TRACE --cache N --policy P`: an expert cache replayed over a routing trace.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use ingot_bench::predict::{card_named, card_names};
use ingot_bench::replay::{replay, ReplayOptions, PCIE_EFFICIENCY};

use super::experts::PolicyArg;
use ingot_gguf::GgufFile;
use ingot_model::trace::Trace;

#[derive(clap::Args)]
pub struct Args {
    /// A routing trace from `ingot run --trace-routing`.
    trace: PathBuf,
    /// Expert slots per MoE layer (at least the experts each token uses).
    #[arg(long)]
    cache: usize,
    #[arg(long, value_enum, default_value_t = PolicyArg::Lru)]
    policy: PolicyArg,
    /// Decay per step of the EMA policy.
    #[arg(long, default_value_t = 0.9)]
    ema_decay: f64,
    /// Tokens at the start of the trace that warm the cache and are not counted.
    #[arg(long, default_value_t = 0)]
    warmup: usize,
    /// Most prompt tokens per prefill chunk (a chunk needs the union of its tokens' experts once).
    #[arg(long, default_value_t = 512)]
    ubatch: usize,
    /// Card for the predicted speed (3090, a6000, 4090, h100, h200).
    #[arg(long, default_value = "3090")]
    card: String,
    /// Decode speed with every expert in VRAM (measured or `ingot plan --predict`), to add the link
    /// time to.
    #[arg(long)]
    base_tok_s: Option<f64>,
    /// The model the trace was recorded on: refused unless it is the same model.
    #[arg(short, long)]
    model: Option<PathBuf>,
}

pub fn run(a: Args) -> Result<()> {
    let card = card_named(&a.card)
        .with_context(|| format!("unknown card {:?} (known: {})", a.card, card_names()))?;
    if let Some(b) = a.base_tok_s {
        if !(b.is_finite() && b > 0.0) {
            bail!("--base-tok-s {b} must be a positive speed");
        }
    }
    let trace = Trace::open(&a.trace)?;
    if let Some(model) = &a.model {
        let file = GgufFile::open(model).with_context(|| format!("reading {}", model.display()))?;
        trace.check_model(file.header())?;
    }
    let policy = a.policy.policy(a.ema_decay);
    let opts = ReplayOptions {
        capacity: a.cache,
        policy,
        warmup: a.warmup,
        ubatch: a.ubatch,
    };
    let r = replay(&trace, &opts)?;
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "trace {} (model {:?}): {} tokens, warm-up {}; measured {} decoded tokens and {} prefill tokens in {} chunks",
        a.trace.display(),
        trace.header.model,
        r.tokens,
        r.warmup,
        r.decode.tokens,
        r.prefill.tokens,
        r.prefill.steps
    );
    println!(
        "cache {} of {} experts per MoE layer, policy {}",
        r.capacity,
        r.n_expert,
        policy.name()
    );
    println!("| layer | hits | misses | hit rate | admitted | MiB read through | MiB admitted |");
    println!("|---|---|---|---|---|---|---|");
    for l in &r.layers {
        println!(
            "| {} | {} | {} | {:.1}% | {} | {:.1} | {:.1} |",
            l.layer,
            l.hits,
            l.misses,
            100.0 * l.hit_rate(),
            l.admissions,
            mib(l.miss_bytes),
            mib(l.admission_bytes)
        );
    }
    let (miss, admit) = r.decode_bytes_per_token();
    println!(
        "all layers: hit rate {:.1}%; per decoded token {:.2} MiB read through and {:.2} MiB admitted over PCIe",
        100.0 * r.hit_rate(),
        miss / (1 << 20) as f64,
        admit / (1 << 20) as f64
    );
    if r.decode.tokens > 0 {
        let link = r.pcie_seconds_per_token(card);
        let with_base = a.base_tok_s.map_or(String::new(), |b| {
            format!(
                "; with {b} tok/s all in VRAM: {:.1} tok/s",
                r.predicted_tok_s(card, Some(b))
            )
        });
        println!(
            "PREDICTED (model, not a measurement) on {} (PCIe {} GB/s x {PCIE_EFFICIENCY}): {:.1} us of link per \
             token, at most {:.1} tok/s from the link alone{with_base}",
            card.display,
            card.pcie_gbps,
            link * 1e6,
            r.predicted_tok_s(card, None)
        );
    }
    Ok(())
}
