//! Register-blocked products: a step dots [`Tile::ROWS`] weight rows against `PAIRS / ROWS`
//! activations, each weight block unpacked once for every activation of the call, and the
//! per-block f32 tails of all (row, activation) pairs of a step evaluated as one vector.
//!
//! Bit-identity with the scalar dot ([`crate::cpu_dot`]): each pair's integer sums are the exact
//! ones of the one-pair kernels (module notes of `avx2`), reduced across lanes by exact i32
//! additions ([`reduce`]); lane `t·R + r` of a step then takes the scalar code's f32 operations on
//! pair (row `r`, activation `t`) in the scalar order (separate multiplies and subtractions, no
//! fused multiply-add), and lane-wise block results are added to a running sum that starts at
//! 0.0, in block order, which is the scalar row fold. Lanes never mix, so every output has the
//! scalar bits.

use core::arch::x86_64::*;

use bytemuck::Pod;
use ingot_abi::blocks::{
    BlockIq4Nl, BlockQ4K, BlockQ4_0, BlockQ5K, BlockQ5_0, BlockQ6K, BlockQ8K, BlockQ8_0,
};

use super::{
    f16, iq4_nl_levels, k4_unpack, load, load128, load_bsums, nibbles32, q5_0_levels, q6_k_unpack,
    q8_0_levels, q8k_groups, scales_mins_k4, splat_i16, widen,
};

/// Most (row, activation) pairs a step dots at once: the eight f32 lanes of one tail vector, whose
/// eight i32 accumulators with the shared operands fit the sixteen vector registers.
const PAIRS: usize = 8;

/// [`Tile::ROWS`] of the k-quants.
const K_ROWS: usize = 2;

/// [`Tile::ROWS`] of Q4_0 and Q5_0.
const LEGACY_ROWS: usize = 4;

/// [`Tile::ROWS`] of Q8_0 and IQ4_NL, whose widened weights take two registers per row.
const WIDE_ROWS: usize = 2;

/// A weight type's register-blocked kernel.
pub(in crate::cpu_dot) trait Tile {
    /// The weight block.
    type Block: Pod;
    /// The activation block it is dotted with.
    type Act;
    /// A weight block in the form the products reuse.
    type Unpacked: Copy;
    /// Rows a step takes (2 or 4), each against `PAIRS / ROWS` activations: more rows share each
    /// activation's preparation, more activations each unpacked weight block.
    const ROWS: usize;

    /// # Safety
    /// The CPU has AVX2 and F16C.
    unsafe fn unpack(x: &Self::Block) -> Self::Unpacked;

    /// Lane `t·R + r` (`r < R`, `t < T`, `R·T ≤ 8`): the scalar block dot of weight block `w[r]`
    /// with activation block `y[t]`, bit for bit; the other lanes are unspecified.
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C.
    unsafe fn dot<const R: usize, const T: usize>(
        w: &[Self::Unpacked; R],
        y: [&Self::Act; T],
    ) -> __m256;
}

/// `out[t·n + first + r] = row r · acts[t]` for the rows `r` in `blocks` (each `acts[0].len()`
/// blocks; every activation as long, `acts` not empty, checked by the caller), bit-identical to
/// the scalar row dot of every pair.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn rows<K: Tile>(
    blocks: &[K::Block],
    acts: &[&[K::Act]],
    out: &mut [f32],
    n: usize,
    first: usize,
) {
    let nb = acts.first().map_or(0, |a| a.len());
    if nb == 0 {
        return;
    }
    let mut unpacked = Vec::with_capacity(K::ROWS * nb);
    let mut groups = blocks.chunks_exact(K::ROWS * nb);
    for (g, group) in (&mut groups).enumerate() {
        let first = first + g * K::ROWS;
        if K::ROWS == 4 {
            row_group::<K, 4>(group, nb, &mut unpacked, acts, out, n, first);
        } else {
            row_group::<K, 2>(group, nb, &mut unpacked, acts, out, n, first);
        }
    }
    let rest = groups.remainder();
    let first = first + (blocks.len() - rest.len()) / nb;
    match rest.len() / nb {
        0 => {}
        1 => row_group::<K, 1>(rest, nb, &mut unpacked, acts, out, n, first),
        2 => row_group::<K, 2>(rest, nb, &mut unpacked, acts, out, n, first),
        _ => row_group::<K, 3>(rest, nb, &mut unpacked, acts, out, n, first),
    }
}

