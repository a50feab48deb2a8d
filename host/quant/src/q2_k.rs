//! Q2_K: 256 weights in 16 sub-blocks of 16, `y = d·(sc&15)·q − dmin·(sc>>4)`
//! (docs/quant-formats.md#q2_k).

use crate::round::{f16_to_f32, f32_to_f16, nearest_int};
use crate::search::{make_qkx2_quants, Qkx2};
use ingot_abi::blocks::{BlockQ2K, QK_K};

/// Unpack the 2-bit levels: `qs[32n+l]` bit pair `2s` is element `128n + 32s + l`.
#[inline(always)]
pub(crate) fn unpack_levels(b: &BlockQ2K, q: &mut [u8; QK_K]) {
    for n in 0..2 {
        for s in 0..4 {
            for l in 0..32 {
                q[128 * n + 32 * s + l] = (b.qs[32 * n + l] >> (2 * s)) & 3;
            }
        }
    }
}

/// Dequantize one super-block (`dequantize_row_q2_K`).
pub fn dequantize(b: &BlockQ2K, y: &mut [f32; QK_K]) {
    let d = f16_to_f32(b.d);
    let min = f16_to_f32(b.dmin);
    let mut q = [0u8; QK_K];
    unpack_levels(b, &mut q);
    for (e, (yi, &qi)) in y.iter_mut().zip(&q).enumerate() {
        let sc = b.scales[e / 16];
        let dl = d * (sc & 0xF) as f32;
        let ml = min * (sc >> 4) as f32;
        *yi = dl * qi as f32 - ml;
    }
}

/// `quantize_row_q2_K_ref` (no importance matrix): per sub-block `make_qkx2_quants(16, 3,
/// w = |x|, −0.5, 0.1, 15, mad)`, 4-bit scales and mins relative to their maxima, then
/// re-quantization against the rounded scales.
pub fn quantize(x: &[f32; QK_K]) -> BlockQ2K {
    const Q4SCALE: f32 = 15.0;
    let search = Qkx2 {
        nmax: 3,
        rmin: -0.5,
        rdelta: 0.1,
        nstep: 15,
        use_mad: true,
    };
    // Sub-block j is lane j: xt[l][j] = x[16j + l], weights |x|.
    let mut xt = [[0.0f32; 16]; 16];
    let mut wt = [[0.0f32; 16]; 16];
    for j in 0..QK_K / 16 {
        for l in 0..16 {
            xt[l][j] = x[16 * j + l];
            wt[l][j] = x[16 * j + l].abs();
        }
    }
    let mut lt = [[0u8; 16]; 16];
    let (scales, mins) = make_qkx2_quants(&search, &xt, &wt, &mut lt);
    let mut levels = [0u8; QK_K];
    for (l, row) in lt.iter().enumerate() {
        for (j, &v) in row.iter().enumerate() {
            levels[16 * j + l] = v;
        }
    }
    let mut max_scale = 0.0f32;
    let mut max_min = 0.0f32;
    for j in 0..QK_K / 16 {
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }

    let mut b = BlockQ2K {
        scales: [0; QK_K / 16],
        qs: [0; QK_K / 4],
        d: f32_to_f16(0.0),
        dmin: f32_to_f16(0.0),
    };
    if max_scale > 0.0 {
        let iscale = Q4SCALE / max_scale;
        for (s, &v) in b.scales.iter_mut().zip(&scales) {
            *s = nearest_int(iscale * v) as u8;
        }
        b.d = f32_to_f16(max_scale / Q4SCALE);
    }
    if max_min > 0.0 {
        let iscale = Q4SCALE / max_min;
        for (s, &v) in b.scales.iter_mut().zip(&mins) {
            *s |= (nearest_int(iscale * v) as u8) << 4;
        }
        b.dmin = f32_to_f16(max_min / Q4SCALE);
    }
    let d_all = f16_to_f32(b.d);
    let m_all = f16_to_f32(b.dmin);
    for j in 0..QK_K / 16 {
        let d = d_all * (b.scales[j] & 0xF) as f32;
        if d == 0.0 {
            continue;
        }
        let dm = m_all * (b.scales[j] >> 4) as f32;
        for ii in 0..16 {
            levels[16 * j + ii] = nearest_int((x[16 * j + ii] + dm) / d).clamp(0, 3) as u8;
        }
    }
    for n in 0..2 {
        for l in 0..32 {
            let e = 128 * n + l;
            b.qs[32 * n + l] =
                levels[e] | (levels[e + 32] << 2) | (levels[e + 64] << 4) | (levels[e + 96] << 6);
        }
    }
    b
}
