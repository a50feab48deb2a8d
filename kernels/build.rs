//! Unpacks the committed PTX (`ptx/ingot.ptx.xz`, written by `cargo xtask kernels`) into `OUT_DIR`,
//! where `src/lib.rs` embeds it with `include_str!`, and writes `OUT_DIR/cubins.rs`, the list of
//! offline-built cubins `src/cubin.rs` embeds.
//!
//! Cubins are embedded only when `INGOT_CUBINS` names a folder `cargo xtask cubins` wrote (relative
//! paths are from the workspace root), and only when its manifest matches the PTX being embedded:
//! a stale folder is a build error, never a silent mismatch. Without `INGOT_CUBINS` the list is
//! empty and every device JIT-compiles the PTX.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

#[path = "src/cubin_files.rs"]
#[allow(dead_code)]
mod cubin_files;

fn main() {
    const PACKED: &str = "ptx/ingot.ptx.xz";
    println!("cargo:rerun-if-changed={PACKED}");
    println!("cargo:rerun-if-env-changed=INGOT_CUBINS");
    let file = std::fs::File::open(PACKED).unwrap_or_else(|e| {
        panic!("kernels/{PACKED}: {e} (it is committed; `cargo xtask kernels` writes it)")
    });
    let mut text = String::new();
    xz2::read::XzDecoder::new(file)
        .read_to_string(&mut text)
        .unwrap_or_else(|e| {
            panic!("kernels/{PACKED} does not unpack: {e} (`cargo xtask kernels` rewrites it)")
        });
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let out = out_dir.join("ingot.ptx");
    std::fs::write(&out, &text).unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));

    let list = match std::env::var_os("INGOT_CUBINS").filter(|v| !v.is_empty()) {
        Some(dir) => {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            let dir = root.join(dir);
            embed_cubins(&dir, &text, &out_dir).unwrap_or_else(|e| {
                panic!("INGOT_CUBINS={}: {e}", dir.display());
            })
        }
        None => String::new(),
    };
    let rs = out_dir.join("cubins.rs");
    std::fs::write(&rs, format!("&[{list}]\n"))
        .unwrap_or_else(|e| panic!("writing {}: {e}", rs.display()));
}

/// Copies the cubins of `dir` into `out_dir` after checking its manifest against `ptx`; returns
/// the `Cubin` entries of `cubins.rs`.
fn embed_cubins(dir: &Path, ptx: &str, out_dir: &Path) -> Result<String, String> {
    let manifest = dir.join(cubin_files::MANIFEST);
    println!("cargo:rerun-if-changed={}", manifest.display());
    let recorded = std::fs::read_to_string(&manifest).map_err(|e| {
        format!(
            "{}: {e} (write the folder with `cargo xtask cubins`)",
            manifest.display()
        )
    })?;
    let sha: String = Sha256::digest(ptx.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    cubin_files::check_manifest(&recorded, &sha)?;
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| cubin_files::arch_of(n).is_some())
        .collect();
    names.sort();
    if names.is_empty() {
        return Err("no ingot.<arch>.cubin.xz in the folder".into());
    }
    let mut list = String::new();
    for name in names {
        let arch = cubin_files::arch_of(&name).expect("filtered");
        let src = dir.join(&name);
        println!("cargo:rerun-if-changed={}", src.display());
        let dest = out_dir.join(&name);
        std::fs::copy(&src, &dest).map_err(|e| format!("{}: {e}", src.display()))?;
        list.push_str(&format!(
            "Cubin {{ arch: {arch:?}, xz: include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{name}\")) }},"
        ));
    }
    Ok(list)
}
