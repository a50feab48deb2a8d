//! Kernel launch descriptors shared by the device crate, the host launcher and the tests.
//!
//! Each kernel's exported name, parameter order and launch shape is written down exactly once,
//! here. The device crate reads the constants (threads per block, rows per block) so its thread
//! mapping cannot drift from what the host launches; the host reads the parameter lists to check
//! argument kinds before a launch and [`KernelDesc::grid`] to size the grid.

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

const fn ptr(name: &'static str) -> Param {
    Param {
        name,
        kind: ParamKind::Ptr,
    }
}

const fn u32_(name: &'static str) -> Param {
    Param {
        name,
        kind: ParamKind::U32,
    }
}

const fn f32_(name: &'static str) -> Param {
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

/// Threads per block of [`QUANTIZE_Q8_1`].
pub const QUANTIZE_Q8_1_THREADS: u32 = 256;
/// Input floats each [`QUANTIZE_Q8_1`] thread loads (one 16-byte load).
pub const QUANTIZE_Q8_1_PER_THREAD: u32 = 4;

/// `quantize_q8_1(x: *const f32, y: *mut BlockQ8_1, n: u32)`: `n` floats (multiple of 32) to
/// `n/32` q8_1 blocks, CUDA variant (`s` = Σx). An item is one input float.
pub const QUANTIZE_Q8_1: KernelDesc = KernelDesc {
    name: "quantize_q8_1",
    params: &[ptr("x"), ptr("y"), u32_("n")],
    block: [QUANTIZE_Q8_1_THREADS, 1, 1],
    items_per_block: QUANTIZE_Q8_1_THREADS * QUANTIZE_Q8_1_PER_THREAD,
    shared_bytes: 0,
};

/// Threads per block of [`RMSNORM_F32`].
pub const RMSNORM_THREADS: u32 = 256;

/// `rmsnorm_f32(x: *const f32, w: *const f32, y: *mut f32, n: u32, eps: f32)`:
/// `y[r] = x[r]·w / sqrt(mean(x[r]²) + eps)` for each row `r` of `n` floats (`n` a multiple of 4).
/// An item is one row.
pub const RMSNORM_F32: KernelDesc = KernelDesc {
    name: "rmsnorm_f32",
    params: &[ptr("x"), ptr("w"), ptr("y"), u32_("n"), f32_("eps")],
    block: [RMSNORM_THREADS, 1, 1],
    items_per_block: 1,
    shared_bytes: 0,
};

/// Warps per block of the gemv kernels; each warp computes one output row.
pub const GEMV_WARPS: u32 = 4;

/// `gemv_q4k_q8_1(w: *const BlockQ4K, x: *const BlockQ8_1, y: *mut f32, ncols: u32, nrows: u32)`:
/// `y[r] = Σ_c W[r][c]·x[c]` with `W` row-major Q4_K (`ncols` a multiple of 256, each row
/// `ncols/256` super-blocks) and `x` the q8_1 activation vector. An item is one output row.
pub const GEMV_Q4K_Q8_1: KernelDesc = KernelDesc {
    name: "gemv_q4k_q8_1",
    params: &[ptr("w"), ptr("x"), ptr("y"), u32_("ncols"), u32_("nrows")],
    block: [GEMV_WARPS * WARP_SIZE, 1, 1],
    items_per_block: GEMV_WARPS,
    shared_bytes: 0,
};

/// `gemv_q3k_q8_1(w: *const BlockQ3K, x: *const BlockQ8_1, y: *mut f32, ncols: u32, nrows: u32)`:
/// as [`GEMV_Q4K_Q8_1`] with Q3_K weights.
pub const GEMV_Q3K_Q8_1: KernelDesc = KernelDesc {
    name: "gemv_q3k_q8_1",
    params: &[ptr("w"), ptr("x"), ptr("y"), u32_("ncols"), u32_("nrows")],
    block: [GEMV_WARPS * WARP_SIZE, 1, 1],
    items_per_block: GEMV_WARPS,
    shared_bytes: 0,
};

/// Every kernel the device crate exports.
pub const KERNELS: &[KernelDesc] = &[QUANTIZE_Q8_1, RMSNORM_F32, GEMV_Q4K_Q8_1, GEMV_Q3K_Q8_1];
