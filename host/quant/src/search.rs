//! The scale searches of ggml's k-quant reference quantizers (`ggml-quants.c`,
//! docs/quant-formats.md#reference-quantizers).
//!
//! These are transcribed operation for operation, in f32 and in ggml's evaluation order
//! (`w*x*l` is `(w*x)*l`, integer levels converted to f32 before multiplying), because the goal
//! is byte-identical output with `llama-quantize`: a different summation order changes which
//! candidate scale wins on near-ties and so changes bytes.

use crate::round::nearest_int;

/// ggml `GROUP_MAX_EPS`: a group whose largest |x| is below this quantizes to all zeros.
pub(crate) const GROUP_MAX_EPS: f32 = 1e-15;

/// Value with the largest magnitude (first one on ties), as ggml scans: `(max, amax)`.
#[inline(always)]
fn signed_absmax(x: &[f32]) -> (f32, f32) {
    let mut max = 0.0f32;
    let mut amax = 0.0f32;
    for &v in x {
        let ax = v.abs();
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    (max, amax)
}

/// `make_qx_quants(n, nmax, x, L, rmse_type = 1, qw = NULL)`: symmetric signed levels
/// `l ∈ [−nmax, nmax−1]` weighted by `x²`; tries 19 candidate inverse scales and keeps the one
/// maximising `(Σwxl)²/Σwl²`. Writes `L = l + nmax` and returns the scale.
pub(crate) fn make_qx_quants_rmse1(nmax: i32, x: &[f32], levels: &mut [i8]) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let clamp = |l: i32| l.clamp(-nmax, nmax - 1);
    let mut iscale = -(nmax as f32) / max;
    let mut sumlx = 0.0f32;
    let mut suml2 = 0.0f32;
    for (xi, li) in x.iter().zip(levels.iter_mut()) {
        let l = clamp(nearest_int(iscale * xi));
        *li = (l + nmax) as i8;
        let w = xi * xi;
        sumlx += w * xi * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1f32 * is as f32) / max;
        sumlx = 0.0;
        suml2 = 0.0;
        for xi in x {
            let l = clamp(nearest_int(iscale * xi)) as f32;
            let w = xi * xi;
            sumlx += w * xi * l;
            suml2 += w * l * l;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (xi, li) in x.iter().zip(levels.iter_mut()) {
                *li = (nmax + clamp(nearest_int(iscale * xi))) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// `make_q3_quants(n, nmax, x, L, do_rmse = true)`: start from `l = round(−nmax·x/max)`, then up
/// to 5 coordinate-descent passes over the levels with weights `x²`. Writes `L = l + nmax`.
pub(crate) fn make_q3_quants(nmax: i32, x: &[f32], levels: &mut [i8]) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let mut sumlx = 0.0f32;
    let mut suml2 = 0.0f32;
    for (xi, li) in x.iter().zip(levels.iter_mut()) {
        let l = nearest_int(iscale * xi).clamp(-nmax, nmax - 1);
        *li = l as i8;
        let w = xi * xi;
        sumlx += w * xi * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut n_changed = 0;
        for (xi, li) in x.iter().zip(levels.iter_mut()) {
            let w = xi * xi;
            let l_old = *li as f32;
            let mut slx = sumlx - w * xi * l_old;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * l_old * l_old;
                let new_l = nearest_int(xi * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != i32::from(*li) {
                    slx += w * xi * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *li = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed += 1;
                    }
                }
            }
        }
        if n_changed == 0 {
            break;
        }
    }
    for li in levels.iter_mut() {
        *li += nmax as i8;
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// Parameters of one `make_qkx2_quants` call: the candidate inverse scales are
/// `(rmin + rdelta·is + nmax)/(max − min)` for `is ∈ 0..=nstep`; `use_mad` picks |error| over
/// squared error.
pub(crate) struct Qkx2 {
    pub nmax: i32,
    pub rmin: f32,
    pub rdelta: f32,
    pub nstep: i32,
    pub use_mad: bool,
}

/// `nearest_int(v).clamp(0, nmax) as f32`, computed in the float domain so the candidate loops
/// vectorise without integer conversions. Equal for every |v| < 2²² (all callers: |v| ≲ nmax+2)
/// because rounding is monotone and the bounds are integers, so clamping before rounding gives
/// the same integer; the `1.5·2²³` add/subtract is exactly `nearest_int`'s round-half-even.
/// (NaN maps to 0 here; the lanes that can produce NaN are discarded by the caller.)
#[inline(always)]
fn level(v: f32, nmax: f32) -> f32 {
    let c = if v > nmax {
        nmax
    } else if v > 0.0 {
        v
    } else {
        0.0
    };
    (c + 12_582_912.0) - 12_582_912.0
}

/// `make_qkx2_quants` run on `L` independent groups at once, one group per lane: asymmetric
/// levels `0..=nmax` with `x ≈ scale·level − the_min`, solving the weighted 2×2 least squares
/// for each candidate inverse scale and keeping the lowest weighted error.
///
/// `xt[i][lane]` is element `i` of group `lane` (and `wt` its weight); the result is
/// `levels[i][lane]` plus per-lane `(scale, the_min)` with `the_min ≥ 0` (ggml's
/// `*the_min = -min`).
///
/// Why lanes: ggml's candidate loop is sequential (a winning candidate replaces `min`, which
/// the next candidates use), but the groups of a super-block are independent. Running them
/// side by side keeps every lane's operations and their order exactly those of the C code,
/// while the loops over lanes vectorise. Branches become per-lane selects; a lane whose group
/// is constant (`max == min`) is computed like the others and its result replaced at the end.
pub(crate) fn make_qkx2_quants<const L: usize>(
    p: &Qkx2,
    xt: &[[f32; L]],
    wt: &[[f32; L]],
    levels: &mut [[u8; L]],
) -> ([f32; L], [f32; L]) {
    let n = xt.len().min(wt.len()).min(levels.len());
    if n == 0 {
        return ([0.0; L], [0.0; L]);
    }
    let nmax = p.nmax;
    let nmax_f = nmax as f32;
    let mut min = xt[0];
    let mut max = xt[0];
    let mut sum_w = wt[0];
    let mut sum_x = [0.0f32; L];
    for k in 0..L {
        sum_x[k] = sum_w[k] * xt[0][k];
    }
    for i in 1..n {
        for k in 0..L {
            let x = xt[i][k];
            if x < min[k] {
                min[k] = x;
            }
            if x > max[k] {
                max[k] = x;
            }
            sum_w[k] += wt[i][k];
            sum_x[k] += wt[i][k] * x;
        }
    }
    let mut constant = [false; L];
    for k in 0..L {
        if min[k] > 0.0 {
            min[k] = 0.0;
        }
        constant[k] = max[k] == min[k];
    }
    let min0 = min;

    // Initial candidate: iscale = nmax/(max − min).
    let mut iscale = [0.0f32; L];
    let mut scale = [0.0f32; L];
    for k in 0..L {
        iscale[k] = nmax as f32 / (max[k] - min[k]);
        scale[k] = 1.0 / iscale[k];
    }
    let mut best_error = [0.0f32; L];
    for i in 0..n {
        for k in 0..L {
            let l = nearest_int(iscale[k] * (xt[i][k] - min[k])).clamp(0, nmax);
            levels[i][k] = l as u8;
            let diff = scale[k] * l as f32 + min[k] - xt[i][k];
            best_error[k] += wt[i][k] * if p.use_mad { diff.abs() } else { diff * diff };
        }
    }

    // The candidate whose levels win, as (inverse scale, min it was applied with); none yet.
    let mut won = [false; L];
    let mut won_iscale = [0.0f32; L];
    let mut won_min = [0.0f32; L];
    for is in 0..=p.nstep {
        for k in 0..L {
            iscale[k] = (p.rmin + p.rdelta * is as f32 + nmax as f32) / (max[k] - min[k]);
        }
        let mut sum_l = [0.0f32; L];
        let mut sum_l2 = [0.0f32; L];
        let mut sum_xl = [0.0f32; L];
        for i in 0..n {
            for k in 0..L {
                let l = level(iscale[k] * (xt[i][k] - min[k]), nmax_f);
                let w = wt[i][k];
                sum_l[k] += w * l;
                sum_l2[k] += w * l * l;
                sum_xl[k] += w * l * xt[i][k];
            }
        }
        let mut d_pos = [false; L];
        let mut this_scale = [0.0f32; L];
        let mut this_min = [0.0f32; L];
        for k in 0..L {
            let d = sum_w[k] * sum_l2[k] - sum_l[k] * sum_l[k];
            d_pos[k] = d > 0.0;
            this_scale[k] = (sum_w[k] * sum_xl[k] - sum_x[k] * sum_l[k]) / d;
            this_min[k] = (sum_l2[k] * sum_x[k] - sum_l[k] * sum_xl[k]) / d;
            if this_min[k] > 0.0 {
                this_min[k] = 0.0;
                this_scale[k] = sum_xl[k] / sum_l2[k];
            }
        }
        let mut cur_error = [0.0f32; L];
        for i in 0..n {
            for k in 0..L {
                let l = level(iscale[k] * (xt[i][k] - min[k]), nmax_f);
                let diff = this_scale[k] * l + this_min[k] - xt[i][k];
                cur_error[k] += wt[i][k] * if p.use_mad { diff.abs() } else { diff * diff };
            }
        }
        for k in 0..L {
            if d_pos[k] && cur_error[k] < best_error[k] {
                won[k] = true;
                won_iscale[k] = iscale[k];
                won_min[k] = min[k];
                best_error[k] = cur_error[k];
                scale[k] = this_scale[k];
                min[k] = this_min[k];
            }
        }
    }
    for row in levels.iter_mut().take(n).zip(xt) {
        let (lv, x) = row;
        for k in 0..L {
            if constant[k] {
                lv[k] = 0;
            } else if won[k] {
                lv[k] = nearest_int(won_iscale[k] * (x[k] - won_min[k])).clamp(0, nmax) as u8;
            }
        }
    }
    let mut the_min = [0.0f32; L];
    for k in 0..L {
        if constant[k] {
            // ggml returns before the search: scale 0, the group's (clamped) min.
            scale[k] = 0.0;
            min[k] = min0[k];
        }
        the_min[k] = -min[k];
    }
    (scale, the_min)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::round::nearest_int;

    /// Verbatim one-group transcription of `make_qkx2_quants`, the oracle of the lane version:
    /// asymmetric levels `L ∈ [0, nmax]` with `x ≈ scale·L − the_min`; solves
    /// the weighted 2×2 least squares for each candidate and keeps the lowest weighted error.
    /// Returns `(scale, the_min)` with `the_min ≥ 0` (ggml's `*the_min = -min`). `laux` is scratch
    /// of the same length as `x`.
    pub(crate) fn make_qkx2_quants_sequential(
        p: &Qkx2,
        x: &[f32],
        weights: &[f32],
        levels: &mut [u8],
        laux: &mut [u8],
    ) -> (f32, f32) {
        let n = x.len();
        let mut min = x[0];
        let mut max = x[0];
        let mut sum_w = weights[0];
        let mut sum_x = sum_w * x[0];
        for i in 1..n {
            if x[i] < min {
                min = x[i];
            }
            if x[i] > max {
                max = x[i];
            }
            let w = weights[i];
            sum_w += w;
            sum_x += w * x[i];
        }
        if min > 0.0 {
            min = 0.0;
        }
        if max == min {
            levels.fill(0);
            return (0.0, -min);
        }
        let nmax = p.nmax;
        let err = |diff: f32| if p.use_mad { diff.abs() } else { diff * diff };
        let mut iscale = nmax as f32 / (max - min);
        let mut scale = 1.0 / iscale;
        let mut best_error = 0.0f32;
        for i in 0..n {
            let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            levels[i] = l as u8;
            let diff = scale * l as f32 + min - x[i];
            best_error += weights[i] * err(diff);
        }
        if p.nstep < 1 {
            return (scale, -min);
        }
        for is in 0..=p.nstep {
            iscale = (p.rmin + p.rdelta * is as f32 + nmax as f32) / (max - min);
            let mut sum_l = 0.0f32;
            let mut sum_l2 = 0.0f32;
            let mut sum_xl = 0.0f32;
            for i in 0..n {
                let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
                laux[i] = l as u8;
                let w = weights[i];
                let lf = l as f32;
                sum_l += w * lf;
                sum_l2 += w * lf * lf;
                sum_xl += w * lf * x[i];
            }
            let d = sum_w * sum_l2 - sum_l * sum_l;
            if d > 0.0 {
                let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / d;
                let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / d;
                if this_min > 0.0 {
                    this_min = 0.0;
                    this_scale = sum_xl / sum_l2;
                }
                let mut cur_error = 0.0f32;
                for i in 0..n {
                    let diff = this_scale * laux[i] as f32 + this_min - x[i];
                    cur_error += weights[i] * err(diff);
                }
                if cur_error < best_error {
                    levels[..n].copy_from_slice(&laux[..n]);
                    best_error = cur_error;
                    scale = this_scale;
                    min = this_min;
                }
            }
        }
        (scale, -min)
    }

    /// Deterministic pseudo-random groups covering the awkward cases: all-positive groups
    /// (min clamps to 0), constant groups, all-zero groups, huge dynamic range, near-ties.
    fn groups(seed: u64, count: usize, n: usize) -> Vec<Vec<f32>> {
        let mut s = seed;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f32 / (1u64 << 53) as f32
        };
        (0..count)
            .map(|g| {
                let kind = g % 7;
                (0..n)
                    .map(|i| match kind {
                        0 => next() * 2.0 - 1.0,
                        1 => next() + 0.1,
                        2 => -0.25,
                        3 => 0.0,
                        4 => (next() * 2.0 - 1.0) * if i % 5 == 0 { 1e3 } else { 1e-3 },
                        5 => ((next() * 16.0) as i32 as f32 - 8.0) * 0.125,
                        _ => (next() - 0.7) * 3e-5,
                    })
                    .collect()
            })
            .collect()
    }

    fn check_lanes<const L: usize, const N: usize>(p: &Qkx2, mad_weights: bool) {
        let gs = groups(0x9e37_79b9 + L as u64, L * 64, N);
        for chunk in gs.chunks(L) {
            let mut xt = [[0.0f32; L]; N];
            let mut wt = [[0.0f32; L]; N];
            for (k, g) in chunk.iter().enumerate() {
                let av = (g.iter().map(|v| v * v).sum::<f32>() / N as f32).sqrt();
                for i in 0..N {
                    xt[i][k] = g[i];
                    wt[i][k] = if mad_weights {
                        g[i].abs()
                    } else {
                        av + g[i].abs()
                    };
                }
            }
            let mut lv = [[0u8; L]; N];
            let (scale, the_min) = make_qkx2_quants(p, &xt, &wt, &mut lv);
            for (k, g) in chunk.iter().enumerate() {
                let w: Vec<f32> = (0..N).map(|i| wt[i][k]).collect();
                let (mut l1, mut aux) = (vec![0u8; N], vec![0u8; N]);
                let (s1, m1) = make_qkx2_quants_sequential(p, g, &w, &mut l1, &mut aux);
                let l2: Vec<u8> = (0..N).map(|i| lv[i][k]).collect();
                assert_eq!(l1, l2, "levels of group {g:?}");
                assert_eq!(s1.to_bits(), scale[k].to_bits(), "scale of group {g:?}");
                assert_eq!(m1.to_bits(), the_min[k].to_bits(), "min of group {g:?}");
            }
        }
    }

    #[test]
    fn lane_search_equals_sequential_transcription() {
        // Q4_K, Q5_K and Q2_K parameters; bitwise-equal scales, mins and levels.
        let q4 = Qkx2 {
            nmax: 15,
            rmin: -1.0,
            rdelta: 0.1,
            nstep: 20,
            use_mad: false,
        };
        let q5 = Qkx2 {
            nmax: 31,
            rmin: -0.5,
            rdelta: 0.1,
            nstep: 15,
            use_mad: false,
        };
        let q2 = Qkx2 {
            nmax: 3,
            rmin: -0.5,
            rdelta: 0.1,
            nstep: 15,
            use_mad: true,
        };
        check_lanes::<8, 32>(&q4, false);
        check_lanes::<8, 32>(&q5, false);
        check_lanes::<16, 16>(&q2, true);
    }
}
