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

pub use error::CudaError;
pub use gpu::{Arg, DeviceBuffer, Gpu, LaunchShape, Module};
pub use graph::{Event, Graph, PinnedBuffer};
