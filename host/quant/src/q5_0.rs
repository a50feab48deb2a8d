//! Q5_0: 32 weights, `y = d·(q − 16)`, 5th bits in `qh` (docs/quant-formats.md#q5_0).

use crate::round::{f16_to_f32, f32_to_f16};
use ingot_abi::blocks::{BlockQ5_0, QK5_0};

/// Dequantize one block (`dequantize_row_q5_0`).
pub fn dequantize(b: &BlockQ5_0, y: &mut [f32; QK5_0]) {
    let d = f16_to_f32(b.d);
    let qh = b.qh_bits();
    for (j, &q) in b.qs.iter().enumerate() {
        let h0 = ((qh >> j) << 4) as u8 & 0x10;
        let h1 = ((qh >> (j + 12)) as u8) & 0x10;
        y[j] = (((q & 0x0F) | h0) as i32 - 16) as f32 * d;
        y[j + QK5_0 / 2] = (((q >> 4) | h1) as i32 - 16) as f32 * d;
    }
}

/// `quantize_row_q5_0_ref`: `d = max/−16`, levels truncated after `+16.5`, capped at 31.
pub fn quantize(x: &[f32; QK5_0]) -> BlockQ5_0 {
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    let d = max / -16.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut qs = [0u8; QK5_0 / 2];
    let mut qh = 0u32;
    for (j, q) in qs.iter_mut().enumerate() {
        let x0 = ((x[j] * id + 16.5) as i8).min(31) as u8;
        let x1 = ((x[j + QK5_0 / 2] * id + 16.5) as i8).min(31) as u8;
        *q = (x0 & 0x0F) | ((x1 & 0x0F) << 4);
        qh |= u32::from((x0 & 0x10) >> 4) << j;
        qh |= u32::from((x1 & 0x10) >> 4) << (j + QK5_0 / 2);
    }
    BlockQ5_0 {
        d: f32_to_f16(d),
        qh: qh.to_le_bytes(),
        qs,
    }
}
