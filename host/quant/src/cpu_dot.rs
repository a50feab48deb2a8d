//! Weight-block × activation-block dot products of ggml's CPU backend
//! (docs/quant-formats.md#cpu-dot-products): k-quants, IQ4_XS and the grid types (IQ2_XXS,
//! IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) against Q8_K, Q4_0/Q5_0/Q8_0/IQ4_NL against Q8_0.
//!
//! These follow ggml's generic formulas (integer sums per scale group, then one f32 scale
//! product per group or block). They are written for speed: each super-block is first unpacked
//! into a plain `[i8; 256]` of signed levels, then multiplied group by group in straight loops
//! that LLVM vectorises. The results equal ggml's generic code up to f32 summation order.
//!
//! [`RowDot`] runs these over whole rows, on AVX2 kernels where the CPU has them; those produce
//! the very same bits as the functions here.

#[cfg(target_arch = "x86_64")]
mod avx2;
mod isa;
pub mod packed;
mod packed_dot;
mod prefetch;
mod rows;
#[cfg(test)]
mod tests;

pub use rows::{Isa, RowDot};

use crate::round::f16_to_f32;
use crate::{iq1_m, iq1_s, iq2_s, iq2_xs, iq2_xxs, iq3_s, iq3_xxs, q2_k, q3_k, q4_k, q5_k, q6_k};
use ingot_abi::blocks::{
    get_scale_min_k4, iq1m_d, iq1m_scale, iq4xs_scale, q3k_scale, BlockIq1M, BlockIq1S, BlockIq2S,
    BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockIq4Nl, BlockIq4Xs, BlockQ2K, BlockQ3K,
    BlockQ4K, BlockQ4_0, BlockQ5K, BlockQ5_0, BlockQ6K, BlockQ8K, BlockQ8_0, KVALUES_IQ4NL, QK_K,
};
use ingot_abi::iq_grids::{IQ1M_DELTA, IQ1S_DELTA};

/// Σ a·b over `N` signed bytes in i32 (|sum| ≤ N·128·128, far inside i32 for N ≤ 256).
#[inline(always)]
fn idot<const N: usize>(a: &[i8], b: &[i8]) -> i32 {
    let (a, b) = (&a[..N], &b[..N]);
    let mut s = 0i32;
    for k in 0..N {
        s += i32::from(a[k]) * i32::from(b[k]);
    }
    s
}

/// Q2_K · Q8_K: `d·y.d·Σ_j (sc_j&15)·Σ q·q8 − dmin·y.d·Σ_j (sc_j>>4)·bsums_j`.
pub fn q2_k(x: &BlockQ2K, y: &BlockQ8K) -> f32 {
    let mut q = [0u8; QK_K];
    q2_k::unpack_levels(x, &mut q);
    let q: &[i8; QK_K] = bytemuck::cast_ref(&q);
    let mut isum = 0i32;
    let mut summs = 0i32;
    for j in 0..16 {
        let sc = i32::from(x.scales[j]);
        isum += (sc & 0xF) * idot::<16>(&q[16 * j..], &y.qs[16 * j..]);
        summs += (sc >> 4) * i32::from(y.bsums[j]);
    }
    let dall = y.d * f16_to_f32(x.d);
    let dmin = y.d * f16_to_f32(x.dmin);
    dall * isum as f32 - dmin * summs as f32
}

/// Q3_K · Q8_K: `d·y.d·Σ_j (S_j − 32)·Σ q3·q8`.
pub fn q3_k(x: &BlockQ3K, y: &BlockQ8K) -> f32 {
    let mut q = [0i8; QK_K];
    q3_k::unpack_levels(x, &mut q);
    let mut isum = 0i32;
    for j in 0..16 {
        isum += q3k_scale(&x.scales, j) * idot::<16>(&q[16 * j..], &y.qs[16 * j..]);
    }
    f16_to_f32(x.d) * y.d * isum as f32
}

