//! Q5_1: 32 weights, `y = d·q + m`, 5th bits in `qh` (docs/quant-formats.md#q5_1).

use crate::round::{f16_to_f32, f32_to_f16};
use ingot_abi::blocks::{BlockQ5_1, QK5_1};

/// Dequantize one block (`dequantize_row_q5_1`).
pub fn dequantize(b: &BlockQ5_1, y: &mut [f32; QK5_1]) {
    let d = f16_to_f32(b.d);
    let m = f16_to_f32(b.m);
    let qh = b.qh_bits();
    for (j, &q) in b.qs.iter().enumerate() {
        let h0 = ((qh >> j) << 4) as u8 & 0x10;
        let h1 = ((qh >> (j + 12)) as u8) & 0x10;
        y[j] = ((q & 0x0F) | h0) as f32 * d + m;
        y[j + QK5_1 / 2] = ((q >> 4) | h1) as f32 * d + m;
    }
}

/// `quantize_row_q5_1_ref`: `d = (max − min)/31`, `m = min`, levels truncated after `+0.5`
/// (ggml applies no cap here; the level cannot exceed 31 for finite input).
pub fn quantize(x: &[f32; QK5_1]) -> BlockQ5_1 {
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
    let d = (max - min) / 31.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut qs = [0u8; QK5_1 / 2];
    let mut qh = 0u32;
    for (j, q) in qs.iter_mut().enumerate() {
        let x0 = ((x[j] - min) * id + 0.5) as u8;
        let x1 = ((x[j + QK5_1 / 2] - min) * id + 0.5) as u8;
        *q = (x0 & 0x0F) | ((x1 & 0x0F) << 4);
        qh |= u32::from((x0 & 0x10) >> 4) << j;
        qh |= u32::from((x1 & 0x10) >> 4) << (j + QK5_1 / 2);
    }
    BlockQ5_1 {
        d: f32_to_f16(d),
        m: f32_to_f16(min),
        qh: qh.to_le_bytes(),
        qs,
    }
}
