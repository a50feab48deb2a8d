//! IQ2_XS: 256 weights in 32 groups of 8 on the 512-point `IQ2XS_GRID`, each group with a
//! 9-bit grid index and a 7-bit sign index in one u16, and 4-bit scales per 16 weights:
//! `y = d·(0.5 + s)·0.25·grid·sign` (ggml `dequantize_row_iq2_xs`).
//!
//! No quantizer: ggml's needs an importance matrix (`ggml_quantize_requires_imatrix`).

use crate::iq2_xxs::signed_group;
use crate::round::f16_to_f32;
use ingot_abi::blocks::{BlockIq2Xs, QK_K};
use ingot_abi::iq_grids::{IQ2XS_GRID, KSIGNS_IQ2XS};

/// The signed levels `grid·sign` (|level| ≤ 43) of every weight, in order. The scales are
/// `b.scales[ib] & 15` (first 16 weights of sub-block `ib`) and `>> 4` (the next 16).
pub fn unpack(b: &BlockIq2Xs, q: &mut [i8; QK_K]) {
    for (g, &v) in b.qs.iter().enumerate() {
        let grid = IQ2XS_GRID[usize::from(v & 511)].to_le_bytes();
        let sign = KSIGNS_IQ2XS[usize::from(v >> 9)];
        signed_group(&grid, sign, &mut q[8 * g..8 * g + 8]);
    }
}

/// Dequantize one super-block (`db·level`, equal to ggml's `db·grid·(±1)`).
pub fn dequantize(b: &BlockIq2Xs, y: &mut [f32; QK_K]) {
    let mut q = [0i8; QK_K];
    unpack(b, &mut q);
    scale_halves(f16_to_f32(b.d), &b.scales, &q, y);
}

/// `y = d·(0.5 + s)·0.25·q` with `s` the low nibble of `scales[ib]` for the first 16 levels of
/// sub-block `ib` and the high nibble for the next 16 (IQ2_XS and IQ2_S).
pub(crate) fn scale_halves(d: f32, scales: &[u8; QK_K / 32], q: &[i8; QK_K], y: &mut [f32; QK_K]) {
    for (ib, &sc) in scales.iter().enumerate() {
        for (h, s) in [sc & 0xF, sc >> 4].into_iter().enumerate() {
            let db = d * (0.5 + f32::from(s)) * 0.25;
            let at = 32 * ib + 16 * h;
            for k in at..at + 16 {
                y[k] = db * f32::from(q[k]);
            }
        }
    }
}
