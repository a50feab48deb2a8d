//! IQ1_M: 256 weights in 32 groups of 8 on the ternary `IQ1S_GRID`, each group with its own
//! shift sign, 3-bit scales per 16 weights, and `d` spread over the scales' top nibbles:
//! `y = d·(2s + 1)·(grid ± IQ1M_DELTA)` (ggml `dequantize_row_iq1_m`).
//!
//! [`quantize`] is ggml's `quantize_iq1_m` with no importance matrix, byte for byte
//! (`llama-quantize` itself refuses IQ1_M without one except for the embedding and output;
//! ggml's function does not).

use crate::codebook::{ggml_max, IQ1S};
use crate::round::{f16_to_f32, f32_to_f16, nearest_int};
use bytemuck::Zeroable;
use ingot_abi::blocks::{iq1m_d, iq1m_scale, iq1m_set_d, BlockIq1M, QK_K};
use ingot_abi::iq_grids::{IQ1M_DELTA, IQ1S_GRID};

/// The grid values (−1, 0, 1) of every weight, in order, and each group's shift sign (−1 when
/// its bit is set, else 1).
pub fn unpack(b: &BlockIq1M, q: &mut [i8; QK_K]) -> [i8; QK_K / 8] {
    let mut signs = [0i8; QK_K / 8];
    for (g, sign) in signs.iter_mut().enumerate() {
        let h = usize::from(b.qh[g / 2]) >> (4 * (g % 2));
        let grid = IQ1S_GRID[usize::from(b.qs[g]) | ((h & 7) << 8)].to_le_bytes();
        for (o, &v) in q[8 * g..8 * g + 8].iter_mut().zip(&grid) {
            *o = v as i8;
        }
        *sign = if h & 8 != 0 { -1 } else { 1 };
    }
    signs
}

/// Dequantize one super-block.
pub fn dequantize(b: &BlockIq1M, y: &mut [f32; QK_K]) {
    let d = f16_to_f32(iq1m_d(&b.scales));
    let mut q = [0i8; QK_K];
    let signs = unpack(b, &mut q);
    for (g, &sign) in signs.iter().enumerate() {
        let (ib, h) = (g / 4, (g % 4) / 2);
        let dl = d * (2 * iq1m_scale(&b.scales, ib, h) + 1) as f32;
        let delta = if sign < 0 { -IQ1M_DELTA } else { IQ1M_DELTA };
        for k in 8 * g..8 * g + 8 {
            y[k] = dl * (f32::from(q[k]) + delta);
        }
    }
}

/// ggml `GROUP_MAX_EPS_IQ1_M`: a group of 16 whose largest |x| is below this gets scale 0.
const GROUP_MAX_EPS: f32 = 1e-7;

/// The values of levels 0, 1, 2 in a group shifted up (`x_p`) or down (`x_m`) by the delta.
const X_P: [f32; 3] = [-1.0 + IQ1M_DELTA, IQ1M_DELTA, 1.0 + IQ1M_DELTA];
const X_M: [f32; 3] = [-1.0 - IQ1M_DELTA, -IQ1M_DELTA, 1.0 - IQ1M_DELTA];

/// The shifted values of group `group ∈ 0..2` (8 weights) of a group of 16 for split kind `k`
/// (0: +,+; 1: +,−; 2: −,+; 3: −,−).
fn shifted(k: u8, group: usize) -> &'static [f32; 3] {
    let minus = if group == 0 { k >= 2 } else { k % 2 == 1 };
    if minus {
        &X_M
    } else {
        &X_P
    }
}
/// The `qh` bits that store split kind `k` (bit 3 of each group's nibble set for −).
const SHIFT_BITS: [u8; 4] = [0x00, 0x80, 0x08, 0x88];

