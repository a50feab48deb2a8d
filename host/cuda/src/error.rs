//! Error type of the launcher.

use cudarc::driver::DriverError;

/// Why a CUDA operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// The driver library is not loadable, so no GPU can be used on this machine.
    ///
    /// Both "no GPU" messages start with `no GPU found`: the device scripts' rehearsal tells an
    /// expected failure on a machine without a GPU from any other by those words.
    #[error(
        "no GPU found: no CUDA driver (libcuda.so / libcuda.so.1 could not be loaded); install \
         the NVIDIA driver, or add the directory holding libcuda.so.1 to LD_LIBRARY_PATH"
    )]
    NoDriver,
    /// The driver works but has no device with this ordinal.
    #[error("no GPU found: no CUDA device with ordinal {ordinal} (the driver reports {count} device(s))")]
    NoDevice { ordinal: usize, count: i32 },
    /// A driver call returned an error.
    #[error("CUDA driver call `{call}` failed: {source}")]
    Driver {
        call: &'static str,
        #[source]
        source: DriverError,
    },
    /// The driver rejected a module: its JIT the PTX (the error log names the line and the
    /// reason), or its loader a cubin. The info log (verbose, one block per kernel) is kept but not
    /// printed.
    #[error(
        "cuModuleLoadDataEx ({}) failed: {source}\nJIT error log:\n{}",
        module.describe(),
        or_none(error_log)
    )]
    Jit {
        module: crate::image::ModuleSource,
        #[source]
        source: DriverError,
        error_log: String,
        info_log: String,
    },
    /// A cubin image is not an ELF file (a build that embedded something else).
    #[error("the {0} cubin embedded in this build is not an ELF image: rebuild it with `cargo xtask cubins`")]
    NotCubin(String),
    /// The PTX text cannot be passed to the driver (it contains a NUL byte).
    #[error("PTX text contains a NUL byte at offset {0}")]
    PtxNul(usize),
    /// The loaded module has no kernel of this name.
    #[error("kernel `{name}` is not in the loaded module: {source}")]
    UnknownKernel {
        name: String,
        #[source]
        source: DriverError,
    },
    /// A host slice is longer than the device buffer it is copied to or from.
    #[error("{op}: host slice of {host} bytes does not fit the device buffer of {device} bytes")]
    SizeMismatch {
        op: &'static str,
        device: usize,
        host: usize,
    },
    /// A stream capture recorded no work, so there is no graph to replay.
    #[error("the stream capture recorded no work (empty CUDA graph)")]
    EmptyGraph,
    /// A zero-sized allocation was requested.
    #[error("cannot allocate a zero-byte device buffer")]
    EmptyAlloc,
}

/// Attaches the name of the failing driver call.
pub(crate) trait Call<T> {
    fn call(self, call: &'static str) -> Result<T, CudaError>;
}

impl<T> Call<T> for Result<T, DriverError> {
    fn call(self, call: &'static str) -> Result<T, CudaError> {
        self.map_err(|source| CudaError::Driver { call, source })
    }
}

fn or_none(log: &str) -> &str {
    if log.is_empty() {
        "(empty)"
    } else {
        log
    }
}
