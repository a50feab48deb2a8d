//! Checked launches of the fused rmsnorm + q8_1 quantization (`ingot_abi::launch` family
//! `norm`), with or without the f32 copy of the normalized row.

use super::{bytes, launch, need, q8_1_bytes, shape, to_u32};
use crate::backend::Accelerator;
use crate::Result;
use ingot_abi::blocks::QK8_1;
use ingot_abi::launch::{
    KernelDesc, RmsnormArgs, RmsnormQ8_1F32Args, RMSNORM_Q8_1, RMSNORM_Q8_1_F32,
};

/// `y[r] = quantize_q8_1(x[r]·w / sqrt(mean(x[r]²) + eps))` for `rows` rows of `n` floats
/// (`n` a positive multiple of 32); `y` receives `rows · n/32` q8_1 blocks (`s = Σ` of the
/// normalized floats, the CUDA variant the gemvs expect).
pub fn rmsnorm_q8_1<B: Accelerator>(
    b: &mut B,
    (x, w, y): (&B::Buf, &B::Buf, &B::Buf),
    rows: usize,
    n: usize,
    eps: f32,
) -> Result<()> {
    let d = &RMSNORM_Q8_1;
    let (n32, rows32) = check(b, d, (x, w, y), rows, n, eps)?;
    launch(
        b,
        d,
        rows32,
        RmsnormArgs {
            x,
            w,
            y,
            n: n32,
            eps,
        },
    )
}

/// As [`rmsnorm_q8_1`], and `y_f32` (`rows · n` floats) receives the normalized floats that were
/// quantized (the MoE router's input).
pub fn rmsnorm_q8_1_f32<B: Accelerator>(
    b: &mut B,
    (x, w, y, y_f32): (&B::Buf, &B::Buf, &B::Buf, &B::Buf),
    rows: usize,
    n: usize,
    eps: f32,
) -> Result<()> {
    let d = &RMSNORM_Q8_1_F32;
    let (n32, rows32) = check(b, d, (x, w, y), rows, n, eps)?;
    need(b, d, "y_f32", y_f32, bytes(rows, n, 4))?;
    launch(
        b,
        d,
        rows32,
        RmsnormQ8_1F32Args {
            x,
            w,
            y,
            y_f32,
            n: n32,
            eps,
        },
    )
}

/// Checks the shape, `eps` and the buffers both kernels share; returns `(n, rows)` as scalars.
fn check<B: Accelerator>(
    b: &B,
    d: &KernelDesc,
    (x, w, y): (&B::Buf, &B::Buf, &B::Buf),
    rows: usize,
    n: usize,
    eps: f32,
) -> Result<(u32, u32)> {
    let scalars = check_rmsnorm(b, d, (x, w), rows, n, QK8_1, eps)?;
    need(b, d, "y", y, q8_1_bytes(rows, n))?;
    Ok(scalars)
}

/// Checks what every rmsnorm launch shares: `n` a positive multiple of `multiple` (the
/// kernel's per-thread chunk), a finite non-negative `eps`, `x` of `rows × n` floats and `w` of
/// `n` floats; returns `(n, rows)` as launch scalars. The output is the caller's to check.
pub(super) fn check_rmsnorm<B: Accelerator>(
    b: &B,
    d: &KernelDesc,
    (x, w): (&B::Buf, &B::Buf),
    rows: usize,
    n: usize,
    multiple: usize,
    eps: f32,
) -> Result<(u32, u32)> {
    if n == 0 || !n.is_multiple_of(multiple) {
        return Err(shape(
            d,
            format!("n = {n} is not a positive multiple of {multiple}"),
        ));
    }
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(shape(
            d,
            format!("eps = {eps} is not a finite non-negative number"),
        ));
    }
    let n32 = to_u32(d, "n", n)?;
    let rows32 = to_u32(d, "rows", rows)?;
    need(b, d, "x", x, bytes(rows, n, 4))?;
    need(b, d, "w", w, bytes(n, 4, 1))?;
    Ok((n32, rows32))
}
