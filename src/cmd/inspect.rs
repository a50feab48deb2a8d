use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use ingot_gguf::{GgufFile, MetaValue};

#[derive(clap::Args)]
pub struct Args {
    /// The GGUF file.
    file: PathBuf,
    /// Print every element of metadata arrays (default: the first few).
    #[arg(long)]
    full_arrays: bool,
}

fn show(v: &MetaValue, full: bool) -> String {
    match v {
        MetaValue::String(s) => format!("{s:?}"),
        MetaValue::Array(a) => {
            let n = if full {
                a.items.len()
            } else {
                a.items.len().min(6)
            };
            let head: Vec<String> = a.items[..n].iter().map(|x| show(x, full)).collect();
            let more = if n < a.items.len() { ", ..." } else { "" };
            format!(
                "[{:?}; {}] [{}{}]",
                a.elem,
                a.items.len(),
                head.join(", "),
                more
            )
        }
        other => format!("{other:?}")
            .split_once('(')
            .map_or_else(String::new, |(_, v)| v.trim_end_matches(')').to_string()),
    }
}

pub fn run(a: Args) -> Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let f = GgufFile::open(&a.file).with_context(|| format!("reading {}", a.file.display()))?;
    let h = f.header();
    writeln!(
        out,
        "file: {}  (GGUF v{}, alignment {}, {} metadata keys, {} tensors, data at byte {})",
        a.file.display(),
        h.version,
        h.alignment,
        h.kv.len(),
        h.tensors.len(),
        h.data_offset
    )?;
    writeln!(out, "\nmetadata:")?;
    for (k, v) in &h.kv {
        writeln!(out, "  {k:<48} {}", show(v, a.full_arrays))?;
    }
    writeln!(out, "\ntensors:")?;
    writeln!(
        out,
        "  {:<36} {:<6} {:<22} {:>14}",
        "name", "type", "shape (ne)", "bytes"
    )?;
    let mut by_type: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
    for t in &h.tensors {
        let shape: Vec<String> = t.ne.iter().map(u64::to_string).collect();
        writeln!(
            out,
            "  {:<36} {:<6} {:<22} {:>14}",
            t.name,
            t.ty.name(),
            shape.join(" x "),
            t.nbytes
        )?;
        let e = by_type.entry(t.ty.name()).or_default();
        e.0 += 1;
        e.1 += t.nbytes;
    }
    let total: u64 = h.tensors.iter().map(|t| t.nbytes).sum();
    writeln!(out, "\ntensor types:")?;
    for (ty, (n, bytes)) in &by_type {
        writeln!(
            out,
            "  {ty:<6} {n:>5} tensors {:>10.2} MB",
            *bytes as f64 / 1e6
        )?;
    }
    writeln!(
        out,
        "  total  {:>5} tensors {:>10.2} MB",
        h.tensors.len(),
        total as f64 / 1e6
    )?;
    config_section(&mut out, h)?;
    out.flush()?;
    Ok(())
}

/// The deepseek2 config derived from the keys, and what one decoded token streams. A file that is a
/// valid GGUF but not a usable deepseek2 model still prints everything above, then says why.
fn config_section(out: &mut impl Write, h: &ingot_gguf::Gguf) -> Result<()> {
    writeln!(
        out,
        "
model config:"
    )?;
    let c = match ingot_model::ModelConfig::from_gguf(h) {
        Ok(c) => c,
        Err(e) => {
            writeln!(out, "  not a usable deepseek2 model: {e}")?;
            return Ok(());
        }
    };
    let rows: [(&str, String); 16] = [
        (
            "layers (dense lead)",
            format!("{} ({})", c.n_layer, c.n_dense_lead),
        ),
        ("embedding", c.n_embd.to_string()),
        ("heads", c.n_head.to_string()),
        ("attention layout", format!("{:?}", c.layout)),
        (
            "kv_lora / q_lora",
            format!("{} / {:?}", c.kv_lora, c.q_lora),
        ),
        (
            "d_nope / d_rope / d_v",
            format!("{} / {} / {}", c.d_nope, c.d_rope, c.d_v),
        ),
        ("dense ffn", c.ff_dense.to_string()),
        (
            "experts (used, shared) x ffn",
            format!(
                "{} ({}, {}) x {}",
                c.n_expert, c.n_expert_used, c.n_expert_shared, c.ff_expert
            ),
        ),
        (
            "expert groups (used)",
            format!("{} ({})", c.n_expert_group, c.n_expert_group_used),
        ),
        (
            "gating, norm, scale",
            format!(
                "{:?}, {}, {}",
                c.gating, c.expert_weights_norm, c.expert_weights_scale
            ),
        ),
        ("vocab", c.vocab.to_string()),
        ("training context", c.n_ctx_train.to_string()),
        ("rms eps", c.rms_eps.to_string()),
        ("kq_scale (derived)", format!("{:.8}", c.kq_scale)),
        (
            "latent cache row (f16)",
            format!(
                "{} values = {} B per layer per token",
                c.cache_row(),
                2 * c.cache_row()
            ),
        ),
        (
            "weights streamed per token",
            format!(
                "{:.2} MB (+ {} B of latent cache per context token)",
                c.bytes_per_token() as f64 / 1e6,
                2 * c.cache_row() * c.n_layer
            ),
        ),
    ];
    for (k, v) in rows {
        writeln!(out, "  {k:<30} {v}")?;
    }
    Ok(())
}
