//! Q8_0: 32 weights (or CPU activations), `y = d·q` (docs/quant-formats.md#q8_0).

use crate::round::{f16_to_f32, f32_to_f16};
use ingot_abi::blocks::{BlockQ8_0, QK8_0};

/// Dequantize one block (`dequantize_row_q8_0`).
pub fn dequantize(b: &BlockQ8_0, y: &mut [f32; QK8_0]) {
    let d = f16_to_f32(b.d);
    for (yj, &q) in y.iter_mut().zip(&b.qs) {
        *yj = q as f32 * d;
    }
}

/// `quantize_row_q8_0_ref`: `d = amax/127`, `q = roundf(x·(1/d))` (ties away from zero).
/// Also the CPU activation quantizer for Q4_0/Q5_0/Q8_0/IQ4_NL weights
/// (docs/quant-formats.md#cpu-dot-products).
pub fn quantize(x: &[f32; QK8_0]) -> BlockQ8_0 {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut qs = [0i8; QK8_0];
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = (v * id).round() as i8;
    }
    BlockQ8_0 {
        d: f32_to_f16(d),
        qs,
    }
}
