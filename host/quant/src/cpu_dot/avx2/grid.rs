//! AVX2 dots of the grid types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S): weights
//! looked up in ggml's code-book grids, signs applied per byte. The sign moves onto the weight
//! ([`signed_pairs`]: `maddubs(|q8|, w·sgn(q8))`), exact for every `|w| ≤ 127` and every `q8`;
//! otherwise the bounds and the bit-identity argument of the parent module hold.

use core::arch::x86_64::*;

use ingot_abi::blocks::{
    iq1m_d, iq1m_scale, iq2xxs_signs_scale, BlockIq1M, BlockIq1S, BlockIq2S, BlockIq2Xs,
    BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockQ8K, QK_K,
};
use ingot_abi::iq_grids::{
    IQ1M_DELTA, IQ1S_DELTA, IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID,
    KSIGNS_IQ2XS,
};

use super::{bytes_from_bits, f16, hsum_i32, load, q8k_groups};

/// `Σ w·q8` of 32 signed weights and 32 activations as 16 i16 pair sums:
/// `maddubs(|q8|, w·sgn(q8))`. `|q8|` is at most 128 as an unsigned byte (−128 included), and
/// `w·sgn(q8)` keeps `|w|`, so for `|w| ≤ 127` each pair is at most `2·128·127 = 32512`: exact,
/// never saturating.
#[inline]
#[target_feature(enable = "avx2")]
fn signed_pairs(w: __m256i, q8: __m256i) -> __m256i {
    _mm256_maddubs_epi16(_mm256_abs_epi8(q8), _mm256_sign_epi8(w, q8))
}

/// `g` with byte `e` negated where byte `e` of `neg` is `0xFF` (`(g ^ m) − m`); exact for the
/// grid magnitudes (< 64).
#[inline]
#[target_feature(enable = "avx2")]
fn negate_where(g: __m256i, neg: __m256i) -> __m256i {
    _mm256_sub_epi8(_mm256_xor_si256(g, neg), neg)
}

/// The 32 sign bits of four groups from their [`KSIGNS_IQ2XS`] indices: group `l`'s byte in
/// bits `8l..8l+8`.
#[inline(always)]
fn ksigns4(idx: [u32; 4]) -> u32 {
    idx.iter().enumerate().fold(0u32, |acc, (l, &i)| {
        acc | (u32::from(KSIGNS_IQ2XS[(i & 127) as usize]) << (8 * l))
    })
}

/// Four 8-value grid points (u64 entries) as the 32 bytes of one vector, point `l` in bytes
/// `8l..8l+8`.
#[inline]
#[target_feature(enable = "avx2")]
fn grid4(points: [u64; 4]) -> __m256i {
    _mm256_set_epi64x(
        points[3] as i64,
        points[2] as i64,
        points[1] as i64,
        points[0] as i64,
    )
}

/// Eight 4-value grid points (u32 entries) as the 32 bytes of one vector, point `k` in bytes
/// `4k..4k+4`.
#[inline]
#[target_feature(enable = "avx2")]
fn grid8(points: [u32; 8]) -> __m256i {
    _mm256_setr_epi32(
        points[0] as i32,
        points[1] as i32,
        points[2] as i32,
        points[3] as i32,
        points[4] as i32,
        points[5] as i32,
        points[6] as i32,
        points[7] as i32,
    )
}

/// The i16 scale vector of a 32-weight sub-block whose halves have scales `ls1` (first 16) and
/// `ls2` (last 16): `maddubs` keeps the first 16 weights' pairs in the low 128-bit half.
#[inline]
#[target_feature(enable = "avx2")]
fn half_scales(ls1: i32, ls2: i32) -> __m256i {
    _mm256_set_m128i(_mm_set1_epi16(ls2 as i16), _mm_set1_epi16(ls1 as i16))
}

/// `acc + Σ pairs·scale` in 8 i32 lanes: `|pair| ≤ 32512`, `scale ≤ 31`, 8 sub-blocks per block:
/// far inside i32.
#[inline]
#[target_feature(enable = "avx2")]
fn add_scaled(acc: __m256i, pairs: __m256i, scale: __m256i) -> __m256i {
    _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, scale))
}

