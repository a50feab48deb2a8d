//! Minimal CUDA launcher: open a device, load PTX, allocate, copy, launch, time with events.
//!
//! Built on `cudarc` with dynamic loading, so it compiles without a CUDA toolkit and a machine
//! without a driver gets [`CudaError::NoDriver`] instead of cudarc's panic: [`Gpu::new`] checks
//! that libcuda can be opened before the first driver call. All work is issued on one
//! (capturable, non-default) stream; `upload`/`download` synchronise, so results are visible
//! when they return. For decoding, a sequence of launches is captured once into a [`Graph`] and
//! replayed, with results read back asynchronously through [`PinnedBuffer`]s and [`Event`]s.

mod error;
mod gpu;
mod graph;
mod image;
mod mapped;
mod module;

pub use error::CudaError;
pub use gpu::{Arg, DeviceBuffer, Gpu, LaunchOptions, LaunchShape, NO_L2_STREAMING};
pub use graph::{Event, Graph, PinnedBuffer};
pub use image::ModuleSource;
pub use mapped::{CopyStream, Fence, MappedBuffer};
pub use module::{JitReport, Module};

/// Environment variable that makes a GPU mandatory: with `INGOT_REQUIRE_GPU=1`, a test or gate
/// whose GPU half would be skipped for want of a GPU fails instead (the device scripts set it,
/// so a run on a machine without a usable GPU can never read as a pass).
pub const REQUIRE_GPU_VAR: &str = "INGOT_REQUIRE_GPU";

/// Whether [`REQUIRE_GPU_VAR`] is set to `1`.
pub fn gpu_required() -> bool {
    std::env::var(REQUIRE_GPU_VAR).is_ok_and(|v| v.trim() == "1")
}

/// What a test prints when GPU 0 cannot be opened (`e` is [`CudaError::NoDriver`] or
/// [`CudaError::NoDevice`], whose text starts with `no GPU found`): a skip, or with
/// [`REQUIRE_GPU_VAR`]`=1` the failure message.
pub fn no_gpu_message(what: &str, e: &CudaError) -> String {
    if gpu_required() {
        format!("{what}: {e}; {REQUIRE_GPU_VAR}=1, so this is a failure")
    } else {
        format!("{what}: GPU half skipped: {e} (set {REQUIRE_GPU_VAR}=1 to fail instead)")
    }
}
