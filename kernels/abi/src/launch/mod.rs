//! Kernel launch descriptors shared by the device crate, the host launcher and the tests.
//!
//! Each kernel's exported name, parameter order and launch shape is written down exactly once,
//! here. The device crate reads the constants (threads per block, rows per block) so its thread
//! mapping cannot drift from what the host launches; the host reads the parameter lists to check
//! argument kinds before a launch and [`KernelDesc::grid`] to size the grid.
//!
//! One file per kernel family; each exports its descriptors and an `ALL` list, and [`KERNELS`]
//! lists the families. A new family adds its module and one entry to [`KERNELS`].

mod basic;

pub use basic::*;

/// Threads per warp on every NVIDIA architecture this crate targets (sm_86, sm_90).
pub const WARP_SIZE: u32 = 32;

/// What a kernel parameter is at the PTX level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// A global-memory pointer (`.u64` in PTX). The buffer it points to must be 16-byte aligned.
    Ptr,
    /// A `.u32` scalar.
    U32,
    /// A `.s32` scalar.
    I32,
    /// A `.f32` scalar.
    F32,
    /// A `.u64` scalar.
    U64,
}

/// One kernel parameter, in declaration order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: &'static str,
    pub kind: ParamKind,
}

pub(crate) const fn ptr(name: &'static str) -> Param {
    Param {
        name,
        kind: ParamKind::Ptr,
    }
}

pub(crate) const fn u32_(name: &'static str) -> Param {
    Param {
        name,
        kind: ParamKind::U32,
    }
}

pub(crate) const fn f32_(name: &'static str) -> Param {
    Param {
        name,
        kind: ParamKind::F32,
    }
}

/// Name, parameters and launch shape of one kernel in `kernels/ptx/ingot.ptx`.
///
/// The grid is one-dimensional: a kernel covers `items` work items (rows, or elements for
/// element-wise kernels), `items_per_block` per thread block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelDesc {
    /// Exported (`#[no_mangle]`) symbol name in the PTX.
    pub name: &'static str,
    /// Parameters in PTX declaration order.
    pub params: &'static [Param],
    /// Threads per block, `[x, y, z]`.
    pub block: [u32; 3],
    /// Work items one block covers; see each kernel for what an item is.
    pub items_per_block: u32,
    /// Dynamic shared memory per block, in bytes.
    pub shared_bytes: u32,
}

impl KernelDesc {
    /// Grid covering `items` work items: `ceil(items / items_per_block)` blocks along x.
    pub const fn grid(&self, items: u32) -> [u32; 3] {
        [items.div_ceil(self.items_per_block), 1, 1]
    }

    /// Threads per block (product of `block`).
    pub const fn threads(&self) -> u32 {
        self.block[0] * self.block[1] * self.block[2]
    }
}


/// Every kernel the device crate exports, by family.
pub const KERNELS: &[&[KernelDesc]] = &[basic::ALL];

/// Iterates every kernel descriptor of every family.
pub fn all_kernels() -> impl Iterator<Item = &'static KernelDesc> {
    KERNELS.iter().flat_map(|family| family.iter())
}
