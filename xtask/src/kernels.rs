//! Builds the device crate to PTX and installs or checks the committed copy.
//!
//! The committed copy is `kernels/ptx/ingot.ptx.xz` (xz preset 9): its text is what rustc emitted
//! less the `// begin inline asm` / `// end inline asm` lines LLVM wraps around every inline asm
//! statement (a fifth of the text, no meaning to ptxas, the driver or ptx-sim). Comparisons are of
//! the text, never of the compressed bytes, so another liblzma version cannot make a stale file.

use crate::paths::{committed_ptx_path, plain_ptx_path, workspace_root};
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Compute capability the PTX is generated for; sm_90 JIT-compiles the same PTX.
const TARGET_CPU: &str = "sm_86";
/// Lowest PTX ISA version ptxas accepts for sm_90, so one file serves sm_86 and sm_90.
const PTX_ISA: &str = "+ptx78";

/// xz preset of the committed file (a 64 MiB dictionary: the text's repeats lie megabytes apart).
const XZ_PRESET: u32 = 9;

/// `cargo xtask kernels`: rebuild, rewrite `kernels/ptx/ingot.ptx.xz` when the text changed, and
/// leave the text at `target/ptx/ingot.ptx` for reading.
pub fn build() -> Result<()> {
    let fresh = compile()?;
    write_plain(&plain_ptx_path(), &fresh)?;
    let dest = committed_ptx_path();
    if committed_text().ok().as_deref() == Some(fresh.as_str()) {
        println!(
            "{} is up to date ({} kernels)",
            dest.display(),
            entries(&fresh).len()
        );
        return Ok(());
    }
    let tmp = dest.with_extension("xz.tmp");
    let file = std::fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
    let mut enc = xz2::write::XzEncoder::new(file, XZ_PRESET);
    enc.write_all(fresh.as_bytes())?;
    enc.finish()?.sync_all()?;
    std::fs::rename(&tmp, &dest).with_context(|| format!("writing {}", dest.display()))?;
    println!(
        "wrote {} ({} bytes of text, {} packed, {} kernels; the text is at {})",
        dest.display(),
        fresh.len(),
        std::fs::metadata(&dest)?.len(),
        entries(&fresh).len(),
        plain_ptx_path().display()
    );
    Ok(())
}

/// The committed PTX's text.
pub fn committed_text() -> Result<String> {
    let path = committed_ptx_path();
    ptx_front::read_ptx(&path).with_context(|| format!("reading {}", path.display()))
}

/// Writes `text` to `path`, creating its folder.
pub fn write_plain(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// `cargo xtask kernels --check`: rebuild and compare with the committed PTX.
pub fn check() -> Result<()> {
    let fresh = compile()?;
    let out = workspace_root().join("target").join("ingot-check.ptx");
    write_plain(&out, &fresh)?;
    let committed_path = committed_ptx_path();
    let committed = committed_text()?;
    if committed == fresh {
        println!("{} is up to date", committed_path.display());
        return Ok(());
    }
    eprintln!("{}", diff_summary(&committed, &fresh));
    bail!(
        "{} is stale: the device crate now compiles to {} (run `cargo xtask kernels` and commit)",
        committed_path.display(),
        out.display()
    )
}

/// Runs nightly rustc on kernels/device and returns the PTX text.
fn compile() -> Result<String> {
    let root = workspace_root();
    let manifest = root.join("kernels").join("device").join("Cargo.toml");
    let target_dir = root.join("kernels").join("device").join("target");
    let mut cmd = Command::new("cargo");
    // The outer `cargo xtask` runs on stable; these would leak into the nightly build.
    for var in [
        "RUSTUP_TOOLCHAIN",
        "RUSTC",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
    ] {
        cmd.env_remove(var);
    }
    cmd.args([
        "+nightly",
        "rustc",
        "--release",
        "--target",
        "nvptx64-nvidia-cuda",
        "-Zbuild-std=core",
    ])
    .arg("--manifest-path")
    .arg(&manifest)
    .arg("--target-dir")
    .arg(&target_dir)
    .args(["--", "--emit=asm", "-C"])
    .arg(format!("target-cpu={TARGET_CPU}"))
    .args(["-C"])
    .arg(format!("target-feature={PTX_ISA}"));
    let status = cmd
        .status()
        .context("running `cargo +nightly` (is the nightly toolchain installed?)")?;
    if !status.success() {
        bail!("building kernels/device failed ({status}); `cargo xtask tools` installs rust-src");
    }
    let deps = target_dir
        .join("nvptx64-nvidia-cuda")
        .join("release")
        .join("deps");
    let asm = newest_asm(&deps)?;
    let text =
        std::fs::read_to_string(&asm).with_context(|| format!("reading {}", asm.display()))?;
    Ok(strip_asm_markers(&text))
}

/// `text` without the lines LLVM writes around each inline asm statement.
fn strip_asm_markers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        if t != "// begin inline asm" && t != "// end inline asm" {
            out.push_str(line);
        }
    }
    out
}

/// The most recent `ingot_kernels_device-*.s` (cargo keeps it even when nothing was rebuilt).
fn newest_asm(deps: &Path) -> Result<PathBuf> {
    let mut best: Option<(std::time::SystemTime, PathBuf)> = None;
    for entry in std::fs::read_dir(deps).with_context(|| format!("listing {}", deps.display()))? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("ingot_kernels_device-") && name.ends_with(".s") {
            let modified = std::fs::metadata(&path)?.modified()?;
            if best.as_ref().is_none_or(|(t, _)| modified > *t) {
                best = Some((modified, path));
            }
        }
    }
    best.map(|(_, p)| p)
        .with_context(|| format!("no ingot_kernels_device-*.s under {}", deps.display()))
}

/// Names of the `.entry` functions in a PTX text.
fn entries(ptx: &str) -> Vec<&str> {
    ptx.lines()
        .filter_map(|l| l.trim().strip_prefix(".visible .entry "))
        .map(|l| l.split('(').next().unwrap_or(l).trim())
        .collect()
}

/// Which kernels appeared/disappeared, how many lines differ, and the first few differences.
fn diff_summary(old: &str, new: &str) -> String {
    let (eo, en) = (entries(old), entries(new));
    let mut s = String::from("committed PTX differs from a fresh build:\n");
    for k in en.iter().filter(|k| !eo.contains(k)) {
        s += &format!("  new kernel: {k}\n");
    }
    for k in eo.iter().filter(|k| !en.contains(k)) {
        s += &format!("  removed kernel: {k}\n");
    }
    let (lo, ln): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    let differing: Vec<usize> = (0..lo.len().max(ln.len()))
        .filter(|&i| lo.get(i) != ln.get(i))
        .collect();
    s += &format!(
        "  {} of {} lines differ (committed {} lines, fresh {} lines)\n",
        differing.len(),
        lo.len().max(ln.len()),
        lo.len(),
        ln.len()
    );
    for &i in differing.iter().take(5) {
        s += &format!(
            "  line {}:\n    committed: {}\n    fresh:     {}\n",
            i + 1,
            lo.get(i).unwrap_or(&"<none>"),
            ln.get(i).unwrap_or(&"<none>")
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::strip_asm_markers;

    #[test]
    fn only_the_asm_marker_lines_go() {
        let text =
            "a\n\t// begin inline asm\n\tmov.u32 %r1, 0;\n\t// end inline asm\n\t// ingot:hot\nb";
        assert_eq!(
            strip_asm_markers(text),
            "a\n\tmov.u32 %r1, 0;\n\t// ingot:hot\nb"
        );
    }
}
