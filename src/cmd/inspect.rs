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
    out.flush()?;
    Ok(())
}
