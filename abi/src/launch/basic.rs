//! Activation quantization and rmsnorm.

use super::{signature, Kernel, KernelDesc};

/// Threads per block of [`QUANTIZE_Q8_1`].
pub const QUANTIZE_Q8_1_THREADS: u32 = 256;
/// Input floats each [`QUANTIZE_Q8_1`] thread loads (one 16-byte load).
pub const QUANTIZE_Q8_1_PER_THREAD: u32 = 4;

/// `quantize_q8_1(x: *const f32, y: *mut BlockQ8_1, n: u32)`: `n` floats (multiple of 32) to
/// `n/32` q8_1 blocks, CUDA variant (`s` = Σx). An item is one input float.
pub const QUANTIZE_Q8_1: Kernel<QuantizeQ8_1Args> = Kernel::new(
    "quantize_q8_1",
    [QUANTIZE_Q8_1_THREADS, 1, 1],
    QUANTIZE_Q8_1_THREADS * QUANTIZE_Q8_1_PER_THREAD,
    0,
);

signature! {
    /// The arguments of [`QUANTIZE_Q8_1`].
    QuantizeQ8_1Args { x: ptr, y: ptr, n: u32 }
}

/// Threads per block of [`RMSNORM_F32`].
pub const RMSNORM_THREADS: u32 = 256;

/// `rmsnorm_f32(x: *const f32, w: *const f32, y: *mut f32, n: u32, eps: f32)`:
/// `y[r] = x[r]·w / sqrt(mean(x[r]²) + eps)` for each row `r` of `n` floats (`n` a multiple of 4).
/// An item is one row.
pub const RMSNORM_F32: Kernel<RmsnormArgs> =
    Kernel::new("rmsnorm_f32", [RMSNORM_THREADS, 1, 1], 1, 0);

signature! {
    /// The arguments of the row norms: [`RMSNORM_F32`], and `rmsnorm_q8_1` with `y` q8_1.
    RmsnormArgs { x: ptr, w: ptr, y: ptr, n: u32, eps: f32 }
}

/// Warps per block of the f32 gemv, the MoE router and the MoE kernels (one output row or
/// row pair per warp); the quantized gemvs use `GEMV_BLOCK_WARPS`.
pub const GEMV_WARPS: u32 = 4;

/// The kernels of this family.
pub const ALL: &[KernelDesc] = &[QUANTIZE_Q8_1.desc, RMSNORM_F32.desc];
