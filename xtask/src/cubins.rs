//! `cargo xtask cubins`: the committed PTX compiled offline by ptxas for the architectures users
//! run (sm_86, sm_90a), xz-compressed into a folder with a manifest of the PTX's SHA-256. A build
//! with `INGOT_CUBINS=<that folder>` embeds them (kernels/build.rs), and a device they run on loads
//! its cubin in milliseconds instead of JIT-compiling the PTX.

use crate::kernels::{committed_text, write_plain};
use crate::paths::{plain_ptx_path, workspace_root, PTXAS};
use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

#[path = "../../kernels/src/cubin_files.rs"]
#[allow(dead_code)]
mod files;

#[path = "../../kernels/src/grid_dep.rs"]
#[allow(dead_code)]
mod grid_dep;

/// xz preset of a cubin (10 MB of SASS packs to about 1.1 MB).
const XZ_PRESET: u32 = 9;

/// `cargo xtask cubins [--arch sm_86,sm_90a] [--out DIR]`.
pub fn build(args: &[&str]) -> Result<()> {
    let mut archs: Vec<String> = files::DEFAULT_ARCHS.iter().map(|a| a.to_string()).collect();
    let mut out = workspace_root().join("target").join("cubin");
    let mut it = args.iter();
    while let Some(&a) = it.next() {
        match (a, it.next()) {
            ("--arch", Some(v)) => archs = v.split(',').map(str::to_string).collect(),
            ("--out", Some(v)) => out = PathBuf::from(v),
            _ => bail!("usage: cargo xtask cubins [--arch sm_86,sm_90a] [--out DIR]"),
        }
    }
    for a in &archs {
        if files::parse_arch(a).is_none() {
            bail!("{a:?} is not an architecture name like sm_86 or sm_90a");
        }
    }
    let text = committed_text()?;
    let ptx = plain_ptx_path();
    write_plain(&ptx, &text)?;
    // Hopper and later: the text whose kernels wait on their predecessor (files::FORMAT).
    let hopper = ptx.with_extension("sm_90.ptx");
    write_plain(&hopper, &grid_dep::for_sm90(&text)?)?;
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    // The manifest goes first and last: a folder interrupted midway matches no PTX.
    let manifest = out.join(files::MANIFEST);
    let _ = std::fs::remove_file(&manifest);
    for entry in std::fs::read_dir(&out)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if files::arch_of(&name).is_some_and(|a| !archs.iter().any(|x| x == a)) {
            std::fs::remove_file(out.join(&name))?;
        }
    }
    let (ptx, hopper, out) = (&ptx, &hopper, &out);
    let results: Vec<Result<String>> = std::thread::scope(|s| {
        let handles: Vec<_> = archs
            .iter()
            .map(|arch| {
                let src = if files::waits_on_predecessor(arch) {
                    hopper
                } else {
                    ptx
                };
                s.spawn(move || one(src, arch, out))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("ptxas thread"))
            .collect()
    });
    for r in results {
        println!("{}", r?);
    }
    let sha: String = Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(&manifest, files::manifest_text(&sha))?;
    println!(
        "cubins for {} in {} (PTX sha256 {sha}); embed them with: INGOT_CUBINS={} cargo build --release",
        archs.join(", "),
        out.display(),
        out.display()
    );
    Ok(())
}

/// ptxas for `arch`, then xz into `out`; returns a line for the log.
fn one(ptx: &Path, arch: &str, out: &Path) -> Result<String> {
    let started = Instant::now();
    let raw = out.join(format!("ingot.{arch}.cubin"));
    let res = Command::new(PTXAS.path())
        .arg(format!("-arch={arch}"))
        .arg(ptx)
        .arg("-o")
        .arg(&raw)
        .output()
        .with_context(|| {
            format!(
                "running {} (try `cargo xtask tools`)",
                PTXAS.path().display()
            )
        })?;
    if !res.status.success() {
        bail!(
            "ptxas -arch={arch} rejected {}:\n{}",
            ptx.display(),
            String::from_utf8_lossy(&res.stderr)
        );
    }
    let image = std::fs::read(&raw)?;
    std::fs::remove_file(&raw)?;
    let dest = out.join(files::file_name(arch));
    let tmp = dest.with_extension("xz.tmp");
    let file = std::fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
    let mut enc = xz2::write::XzEncoder::new(file, XZ_PRESET);
    enc.write_all(&image)?;
    enc.finish()?.sync_all()?;
    std::fs::rename(&tmp, &dest)?;
    Ok(format!(
        "{arch}: {} bytes of cubin, {} packed, in {:.1} s",
        image.len(),
        std::fs::metadata(&dest)?.len(),
        started.elapsed().as_secs_f64()
    ))
}
