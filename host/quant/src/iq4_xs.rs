//! IQ4_XS: 256 weights in 8 sub-blocks of 32 on the IQ4_NL code book with 6-bit signed
//! sub-scales, `y = d·(ls − 32)·KVALUES_IQ4NL[nibble]` (docs/quant-formats.md#iq4_xs).

use crate::iq4_nl::quantize_impl;
use crate::round::f16_to_f32;
use ingot_abi::blocks::{iq4xs_scale, BlockIq4Xs, KVALUES_IQ4NL, QK_K};

/// Dequantize one super-block (`dequantize_row_iq4_xs`).
pub fn dequantize(b: &BlockIq4Xs, y: &mut [f32; QK_K]) {
    let d = f16_to_f32(b.d);
    for ib in 0..QK_K / 32 {
        let dl = d * iq4xs_scale(b.scales_h, &b.scales_l, ib) as f32;
        for j in 0..16 {
            let q = b.qs[16 * ib + j];
            y[32 * ib + j] = dl * KVALUES_IQ4NL[(q & 0xF) as usize] as f32;
            y[32 * ib + 16 + j] = dl * KVALUES_IQ4NL[(q >> 4) as usize] as f32;
        }
    }
}

/// Quantize one super-block as `llama-quantize` does for IQ4_XS without an importance matrix
/// (`quantize_iq4_xs` → `quantize_row_iq4_nl_impl(QK_K, 32, …, ntry = 7)`).
pub fn quantize(x: &[f32; QK_K]) -> BlockIq4Xs {
    let q = quantize_impl::<QK_K, { QK_K / 2 }>(x);
    BlockIq4Xs {
        d: q.d,
        scales_h: q.scales_h,
        scales_l: q.scales_l,
        qs: q.qs,
    }
}
