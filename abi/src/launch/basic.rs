//! Activation quantization and rmsnorm.

use super::{f32_, ptr, u32_, KernelDesc};

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

/// The kernels of this family.
pub const ALL: &[KernelDesc] = &[QUANTIZE_Q8_1, RMSNORM_F32];
