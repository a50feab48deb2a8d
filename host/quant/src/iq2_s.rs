//! IQ2_S: 256 weights in 32 groups of 8 on the 1024-point `IQ2S_GRID` (8 low index bits in
//! `qs`, 2 high ones in `qh`), 8 explicit sign bits per group, and 4-bit scales per 16 weights:
//! `y = d·(0.5 + s)·0.25·grid·sign` (ggml `dequantize_row_iq2_s`).
//!
//! No quantizer: ggml's needs an importance matrix.

use crate::iq2_xs::scale_halves;
use crate::iq2_xxs::signed_group;
use crate::round::f16_to_f32;
use ingot_abi::blocks::{BlockIq2S, QK_K};
use ingot_abi::iq_grids::IQ2S_GRID;

/// The signed levels `grid·sign` (|level| ≤ 43) of every weight, in order. Scales as IQ2_XS.
pub fn unpack(b: &BlockIq2S, q: &mut [i8; QK_K]) {
    for g in 0..QK_K / 8 {
        let (ib, l) = (g / 4, g % 4);
        let high = (usize::from(b.qh[ib]) >> (2 * l)) & 3;
        let grid = IQ2S_GRID[usize::from(b.qs[g]) | (high << 8)].to_le_bytes();
        signed_group(&grid, b.qs[QK_K / 8 + g], &mut q[8 * g..8 * g + 8]);
    }
}

/// Dequantize one super-block (`db·level`, equal to ggml's `db·grid·(±1)`).
pub fn dequantize(b: &BlockIq2S, y: &mut [f32; QK_K]) {
    let mut q = [0i8; QK_K];
    unpack(b, &mut q);
    scale_halves(f16_to_f32(b.d), &b.scales, &q, y);
}
