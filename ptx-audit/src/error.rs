//! Error types. Every failure names the file, tool, kernel or metric involved.

use std::path::PathBuf;

use ptx_front::PtxError;

/// Errors of the audit (tools, budgets, files).
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Ptx {
        path: PathBuf,
        #[source]
        source: PtxError,
    },
    #[error("{tool} not found ({searched}); run `cargo xtask tools` to install NVIDIA's ptxas/cuobjdump/nvdisasm under .tools/, then `cargo xtask audit` (which passes their paths), or set {env_var} to the executable")]
    ToolMissing {
        tool: &'static str,
        env_var: &'static str,
        searched: String,
    },
    #[error("{tool} failed for {arch} (exit status {status}): {stderr}")]
    ToolFailed {
        tool: &'static str,
        arch: String,
        status: String,
        stderr: String,
    },
    #[error("{tool} did not finish within {seconds} s for {arch}")]
    ToolTimeout {
        tool: &'static str,
        arch: String,
        seconds: u64,
    },
    #[error("could not read {tool} output for {arch}: {message}")]
    ToolOutput {
        tool: &'static str,
        arch: String,
        message: String,
    },
    #[error("budget file {path}: {message}")]
    Budget { path: PathBuf, message: String },
    #[error("no kernel `{name}` in {path}")]
    UnknownKernel { name: String, path: PathBuf },
}
