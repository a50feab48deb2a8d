//! Q4_1: 32 weights, `y = d·q + m` (docs/quant-formats.md#q4_1).

use crate::round::{f16_to_f32, f32_to_f16};
use ingot_abi::blocks::{BlockQ4_1, QK4_1};

/// Dequantize one block (`dequantize_row_q4_1`).
pub fn dequantize(b: &BlockQ4_1, y: &mut [f32; QK4_1]) {
    let d = f16_to_f32(b.d);
    let m = f16_to_f32(b.m);
    for (j, &q) in b.qs.iter().enumerate() {
        y[j] = (q & 0x0F) as f32 * d + m;
        y[j + QK4_1 / 2] = (q >> 4) as f32 * d + m;
    }
}

/// `quantize_row_q4_1_ref`: `d = (max − min)/15`, `m = min`, levels truncated after `+0.5`.
pub fn quantize(x: &[f32; QK4_1]) -> BlockQ4_1 {
    let mut min = f32::MAX;
    let mut max = -f32::MAX;
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    let d = (max - min) / 15.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut qs = [0u8; QK4_1 / 2];
    for (j, q) in qs.iter_mut().enumerate() {
        let x0 = (((x[j] - min) * id + 0.5) as i8).min(15) as u8;
        let x1 = (((x[j + QK4_1 / 2] - min) * id + 0.5) as i8).min(15) as u8;
        *q = x0 | (x1 << 4);
    }
    BlockQ4_1 {
        d: f32_to_f16(d),
        m: f32_to_f16(min),
        qs,
    }
}
