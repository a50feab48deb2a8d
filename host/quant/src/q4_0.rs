//! Q4_0: 32 weights, `y = d·(q − 8)` (docs/quant-formats.md#q4_0).

use crate::round::{f16_to_f32, f32_to_f16};
use ingot_abi::blocks::{BlockQ4_0, QK4_0};

/// Dequantize one block (`dequantize_row_q4_0`).
pub fn dequantize(b: &BlockQ4_0, y: &mut [f32; QK4_0]) {
    let d = f16_to_f32(b.d);
    for (j, &q) in b.qs.iter().enumerate() {
        y[j] = ((q & 0x0F) as i32 - 8) as f32 * d;
        y[j + QK4_0 / 2] = ((q >> 4) as i32 - 8) as f32 * d;
    }
}

/// `quantize_row_q4_0_ref`: `d = max/−8` where `max` is the signed value of largest |x|, so
/// that value maps to level 0 exactly; levels are truncated after `+8.5` and capped at 15.
pub fn quantize(x: &[f32; QK4_0]) -> BlockQ4_0 {
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    let d = max / -8.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut qs = [0u8; QK4_0 / 2];
    for (j, q) in qs.iter_mut().enumerate() {
        // `as i8` truncates toward zero like C's `(int8_t)` (the value is in 0.5..=16.5).
        let x0 = ((x[j] * id + 8.5) as i8).min(15) as u8;
        let x1 = ((x[j + QK4_0 / 2] * id + 8.5) as i8).min(15) as u8;
        *q = x0 | (x1 << 4);
    }
    BlockQ4_0 {
        d: f32_to_f16(d),
        qs,
    }
}
