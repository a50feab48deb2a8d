//! Error type of the bench library.

use ingot_gguf::GgmlType;

/// Why a bench could not be set up or run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A kernel launch (shape check, simulator or driver) failed.
    #[error(transparent)]
    Kernel(#[from] ingot_kernels::KernelError),
    /// A reference quantizer rejected the request.
    #[error("quantizing {ty:?} bench weights: {source}")]
    Quant {
        ty: GgmlType,
        #[source]
        source: ingot_quant::QuantError,
    },
    /// A bench shape does not fit the format it asks for (caught before anything is allocated).
    #[error("bench case `{case}`: {reason}")]
    Shape { case: String, reason: String },
    /// The PTX simulator refused the module or a launch.
    #[error("ptx-sim: {0}")]
    Sim(#[from] ptx_sim::SimError),
    /// A CUDA driver call failed.
    #[error("CUDA: {0}")]
    Cuda(#[from] ingot_cuda::CudaError),
    /// ptxas or the disassembler (SASS counts) failed or is missing.
    #[error("SASS counts: {0}")]
    Audit(#[from] ptx_audit::AuditError),
    /// A scratch file could not be written.
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Result of bench operations.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;
