//! Activation quantization, rmsnorm and the first gemv kernels.

use super::{f32_, ptr, u32_, KernelDesc, GEMV_BLOCK_WARPS, WARP_SIZE};

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

/// Warps per block of the f32 gemv, the MoE router and the MoE kernels (one output row or
/// row pair per warp); the quantized gemvs use `GEMV_BLOCK_WARPS`.
pub const GEMV_WARPS: u32 = 4;

/// `gemv_q4k_q8_1(w: *const BlockQ4K, x: *const BlockQ8_1, y: *mut f32, ncols: u32, nrows: u32)`:
/// `y[r] = Σ_c W[r][c]·x[c]` with `W` row-major Q4_K (`ncols` a multiple of 256, each row
/// `ncols/256` super-blocks) and `x` the q8_1 activation vector. An item is a warp (see the
/// `gemv` family).
pub const GEMV_Q4K_Q8_1: KernelDesc = KernelDesc {
    name: "gemv_q4k_q8_1",
    params: &[ptr("w"), ptr("x"), ptr("y"), u32_("ncols"), u32_("nrows")],
    block: [GEMV_BLOCK_WARPS * WARP_SIZE, 1, 1],
    items_per_block: GEMV_BLOCK_WARPS,
    shared_bytes: 0,
};

/// `gemv_q3k_q8_1(w: *const BlockQ3K, x: *const BlockQ8_1, y: *mut f32, ncols: u32, nrows: u32)`:
/// as [`GEMV_Q4K_Q8_1`] with Q3_K weights.
pub const GEMV_Q3K_Q8_1: KernelDesc = KernelDesc {
    name: "gemv_q3k_q8_1",
    params: &[ptr("w"), ptr("x"), ptr("y"), u32_("ncols"), u32_("nrows")],
    block: [GEMV_BLOCK_WARPS * WARP_SIZE, 1, 1],
    items_per_block: GEMV_BLOCK_WARPS,
    shared_bytes: 0,
};

/// The kernels of this family.
pub const ALL: &[KernelDesc] = &[QUANTIZE_Q8_1, RMSNORM_F32, GEMV_Q4K_Q8_1, GEMV_Q3K_Q8_1];
