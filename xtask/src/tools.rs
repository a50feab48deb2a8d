//! Installs what the PTX build and audit need: rust-src for nightly, and NVIDIA's offline tools
//! (ptxas, cuobjdump, nvdisasm) from PyPI wheels unpacked under `.tools/`. Idempotent: an
//! installed tool is detected and nothing is downloaded.

use crate::paths::{tools_dir, TOOLS};
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// Pinned wheels, in the order of `paths::TOOLS` (ptxas, cuobjdump, nvdisasm), each providing that tool.
const WHEELS: [&str; 3] = [
    "nvidia-cuda-nvcc==13.5.37",
    "nvidia-cuda-cuobjdump==13.5.37",
    "nvidia-cuda-nvdisasm==13.5.37",
];

pub fn install() -> Result<()> {
    rust_src()?;
    let bins = TOOLS.map(|t| t.path());
    for ((wheel, tool), bin) in WHEELS.iter().zip(&TOOLS).zip(&bins) {
        let name = tool.name;
        if bin.is_file() {
            continue;
        }
        println!("installing {name} from {wheel}");
        fetch_wheel(wheel, &tools_dir())?;
        if !bin.is_file() {
            bail!("{wheel} did not provide {}", bin.display());
        }
    }
    for bin in &bins {
        make_executable(bin)?;
    }
    println!("ptxas:     {}", bins[0].display());
    println!("cuobjdump: {}", bins[1].display());
    println!("nvdisasm:  {}", bins[2].display());
    Ok(())
}

fn rust_src() -> Result<()> {
    let out = Command::new("rustup")
        .args(["component", "list", "--toolchain", "nightly", "--installed"])
        .output()
        .context("running rustup (needed for the nightly toolchain)")?;
    if String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.starts_with("rust-src"))
    {
        return Ok(());
    }
    let status = Command::new("rustup")
        .args(["component", "add", "rust-src", "--toolchain", "nightly"])
        .status()?;
    if !status.success() {
        bail!("`rustup component add rust-src --toolchain nightly` failed ({status})");
    }
    Ok(())
}

/// `pip download --no-deps` one wheel into `.tools/wheels`, then unzip it into `.tools`.
fn fetch_wheel(spec: &str, dest: &Path) -> Result<()> {
    let wheels = dest.join("wheels");
    std::fs::create_dir_all(&wheels)?;
    let status = Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--quiet", "-d"])
        .arg(&wheels)
        .arg(spec)
        .status()
        .context("running `python3 -m pip download`")?;
    if !status.success() {
        bail!("pip download {spec} failed ({status})");
    }
    let stem = spec.split("==").next().unwrap_or(spec).replace('-', "_");
    let wheel = std::fs::read_dir(&wheels)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&stem) && n.ends_with(".whl"))
        })
        .with_context(|| format!("no {stem}*.whl in {}", wheels.display()))?;
    // A wheel is a zip file; Python's zipfile module unpacks it without needing `unzip`.
    let status = Command::new("python3")
        .args(["-m", "zipfile", "-e"])
        .arg(&wheel)
        .arg(dest)
        .status()?;
    if !status.success() {
        bail!("unpacking {} failed ({status})", wheel.display());
    }
    Ok(())
}

/// zipfile extraction drops the executable bit.
fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut perm = std::fs::metadata(path)?.permissions();
    if perm.mode() & 0o111 != 0o111 {
        perm.set_mode(perm.mode() | 0o755);
        std::fs::set_permissions(path, perm)?;
    }
    Ok(())
}