/// The `R` rows `group` (each `nb` blocks), rows `first..first + R` of the output, against every
/// activation: their blocks unpacked once into `unpacked` (block-major), then `PAIRS / R`
/// activations at a time, the last step taking what is left.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn row_group<K: Tile, const R: usize>(
    group: &[K::Block],
    nb: usize,
    unpacked: &mut Vec<K::Unpacked>,
    acts: &[&[K::Act]],
    out: &mut [f32],
    n: usize,
    first: usize,
) {
    unpacked.clear();
    for b in 0..nb {
        for r in 0..R {
            // SAFETY: this function runs with AVX2 and F16C.
            unpacked.push(unsafe { K::unpack(&group[r * nb + b]) });
        }
    }
    let (w, _) = unpacked.as_chunks::<R>();
    let w = &w[..nb];
    // `PAIRS / R` activations per step (R = 1 takes 4: the accumulators of eight would not fit).
    if R >= 3 {
        steps::<K, R, 2>(w, acts, out, n, first);
    } else {
        steps::<K, R, 4>(w, acts, out, n, first);
    }
}

/// [`step`]s of `T` activations over all of `acts`, the last one taking what is left (on the
/// blocks `w` already unpacked, even for one activation).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn steps<K: Tile, const R: usize, const T: usize>(
    w: &[[K::Unpacked; R]],
    acts: &[&[K::Act]],
    out: &mut [f32],
    n: usize,
    first: usize,
) {
    let nb = w.len();
    let mut whole = acts.chunks_exact(T);
    for (s, ys) in (&mut whole).enumerate() {
        let sums = step::<K, R, T>(w, core::array::from_fn(|t| &ys[t][..nb]));
        store::<R, T>(sums, out, n, first, s * T);
    }
    let ys = whole.remainder();
    let t0 = acts.len() - ys.len();
    match ys.len() {
        0 => {}
        1 => {
            let sums = step::<K, R, 1>(w, [&ys[0][..nb]]);
            store::<R, 1>(sums, out, n, first, t0);
        }
        2 => {
            let sums = step::<K, R, 2>(w, core::array::from_fn(|t| &ys[t][..nb]));
            store::<R, 2>(sums, out, n, first, t0);
        }
        _ => {
            let sums = step::<K, R, 3>(w, core::array::from_fn(|t| &ys[t][..nb]));
            store::<R, 3>(sums, out, n, first, t0);
        }
    }
}

/// The running sums of `R` unpacked rows `w` against `T` activations `ys` (each `w.len()` blocks):
/// lane `t·R + r` is `Σ_b dot(w[b][r], ys[t][b])` added to 0.0 in block order.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn step<K: Tile, const R: usize, const T: usize>(
    w: &[[K::Unpacked; R]],
    ys: [&[K::Act]; T],
) -> __m256 {
    // Constant per instance: free where it holds; the dispatch above never takes the instances
    // where it fails (they exist only as untaken match arms).
    assert!(R * T <= PAIRS, "a step of {R} rows x {T} activations");
    let mut sums = _mm256_setzero_ps();
    for (b, wb) in w.iter().enumerate() {
        // SAFETY: this function runs with AVX2 and F16C.
        let v = unsafe { K::dot::<R, T>(wb, core::array::from_fn(|t| &ys[t][b])) };
        sums = _mm256_add_ps(sums, v);
    }
    sums
}

