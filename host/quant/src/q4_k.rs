//! Q4_K: 256 weights in 8 sub-blocks of 32, `y = d·sc_j·q − dmin·m_j`, `q ∈ 0..=15`
//! (docs/quant-formats.md#q4_k).

use crate::round::{f16_to_f32, f32_to_f16, nearest_int};
use crate::search::{make_qkx2_quants, Qkx2};
use ingot_abi::blocks::{get_scale_min_k4, BlockQ4K, K_SCALE_SIZE, QK_K};

/// Unpack the 4-bit levels: `qs[32p+l]` low nibble = element `64p+l`, high = `64p+32+l`.
#[inline(always)]
pub(crate) fn unpack_levels(qs: &[u8; QK_K / 2], q: &mut [u8; QK_K]) {
    for p in 0..4 {
        for l in 0..32 {
            q[64 * p + l] = qs[32 * p + l] & 0xF;
            q[64 * p + 32 + l] = qs[32 * p + l] >> 4;
        }
    }
}

/// Dequantize one super-block (`dequantize_row_q4_K`).
pub fn dequantize(b: &BlockQ4K, y: &mut [f32; QK_K]) {
    let d = f16_to_f32(b.d);
    let min = f16_to_f32(b.dmin);
    let mut q = [0u8; QK_K];
    unpack_levels(&b.qs, &mut q);
    for j in 0..8 {
        let (sc, m) = get_scale_min_k4(j, &b.scales);
        let (dl, ml) = (d * sc as f32, min * m as f32);
        for l in 0..32 {
            y[32 * j + l] = dl * q[32 * j + l] as f32 - ml;
        }
    }
}

/// The sub-block search shared by Q4_K and Q5_K refs, then 6-bit scales/mins relative to
/// their maxima and re-quantization against the rounded values. Returns `(d, dmin, scales,
/// levels)` with levels in `0..=nmax`.
pub(crate) fn quantize_scaled(
    x: &[f32; QK_K],
    search: &Qkx2,
) -> (u16, u16, [u8; K_SCALE_SIZE], [u8; QK_K]) {
    // Sub-block j is lane j: xt[l][j] = x[32j + l].
    let mut xt = [[0.0f32; 8]; 32];
    let mut wt = [[0.0f32; 8]; 32];
    for j in 0..QK_K / 32 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        for (l, v) in xs.iter().enumerate() {
            xt[l][j] = *v;
            wt[l][j] = av_x + v.abs();
        }
    }
    let mut lt = [[0u8; 8]; 32];
    let (scales, mins) = make_qkx2_quants(search, &xt, &wt, &mut lt);
    let mut levels = [0u8; QK_K];
    for (l, row) in lt.iter().enumerate() {
        for (j, &v) in row.iter().enumerate() {
            levels[32 * j + l] = v;
        }
    }
    let mut max_scale = 0.0f32;
    let mut max_min = 0.0f32;
    for j in 0..QK_K / 32 {
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }

    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut packed = [0u8; K_SCALE_SIZE];
    for j in 0..QK_K / 32 {
        // ggml assigns nearest_int to a uint8_t (mod 256) before capping at 63.
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            packed[j - 4] |= (ls >> 4) << 6;
            packed[j] |= (lm >> 4) << 6;
        }
    }
    let d = f32_to_f16(max_scale / 63.0);
    let dmin = f32_to_f16(max_min / 63.0);

    let (d_all, m_all) = (f16_to_f32(d), f16_to_f32(dmin));
    for j in 0..QK_K / 32 {
        let (sc, m) = get_scale_min_k4(j, &packed);
        let dl = d_all * sc as f32;
        if dl == 0.0 {
            continue;
        }
        let dm = m_all * m as f32;
        for ii in 0..32 {
            levels[32 * j + ii] =
                nearest_int((x[32 * j + ii] + dm) / dl).clamp(0, search.nmax) as u8;
        }
    }
    (d, dmin, packed, levels)
}

/// `quantize_row_q4_K_ref` (no importance matrix): weights `sqrt(Σx²/32) + |x|`,
/// `make_qkx2_quants(32, 15, w, −1, 0.1, 20, squared error)`.
pub fn quantize(x: &[f32; QK_K]) -> BlockQ4K {
    let search = Qkx2 {
        nmax: 15,
        rmin: -1.0,
        rdelta: 0.1,
        nstep: 20,
        use_mad: false,
    };
    let (d, dmin, scales, levels) = quantize_scaled(x, &search);
    let mut qs = [0u8; QK_K / 2];
    for p in 0..4 {
        for l in 0..32 {
            qs[32 * p + l] = levels[64 * p + l] | (levels[64 * p + 32 + l] << 4);
        }
    }
    BlockQ4K {
        d,
        dmin,
        scales,
        qs,
    }
}
