//! Whole rows of Q4_K, Q5_K and Q6_K against one Q8_K activation (the decode step's products),
//! eight super-blocks at a time.
//!
//! The one-block kernels end every block with two horizontal reductions, two f16 conversions and a
//! few scalar products: about a fifth of a Q4_K block's instructions. Here eight blocks keep their
//! integer sums as vectors of partial sums, one transposing reduction ([`hsum8`]) gives all eight
//! sums at once (exact: i32 additions), and the scalar code's f32 expression runs on the eight
//! blocks as one vector, each lane the same operations on the same values. The row then adds the
//! eight results to its sum one by one in block order, as the scalar row does: every row has the
//! bits of folding the one-block kernel over it (`cpu_dot/tests.rs`, rows of 1 to 17 blocks).

use super::*;

/// The sums of eight vectors of eight i32: lane `k` is `Σ v[k]` (wrapping, as i32 sums are).
#[inline]
#[target_feature(enable = "avx2")]
fn hsum8(v: &[__m256i; 8]) -> __m256i {
    // Within each 128-bit half, `hadd` sums neighbours: after two rounds lane k of a half holds
    // that half's sum of vector k (of four).
    let c = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    let e = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    let lo = _mm256_permute2x128_si256::<0x20>(c, e);
    let hi = _mm256_permute2x128_si256::<0x31>(c, e);
    _mm256_add_epi32(lo, hi)
}

/// Eight f16 bit patterns as f32 (exact).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn f16x8(d: &[u16; 8]) -> __m256 {
    // SAFETY: `d` is 16 readable bytes; `loadu` has no alignment requirement.
    _mm256_cvtph_ps(unsafe { _mm_loadu_si128(d.as_ptr().cast()) })
}

/// `sum` plus the eight lanes of `r`, one by one in lane order.
#[inline]
#[target_feature(enable = "avx2")]
fn add_lanes(mut sum: f32, r: __m256) -> f32 {
    let lanes: [f32; 8] = bytemuck::cast(r);
    for v in lanes {
        sum += v;
    }
    sum
}

/// A Q4_K or Q5_K row against one activation: `Σ_b d_b·y_b.d·isum_b − dmin_b·y_b.d·summs_b` in
/// block order, [`super::k4_finish`]'s expression per block. `parts` gives a block's nibbles, fifth
/// bits (Q5_K), scales, `d` and `dmin`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn k4_row<B>(
    row: &[B],
    act: &[BlockQ8K],
    parts: impl Fn(&B) -> (&[u8; QK_K / 2], Option<&[u8; 32]>, &[u8; 12], u16, u16),
) -> f32 {
    let mut sum = 0.0f32;
    let groups = row.len().min(act.len()) / 8;
    for g in 0..groups {
        let (xs, ys) = (&row[8 * g..8 * g + 8], &act[8 * g..8 * g + 8]);
        let zero = _mm256_setzero_si256();
        let (mut isums, mut summs) = ([zero; 8], [zero; 8]);
        let (mut d, mut dmin, mut yd) = ([0u16; 8], [0u16; 8], [0.0f32; 8]);
        for k in 0..8 {
            let (qs, qh, scales, dk, dmk) = parts(&xs[k]);
            let (sc, m) = scales_mins_k4(scales);
            isums[k] = k4_isum_lanes(qs, qh, sc, &ys[k]);
            summs[k] = k4_mins_lanes(m, &ys[k]);
            (d[k], dmin[k], yd[k]) = (dk, dmk, ys[k].d);
        }
        let isum = _mm256_cvtepi32_ps(hsum8(&isums));
        let summ = _mm256_cvtepi32_ps(hsum8(&summs));
        // SAFETY: `yd` is 8 readable f32.
        let yd = unsafe { _mm256_loadu_ps(yd.as_ptr()) };
        let r = _mm256_sub_ps(
            _mm256_mul_ps(_mm256_mul_ps(f16x8(&d), yd), isum),
            _mm256_mul_ps(_mm256_mul_ps(f16x8(&dmin), yd), summ),
        );
        sum = add_lanes(sum, r);
    }
    for (x, y) in row.iter().zip(act).skip(8 * groups) {
        let (qs, qh, scales, d, dmin) = parts(x);
        let (sc, m) = scales_mins_k4(scales);
        sum += k4_finish(k4_isum(qs, qh, sc, y), m, d, dmin, y);
    }
    sum
}

/// A Q4_K row against one Q8_K activation (as many blocks): [`super::q4_k`] folded over the row.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn q4_k_row(row: &[BlockQ4K], act: &[BlockQ8K]) -> f32 {
    k4_row(row, act, |x: &BlockQ4K| {
        (&x.qs, None, &x.scales, x.d, x.dmin)
    })
}

/// A Q5_K row against one Q8_K activation: [`super::q5_k`] folded over the row.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn q5_k_row(row: &[BlockQ5K], act: &[BlockQ8K]) -> f32 {
    k4_row(row, act, |x: &BlockQ5K| {
        (&x.qs, Some(&x.qh), &x.scales, x.d, x.dmin)
    })
}

/// A Q6_K row against one Q8_K activation: `Σ_b d_b·y_b.d·isum_b` in block order, [`super::q6_k`]
/// folded over the row.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn q6_k_row(row: &[BlockQ6K], act: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    let groups = row.len().min(act.len()) / 8;
    for g in 0..groups {
        let (xs, ys) = (&row[8 * g..8 * g + 8], &act[8 * g..8 * g + 8]);
        let mut isums = [_mm256_setzero_si256(); 8];
        let (mut d, mut yd) = ([0u16; 8], [0.0f32; 8]);
        for k in 0..8 {
            isums[k] = q6_k_lanes(&xs[k], &ys[k]);
            (d[k], yd[k]) = (xs[k].d, ys[k].d);
        }
        let isum = _mm256_cvtepi32_ps(hsum8(&isums));
        // SAFETY: `yd` is 8 readable f32.
        let yd = unsafe { _mm256_loadu_ps(yd.as_ptr()) };
        sum = add_lanes(sum, _mm256_mul_ps(_mm256_mul_ps(f16x8(&d), yd), isum));
    }
    for (x, y) in row.iter().zip(act).skip(8 * groups) {
        sum += q6_k(x, y);
    }
    sum
}