/// IQ2_XXS · Q8_K, the scalar expression `0.125·(d·y.d·bsum)` on the same integer `bsum`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn iq2_xxs(x: &BlockIq2Xxs, y: &BlockQ8K) -> f32 {
    let ys = q8k_groups(y);
    let mut acc = _mm256_setzero_si256();
    for (ib, y8) in ys.iter().enumerate() {
        let a = u32::from(x.qs[4 * ib]) | (u32::from(x.qs[4 * ib + 1]) << 16);
        let (signs, s) = iq2xxs_signs_scale(&x.qs, ib);
        let g = grid4(core::array::from_fn(|l| {
            IQ2XXS_GRID[((a >> (8 * l)) & 0xFF) as usize]
        }));
        let neg = bytes_from_bits(ksigns4(core::array::from_fn(|l| signs >> (7 * l))));
        let p = signed_pairs(negate_where(g, neg), load(y8));
        acc = add_scaled(acc, p, _mm256_set1_epi16(2 * s as i16 + 1));
    }
    let d = f16(x.d) * y.d;
    0.125 * (d * hsum_i32(acc) as f32)
}

/// IQ2_XS · Q8_K, the scalar expression `0.125·(d·y.d·bsum)` on the same integer `bsum`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn iq2_xs(x: &BlockIq2Xs, y: &BlockQ8K) -> f32 {
    let ys = q8k_groups(y);
    let mut acc = _mm256_setzero_si256();
    for (ib, y8) in ys.iter().enumerate() {
        let q2: [u16; 4] = core::array::from_fn(|l| x.qs[4 * ib + l]);
        let g = grid4(q2.map(|v| IQ2XS_GRID[usize::from(v & 511)]));
        let neg = bytes_from_bits(ksigns4(q2.map(|v| u32::from(v >> 9))));
        let p = signed_pairs(negate_where(g, neg), load(y8));
        let sc = x.scales[ib];
        let scale = half_scales(2 * i32::from(sc & 0xF) + 1, 2 * i32::from(sc >> 4) + 1);
        acc = add_scaled(acc, p, scale);
    }
    let d = f16(x.d) * y.d;
    0.125 * (d * hsum_i32(acc) as f32)
}

/// IQ2_S · Q8_K, the scalar expression `0.125·(d·y.d·bsum)` on the same integer `bsum`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn iq2_s(x: &BlockIq2S, y: &BlockQ8K) -> f32 {
    let ys = q8k_groups(y);
    let mut acc = _mm256_setzero_si256();
    for (ib, y8) in ys.iter().enumerate() {
        let qh = usize::from(x.qh[ib]);
        let g = grid4(core::array::from_fn(|l| {
            IQ2S_GRID[usize::from(x.qs[4 * ib + l]) | (((qh >> (2 * l)) & 3) << 8)]
        }));
        let at = QK_K / 8 + 4 * ib;
        let signs = u32::from_le_bytes([x.qs[at], x.qs[at + 1], x.qs[at + 2], x.qs[at + 3]]);
        let p = signed_pairs(negate_where(g, bytes_from_bits(signs)), load(y8));
        let sc = x.scales[ib];
        let scale = half_scales(2 * i32::from(sc & 0xF) + 1, 2 * i32::from(sc >> 4) + 1);
        acc = add_scaled(acc, p, scale);
    }
    let d = f16(x.d) * y.d;
    0.125 * (d * hsum_i32(acc) as f32)
}

/// IQ3_XXS · Q8_K, the scalar expression `0.25·(d·y.d·bsum)` on the same integer `bsum`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn iq3_xxs(x: &BlockIq3Xxs, y: &BlockQ8K) -> f32 {
    let ys = q8k_groups(y);
    let mut acc = _mm256_setzero_si256();
    for (ib, y8) in ys.iter().enumerate() {
        let at = QK_K / 4 + 4 * ib;
        let w = u32::from_le_bytes([x.qs[at], x.qs[at + 1], x.qs[at + 2], x.qs[at + 3]]);
        let g = grid8(core::array::from_fn(|k| {
            IQ3XXS_GRID[usize::from(x.qs[8 * ib + k])]
        }));
        let neg = bytes_from_bits(ksigns4(core::array::from_fn(|l| w >> (7 * l))));
        let p = signed_pairs(negate_where(g, neg), load(y8));
        acc = add_scaled(acc, p, _mm256_set1_epi16(2 * (w >> 28) as i16 + 1));
    }
    let d = f16(x.d) * y.d;
    0.25 * (d * hsum_i32(acc) as f32)
}

