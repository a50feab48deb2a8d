//! Q3_K: 256 weights in 16 sub-blocks of 16, `y = d·(S_j − 32)·q`, `q ∈ −4..=3`
//! (docs/quant-formats.md#q3_k).

use crate::round::{f16_to_f32, f32_to_f16, nearest_int};
use crate::search::make_q3_quants;
use ingot_abi::blocks::{q3k_scale, BlockQ3K, QK_K};

/// Unpack the signed 3-bit levels: low two bits as in Q2_K, and `−4` unless element `e`'s bit
/// `e/32` of `hmask[e%32]` is set.
#[inline(always)]
pub(crate) fn unpack_levels(b: &BlockQ3K, q: &mut [i8; QK_K]) {
    for n in 0..2 {
        for s in 0..4 {
            for l in 0..32 {
                let e = 128 * n + 32 * s + l;
                let low = ((b.qs[32 * n + l] >> (2 * s)) & 3) as i8;
                let high = (b.hmask[l] >> (e / 32)) & 1;
                q[e] = low - if high != 0 { 0 } else { 4 };
            }
        }
    }
}

/// Dequantize one super-block (`dequantize_row_q3_K`).
pub fn dequantize(b: &BlockQ3K, y: &mut [f32; QK_K]) {
    let d_all = f16_to_f32(b.d);
    let mut q = [0i8; QK_K];
    unpack_levels(b, &mut q);
    for (e, (yi, &qi)) in y.iter_mut().zip(&q).enumerate() {
        let dl = d_all * q3k_scale(&b.scales, e / 16) as f32;
        *yi = dl * qi as f32;
    }
}

/// `quantize_row_q3_K_ref`: per sub-block `make_q3_quants(16, 4, rmse)`, 6-bit signed scales
/// relative to the scale of largest magnitude, then re-quantization against the rounded scales.
pub fn quantize(x: &[f32; QK_K]) -> BlockQ3K {
    let mut levels = [0i8; QK_K];
    let mut scales = [0.0f32; QK_K / 16];
    let mut max_scale = 0.0f32;
    let mut amax = 0.0f32;
    for j in 0..QK_K / 16 {
        scales[j] = make_q3_quants(4, &x[16 * j..16 * j + 16], &mut levels[16 * j..16 * j + 16]);
        let scale = scales[j].abs();
        if scale > amax {
            amax = scale;
            max_scale = scales[j];
        }
    }

    let mut b = BlockQ3K {
        hmask: [0; QK_K / 8],
        qs: [0; QK_K / 4],
        scales: [0; 12],
        d: f32_to_f16(0.0),
    };
    if max_scale != 0.0 {
        let iscale = -32.0 / max_scale;
        for (j, &s) in scales.iter().enumerate() {
            // ggml stores nearest_int into an int8 before clamping; |iscale·s| ≤ 32 so no wrap.
            let l = (i32::from(nearest_int(iscale * s) as i8).clamp(-32, 31) + 32) as u8;
            if j < 8 {
                b.scales[j] = l & 0xF;
            } else {
                b.scales[j - 8] |= (l & 0xF) << 4;
            }
            b.scales[j % 4 + 8] |= (l >> 4) << (2 * (j / 4));
        }
        b.d = f32_to_f16(1.0 / iscale);
    }
    let d_all = f16_to_f32(b.d);
    for j in 0..QK_K / 16 {
        let d = d_all * q3k_scale(&b.scales, j) as f32;
        if d == 0.0 {
            continue;
        }
        for ii in 0..16 {
            levels[16 * j + ii] = (nearest_int(x[16 * j + ii] / d).clamp(-4, 3) + 4) as i8;
        }
    }
    // Levels are now 0..=7: bit 2 goes to hmask (element e → byte e%32, bit e/32).
    for (e, l) in levels.iter_mut().enumerate() {
        if *l > 3 {
            b.hmask[e % 32] |= 1 << (e / 32);
            *l -= 4;
        }
    }
    for n in 0..2 {
        for l in 0..32 {
            let e = 128 * n + l;
            let lv = |i: usize| levels[i] as u8;
            b.qs[32 * n + l] = lv(e) | (lv(e + 32) << 2) | (lv(e + 64) << 4) | (lv(e + 96) << 6);
        }
    }
    b
}
