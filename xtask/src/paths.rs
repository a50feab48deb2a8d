//! The one place that knows where the workspace keeps things: the committed PTX (and its unpacked
//! copy) and NVIDIA's offline tools (ptxas, cuobjdump, nvdisasm).
//!
//! `cargo xtask tools` unpacks the tools from NVIDIA's PyPI wheels into `<workspace>/.tools`
//! (gitignored). Each can be overridden with an environment variable naming the executable, so a
//! machine with a CUDA toolkit can point at its own copy. The xtask commands that run `ptx-audit`
//! (directly or through its tests) pass the paths to it in the same variables ([`tool_env`]);
//! `ptx-audit` itself only reads those variables and `PATH`.

use std::path::{Path, PathBuf};

/// The workspace root (parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The committed PTX, xz-compressed; `ingot_kernels::PTX` embeds its text.
pub fn committed_ptx_path() -> PathBuf {
    workspace_root().join("kernels/ptx/ingot.ptx.xz")
}

/// The committed PTX's text, unpacked for tools that take a file (ptxas) and for reading:
/// `target/ptx/ingot.ptx`, rewritten by every `cargo xtask kernels` and `cargo xtask sass`.
pub fn plain_ptx_path() -> PathBuf {
    workspace_root().join("target/ptx/ingot.ptx")
}

/// `<workspace>/.tools`, where `cargo xtask tools` installs.
pub fn tools_dir() -> PathBuf {
    workspace_root().join(".tools")
}

/// `<workspace>/.tools/python`, where `cargo xtask tools` installs the `openai` client (a
/// `PYTHONPATH` directory; `tests/serve_clients.rs` knows the same path).
pub fn python_dir() -> PathBuf {
    tools_dir().join("python")
}

/// A tool, the variable that overrides (and passes on) its path, and the file its wheel installs.
pub struct Tool {
    pub name: &'static str,
    pub env_var: &'static str,
}

pub const PTXAS: Tool = Tool {
    name: "ptxas",
    env_var: "INGOT_PTXAS",
};
pub const CUOBJDUMP: Tool = Tool {
    name: "cuobjdump",
    env_var: "INGOT_CUOBJDUMP",
};
pub const NVDISASM: Tool = Tool {
    name: "nvdisasm",
    env_var: "INGOT_NVDISASM",
};
pub const TOOLS: [Tool; 3] = [PTXAS, CUOBJDUMP, NVDISASM];

impl Tool {
    /// `$<env_var>` when set and non-empty, else `<workspace>/.tools/nvidia/cu13/bin/<name>` (where
    /// the CUDA 13 wheels put it). May not exist yet.
    pub fn path(&self) -> PathBuf {
        match std::env::var_os(self.env_var) {
            Some(p) if !p.is_empty() => PathBuf::from(p),
            _ => tools_dir().join("nvidia/cu13/bin").join(self.name),
        }
    }
}

/// The `INGOT_*` variables for the tools that exist, to set on a child process that runs
/// `ptx-audit`.
pub fn tool_env() -> Vec<(&'static str, PathBuf)> {
    TOOLS
        .iter()
        .map(|t| (t.env_var, t.path()))
        .filter(|(_, path)| path.is_file())
        .collect()
}
