//! Where the offline NVIDIA tools (ptxas, cuobjdump, nvdisasm) live.
//!
//! `cargo xtask tools` unpacks them from NVIDIA's PyPI wheels into `<workspace>/.tools`
//! (gitignored). Each can be overridden with an environment variable naming the executable, so
//! a machine with a CUDA toolkit can point at its own copy.

use std::path::{Path, PathBuf};

/// Overrides the path of `ptxas`.
pub const PTXAS_ENV: &str = "INGOT_PTXAS";
/// Overrides the path of `cuobjdump`.
pub const CUOBJDUMP_ENV: &str = "INGOT_CUOBJDUMP";
/// Overrides the path of `nvdisasm`.
pub const NVDISASM_ENV: &str = "INGOT_NVDISASM";

/// The workspace root (parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// `<workspace>/.tools`, where `cargo xtask tools` installs.
pub fn tools_dir() -> PathBuf {
    workspace_root().join(".tools")
}

/// Directory of the unpacked wheel binaries (CUDA 13 wheels put them under `nvidia/cu13/bin`).
pub fn tools_bin_dir() -> PathBuf {
    tools_dir().join("nvidia").join("cu13").join("bin")
}

/// The committed PTX file that [`crate::PTX`] embeds.
pub fn committed_ptx_path() -> PathBuf {
    workspace_root()
        .join("kernels")
        .join("ptx")
        .join("ingot.ptx")
}

fn tool(env: &str, name: &str) -> PathBuf {
    match std::env::var_os(env) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => tools_bin_dir().join(name),
    }
}

/// `$INGOT_PTXAS`, else `<workspace>/.tools/nvidia/cu13/bin/ptxas`. May not exist yet.
pub fn ptxas() -> PathBuf {
    tool(PTXAS_ENV, "ptxas")
}

/// `$INGOT_CUOBJDUMP`, else `<workspace>/.tools/nvidia/cu13/bin/cuobjdump`. May not exist yet.
pub fn cuobjdump() -> PathBuf {
    tool(CUOBJDUMP_ENV, "cuobjdump")
}

/// `$INGOT_NVDISASM`, else `<workspace>/.tools/nvidia/cu13/bin/nvdisasm`. May not exist yet.
pub fn nvdisasm() -> PathBuf {
    tool(NVDISASM_ENV, "nvdisasm")
}
