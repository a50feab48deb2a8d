//! Q6_K: 256 weights in 16 sub-blocks of 16, `y = d·scales[e/16]·(q − 32)`, `q ∈ 0..=63`
//! (docs/quant-formats.md#q6_k).

use crate::round::{f16_to_f32, f32_to_f16, nearest_int};
use crate::search::{make_qx_quants_rmse1, GROUP_MAX_EPS};
use ingot_abi::blocks::{BlockQ6K, QK_K};

/// Unpack the signed 6-bit levels `q − 32 ∈ −32..=31`. Per 128-element chunk `n` (ql offset
/// 64n, qh offset 32n): element `l` = `ql[l]&15 | (qh[l]&3)<<4`, `l+32` = `ql[l+32]&15 |
/// (qh[l]>>2&3)<<4`, `l+64` = `ql[l]>>4 | (qh[l]>>4&3)<<4`, `l+96` = `ql[l+32]>>4 | (qh[l]>>6)<<4`.
#[inline(always)]
pub(crate) fn unpack_levels(b: &BlockQ6K, q: &mut [i8; QK_K]) {
    for n in 0..2 {
        let (ql, qh) = (&b.ql[64 * n..64 * n + 64], &b.qh[32 * n..32 * n + 32]);
        let y = &mut q[128 * n..128 * n + 128];
        for l in 0..32 {
            y[l] = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
            y[l + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            y[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            y[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
        }
    }
}

/// Dequantize one super-block (`dequantize_row_q6_K`).
pub fn dequantize(b: &BlockQ6K, y: &mut [f32; QK_K]) {
    let d = f16_to_f32(b.d);
    let mut q = [0i8; QK_K];
    unpack_levels(b, &mut q);
    for (e, (yi, &qi)) in y.iter_mut().zip(&q).enumerate() {
        // ggml evaluates `d * sc * q` left to right: (d·sc)·q.
        *yi = d * b.scales[e / 16] as f32 * qi as f32;
    }
}

/// `quantize_row_q6_K_ref`: per sub-block `make_qx_quants(16, 32, rmse_type 1)`, 8-bit signed
/// scales relative to the scale of largest magnitude (mapped to −128), then re-quantization.
pub fn quantize(x: &[f32; QK_K]) -> BlockQ6K {
    let mut levels = [0i8; QK_K];
    let mut scales = [0.0f32; QK_K / 16];
    let mut max_scale = 0.0f32;
    let mut max_abs_scale = 0.0f32;
    for ib in 0..QK_K / 16 {
        let scale = make_qx_quants_rmse1(
            32,
            &x[16 * ib..16 * ib + 16],
            &mut levels[16 * ib..16 * ib + 16],
        );
        scales[ib] = scale;
        if scale.abs() > max_abs_scale {
            max_abs_scale = scale.abs();
            max_scale = scale;
        }
    }
    let mut b = BlockQ6K {
        ql: [0; QK_K / 2],
        qh: [0; QK_K / 4],
        scales: [0; QK_K / 16],
        d: f32_to_f16(0.0),
    };
    if max_abs_scale < GROUP_MAX_EPS {
        return b;
    }
    let iscale = -128.0 / max_scale;
    b.d = f32_to_f16(1.0 / iscale);
    for (s, &v) in b.scales.iter_mut().zip(&scales) {
        // |iscale·v| ≤ 128, and the cap at 127 keeps it in i8.
        *s = nearest_int(iscale * v).min(127) as i8;
    }
    let d_all = f16_to_f32(b.d);
    for j in 0..QK_K / 16 {
        let d = d_all * b.scales[j] as f32;
        if d == 0.0 {
            continue;
        }
        for ii in 0..16 {
            levels[16 * j + ii] = (nearest_int(x[16 * j + ii] / d).clamp(-32, 31) + 32) as i8;
        }
    }
    for n in 0..2 {
        for l in 0..32 {
            let e = 128 * n + l;
            let lv = |i: usize| levels[i] as u8;
            b.ql[64 * n + l] = (lv(e) & 0xF) | ((lv(e + 64) & 0xF) << 4);
            b.ql[64 * n + l + 32] = (lv(e + 32) & 0xF) | ((lv(e + 96) & 0xF) << 4);
            b.qh[32 * n + l] = (lv(e) >> 4)
                | ((lv(e + 32) >> 4) << 2)
                | ((lv(e + 64) >> 4) << 4)
                | ((lv(e + 96) >> 4) << 6);
        }
    }
    b
}