/// Lane `t·R + r` of `sums` into `out[(t0 + t)·n + first + r]`.
#[inline]
#[target_feature(enable = "avx2")]
fn store<const R: usize, const T: usize>(
    sums: __m256,
    out: &mut [f32],
    n: usize,
    first: usize,
    t0: usize,
) {
    let lanes: [f32; 8] = bytemuck::cast(sums);
    for t in 0..T {
        let at = (t0 + t) * n + first;
        out[at..at + R].copy_from_slice(&lanes[t * R..t * R + R]);
    }
}

/// Lane `i < 8` is `Σ v[i]` over its eight i32 lanes (wrapping additions, which the callers'
/// bounds make exact); `N ≤ 8` vectors, the lanes past `N` are 0.
#[inline]
#[target_feature(enable = "avx2")]
fn reduce<const N: usize>(v: [__m256i; N]) -> __m256i {
    let z = _mm256_setzero_si256();
    let at = |i: usize| if i < N { v[i] } else { z };
    // hadd(a, b) = [a0+a1, a2+a3, b0+b1, b2+b3 | a4+a5, a6+a7, b4+b5, b6+b7].
    let h01 = _mm256_hadd_epi32(at(0), at(1));
    let h23 = _mm256_hadd_epi32(at(2), at(3));
    // [Σ_{0..4} v0, v1, v2, v3 | Σ_{4..8} v0, v1, v2, v3].
    let g0 = _mm256_hadd_epi32(h01, h23);
    if N <= 4 {
        let s = _mm_add_epi32(
            _mm256_castsi256_si128(g0),
            _mm256_extracti128_si256::<1>(g0),
        );
        return _mm256_zextsi128_si256(s);
    }
    let h45 = _mm256_hadd_epi32(at(4), at(5));
    let h67 = _mm256_hadd_epi32(at(6), at(7));
    let g1 = _mm256_hadd_epi32(h45, h67);
    let lo = _mm256_permute2x128_si256::<0x20>(g0, g1);
    let hi = _mm256_permute2x128_si256::<0x31>(g0, g1);
    _mm256_add_epi32(lo, hi)
}

/// The `T × R` pair vectors `v[t][r]` in lane order `t·R + r`, reduced ([`reduce`]) and
/// converted to f32 (round to nearest, as `as f32`).
#[inline]
#[target_feature(enable = "avx2")]
fn pair_sums<const R: usize, const T: usize>(v: &[[__m256i; R]; T]) -> __m256 {
    let z = _mm256_setzero_si256();
    let flat: [__m256i; 8] = core::array::from_fn(|i| if i < R * T { v[i / R][i % R] } else { z });
    _mm256_cvtepi32_ps(reduce(flat))
}

/// Lane `t·R + r` = `f(r)` for every lane (the rows repeat).
#[inline]
#[target_feature(enable = "avx2")]
fn row_lanes<const R: usize>(f: impl Fn(usize) -> f32) -> __m256 {
    let v: [f32; 8] = core::array::from_fn(|i| f(i % R));
    bytemuck::cast(v)
}

/// Lane `t·R + r` = `f(t)` for `t < T`, 0 past the pairs.
#[inline]
#[target_feature(enable = "avx2")]
fn act_lanes<const R: usize, const T: usize>(f: impl Fn(usize) -> f32) -> __m256 {
    let v: [f32; 8] = core::array::from_fn(|i| if i < R * T { f(i / R) } else { 0.0 });
    bytemuck::cast(v)
}

/// `Σ_k maddubs(levels_r[k], group k of y_t)·scale_r(k)` per pair, the k-quant kernels' exact
/// products ([`super::k_multi`]), as `[t][r]` vectors of eight partial i32 sums. Group `k`'s i16
/// scale vector is `splat_i16(scales_r, k)`, built once per step for its activations.
#[inline]
#[target_feature(enable = "avx2")]
fn k_isums<const R: usize, const T: usize>(
    levels: [&[__m256i; 8]; R],
    scales: [__m256i; R],
    y: [&BlockQ8K; T],
) -> [[__m256i; R]; T] {
    let mut acc = [[_mm256_setzero_si256(); R]; T];
    for k in 0..8 {
        let sk: [__m256i; R] = core::array::from_fn(|r| splat_i16(scales[r], k as i16));
        for (acc_t, y_t) in acc.iter_mut().zip(y) {
            let yk = load(&q8k_groups(y_t)[k]);
            for (a, (l, s)) in acc_t.iter_mut().zip(levels.iter().zip(sk)) {
                let p = _mm256_maddubs_epi16(l[k], yk);
                *a = _mm256_add_epi32(*a, _mm256_madd_epi16(p, s));
            }
        }
    }
    acc
}

