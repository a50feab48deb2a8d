//! Checked launches of the prefill matrix-matrix products (`ingot_abi::launch` family `mmq`):
//! quantized weights times the q8_1 activations of many tokens, f32 out, token-major.

use super::{bytes, launch, need, q8_1_bytes, shape, to_u32};
use crate::backend::{Accelerator, KArg};
use crate::Result;
use ingot_abi::blocks::{BlockQ4K, BlockQ6K, QK_K};
use ingot_abi::launch::{mmq_items, KernelDesc, MMQ_Q4K, MMQ_Q6K};
use std::mem::size_of;

/// `y[t·nrows + r] = Σ_k W[r][k]·x_t[k]` for `t < ntok`: `W` is `nrows` rows of `ncols/256`
/// Q4_K blocks, `x` is `ntok` rows of `ncols/32` q8_1 blocks (CUDA variant, `s = Σx`), `y` is
/// `ntok × nrows` floats (token-major). `ncols` must be a positive multiple of 256, `nrows` and
/// `ntok` positive.
pub fn mmq_q4k<B: Accelerator>(
    b: &mut B,
    (w, x, y): (&B::Buf, &B::Buf, &B::Buf),
    nrows: usize,
    ncols: usize,
    ntok: usize,
) -> Result<()> {
    mmq(
        b,
        &MMQ_Q4K,
        size_of::<BlockQ4K>(),
        (w, x, y),
        [nrows, ncols, ntok],
    )
}

/// As [`mmq_q4k`] with Q6_K weights (`ncols/256` blocks of 210 bytes per row).
pub fn mmq_q6k<B: Accelerator>(
    b: &mut B,
    (w, x, y): (&B::Buf, &B::Buf, &B::Buf),
    nrows: usize,
    ncols: usize,
    ntok: usize,
) -> Result<()> {
    mmq(
        b,
        &MMQ_Q6K,
        size_of::<BlockQ6K>(),
        (w, x, y),
        [nrows, ncols, ntok],
    )
}

/// Checks the shape and every buffer of an `mmq` launch whose weights come in blocks of 256 of
/// `block_bytes` bytes, then launches one block per tile.
fn mmq<B: Accelerator>(
    b: &mut B,
    d: &KernelDesc,
    block_bytes: usize,
    (w, x, y): (&B::Buf, &B::Buf, &B::Buf),
    [nrows, ncols, ntok]: [usize; 3],
) -> Result<()> {
    if ncols == 0 || !ncols.is_multiple_of(QK_K) {
        return Err(shape(
            d,
            format!("ncols = {ncols} is not a positive multiple of {QK_K}"),
        ));
    }
    if nrows == 0 || ntok == 0 {
        return Err(shape(
            d,
            format!("nrows = {nrows}, ntok = {ntok}: both must be positive"),
        ));
    }
    let ncols32 = to_u32(d, "ncols", ncols)?;
    let nrows32 = to_u32(d, "nrows", nrows)?;
    let ntok32 = to_u32(d, "ntok", ntok)?;
    let items = mmq_items(nrows32, ntok32)
        .ok_or_else(|| shape(d, format!("{nrows} rows × {ntok} tokens: too many tiles")))?;
    need(b, d, "w", w, bytes(nrows, ncols / QK_K, block_bytes))?;
    need(b, d, "x", x, q8_1_bytes(ntok, ncols))?;
    need(b, d, "y", y, bytes(ntok, nrows, 4))?;
    launch(
        b,
        d,
        items,
        &[
            KArg::Buf(w),
            KArg::Buf(x),
            KArg::Buf(y),
            KArg::U32(ncols32),
            KArg::U32(nrows32),
            KArg::U32(ntok32),
        ],
    )
}