/// Quantize one super-block as ggml's `quantize_row_iq1_m_impl(…, quant_weights = NULL)`:
/// weights `x²`; each group of 16 is solved exactly over the two level boundaries and the four
/// shift choices (values sorted, prefix sums per half), then snapped to the ternary grid; the
/// super-block scale is refitted over all groups at the end.
pub fn quantize(x: &[f32; QK_K]) -> BlockIq1M {
    const BS: usize = 16;
    let mut b = BlockIq1M::zeroed();
    let mut scales = [0.0f32; QK_K / BS];
    let mut shifts = [0u8; QK_K / BS];
    let mut max_scale = 0.0f32;
    for (ib, xb) in x.chunks_exact(BS).enumerate() {
        let mut weight = [0.0f32; BS];
        for i in 0..BS {
            weight[i] = xb[i] * xb[i];
        }
        let max = ggml_max(xb.iter().map(|v| v.abs()));
        if max < GROUP_MAX_EPS {
            continue;
        }
        // ggml's qsort of (value, index) pairs by value; glibc's qsort is a merge sort here
        // (stable), and every stable sort gives the same order. NaN has no place in that order:
        // such a block is sorted by `total_cmp` instead (its bytes are meaningless either way).
        let mut order: [(f32, usize); BS] = std::array::from_fn(|j| (xb[j], j));
        if xb.iter().any(|v| v.is_nan()) {
            order.sort_by(|a, b| a.0.total_cmp(&b.0));
        } else {
            order.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
        }
        let mut px = [[0.0f32; BS + 1]; 2];
        let mut pw = [[0.0f32; BS + 1]; 2];
        for (j, &(_, i)) in order.iter().enumerate() {
            let h = usize::from(i >= BS / 2);
            px[h][j + 1] = px[h][j] + weight[i] * xb[i];
            px[1 - h][j + 1] = px[1 - h][j];
            pw[h][j + 1] = pw[h][j] + weight[i];
            pw[1 - h][j + 1] = pw[1 - h][j];
        }
        let txs = [px[0][BS], px[1][BS]];
        let tws = [pw[0][BS], pw[1][BS]];
        let (p2, m2) = (X_P[2], X_M[2]);
        let cp1 = X_P[0] * X_P[0] - X_P[1] * X_P[1];
        let cp2 = X_P[1] * X_P[1] - X_P[2] * X_P[2];
        let cm1 = X_M[0] * X_M[0] - X_M[1] * X_M[1];
        let cm2 = X_M[1] * X_M[1] - X_M[2] * X_M[2];
        let mut best_score = -f32::MAX;
        let mut scale = max;
        let mut best: Option<(usize, usize, u8)> = None;
        for i1 in 0..=BS {
            for i2 in i1..=BS {
                let mut qx_p = [0.0f32; 2];
                let mut qx_m = [0.0f32; 2];
                let mut q2_p = [0.0f32; 2];
                let mut q2_m = [0.0f32; 2];
                for h in 0..2 {
                    let sx = px[h][i1] + px[h][i2];
                    qx_p[h] = txs[h] * p2 - sx;
                    qx_m[h] = txs[h] * m2 - sx;
                    q2_p[h] = tws[h] * p2 * p2 + pw[h][i1] * cp1 + pw[h][i2] * cp2;
                    q2_m[h] = tws[h] * m2 * m2 + pw[h][i1] * cm1 + pw[h][i2] * cm2;
                }
                let sumqx = [
                    qx_p[0] + qx_p[1],
                    qx_p[0] + qx_m[1],
                    qx_m[0] + qx_p[1],
                    qx_m[0] + qx_m[1],
                ];
                let sumq2 = [
                    q2_p[0] + q2_p[1],
                    q2_p[0] + q2_m[1],
                    q2_m[0] + q2_p[1],
                    q2_m[0] + q2_m[1],
                ];
                for k in 0..4 {
                    if sumq2[k] > 0.0 && sumqx[k] * sumqx[k] > best_score * sumq2[k] {
                        scale = sumqx[k] / sumq2[k];
                        best_score = scale * sumqx[k];
                        best = Some((i1, i2, k as u8));
                    }
                }
            }
        }
        let Some((i1, i2, mut best_k)) = best else {
            continue;
        };
        let mut l = [0i8; BS];
        for (j, &(_, i)) in order.iter().enumerate() {
            l[i] = if j < i1 {
                0
            } else if j < i2 {
                1
            } else {
                2
            };
        }
        if scale < 0.0 {
            l = l.map(|v| 2 - v);
            scale = -scale;
            best_k = 3 - best_k;
        }
        let mut index = [0u16; 2];
        let mut all_on_grid = true;
        for (k, point) in index.iter_mut().enumerate() {
            let xx = shifted(best_k, k);
            let g = 8 * k..8 * k + 8;
            let (p, on) = IQ1S.snap(
                &xb[g.clone()],
                &weight[g.clone()],
                scale,
                |v| xx[v as usize],
                &mut l[g],
            );
            all_on_grid &= on;
            *point = p;
        }
        if !all_on_grid {
            let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
            for k in 0..2 {
                let xx = shifted(best_k, k);
                let levels = IQ1S.levels_of(index[k]);
                for j in 0..8 {
                    let w = weight[8 * k + j];
                    let q = xx[levels[j] as usize];
                    sumqx += w * q * xb[8 * k + j];
                    sumq2 += w * q * q;
                }
            }
            if sumqx > 0.0 && sumq2 > 0.0 {
                scale = sumqx / sumq2;
            }
        }
        b.qs[2 * ib] = index[0] as u8;
        b.qs[2 * ib + 1] = index[1] as u8;
        b.qh[ib] = (index[0] >> 8) as u8 | ((index[1] >> 8) as u8) << 4;
        scales[ib] = scale;
        shifts[ib] = best_k;
        max_scale = ggml_max([max_scale, scale]);
    }
    if max_scale == 0.0 {
        return b;
    }
    let mut d = max_scale / 15.0;
    let id = 1.0 / d;
    let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
    let mut sc = [0u16; 4];
    for (ib, xb) in x.chunks_exact(BS).enumerate() {
        let l = nearest_int(0.5 * (id * scales[ib] - 1.0)).clamp(0, 7);
        sc[ib / 4] |= (l as u16) << (3 * (ib % 4));
        b.qh[ib] |= SHIFT_BITS[usize::from(shifts[ib])];
        for k in 0..2 {
            let xx = shifted(shifts[ib], k);
            let p =
                usize::from(b.qs[2 * ib + k]) | ((usize::from(b.qh[ib]) << (8 - 4 * k)) & 0x700);
            let levels = IQ1S.levels_of(p as u16);
            for j in 0..8 {
                let w = xb[8 * k + j] * xb[8 * k + j];
                let q = xx[levels[j] as usize] * (2 * l + 1) as f32;
                sumqx += w * q * xb[8 * k + j];
                sumq2 += w * q * q;
            }
        }
    }
    if sumq2 > 0.0 {
        d = sumqx / sumq2;
    }
    for (k, v) in sc.iter().enumerate() {
        [b.scales[2 * k], b.scales[2 * k + 1]] = v.to_le_bytes();
    }
    // ggml's fudge factor on the refitted scale.
    iq1m_set_d(&mut b.scales, f32_to_f16(d * 1.1125));
    b
}
