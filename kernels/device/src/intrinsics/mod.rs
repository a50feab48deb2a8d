//! Every single-instruction wrapper the kernels use, the one place device code writes `asm!`
//! for an instruction rather than for a kernel's own shared-memory symbol.
//!
//! LLVM does not emit these instructions on its own in the form the kernels need (non-coherent
//! and predicated loads, dp4a, warp shuffles and reductions, half conversions, tensor-core
//! `mma`), so each is one `asm!` behind an `#[inline(always)]` function; the submodules group
//! them by concern and this module re-exports them flat.
//!
//! Contracts shared by all of them:
//! - Global addresses are plain `u64`s obtained once per kernel from [`global`]; shared
//!   addresses are 32-bit `.shared` offsets. Alignment requirements are on each function.
//! - `ld.global.nc` loads (read-only data cache) must only read buffers that no thread writes
//!   during the same launch; [`ld_f32_coherent`] is the exception for aliased data.
//! - Warp-synchronous instructions (shuffles, `redux`, `ldmatrix`, `mma`) are not marked `pure`,
//!   so LLVM never sinks them into a branch only part of the warp takes; every lane of the
//!   warp must execute them.

mod float;
mod global_mem;
mod grid_dep;
mod int;
mod mma;
mod shared_mem;
mod special;
mod warp;

pub use float::*;
pub use global_mem::*;
pub use grid_dep::*;
pub use int::*;
pub use mma::*;
pub use shared_mem::*;
pub use special::*;
pub use warp::*;
