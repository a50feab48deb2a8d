//! ingot's GPU kernels as committed PTX, the table of their launch shapes, and a [`Backend`]
//! trait that runs them on a real GPU ([`backend::cuda`]) or on the PTX simulator
//! (`backend::sim`, feature `sim`).
//!
//! The PTX is generated from `kernels/device` by `cargo xtask kernels` and committed, so this
//! crate builds on stable Rust with no CUDA toolkit. `cargo xtask kernels --check` fails when the
//! committed file no longer matches the device sources. Kernel names, parameter lists and launch
//! shapes come from [`ingot_abi::launch`], the same constants the device code compiles against.

pub mod backend;
mod error;
pub mod ops;

pub use backend::{Backend, KArg};
pub use error::{KernelError, Result};
pub use ingot_abi::launch::{all_kernels, KernelDesc, Param, ParamKind, KERNELS};

/// The committed PTX module (PTX ISA 7.8, sm_86; JIT-compiled by the driver for newer GPUs).
pub const PTX: &str = include_str!("../ptx/ingot.ptx");

/// The launch descriptor of kernel `name`, if the module has it.
pub fn kernel(name: &str) -> Option<&'static KernelDesc> {
    all_kernels().find(|k| k.name == name)
}