/// IQ3_S · Q8_K, the scalar expression `d·y.d·bsum` on the same integer `bsum`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn iq3_s(x: &BlockIq3S, y: &BlockQ8K) -> f32 {
    let ys = q8k_groups(y);
    let mut acc = _mm256_setzero_si256();
    for (ib, y8) in ys.iter().enumerate() {
        let qh = usize::from(x.qh[ib]);
        let g = grid8(core::array::from_fn(|k| {
            IQ3S_GRID[usize::from(x.qs[8 * ib + k]) | (((qh >> k) & 1) << 8)]
        }));
        let at = 4 * ib;
        let signs = u32::from_le_bytes([
            x.signs[at],
            x.signs[at + 1],
            x.signs[at + 2],
            x.signs[at + 3],
        ]);
        let p = signed_pairs(negate_where(g, bytes_from_bits(signs)), load(y8));
        let s = (x.scales[ib / 2] >> (4 * (ib % 2))) & 0xF;
        acc = add_scaled(acc, p, _mm256_set1_epi16(2 * i16::from(s) + 1));
    }
    let d = f16(x.d) * y.d;
    d * hsum_i32(acc) as f32
}

/// IQ1_S · Q8_K: the ternary grid values go straight into [`signed_pairs`]; the shift term is the
/// scalar code's integer sum over `bsums`; the f32 tail is the scalar expression.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn iq1_s(x: &BlockIq1S, y: &BlockQ8K) -> f32 {
    let ys = q8k_groups(y);
    let mut acc = _mm256_setzero_si256();
    let mut sumi1 = 0i32;
    for (ib, y8) in ys.iter().enumerate() {
        let qh = x.qh[ib];
        let g = grid4(core::array::from_fn(|l| {
            IQ1S_GRID[usize::from(x.qs[4 * ib + l]) | ((usize::from(qh >> (3 * l)) & 7) << 8)]
        }));
        let ls = 2 * i32::from((qh >> 12) & 7) + 1;
        acc = add_scaled(acc, signed_pairs(g, load(y8)), _mm256_set1_epi16(ls as i16));
        let sign = if qh & 0x8000 != 0 { -1 } else { 1 };
        sumi1 += ls * sign * (i32::from(y.bsums[2 * ib]) + i32::from(y.bsums[2 * ib + 1]));
    }
    f16(x.d) * y.d * (hsum_i32(acc) as f32 + IQ1S_DELTA * sumi1 as f32)
}

/// IQ1_M · Q8_K: grid values and the per-group shift signs (±1 bytes) both go through
/// [`signed_pairs`] against the activations, scaled per 16-weight half; the f32 tail is the
/// scalar expression.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn iq1_m(x: &BlockIq1M, y: &BlockQ8K) -> f32 {
    const PLUS: u64 = 0x0101_0101_0101_0101;
    const MINUS: u64 = u64::MAX;
    let ys = q8k_groups(y);
    let mut acc1 = _mm256_setzero_si256();
    let mut acc2 = _mm256_setzero_si256();
    for (ib, y8) in ys.iter().enumerate() {
        let h: [usize; 4] =
            core::array::from_fn(|l| usize::from(x.qh[2 * ib + l / 2]) >> (4 * (l % 2)));
        let g = grid4(core::array::from_fn(|l| {
            IQ1S_GRID[usize::from(x.qs[4 * ib + l]) | ((h[l] & 7) << 8)]
        }));
        let shift = grid4(h.map(|v| if v & 8 != 0 { MINUS } else { PLUS }));
        let scale = half_scales(
            2 * iq1m_scale(&x.scales, ib, 0) as i32 + 1,
            2 * iq1m_scale(&x.scales, ib, 1) as i32 + 1,
        );
        let q8 = load(y8);
        acc1 = add_scaled(acc1, signed_pairs(g, q8), scale);
        acc2 = add_scaled(acc2, signed_pairs(shift, q8), scale);
    }
    let (sumi1, sumi2) = (hsum_i32(acc1), hsum_i32(acc2));
    f16(iq1m_d(&x.scales)) * y.d * (sumi1 as f32 + IQ1M_DELTA * sumi2 as f32)
}
