//! IQ1_M: 256 weights in 32 groups of 8 on the ternary `IQ1S_GRID`, each group with its own
//! shift sign, 3-bit scales per 16 weights, and `d` spread over the scales' top nibbles:
//! `y = d·(2s + 1)·(grid ± IQ1M_DELTA)` (ggml `dequantize_row_iq1_m`).
//!
//! No quantizer: ggml's needs an importance matrix.

use crate::round::f16_to_f32;
use ingot_abi::blocks::{iq1m_d, iq1m_scale, BlockIq1M, QK_K};
use ingot_abi::iq_grids::{IQ1M_DELTA, IQ1S_GRID};

/// The grid values (−1, 0, 1) of every weight, in order, and each group's shift sign (−1 when
/// its bit is set, else 1).
pub fn unpack(b: &BlockIq1M, q: &mut [i8; QK_K]) -> [i8; QK_K / 8] {
    let mut signs = [0i8; QK_K / 8];
    for (g, sign) in signs.iter_mut().enumerate() {
        let h = usize::from(b.qh[g / 2]) >> (4 * (g % 2));
        let grid = IQ1S_GRID[usize::from(b.qs[g]) | ((h & 7) << 8)].to_le_bytes();
        for (o, &v) in q[8 * g..8 * g + 8].iter_mut().zip(&grid) {
            *o = v as i8;
        }
        *sign = if h & 8 != 0 { -1 } else { 1 };
    }
    signs
}

/// Dequantize one super-block.
pub fn dequantize(b: &BlockIq1M, y: &mut [f32; QK_K]) {
    let d = f16_to_f32(iq1m_d(&b.scales));
    let mut q = [0i8; QK_K];
    let signs = unpack(b, &mut q);
    for (g, &sign) in signs.iter().enumerate() {
        let (ib, h) = (g / 4, (g % 4) / 2);
        let dl = d * (2 * iq1m_scale(&b.scales, ib, h) + 1) as f32;
        let delta = if sign < 0 { -IQ1M_DELTA } else { IQ1M_DELTA };
        for k in 8 * g..8 * g + 8 {
            y[k] = dl * (f32::from(q[k]) + delta);
        }
    }
}
