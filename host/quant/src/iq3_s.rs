//! IQ3_S: 256 weights on the 512-point `IQ3S_GRID` (4 odd values 1..=15 per point; 8 low index
//! bits in `qs`, the 9th in `qh`), one explicit sign bit per weight and a 4-bit scale per
//! sub-block of 32: `y = d·(1 + 2s)·grid·sign` (ggml `dequantize_row_iq3_s`).
//!
//! No quantizer yet: ggml's runs without an importance matrix (`llama-quantize` accepts IQ3_S
//! without one), but it is not ported (issue 15); synthetic files use stand-in blocks.

use crate::round::f16_to_f32;
use ingot_abi::blocks::{BlockIq3S, QK_K};
use ingot_abi::iq_grids::IQ3S_GRID;

/// The signed levels `grid·sign` (|level| ≤ 15) of every weight, in order. Sub-block `ib`'s
/// scale is `b.scales[ib / 2] >> 4·(ib % 2) & 15`.
pub fn unpack(b: &BlockIq3S, q: &mut [i8; QK_K]) {
    for (k, &low) in b.qs.iter().enumerate() {
        let high = (usize::from(b.qh[k / 8]) >> (k % 8)) & 1;
        let grid = IQ3S_GRID[usize::from(low) | (high << 8)].to_le_bytes();
        for (j, &g) in grid.iter().enumerate() {
            let e = 4 * k + j;
            let g = g as i8;
            q[e] = if b.signs[e / 8] & (1 << (e % 8)) != 0 {
                -g
            } else {
                g
            };
        }
    }
}

/// The 4-bit scale of sub-block `ib ∈ 0..8`.
#[inline(always)]
pub fn scale(b: &BlockIq3S, ib: usize) -> u8 {
    (b.scales[(ib / 2) % (QK_K / 64)] >> (4 * (ib % 2))) & 0xF
}

/// Dequantize one super-block (`db·level`, equal to ggml's `db·grid·(±1)`).
pub fn dequantize(b: &BlockIq3S, y: &mut [f32; QK_K]) {
    let d = f16_to_f32(b.d);
    let mut q = [0i8; QK_K];
    unpack(b, &mut q);
    for ib in 0..QK_K / 32 {
        let db = d * f32::from(1 + 2 * scale(b, ib));
        for k in 32 * ib..32 * ib + 32 {
            y[k] = db * f32::from(q[k]);
        }
    }
}
