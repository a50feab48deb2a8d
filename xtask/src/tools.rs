//! Installs what the PTX build, the audit and the tests need: rust-src for nightly, NVIDIA's
//! offline tools (ptxas, cuobjdump, nvdisasm) from PyPI wheels unpacked under `.tools/`, the
//! `openai` Python client with its dependencies under `.tools/python` (for
//! `tests/serve_clients.rs`), with numpy and gguf-py beside it (for `tests/routing_trace.rs` and
//! `host/quant/tests/gguf_py.rs`), and Debian's `chromium` (for `tests/serve_browser.rs`), from apt
//! when running as root. Idempotent: an installed tool is detected and nothing is downloaded.

use crate::paths::{python_dir, tools_dir, TOOLS};
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// Pinned wheels, in the order of `paths::TOOLS` (ptxas, cuobjdump, nvdisasm), each providing that
/// tool.
const WHEELS: [&str; 3] = [
    "nvidia-cuda-nvcc==13.5.37",
    "nvidia-cuda-cuobjdump==13.5.37",
    "nvidia-cuda-nvdisasm==13.5.37",
];

/// The `openai` Python client and every package it imports, each pinned, installed with `--no-deps`
/// so the set is exactly this one (pydantic-core must match pydantic). `tests/serve_clients.rs`
/// runs `serve/tests/openai_client.py` with `PYTHONPATH=.tools/python`; numpy is for
/// `tests/routing_trace.rs`, which memory-maps a routing trace as users do, and for gguf-py
/// (`gguf`), whose numpy dequantizers `host/quant/tests/gguf_py.rs` compares against; importing
/// `gguf.quants` runs the package's `__init__`, which imports `yaml` (its other dependencies, tqdm
/// and requests, are imported only inside functions the test does not call).
const PYTHON_PACKAGES: [&str; 17] = [
    "openai==3.57.0",
    "numpy==2.3.5",
    "gguf==0.19.0",
    "pyyaml==6.0.3",
    "annotated-types==0.8.0",
    "anyio==4.16.0",
    "h11==0.16.0",
    "httpcore2==2.16.2",
    "httpx2==2.16.2",
    "idna==3.20",
    "jiter==0.19.0",
    "pydantic==2.14.4",
    "pydantic-core==2.50.5",
    "sniffio==1.3.1",
    "truststore==0.10.5",
    "typing-extensions==4.16.0",
    "typing-inspection==0.4.5",
];

pub fn install() -> Result<()> {
    rust_src()?;
    python_packages()?;
    chromium()?;
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

/// `pip install --no-deps --target .tools/python` the pinned [`PYTHON_PACKAGES`], unless the stamp
/// file there already lists exactly them (a changed pin reinstalls from scratch).
fn python_packages() -> Result<()> {
    let dir = python_dir();
    let stamp = dir.join(".ingot-pins");
    let want = PYTHON_PACKAGES.join("\n");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == want) {
        return Ok(());
    }
    println!(
        "installing the pinned Python packages into {}",
        dir.display()
    );
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    let status = Command::new("python3")
        .args(["-m", "pip", "install", "--no-deps", "--quiet", "--target"])
        .arg(&dir)
        .args(PYTHON_PACKAGES)
        .status()
        .context("running `python3 -m pip install`")?;
    if !status.success() {
        bail!("pip install of the pinned Python packages failed ({status})");
    }
    std::fs::write(&stamp, want)?;
    Ok(())
}

/// Debian's `chromium`, which `tests/serve_browser.rs` drives headless. Present: nothing to do.
/// Missing: `apt-get install` it when running as root (after `apt-get update` if the first try
/// fails); otherwise the error says how to install it or skip the browser test.
fn chromium() -> Result<()> {
    let runs = |bin: &str| {
        Command::new(bin)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if let Ok(bin) = std::env::var("INGOT_CHROMIUM") {
        if runs(&bin) {
            return Ok(());
        }
        bail!("INGOT_CHROMIUM={bin} does not run (`{bin} --version` failed)");
    }
    if runs("chromium") || runs("chromium-browser") {
        return Ok(());
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let fix = "install Debian's chromium (`apt-get install chromium`) or set \
               INGOT_SKIP_BROWSER_TESTS=1 to skip the chat page's browser test";
    if !root {
        bail!("chromium is missing and this is not root, so apt cannot install it: {fix}");
    }
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success())
    };
    let install = ["install", "-y", "-q", "--no-install-recommends", "chromium"];
    println!("installing chromium with apt-get (for tests/serve_browser.rs)");
    let installed = apt(&install) || (apt(&["update", "-q"]) && apt(&install));
    if !installed {
        bail!("apt-get could not install chromium: {fix}");
    }
    if !runs("chromium") {
        bail!("apt-get installed chromium but `chromium --version` fails: {fix}");
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
