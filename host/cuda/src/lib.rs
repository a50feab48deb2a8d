//! Minimal CUDA launcher: open a device, load PTX, allocate, copy, launch, time with events.
//!
//! Built on `cudarc` with dynamic loading, so it compiles without a CUDA toolkit and a machine
//! without a driver gets [`CudaError::NoDriver`] instead of cudarc's panic: [`Gpu::new`] checks
//! that libcuda can be opened before the first driver call. All work is issued on one stream and
//! the copy functions synchronise, so results are visible when they return.

mod error;
mod gpu;

pub use error::CudaError;
pub use gpu::{Arg, DeviceBuffer, Gpu, LaunchShape, Module};
