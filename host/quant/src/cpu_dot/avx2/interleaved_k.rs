//! Q4_K and Q5_K rows interleaved eight to a vector: the unpacking that the AVX2 and AVX-VNNI
//! kernels share, the f32 tail they share, and the AVX2 products.
//!
//! Lane `r` of `u[8k + i]` holds row `r`'s unsigned levels `4i..4i + 4` of 32-weight group `k`
//! (`u ≤ 15` for Q4_K, `≤ 31` for Q5_K); an activation's four matching quants are broadcast to
//! every lane, so each row's group sum `S_rk = Σ u·q8` lands in its own lane. AVX2 has no
//! four-product instruction: `maddubs` adds two `u·q8` products into an i16 (`≤ 2·31·128 = 7936`
//! in magnitude, never saturating), and a group's eight such vectors add exactly in i16 for Q4_K
//! (`8·2·15·128 = 30720 < 2^15`), four at a time for Q5_K (`4·7936 = 31744`). One `madd` with the
//! group's scale as an i16 pair then widens and scales a lane's two i16 halves at once
//! (`sc·S_rk`, `63·2^16` at most), and the eight groups add in i32 (`< 2^26`). The mins term
//! `Σ_j m_j·(bsums_2j + bsums_2j+1)` and the f32 tail `d·y.d·isum − dmin·y.d·summs` are the
//! AVX-VNNI kernels' ([`k4_finish`]), lane by lane in the scalar order: the scalar dot's bits.
//!
//! Four activations per step share each weight vector's load ([`Interleaved::dots`]).

use core::arch::x86_64::*;

use ingot_abi::blocks::{BlockQ4K, BlockQ5K, BlockQ8K};

use super::interleaved::{min_pairs, scales, transpose, Interleaved, GROUP};
use super::{load, per_row, quad, scales_mins_k4, K4Act};

/// Eight Q4_K/Q5_K rows' super-block, interleaved.
#[derive(Clone, Copy)]
pub(in crate::cpu_dot) struct K4Rows {
    /// `u[8k + i]`: lane `r` holds row `r`'s levels `4i..4i + 4` of group `k` (`≤ 31`).
    pub(super) u: [__m256i; 64],
    /// `sc[k]`: group `k`'s scale of each row, as i32 lanes (`≤ 63`).
    pub(super) sc: [__m256i; 8],
    /// `sc_pairs[k]`: the same scales twice per lane, as an i16 pair (the `madd` operand that
    /// scales and widens a lane's two i16 partial sums at once).
    pub(super) sc_pairs: [__m256i; 8],
    /// `mins[q]`: lane `r` holds row `r`'s mins `m_2q`, `m_2q+1` as an i16 pair.
    pub(super) mins: [__m256i; 4],
    pub(super) d: __m256,
    pub(super) dmin: __m256,
}

/// The eight rows' quants `qs` (and fifth bits `qh`, Q5_K), 12-byte scales, `d`, `dmin`, written
/// into `w` in place.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn k4_rows(
    qs: [&[u8; 128]; GROUP],
    qh: Option<[&[u8; 32]; GROUP]>,
    s: [&[u8; 12]; GROUP],
    d: [u16; GROUP],
    dmin: [u16; GROUP],
    w: &mut K4Rows,
) {
    let nibble = _mm256_set1_epi8(0x0F);
    let fifth = _mm256_set1_epi8(0x10);
    // Bit 2p of qh byte l is bit 4 of element l of group 2p, bit 2p + 1 that of group 2p + 1:
    // the interleaved fifth bits sit under the interleaved quants, shifted down 2 per p.
    let z = _mm256_setzero_si256();
    let mut high = qh.map(|h| transpose(per_row(z, |r| load(h[r]))));
    for p in 0..4 {
        let t = transpose(per_row(z, |r| {
            load(&bytemuck::cast_ref::<_, [[u8; 32]; 4]>(qs[r])[p])
        }));
        for i in 0..8 {
            let mut lo = _mm256_and_si256(t[i], nibble);
            let mut hi = _mm256_and_si256(_mm256_srli_epi16::<4>(t[i]), nibble);
            if let Some(h) = &mut high {
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16::<4>(h[i]), fifth));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16::<3>(h[i]), fifth));
                h[i] = _mm256_srli_epi16::<2>(h[i]);
            }
            w.u[16 * p + i] = lo;
            w.u[16 * p + 8 + i] = hi;
        }
    }
    let sm: [(u64, u64); GROUP] = per_row((0, 0), |r| scales_mins_k4(s[r]));
    let m: [u64; GROUP] = per_row(0, |r| sm[r].1);
    let sc = transpose(per_row(z, |r| {
        _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(sm[r].0 as i64))
    }));
    w.sc = sc;
    w.sc_pairs = per_row(z, |k| {
        _mm256_or_si256(sc[k], _mm256_slli_epi32::<16>(sc[k]))
    });
    w.mins = min_pairs(m);
    w.d = scales(d);
    w.dmin = scales(dmin);
}