/// Shared Q4_K/Q5_K body: `d·y.d·Σ_j sc_j·Σ q·q8 − dmin·y.d·Σ_j m_j·(bsums_{2j} + bsums_{2j+1})`.
#[inline(always)]
fn k4_like(q: &[u8; QK_K], scales: &[u8; 12], d: u16, dmin: u16, y: &BlockQ8K) -> f32 {
    let sm: [(u8, u8); 8] = core::array::from_fn(|j| get_scale_min_k4(j, scales));
    k4_decoded(q, sm.map(|p| p.0), sm.map(|p| p.1), d, dmin, y)
}

/// [`k4_like`] with the scales `sc` and mins `m` decoded (the packed rows keep them so).
#[inline(always)]
fn k4_decoded(q: &[u8; QK_K], sc: [u8; 8], m: [u8; 8], d: u16, dmin: u16, y: &BlockQ8K) -> f32 {
    let q: &[i8; QK_K] = bytemuck::cast_ref(q);
    let mut isum = 0i32;
    let mut summs = 0i32;
    for j in 0..8 {
        isum += i32::from(sc[j]) * idot::<32>(&q[32 * j..], &y.qs[32 * j..]);
        summs += i32::from(m[j]) * (i32::from(y.bsums[2 * j]) + i32::from(y.bsums[2 * j + 1]));
    }
    f16_to_f32(d) * y.d * isum as f32 - f16_to_f32(dmin) * y.d * summs as f32
}

/// Q4_K · Q8_K (levels 0..=15 fit in i8).
pub fn q4_k(x: &BlockQ4K, y: &BlockQ8K) -> f32 {
    let mut q = [0u8; QK_K];
    q4_k::unpack_levels(&x.qs, &mut q);
    k4_like(&q, &x.scales, x.d, x.dmin, y)
}

/// Q5_K · Q8_K (levels 0..=31 fit in i8).
pub fn q5_k(x: &BlockQ5K, y: &BlockQ8K) -> f32 {
    let mut q = [0u8; QK_K];
    q5_k::unpack_levels(x, &mut q);
    k4_like(&q, &x.scales, x.d, x.dmin, y)
}

/// Q6_K · Q8_K: `d·y.d·Σ_j scales_j·Σ (q6 − 32)·q8`.
pub fn q6_k(x: &BlockQ6K, y: &BlockQ8K) -> f32 {
    let mut q = [0i8; QK_K];
    q6_k::unpack_levels(x, &mut q);
    let mut isum = 0i32;
    for j in 0..16 {
        isum += i32::from(x.scales[j]) * idot::<16>(&q[16 * j..], &y.qs[16 * j..]);
    }
    f16_to_f32(x.d) * y.d * isum as f32
}

/// IQ4_XS · Q8_K: `d·y.d·Σ_ib (ls_ib − 32)·Σ kvalues·q8`.
pub fn iq4_xs(x: &BlockIq4Xs, y: &BlockQ8K) -> f32 {
    let mut isum = 0i32;
    for ib in 0..8 {
        let mut v = [0i8; 32];
        for j in 0..16 {
            let b = x.qs[16 * ib + j];
            v[j] = KVALUES_IQ4NL[(b & 0xF) as usize];
            v[j + 16] = KVALUES_IQ4NL[(b >> 4) as usize];
        }
        isum += iq4xs_scale(x.scales_h, &x.scales_l, ib) * idot::<32>(&v, &y.qs[32 * ib..]);
    }
    f16_to_f32(x.d) * y.d * isum as f32
}

// The grid types follow ggml's `ggml_vec_dot_iq*_q8_K_generic`: exact integer sums `Σ level·q8`
// per scale group, combined with the integer scales into one i32 per block (|·| < 2^27 for
// every type: at most 256 products of |level| ≤ 62 and |q8| ≤ 128, times a scale ≤ 31), then
// one f32 expression per block. Where ggml multiplies the row's f32 sum by a power of two at the
// end (0.125 for IQ2_*, 0.25 for IQ3_XXS), this applies it to each block's term instead: scaling
// by a power of two is exact and commutes with every f32 rounding of the sum, so the row result
// is ggml's unless one of our scaled terms or partial sums is subnormal (below 2^-126), or one of
// ggml's unscaled partial sums overflows f32 (which ours then would not).

