//! ingot's GPU kernels as committed PTX, the table of their launch shapes, and the
//! [`Accelerator`] trait that runs them on a real GPU ([`backend::cuda`]) or on the PTX simulator
//! (`backend::sim`, feature `sim`).
//!
//! The PTX is generated from `kernels/device` by `cargo xtask kernels` and committed, xz-compressed
//! (`kernels/ptx/ingot.ptx.xz`; `build.rs` unpacks it), so this crate builds on stable Rust with no
//! CUDA toolkit. `cargo xtask kernels --check` fails when the
//! committed file no longer matches the device sources. Kernel names, parameter lists and launch
//! shapes come from [`ingot_abi::launch`], the same constants the device code compiles against.

pub mod backend;
pub mod cubin;
mod error;
pub mod grid_dep;
pub mod ops;

pub use backend::{Accelerator, KArg};
pub use error::{KernelError, Result};
pub use ingot_abi::kernel_table::{all_kernels, KERNELS};
pub use ingot_abi::launch::{KernelDesc, Param, ParamKind};

/// The committed PTX module (PTX ISA 7.8, sm_86; JIT-compiled by the driver for newer GPUs), as
/// `build.rs` unpacked it from `kernels/ptx/ingot.ptx.xz`.
///
/// A `static`, not a `const`: a `const` is inlined at every use site, so each crate that names
/// it would embed its own ~18 MB copy; a `static` is one object, so a binary holds it once.
pub static PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/ingot.ptx"));

/// The launch descriptor of kernel `name`, if the module has it.
pub fn kernel(name: &str) -> Option<&'static KernelDesc> {
    all_kernels().find(|k| k.name == name)
}