/// A Q4_K/Q5_K block unpacked: [`k4_unpack`]'s levels and scale vector, the mins `m_j` as i16 at
/// lanes `2j` and `2j + 1` (so that `madd` with `bsums` gives `m_j·(bsums_{2j} + bsums_{2j+1})`),
/// and the f32 scales.
#[derive(Clone, Copy)]
pub(in crate::cpu_dot) struct K4 {
    levels: [__m256i; 8],
    scales: __m256i,
    mins: __m256i,
    d: f32,
    dmin: f32,
}

#[inline]
#[target_feature(enable = "avx2,f16c")]
fn k4(qs: &[u8; 128], qh: Option<&[u8; 32]>, s: &[u8; 12], d: u16, dmin: u16) -> K4 {
    let (sc, m) = scales_mins_k4(s);
    let (levels, scales) = k4_unpack(qs, qh, sc);
    let dup = _mm_shuffle_epi8(
        _mm_cvtsi64_si128(m as i64),
        _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
    );
    K4 {
        levels,
        scales,
        mins: _mm256_cvtepu8_epi16(dup),
        d: f16(d),
        dmin: f16(dmin),
    }
}

/// The Q4_K/Q5_K pair results: `d·y.d·isum − dmin·y.d·summs` with `summs = Σ_j m_j·(bsums_{2j} +
/// bsums_{2j+1})` (`|m_j·bsums| ≤ 63·2048`: exact), [`super::k4_finish`]'s expression.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn k4_dot<const R: usize, const T: usize>(w: &[K4; R], y: [&BlockQ8K; T]) -> __m256 {
    let acc = k_isums::<R, T>(
        core::array::from_fn(|r| &w[r].levels),
        core::array::from_fn(|r| w[r].scales),
        y,
    );
    let mins: [[__m256i; R]; T] = core::array::from_fn(|t| {
        let b = load_bsums(y[t]);
        core::array::from_fn(|r| _mm256_madd_epi16(b, w[r].mins))
    });
    let (isum, summs) = (pair_sums(&acc), pair_sums(&mins));
    let yd = act_lanes::<R, T>(|t| y[t].d);
    let d = _mm256_mul_ps(row_lanes::<R>(|r| w[r].d), yd);
    let dmin = _mm256_mul_ps(row_lanes::<R>(|r| w[r].dmin), yd);
    _mm256_sub_ps(_mm256_mul_ps(d, isum), _mm256_mul_ps(dmin, summs))
}

/// Q4_K rows against Q8_K activations.
pub(in crate::cpu_dot) struct Q4K;