/// `Σ_ib ls(s_ib)·Σ level·q8` over the 8 sub-blocks of 32 with 4-bit scales `s`, `ls = 2s + 1`.
#[inline(always)]
fn isum_per_32(q: &[i8; QK_K], scales: &[u8; 8], y: &BlockQ8K) -> i32 {
    let mut bsum = 0i32;
    for (ib, &s) in scales.iter().enumerate() {
        bsum += (2 * i32::from(s) + 1) * idot::<32>(&q[32 * ib..], &y.qs[32 * ib..]);
    }
    bsum
}

/// `Σ_ib (ls1·Σ_first16 + ls2·Σ_last16)` with the two nibbles of `scales[ib]` (IQ2_XS, IQ2_S).
#[inline(always)]
fn isum_per_16(q: &[i8; QK_K], scales: &[u8; 8], y: &BlockQ8K) -> i32 {
    let mut bsum = 0i32;
    for (ib, &sc) in scales.iter().enumerate() {
        let (ls1, ls2) = (2 * i32::from(sc & 0xF) + 1, 2 * i32::from(sc >> 4) + 1);
        let at = 32 * ib;
        bsum += ls1 * idot::<16>(&q[at..], &y.qs[at..]);
        bsum += ls2 * idot::<16>(&q[at + 16..], &y.qs[at + 16..]);
    }
    bsum
}

/// IQ2_XXS · Q8_K: `0.125·(d·y.d)·Σ_ib (2s_ib + 1)·Σ level·q8`.
pub fn iq2_xxs(x: &BlockIq2Xxs, y: &BlockQ8K) -> f32 {
    let mut q = [0i8; QK_K];
    let scales = iq2_xxs::unpack(x, &mut q);
    let d = f16_to_f32(x.d) * y.d;
    0.125 * (d * isum_per_32(&q, &scales, y) as f32)
}

/// IQ2_XS · Q8_K: `0.125·(d·y.d)·Σ (2s + 1)·Σ level·q8` over 16-weight scale groups.
pub fn iq2_xs(x: &BlockIq2Xs, y: &BlockQ8K) -> f32 {
    let mut q = [0i8; QK_K];
    iq2_xs::unpack(x, &mut q);
    let d = f16_to_f32(x.d) * y.d;
    0.125 * (d * isum_per_16(&q, &x.scales, y) as f32)
}

/// IQ2_S · Q8_K: as IQ2_XS.
pub fn iq2_s(x: &BlockIq2S, y: &BlockQ8K) -> f32 {
    let mut q = [0i8; QK_K];
    iq2_s::unpack(x, &mut q);
    let d = f16_to_f32(x.d) * y.d;
    0.125 * (d * isum_per_16(&q, &x.scales, y) as f32)
}

/// IQ3_XXS · Q8_K: `0.25·(d·y.d)·Σ_ib (2s_ib + 1)·Σ level·q8`.
pub fn iq3_xxs(x: &BlockIq3Xxs, y: &BlockQ8K) -> f32 {
    let mut q = [0i8; QK_K];
    let scales = iq3_xxs::unpack(x, &mut q);
    let d = f16_to_f32(x.d) * y.d;
    0.25 * (d * isum_per_32(&q, &scales, y) as f32)
}

/// IQ3_S · Q8_K: `(d·y.d)·Σ_ib (2s_ib + 1)·Σ level·q8`.
pub fn iq3_s(x: &BlockIq3S, y: &BlockQ8K) -> f32 {
    let mut q = [0i8; QK_K];
    iq3_s::unpack(x, &mut q);
    let scales: [u8; 8] = core::array::from_fn(|ib| iq3_s::scale(x, ib));
    let d = f16_to_f32(x.d) * y.d;
    d * isum_per_32(&q, &scales, y) as f32
}

/// IQ1_S · Q8_K: `d·y.d·(Σ_ib ls·Σ grid·q8 + IQ1S_DELTA·Σ_ib ls·sign_ib·Σ q8)`, `ls = 2s + 1`,
/// the activation sums `Σ q8` taken from `bsums` as ggml does (so activations must come from
/// [`crate::quantize_q8_k`] or have equally consistent `bsums`).
pub fn iq1_s(x: &BlockIq1S, y: &BlockQ8K) -> f32 {
    let mut q = [0i8; QK_K];
    iq1_s::unpack(x, &mut q);
    let (mut sumi, mut sumi1) = (0i32, 0i32);
    for ib in 0..QK_K / 32 {
        let (s, sign) = iq1_s::scale_sign(x, ib);
        let ls = 2 * s + 1;
        sumi += ls * idot::<32>(&q[32 * ib..], &y.qs[32 * ib..]);
        let qsum = i32::from(y.bsums[2 * ib]) + i32::from(y.bsums[2 * ib + 1]);
        sumi1 += ls * sign * qsum;
    }
    f16_to_f32(x.d) * y.d * (sumi as f32 + IQ1S_DELTA * sumi1 as f32)
}

