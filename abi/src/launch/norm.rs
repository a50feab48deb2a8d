//! RMS norm fused with the q8_1 quantization of its output.

use super::{signature, Kernel, KernelDesc, RmsnormArgs};

/// Threads per block of [`RMSNORM_Q8_1`].
pub const RMSNORM_Q8_1_THREADS: u32 = 256;

/// `rmsnorm_q8_1(x: *const f32, w: *const f32, y: *mut BlockQ8_1, n: u32, eps: f32)`:
/// `y[r] = quantize_q8_1((x[r] / sqrt(mean(x[r]²) + eps))·w)` (CUDA q8_1 variant, `s = Σ`) for
/// each row `r` of `n` floats, `n` a multiple of 32. An item is one row.
pub const RMSNORM_Q8_1: Kernel<RmsnormArgs> =
    Kernel::new("rmsnorm_q8_1", [RMSNORM_Q8_1_THREADS, 1, 1], 1, 0);

/// `rmsnorm_q8_1_f32(x, w, y, y_f32, n, eps)`: as [`RMSNORM_Q8_1`], and `y_f32[r]` (`n`
/// floats per row) receives the normalized floats that were quantized (the MoE router input).
pub const RMSNORM_Q8_1_F32: Kernel<RmsnormQ8_1F32Args> =
    Kernel::new("rmsnorm_q8_1_f32", [RMSNORM_Q8_1_THREADS, 1, 1], 1, 0);

signature! {
    /// The arguments of [`RMSNORM_Q8_1_F32`].
    RmsnormQ8_1F32Args { x: ptr, w: ptr, y: ptr, y_f32: ptr, n: u32, eps: f32 }
}

/// The kernels of this family.
pub const ALL: &[KernelDesc] = &[RMSNORM_Q8_1.desc, RMSNORM_Q8_1_F32.desc];
