//! `ingot plan`: the decode plan as a table of simulator counts, and with `--predict` a card's
//! predicted time per node and tok/s (the model: `ingot_bench::predict`).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use ingot_bench::predict::{card_named, card_names, plan_table, TableOptions, DEFAULT_CONSTANTS};
use ingot_gguf::GgufFile;
use ingot_synth::{Layout, Preset, QuantMix, SynthOptions};

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
    /// Plan a synthetic model from its header alone, no file written (tiny, lite-4l, v2-lite).
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
    /// Cached positions before the decoded token.
    #[arg(long, default_value_t = 0)]
    depth: usize,
    /// Predict the time on a card: 3090, a6000, 4090, h100, h200.
    #[arg(long, value_name = "CARD")]
    predict: Option<String>,
    /// Most blocks simulated per node; larger grids are sampled and scaled.
    #[arg(long, default_value_t = 64)]
    max_blocks: u64,
    /// Print the table as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<()> {
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
    let opts = TableOptions {
        ctx: a.ctx.unwrap_or(a.depth + 128),
        depth: a.depth,
        card,
        max_blocks: a.max_blocks,
        constants: DEFAULT_CONSTANTS,
    };
    let table = plan_table(&header, opts)?;
    let mut out = std::io::stdout().lock();
    if a.json {
        serde_json::to_writer_pretty(&mut out, &table)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{table}")?;
    }
    Ok(())
}
