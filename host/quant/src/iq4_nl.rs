//! IQ4_NL: 32 weights on the non-linear code book, `y = d·KVALUES_IQ4NL[nibble]`
//! (docs/quant-formats.md#iq4_nl), and the scale search it shares with IQ4_XS.

use crate::round::{f16_to_f32, f32_to_f16, nearest_int};
use crate::search::GROUP_MAX_EPS;
use ingot_abi::blocks::{BlockIq4Nl, KVALUES_IQ4NL, QK4_NL};

/// Dequantize one block (`dequantize_row_iq4_nl`).
pub fn dequantize(b: &BlockIq4Nl, y: &mut [f32; QK4_NL]) {
    let d = f16_to_f32(b.d);
    for (j, &q) in b.qs.iter().enumerate() {
        y[j] = d * KVALUES_IQ4NL[(q & 0xF) as usize] as f32;
        y[j + QK4_NL / 2] = d * KVALUES_IQ4NL[(q >> 4) as usize] as f32;
    }
}

/// ggml `best_index_int8` over the code book: index of the nearest value (binary search; on an
/// exact midpoint the upper index wins).
#[inline(always)]
fn best_index(x: f32) -> u8 {
    let val = &KVALUES_IQ4NL;
    if x <= val[0] as f32 {
        return 0;
    }
    if x >= val[15] as f32 {
        return 15;
    }
    let (mut ml, mut mu) = (0usize, 15usize);
    while mu - ml > 1 {
        let mav = (ml + mu) / 2;
        if x < val[mav] as f32 {
            mu = mav;
        } else {
            ml = mav;
        }
    }
    if x - (val[mu - 1] as f32) < val[mu] as f32 - x {
        (mu - 1) as u8
    } else {
        mu as u8
    }
}

/// Output of [`quantize_impl`]: the f16 super-scale, the packed nibbles, and (for more than one
/// 32-element sub-block) the 6-bit sub-block scales split as IQ4_XS stores them.
pub(crate) struct Iq4Quantized<const HALF: usize> {
    pub d: u16,
    pub qs: [u8; HALF],
    pub scales_h: u16,
    pub scales_l: [u8; 4],
}

/// `quantize_row_iq4_nl_impl(super, 32, x, …, values = kvalues_iq4nl, quant_weights = NULL,
/// ntry = 7)`, the path `llama-quantize` takes for IQ4_NL (`SUPER = 32`) and IQ4_XS
/// (`SUPER = 256`) without an importance matrix: weights `x²`, per sub-block 15 candidate
/// scales maximising `(Σwqx)²/Σwq²`; with several sub-blocks, 6-bit sub-scales relative to the
/// largest-magnitude one and a re-pick of every index against the rounded sub-scale.
/// `HALF` must be `SUPER/2`.
pub(crate) fn quantize_impl<const SUPER: usize, const HALF: usize>(
    x: &[f32; SUPER],
) -> Iq4Quantized<HALF> {
    const NTRY: i32 = 7;
    let values = &KVALUES_IQ4NL;
    let nblocks = SUPER / 32;
    let mut levels = [0u8; SUPER];
    let mut scales = [0.0f32; 8];
    let mut weight = [0.0f32; 32];

    let mut out = Iq4Quantized {
        d: f32_to_f16(0.0),
        qs: [0u8; HALF],
        scales_h: 0,
        scales_l: [0; 4],
    };
    let mut max_scale = 0.0f32;
    let mut amax_scale = 0.0f32;
    for ib in 0..nblocks {
        let xb = &x[32 * ib..32 * ib + 32];
        let lb = &mut levels[32 * ib..32 * ib + 32];
        for (w, v) in weight.iter_mut().zip(xb) {
            *w = v * v;
        }
        let mut amax = 0.0f32;
        let mut max = 0.0f32;
        for &v in xb {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax < GROUP_MAX_EPS {
            scales[ib] = 0.0;
            continue;
        }
        let mut d = -max / values[0] as f32;
        let mut id = 1.0 / d;
        let mut sumqx = 0.0f32;
        let mut sumq2 = 0.0f32;
        for j in 0..32 {
            let l = best_index(id * xb[j]);
            lb[j] = l;
            let q = values[l as usize] as f32;
            let w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
        let mut best = d * sumqx;
        for itry in -NTRY..=NTRY {
            id = (itry + i32::from(values[0])) as f32 / max;
            sumqx = 0.0;
            sumq2 = 0.0;
            for j in 0..32 {
                let q = values[best_index(id * xb[j]) as usize] as f32;
                let w = weight[j];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        if d.abs() > amax_scale {
            amax_scale = d.abs();
            max_scale = d;
        }
    }

    if nblocks > 1 {
        let d = -max_scale / 32.0;
        out.d = f32_to_f16(d);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        for ib in 0..nblocks {
            let l = nearest_int(id * scales[ib]).clamp(-32, 31);
            let dl = d * l as f32;
            let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
            for j in 0..32 {
                levels[32 * ib + j] = best_index(idl * x[32 * ib + j]);
            }
            let l = (l + 32) as u8;
            if ib % 2 == 0 {
                out.scales_l[ib / 2] = l & 0xF;
            } else {
                out.scales_l[ib / 2] |= (l & 0xF) << 4;
            }
            out.scales_h |= u16::from(l >> 4) << (2 * (ib % 8));
        }
    } else {
        out.d = f32_to_f16(scales[0]);
        let id = if scales[0] != 0.0 {
            1.0 / scales[0]
        } else {
            0.0
        };
        for (l, &v) in levels.iter_mut().zip(x) {
            *l = best_index(id * v);
        }
    }
    for i in 0..nblocks {
        for j in 0..16 {
            out.qs[16 * i + j] = levels[32 * i + j] | (levels[32 * i + 16 + j] << 4);
        }
    }
    out
}

/// Quantize one block as `llama-quantize` does for IQ4_NL without an importance matrix
/// (`quantize_iq4_nl`, ntry = 7).
pub fn quantize(x: &[f32; QK4_NL]) -> BlockIq4Nl {
    let q = quantize_impl::<QK4_NL, { QK4_NL / 2 }>(x);
    BlockIq4Nl { d: q.d, qs: q.qs }
}

#[cfg(test)]
mod tests {
    use super::best_index;

    #[test]
    fn best_index_picks_nearest_code() {
        assert_eq!(best_index(-500.0), 0);
        assert_eq!(best_index(500.0), 15);
        assert_eq!(best_index(0.0), 8); // 1 is nearer than −10
        assert_eq!(best_index(-4.5), 8); // midpoint of −10 and 1: the upper index wins
        assert_eq!(best_index(-4.6), 7);
        assert_eq!(best_index(13.0), 9);
        assert_eq!(best_index(100.0), 14); // 89 is 11 away, 113 is 13 away
    }
}
