//! IQ1_S: 256 weights in 8 sub-blocks of 32 on the 2048-point ternary `IQ1S_GRID` (values −1, 0,
//! 1), each sub-block with a 3-bit scale and a shared shift `±IQ1S_DELTA`:
//! `y = d·(2s + 1)·(grid + delta)` (ggml `dequantize_row_iq1_s`).
//!
//! No quantizer: ggml's needs an importance matrix (`ggml_quantize_requires_imatrix`).

use crate::round::f16_to_f32;
use ingot_abi::blocks::{BlockIq1S, QK_K};
use ingot_abi::iq_grids::{IQ1S_DELTA, IQ1S_GRID};

/// The grid values (−1, 0, 1) of every weight, in order.
pub fn unpack(b: &BlockIq1S, q: &mut [i8; QK_K]) {
    for g in 0..QK_K / 8 {
        let (ib, l) = (g / 4, g % 4);
        let high = (usize::from(b.qh[ib]) >> (3 * l)) & 7;
        let grid = IQ1S_GRID[usize::from(b.qs[g]) | (high << 8)].to_le_bytes();
        for (o, &v) in q[8 * g..8 * g + 8].iter_mut().zip(&grid) {
            *o = v as i8;
        }
    }
}

/// The 3-bit scale of sub-block `ib` (bits 12-14 of `qh[ib]`) and the sign of its shift
/// (bit 15: −1 when set).
#[inline(always)]
pub fn scale_sign(b: &BlockIq1S, ib: usize) -> (i32, i32) {
    let h = b.qh[ib % (QK_K / 32)];
    (
        i32::from((h >> 12) & 7),
        if h & 0x8000 != 0 { -1 } else { 1 },
    )
}

/// Dequantize one super-block.
pub fn dequantize(b: &BlockIq1S, y: &mut [f32; QK_K]) {
    let d = f16_to_f32(b.d);
    let mut q = [0i8; QK_K];
    unpack(b, &mut q);
    for ib in 0..QK_K / 32 {
        let (s, sign) = scale_sign(b, ib);
        let dl = d * (2 * s + 1) as f32;
        let delta = if sign < 0 { -IQ1S_DELTA } else { IQ1S_DELTA };
        for k in 32 * ib..32 * ib + 32 {
            y[k] = dl * (f32::from(q[k]) + delta);
        }
    }
}