impl Tile for Q4K {
    type Block = BlockQ4K;
    type Act = BlockQ8K;
    type Unpacked = K4;
    const ROWS: usize = K_ROWS;

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn unpack(x: &BlockQ4K) -> K4 {
        k4(&x.qs, None, &x.scales, x.d, x.dmin)
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn dot<const R: usize, const T: usize>(w: &[K4; R], y: [&BlockQ8K; T]) -> __m256 {
        k4_dot(w, y)
    }
}

/// Q5_K rows against Q8_K activations.
pub(in crate::cpu_dot) struct Q5K;

impl Tile for Q5K {
    type Block = BlockQ5K;
    type Act = BlockQ8K;
    type Unpacked = K4;
    const ROWS: usize = K_ROWS;

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn unpack(x: &BlockQ5K) -> K4 {
        k4(&x.qs, Some(&x.qh), &x.scales, x.d, x.dmin)
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn dot<const R: usize, const T: usize>(w: &[K4; R], y: [&BlockQ8K; T]) -> __m256 {
        k4_dot(w, y)
    }
}

/// A Q6_K block unpacked: [`q6_k_unpack`]'s levels and scale vector, the sixteen scales as i16 (for
/// the `−32` offset against `bsums`) and the f32 scale.
#[derive(Clone, Copy)]
pub(in crate::cpu_dot) struct K6 {
    levels: [__m256i; 8],
    scales: __m256i,
    wide: __m256i,
    d: f32,
}

/// Q6_K rows against Q8_K activations: per pair `Σ_j s_j·Σ q·q8 − 32·Σ_j s_j·bsums_j`
/// ([`super::q6_k`]'s integer, the offset subtracted lane-wise: `|s·bsums| ≤ 128·2048` per i16
/// pair, so every lane and the total stay exact in wrapping i32), then `d·y.d·isum`.
pub(in crate::cpu_dot) struct Q6K;

impl Tile for Q6K {
    type Block = BlockQ6K;
    type Act = BlockQ8K;
    type Unpacked = K6;
    const ROWS: usize = K_ROWS;

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn unpack(x: &BlockQ6K) -> K6 {
        let (levels, scales) = q6_k_unpack(x);
        K6 {
            levels,
            scales,
            wide: _mm256_cvtepi8_epi16(load128(&x.scales)),
            d: f16(x.d),
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn dot<const R: usize, const T: usize>(w: &[K6; R], y: [&BlockQ8K; T]) -> __m256 {
        let mut acc = k_isums::<R, T>(
            core::array::from_fn(|r| &w[r].levels),
            core::array::from_fn(|r| w[r].scales),
            y,
        );
        for (acc_t, y_t) in acc.iter_mut().zip(y) {
            let b = load_bsums(y_t);
            for (a, w_r) in acc_t.iter_mut().zip(w) {
                let offset = _mm256_slli_epi32::<5>(_mm256_madd_epi16(w_r.wide, b));
                *a = _mm256_sub_epi32(*a, offset);
            }
        }
        let d = _mm256_mul_ps(row_lanes::<R>(|r| w[r].d), act_lanes::<R, T>(|t| y[t].d));
        _mm256_mul_ps(d, pair_sums(&acc))
    }
}

/// A legacy block of unsigned levels `u` with zero point `Z` (value `u − Z`, `u ≤ 31`) and its
/// f32 scale.
#[derive(Clone, Copy)]
pub(in crate::cpu_dot) struct Offset {
    u: __m256i,
    d: f32,
}

/// A legacy block of signed weights, [`widen`]ed, and its f32 scale.
#[derive(Clone, Copy)]
pub(in crate::cpu_dot) struct Wide {
    w: (__m256i, __m256i),
    d: f32,
}

/// The legacy scale vector `[f16(y_t.d)]` in lane order.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn q8_0_scales<const R: usize, const T: usize>(y: [&BlockQ8_0; T]) -> __m256 {
    act_lanes::<R, T>(|t| f16(y[t].d))
}

/// `Σ (u − Z)·q8` per pair: `maddubs(u, q8) − maddubs(Z, q8)` ([`super::offset_isums`], the
/// second product shared by the rows), then `(isum·dx)·dy`, the scalar Q4_0/Q5_0 order.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn offset_dot<const Z: i8, const R: usize, const T: usize>(
    w: &[Offset; R],
    y: [&BlockQ8_0; T],
) -> __m256 {
    let zero = _mm256_set1_epi8(Z);
    let ones = _mm256_set1_epi16(1);
    let acc: [[__m256i; R]; T] = core::array::from_fn(|t| {
        let y8 = load(&y[t].qs);
        let z = _mm256_maddubs_epi16(zero, y8);
        core::array::from_fn(|r| {
            let p = _mm256_sub_epi16(_mm256_maddubs_epi16(w[r].u, y8), z);
            _mm256_madd_epi16(p, ones)
        })
    });
    let dx = row_lanes::<R>(|r| w[r].d);
    _mm256_mul_ps(_mm256_mul_ps(pair_sums(&acc), dx), q8_0_scales::<R, T>(y))
}

/// `Σ w·q8` per pair on sign-extended i16 ([`super::wide_isums`], the activation widened once
/// for the rows), then `(isum·dx)·dy` (Q8_0) or `(dx·dy)·isum` (IQ4_NL).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn wide_dot<const SCALES_FIRST: bool, const R: usize, const T: usize>(
    w: &[Wide; R],
    y: [&BlockQ8_0; T],
) -> __m256 {
    let acc: [[__m256i; R]; T] = core::array::from_fn(|t| {
        let (y0, y1) = widen(load(&y[t].qs));
        core::array::from_fn(|r| {
            let (w0, w1) = w[r].w;
            _mm256_add_epi32(_mm256_madd_epi16(w0, y0), _mm256_madd_epi16(w1, y1))
        })
    });
    let (isum, dx, dy) = (
        pair_sums(&acc),
        row_lanes::<R>(|r| w[r].d),
        q8_0_scales::<R, T>(y),
    );
    if SCALES_FIRST {
        _mm256_mul_ps(_mm256_mul_ps(dx, dy), isum)
    } else {
        _mm256_mul_ps(_mm256_mul_ps(isum, dx), dy)
    }
}

/// Q4_0 rows against Q8_0 activations.
pub(in crate::cpu_dot) struct Q4_0;

impl Tile for Q4_0 {
    type Block = BlockQ4_0;
    type Act = BlockQ8_0;
    type Unpacked = Offset;
    const ROWS: usize = LEGACY_ROWS;

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn unpack(x: &BlockQ4_0) -> Offset {
        Offset {
            u: nibbles32(&x.qs),
            d: f16(x.d),
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn dot<const R: usize, const T: usize>(w: &[Offset; R], y: [&BlockQ8_0; T]) -> __m256 {
        offset_dot::<8, R, T>(w, y)
    }
}

/// Q5_0 rows against Q8_0 activations.
pub(in crate::cpu_dot) struct Q5_0;

impl Tile for Q5_0 {
    type Block = BlockQ5_0;
    type Act = BlockQ8_0;
    type Unpacked = Offset;
    const ROWS: usize = LEGACY_ROWS;

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn unpack(x: &BlockQ5_0) -> Offset {
        Offset {
            u: q5_0_levels(x),
            d: f16(x.d),
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn dot<const R: usize, const T: usize>(w: &[Offset; R], y: [&BlockQ8_0; T]) -> __m256 {
        offset_dot::<16, R, T>(w, y)
    }
}

/// Q8_0 rows against Q8_0 activations.
pub(in crate::cpu_dot) struct Q8_0;

impl Tile for Q8_0 {
    type Block = BlockQ8_0;
    type Act = BlockQ8_0;
    type Unpacked = Wide;
    const ROWS: usize = WIDE_ROWS;

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn unpack(x: &BlockQ8_0) -> Wide {
        Wide {
            w: q8_0_levels(x),
            d: f16(x.d),
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn dot<const R: usize, const T: usize>(w: &[Wide; R], y: [&BlockQ8_0; T]) -> __m256 {
        wide_dot::<false, R, T>(w, y)
    }
}

/// IQ4_NL rows against Q8_0 activations.
pub(in crate::cpu_dot) struct Iq4Nl;

impl Tile for Iq4Nl {
    type Block = BlockIq4Nl;
    type Act = BlockQ8_0;
    type Unpacked = Wide;
    const ROWS: usize = WIDE_ROWS;

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn unpack(x: &BlockIq4Nl) -> Wide {
        Wide {
            w: iq4_nl_levels(x),
            d: f16(x.d),
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn dot<const R: usize, const T: usize>(w: &[Wide; R], y: [&BlockQ8_0; T]) -> __m256 {
        wide_dot::<true, R, T>(w, y)
    }
}