/// IQ1_M · Q8_K: `d·y.d·(Σ ls·Σ grid·q8 + IQ1M_DELTA·Σ ls·Σ_groups sign_g·Σ q8)` over 16-weight
/// scale halves; the per-group activation sums are taken from `qs` (ggml does not use `bsums`
/// here: the shift signs change every 8 weights).
pub fn iq1_m(x: &BlockIq1M, y: &BlockQ8K) -> f32 {
    let mut q = [0i8; QK_K];
    let signs = iq1_m::unpack(x, &mut q);
    let (mut sumi1, mut sumi2) = (0i32, 0i32);
    for ib in 0..QK_K / 32 {
        for h in 0..2 {
            let ls = 2 * iq1m_scale(&x.scales, ib, h) as i32 + 1;
            let at = 32 * ib + 16 * h;
            sumi1 += ls * idot::<16>(&q[at..], &y.qs[at..]);
            let mut shift = 0i32;
            for g in 0..2 {
                let group = &y.qs[at + 8 * g..at + 8 * g + 8];
                let qsum: i32 = group.iter().map(|&v| i32::from(v)).sum();
                shift += i32::from(signs[(at + 8 * g) / 8]) * qsum;
            }
            sumi2 += ls * shift;
        }
    }
    f16_to_f32(iq1m_d(&x.scales)) * y.d * (sumi1 as f32 + IQ1M_DELTA * sumi2 as f32)
}

/// The 32 signed levels of a legacy block laid out like its Q8_0 partner (low nibbles are
/// elements 0..16, high nibbles 16..32).
#[inline(always)]
fn nibbles(qs: &[u8; 16], f: impl Fn(u8) -> i8) -> [i8; 32] {
    let mut v = [0i8; 32];
    for j in 0..16 {
        v[j] = f(qs[j] & 0xF);
        v[j + 16] = f(qs[j] >> 4);
    }
    v
}

/// Q4_0 · Q8_0: `Σ(q − 8)·q8 · d·d8`.
pub fn q4_0(x: &BlockQ4_0, y: &BlockQ8_0) -> f32 {
    let v = nibbles(&x.qs, |n| n as i8 - 8);
    idot::<32>(&v, &y.qs) as f32 * f16_to_f32(x.d) * f16_to_f32(y.d)
}

/// Q5_0 · Q8_0: `Σ(q − 16)·q8 · d·d8`.
pub fn q5_0(x: &BlockQ5_0, y: &BlockQ8_0) -> f32 {
    let qh = x.qh_bits();
    let mut v = nibbles(&x.qs, |n| n as i8);
    for (e, ve) in v.iter_mut().enumerate() {
        *ve = (*ve | ((((qh >> e) & 1) as i8) << 4)) - 16;
    }
    idot::<32>(&v, &y.qs) as f32 * f16_to_f32(x.d) * f16_to_f32(y.d)
}

/// Q8_0 · Q8_0: `Σ q·q8 · d·d8`.
pub fn q8_0(x: &BlockQ8_0, y: &BlockQ8_0) -> f32 {
    idot::<32>(&x.qs, &y.qs) as f32 * f16_to_f32(x.d) * f16_to_f32(y.d)
}

/// IQ4_NL · Q8_0: `d·d8·Σ kvalues·q8`.
pub fn iq4_nl(x: &BlockIq4Nl, y: &BlockQ8_0) -> f32 {
    let v = nibbles(&x.qs, |n| KVALUES_IQ4NL[n as usize]);
    f16_to_f32(x.d) * f16_to_f32(y.d) * idot::<32>(&v, &y.qs) as f32
}
