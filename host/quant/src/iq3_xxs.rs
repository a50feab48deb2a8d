//! IQ3_XXS: 256 weights in 8 sub-blocks of 32 on the 256-point `IQ3XXS_GRID` (4 values per
//! point), 7 stored sign bits per 8 weights and a 4-bit scale per sub-block:
//! `y = d·(0.5 + s)·0.5·grid·sign` (ggml `dequantize_row_iq3_xxs`).
//!
//! No quantizer yet: ggml's runs without an importance matrix (`llama-quantize` accepts IQ3_XXS
//! without one), but it is not ported (issue 15); synthetic files use stand-in blocks.

use crate::iq2_xxs::signed_group;
use crate::round::f16_to_f32;
use ingot_abi::blocks::{BlockIq3Xxs, QK_K};
use ingot_abi::iq_grids::{IQ3XXS_GRID, KSIGNS_IQ2XS};

/// The signed levels `grid·sign` (|level| ≤ 62) of every weight, in order, and the 4-bit scale
/// of each sub-block of 32.
pub fn unpack(b: &BlockIq3Xxs, q: &mut [i8; QK_K]) -> [u8; QK_K / 32] {
    let mut scales = [0u8; QK_K / 32];
    for (ib, s) in scales.iter_mut().enumerate() {
        let at = QK_K / 4 + 4 * ib;
        let w = u32::from_le_bytes([b.qs[at], b.qs[at + 1], b.qs[at + 2], b.qs[at + 3]]);
        *s = (w >> 28) as u8;
        for l in 0..4 {
            let k = 8 * ib + 2 * l;
            let g1 = IQ3XXS_GRID[usize::from(b.qs[k])].to_le_bytes();
            let g2 = IQ3XXS_GRID[usize::from(b.qs[k + 1])].to_le_bytes();
            let grid = [g1[0], g1[1], g1[2], g1[3], g2[0], g2[1], g2[2], g2[3]];
            let sign = KSIGNS_IQ2XS[((w >> (7 * l)) & 127) as usize];
            signed_group(&grid, sign, &mut q[32 * ib + 8 * l..32 * ib + 8 * l + 8]);
        }
    }
    scales
}

/// Dequantize one super-block (`db·level`, equal to ggml's `db·grid·(±1)`).
pub fn dequantize(b: &BlockIq3Xxs, y: &mut [f32; QK_K]) {
    let d = f16_to_f32(b.d);
    let mut q = [0i8; QK_K];
    let scales = unpack(b, &mut q);
    for (ib, &s) in scales.iter().enumerate() {
        let db = d * (0.5 + f32::from(s)) * 0.5;
        for k in 32 * ib..32 * ib + 32 {
            y[k] = db * f32::from(q[k]);
        }
    }
}
