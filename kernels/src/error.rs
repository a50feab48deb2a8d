//! Error type of kernel launches.

/// Why a kernel could not be launched or its backend failed.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The requested shape is not one the kernel supports.
    #[error("{kernel}: unsupported shape: {reason}")]
    Shape {
        kernel: &'static str,
        reason: String,
    },
    /// A buffer is smaller than the shape requires.
    #[error("{kernel}: buffer `{param}` holds {have} bytes but the shape needs {need}")]
    BufferTooSmall {
        kernel: &'static str,
        param: &'static str,
        have: usize,
        need: usize,
    },
    /// No kernel of this name exists in the module.
    #[error("unknown kernel `{0}`")]
    UnknownKernel(String),
    /// The backend (driver, simulator) reported an error.
    #[error("{backend} backend: {source}")]
    Backend {
        backend: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Result of kernel operations.
pub type Result<T, E = KernelError> = std::result::Result<T, E>;
