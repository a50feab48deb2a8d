//! Weight-block × activation-block dot products of ggml's CPU backend (spec §3.2): k-quants and
//! IQ4_XS against Q8_K, Q4_0/Q5_0/Q8_0/IQ4_NL against Q8_0.
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
mod rows;
#[cfg(test)]
mod tests;

pub use rows::{Isa, RowDot};

use crate::round::f16_to_f32;
use crate::{q2_k, q3_k, q4_k, q5_k, q6_k};
use ingot_abi::blocks::{
    get_scale_min_k4, iq4xs_scale, q3k_scale, BlockIq4Nl, BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4K,
    BlockQ4_0, BlockQ5K, BlockQ5_0, BlockQ6K, BlockQ8K, BlockQ8_0, KVALUES_IQ4NL, QK_K,
};

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
    let q: &[i8; QK_K] = bytemuck::cast_ref(q);
    let mut isum = 0i32;
    let mut summs = 0i32;
    for j in 0..8 {
        let (sc, m) = get_scale_min_k4(j, scales);
        isum += i32::from(sc) * idot::<32>(&q[32 * j..], &y.qs[32 * j..]);
        summs += i32::from(m) * (i32::from(y.bsums[2 * j]) + i32::from(y.bsums[2 * j + 1]));
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
