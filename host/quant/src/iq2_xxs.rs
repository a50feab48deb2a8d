//! IQ2_XXS: 256 weights in 8 sub-blocks of 32, groups of 8 on the 256-point `IQ2XXS_GRID`, with
//! 7 stored sign bits per group (parity completes the 8th) and a 4-bit scale per sub-block:
//! `y = d·(0.5 + s)·0.25·grid·sign` (ggml `dequantize_row_iq2_xxs`).
//!
//! No quantizer: ggml's needs an importance matrix (`llama-quantize` refuses IQ2_XXS without
//! one), so files of this type come from elsewhere and this crate only reads them.

use crate::round::f16_to_f32;
use ingot_abi::blocks::{iq2xxs_signs_scale, BlockIq2Xxs, QK_K};
use ingot_abi::iq_grids::{IQ2XXS_GRID, KSIGNS_IQ2XS};

/// The signed levels `grid·sign` (|level| ≤ 43) of every weight, in order, and the 4-bit scale of
/// each sub-block of 32.
pub fn unpack(b: &BlockIq2Xxs, q: &mut [i8; QK_K]) -> [u8; QK_K / 32] {
    let mut scales = [0u8; QK_K / 32];
    for (ib, s) in scales.iter_mut().enumerate() {
        let a = u32::from(b.qs[4 * ib]) | (u32::from(b.qs[4 * ib + 1]) << 16);
        let (signs, scale) = iq2xxs_signs_scale(&b.qs, ib);
        *s = scale as u8;
        for l in 0..4 {
            let grid = IQ2XXS_GRID[((a >> (8 * l)) & 0xFF) as usize].to_le_bytes();
            let sign = KSIGNS_IQ2XS[((signs >> (7 * l)) & 127) as usize];
            signed_group(&grid, sign, &mut q[32 * ib + 8 * l..32 * ib + 8 * l + 8]);
        }
    }
    scales
}

/// `out[j] = ±grid[j]`, negative where bit `j` of `sign` is set. Grid magnitudes are below 64,
/// so the negation fits i8.
#[inline(always)]
pub(crate) fn signed_group(grid: &[u8], sign: u8, out: &mut [i8]) {
    for (j, (o, &g)) in out.iter_mut().zip(grid).enumerate() {
        let g = g as i8;
        *o = if sign & (1 << j) != 0 { -g } else { g };
    }
}

/// Dequantize one super-block. `db·level` with the signed level equals ggml's
/// `db·grid·(±1)`: negation is exact and f32 rounding is symmetric.
pub fn dequantize(b: &BlockIq2Xxs, y: &mut [f32; QK_K]) {
    let d = f16_to_f32(b.d);
    let mut q = [0i8; QK_K];
    let scales = unpack(b, &mut q);
    for (ib, &s) in scales.iter().enumerate() {
        let db = d * (0.5 + f32::from(s)) * 0.25;
        for k in 32 * ib..32 * ib + 32 {
            y[k] = db * f32::from(q[k]);
        }
    }
}
