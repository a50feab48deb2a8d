//! `ingot slice IN OUT --keep FILE.json`: a copy of a deepseek2 file keeping some of its routed
//! experts.

use std::path::PathBuf;

use anyhow::{Context, Result};
use ingot_gguf::{OutputFile, OutputPolicy};
use ingot_model::slice::{slice_to, KeepList};

#[derive(clap::Args)]
pub struct Args {
    /// The GGUF file to read (never written).
    input: PathBuf,
    /// The GGUF file to write (a temporary file next to it, renamed when complete). An existing
    /// file is refused unless --force; the input, the keep list and anything but a regular file
    /// always are.
    output: PathBuf,
    /// JSON object from MoE layer index to the expert ids it keeps, in their new order, e.g. {"1":
    /// [0, 2, 5], "2": [1, 3, 4]}. Every MoE layer (NextN/MTP blocks too) must be named, all
    /// keeping the same number.
    #[arg(long, value_name = "FILE.json")]
    keep: PathBuf,
    /// Replace an existing output file.
    #[arg(long)]
    force: bool,
}

pub fn run(a: Args) -> Result<()> {
    let policy = OutputPolicy {
        force: a.force,
        inputs: &[&a.input, &a.keep],
    };
    let out = OutputFile::create(&a.output, &policy)?;
    let text = std::fs::read_to_string(&a.keep)
        .with_context(|| format!("reading the keep list {}", a.keep.display()))?;
    let keep = KeepList::from_json(&text).with_context(|| format!("in {}", a.keep.display()))?;
    let r = slice_to(&a.input, out, &keep)
        .with_context(|| format!("slicing {} into {}", a.input.display(), a.output.display()))?;
    println!(
        "wrote {}: {} of {} experts per MoE layer, {} per-expert tensors sliced, {} copied, {:.1} MiB of tensor data",
        a.output.display(),
        r.experts_after,
        r.experts_before,
        r.tensors_sliced,
        r.tensors_copied,
        r.bytes_written as f64 / (1 << 20) as f64
    );
    Ok(())
}