/// `d·y.d·isum − dmin·y.d·summs` per lane, with `summs = Σ_q mins_q·B_q` ([`K4Act`]): the
/// scalar Q4_K/Q5_K tail given each row's `isum = Σ_k sc_k·S_rk`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn k4_finish(w: &K4Rows, y: &BlockQ8K, p: &K4Act, isum: __m256i) -> __m256 {
    k4_tail(&w.mins, w.d, w.dmin, y, p, isum)
}

/// [`k4_finish`] on the parts of a [`K4Rows`]: `mins[q]` lane `r` is row `r`'s `(m_2q, m_2q+1)`
/// as an i16 pair, `d` and `dmin` its scales.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn k4_tail(
    mins: &[__m256i; 4],
    d: __m256,
    dmin: __m256,
    y: &BlockQ8K,
    p: &K4Act,
    isum: __m256i,
) -> __m256 {
    let mut summs = _mm256_setzero_si256();
    for (m, &b) in mins.iter().zip(&p.pairs) {
        summs = _mm256_add_epi32(summs, _mm256_madd_epi16(*m, _mm256_set1_epi32(b)));
    }
    let yd = _mm256_set1_ps(y.d);
    _mm256_sub_ps(
        _mm256_mul_ps(_mm256_mul_ps(d, yd), _mm256_cvtepi32_ps(isum)),
        _mm256_mul_ps(_mm256_mul_ps(dmin, yd), _mm256_cvtepi32_ps(summs)),
    )
}

/// Lane `r`: row `r`'s block dot with each of the `T` activations. `SPLIT` i16 partial sums per
/// group: 1 for Q4_K, 2 for Q5_K (module notes).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn k4_dot<const SPLIT: usize, const T: usize>(
    w: &K4Rows,
    y: [&BlockQ8K; T],
    p: [&K4Act; T],
) -> [__m256; T] {
    let per_sum = 8 / SPLIT;
    let mut isum = [_mm256_setzero_si256(); T];
    for k in 0..8 {
        let sc = w.sc_pairs[k];
        for h in 0..SPLIT {
            let mut s = [_mm256_setzero_si256(); T];
            for i in h * per_sum..(h + 1) * per_sum {
                let u = w.u[8 * k + i];
                for t in 0..T {
                    let q = _mm256_set1_epi32(quad(&y[t].qs, 8 * k + i));
                    s[t] = _mm256_add_epi16(s[t], _mm256_maddubs_epi16(u, q));
                }
            }
            for t in 0..T {
                isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s[t], sc));
            }
        }
    }
    let mut out = [_mm256_setzero_ps(); T];
    for t in 0..T {
        out[t] = k4_finish(w, y[t], p[t], isum[t]);
    }
    out
}

/// Eight Q4_K rows' blocks `x`, unpacked into `w` (the AVX2 and AVX-VNNI kernels' shared form).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn unpack_q4k(x: [&BlockQ4K; GROUP], w: &mut K4Rows) {
    let s = per_row(&x[0].scales, |r| &x[r].scales);
    let (d, dmin) = (per_row(0, |r| x[r].d), per_row(0, |r| x[r].dmin));
    k4_rows(per_row(&x[0].qs, |r| &x[r].qs), None, s, d, dmin, w)
}

/// Eight Q5_K rows' blocks `x`, unpacked into `w`, fifth bits included.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn unpack_q5k(x: [&BlockQ5K; GROUP], w: &mut K4Rows) {
    let qh = Some(per_row(&x[0].qh, |r| &x[r].qh));
    let s = per_row(&x[0].scales, |r| &x[r].scales);
    let (d, dmin) = (per_row(0, |r| x[r].d), per_row(0, |r| x[r].dmin));
    k4_rows(per_row(&x[0].qs, |r| &x[r].qs), qh, s, d, dmin, w)
}

macro_rules! k4 {
    ($(#[$doc:meta])* $name:ident, $block:ty, $split:literal, $unpack:ident) => {
        $(#[$doc])*
        pub(in crate::cpu_dot) struct $name;

        impl Interleaved for $name {
            type Block = $block;
            type Act = BlockQ8K;
            type Unpacked = K4Rows;
            type Prepared = K4Act;
            // Measured (whole-prefill A/B, docs/perf.md): with fewer activations the transposes
            // cost more than the shared loads save, and the one-activation row kernels win.
            const MIN_ACTS: usize = 4;

            #[inline]
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn unpack(x: [&$block; GROUP], w: &mut K4Rows) {
                $unpack(x, w)
            }

            #[inline]
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn prepare(y: &BlockQ8K) -> K4Act {
                K4Act::of(y)
            }

            #[inline]
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn dot(w: &K4Rows, y: &BlockQ8K, p: &K4Act) -> __m256 {
                let [d] = k4_dot::<$split, 1>(w, [y], [p]);
                d
            }

            #[inline]
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn dots<const T: usize>(
                w: &K4Rows,
                y: [&BlockQ8K; T],
                p: [&K4Act; T],
            ) -> [__m256; T] {
                k4_dot::<$split, T>(w, y, p)
            }
        }
    };
}

k4!(
    /// Q4_K rows against Q8_K activations (AVX2).
    Q4K, BlockQ4K, 1, unpack_q4k
);
k4!(
    /// Q5_K rows against Q8_K activations (AVX2).
    Q5K, BlockQ5K, 2, unpack_q5k
);
