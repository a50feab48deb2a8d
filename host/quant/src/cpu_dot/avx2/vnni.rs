//! AVX-VNNI kernels. `vpdpbusd` multiplies four unsigned weight bytes by four signed activation
//! bytes and adds the four products to an i32 lane in one instruction, exactly (no i16 step, so
//! no saturation), where AVX2 takes `maddubs` + `madd` + `add`.
//!
//! Legacy types (Q4_0, Q5_0, Q8_0, IQ4_NL): eight rows interleaved across the lanes as in
//! [`super::interleaved`], each row's weights made unsigned by a zero point `Z`
//! (`u = level + Z`: the nibble's own offset for Q4_0 and Q5_0, 128 for the signed Q8_0 weights
//! and IQ4_NL code-book values), so that `Σ level·q8 = Σ u·q8 − Z·Σ q8`. Bounds: `u ≤ 255`,
//! `|q8| ≤ 128`, so a lane's block sum is at most `32·255·128 ≈ 1.0e6` and `Z·|Σ q8| ≤
//! 128·4096`: every step exact in i32. The f32 tail is each type's scalar expression lane by
//! lane, so results keep the scalar dot's bits.
//!
//! Q4_K and Q5_K: eight rows interleaved the same way, per 32-weight group `k` of the
//! super-block. Lane `r` sums group `k`'s products `S_rk = Σ u·q8` exactly (`u ≤ 31`, so
//! `|S_rk| ≤ 32·31·128 < 2^17`), multiplies it by its 6-bit scale (`vpmulld`, `< 2^23`) and adds
//! the eight groups (`< 2^26`); the mins term `Σ_j m_j·(bsums_2j + bsums_2j+1)` is `madd` of i16
//! pairs (`63·4096` each). Then `d·y.d·isum − dmin·y.d·summs` lane by lane, the scalar order.

use core::arch::x86_64::*;

use ingot_abi::blocks::{
    BlockIq4Nl, BlockQ4K, BlockQ4_0, BlockQ5K, BlockQ5_0, BlockQ8K, BlockQ8_0,
};

use super::interleaved::{self, offset_prepare, scales, transpose, Interleaved, OffsetAct, GROUP};
use super::interleaved_k::{k4_finish, unpack_q4k, unpack_q5k, K4Rows};
use super::{iq4nl_table, load, nibbles32, per_row, q5_0_levels, quad, K4Act};

/// Eight rows of unsigned levels, interleaved by 4 bytes (lane `r` of vector `k` holds row `r`'s
/// levels `4k..4k + 4`), and their f32 scales.
#[derive(Clone, Copy)]
pub(in crate::cpu_dot) struct Unsigned {
    u: [__m256i; 8],
    dx: __m256,
}

/// Lane `r`: row `r`'s block `Σ (u − Z)·q8`, then `(isum·dx)·dy` (Q4_0, Q5_0, Q8_0) or
/// `(dx·dy)·isum` (IQ4_NL), the scalar orders.
#[inline]
#[target_feature(enable = "avx2,f16c,avxvnni")]
fn dot<const SCALES_FIRST: bool>(w: &Unsigned, y: &OffsetAct) -> __m256 {
    // Four independent accumulators: `vpdpbusd` has a latency of several cycles, and one chain of
    // eight would bound the loop by it.
    let mut acc = [_mm256_setzero_si256(); 4];
    for k in 0..8 {
        acc[k % 4] = _mm256_dpbusd_avx_epi32(acc[k % 4], w.u[k], _mm256_set1_epi32(y.qs[k]));
    }
    let acc = _mm256_add_epi32(
        _mm256_add_epi32(acc[0], acc[1]),
        _mm256_add_epi32(acc[2], acc[3]),
    );
    let isum = _mm256_cvtepi32_ps(_mm256_sub_epi32(acc, _mm256_set1_epi32(y.zsum)));
    let dy = _mm256_set1_ps(y.dy);
    if SCALES_FIRST {
        _mm256_mul_ps(_mm256_mul_ps(w.dx, dy), isum)
    } else {
        _mm256_mul_ps(_mm256_mul_ps(isum, w.dx), dy)
    }
}

/// Eight rows' unsigned levels (32 bytes each), interleaved.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn unpack(levels: [__m256i; GROUP], d: [u16; GROUP]) -> Unsigned {
    Unsigned {
        u: transpose(levels),
        dx: scales(d),
    }
}

/// The signed bytes `v` as unsigned `v + 128`.
#[inline]
#[target_feature(enable = "avx2")]
fn offset_128(v: __m256i) -> __m256i {
    _mm256_xor_si256(v, _mm256_set1_epi8(i8::MIN))
}

/// `out[t·n + r] = row r · acts[t]` for the first `8·⌊n/8⌋` rows: [`interleaved::rows`] on these
/// kernels.
#[inline]
#[target_feature(enable = "avx2,f16c,avxvnni")]
pub(in crate::cpu_dot) fn rows<K: Interleaved>(
    blocks: &[K::Block],
    acts: &[&[K::Act]],
    out: &mut [f32],
) -> usize {
    // SAFETY: this function runs with every feature `K`'s kernels need (AVX2, F16C, AVX-VNNI).
    unsafe { interleaved::rows_body::<K>(blocks, acts, out) }
}

macro_rules! legacy {
    ($(#[$doc:meta])* $name:ident, $block:ty, $z:literal, $scales_first:literal, |$x:ident| $levels:expr) => {
        $(#[$doc])*
        pub(in crate::cpu_dot) struct $name;

        impl Interleaved for $name {
            type Block = $block;
            type Act = BlockQ8_0;
            type Unpacked = Unsigned;
            type Prepared = OffsetAct;
            const MIN_ACTS: usize = 2;

            #[inline]
            #[target_feature(enable = "avx2,f16c,avxvnni")]
            unsafe fn unpack(x: [&$block; GROUP], w: &mut Unsigned) {
                let levels = per_row(_mm256_setzero_si256(), |r| {
                    let $x = x[r];
                    $levels
                });
                *w = unpack(levels, per_row(0, |r| x[r].d));
            }

            #[inline]
            #[target_feature(enable = "avx2,f16c,avxvnni")]
            unsafe fn prepare(y: &BlockQ8_0) -> OffsetAct {
                offset_prepare::<$z>(y)
            }

            #[inline]
            #[target_feature(enable = "avx2,f16c,avxvnni")]
            unsafe fn dot(w: &Unsigned, _: &BlockQ8_0, p: &OffsetAct) -> __m256 {
                dot::<$scales_first>(w, p)
            }
        }
    };
}

legacy!(
    /// Q4_0 rows: nibbles, zero point 8.
    Q4_0, BlockQ4_0, 8, false, |b| nibbles32(&b.qs)
);
legacy!(
    /// Q5_0 rows: five-bit levels, zero point 16.
    Q5_0, BlockQ5_0, 16, false, |b| q5_0_levels(b)
);
legacy!(
    /// Q8_0 rows: the signed weights offset by 128.
    Q8_0, BlockQ8_0, 128, false, |b| offset_128(load(&b.qs))
);
legacy!(
    /// IQ4_NL rows: the code-book values offset by 128.
    Iq4Nl, BlockIq4Nl, 128, true, |b| offset_128(_mm256_shuffle_epi8(iq4nl_table(), nibbles32(&b.qs)))
);

#[inline]
#[target_feature(enable = "avx2,f16c,avxvnni")]
fn k4_dot(w: &K4Rows, y: &BlockQ8K, p: &K4Act) -> __m256 {
    let mut isum = _mm256_setzero_si256();
    for k in 0..8 {
        // Two chains, so that `vpdpbusd`'s latency overlaps.
        let mut acc = [_mm256_setzero_si256(); 2];
        for i in 0..8 {
            let q = _mm256_set1_epi32(quad(&y.qs, 8 * k + i));
            acc[i % 2] = _mm256_dpbusd_avx_epi32(acc[i % 2], w.u[8 * k + i], q);
        }
        let s = _mm256_add_epi32(acc[0], acc[1]);
        isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(s, w.sc[k]));
    }
    k4_finish(w, y, p, isum)
}

macro_rules! k4 {
    ($(#[$doc:meta])* $name:ident, $block:ty, $unpack:ident) => {
        $(#[$doc])*
        pub(in crate::cpu_dot) struct $name;

        impl Interleaved for $name {
            type Block = $block;
            type Act = BlockQ8K;
            type Unpacked = K4Rows;
            type Prepared = K4Act;
            const MIN_ACTS: usize = 2;

            #[inline]
            #[target_feature(enable = "avx2,f16c,avxvnni")]
            unsafe fn unpack(x: [&$block; GROUP], w: &mut K4Rows) {
                $unpack(x, w)
            }

            #[inline]
            #[target_feature(enable = "avx2,f16c,avxvnni")]
            unsafe fn prepare(y: &BlockQ8K) -> K4Act {
                K4Act::of(y)
            }

            #[inline]
            #[target_feature(enable = "avx2,f16c,avxvnni")]
            unsafe fn dot(w: &K4Rows, y: &BlockQ8K, p: &K4Act) -> __m256 {
                k4_dot(w, y, p)
            }
        }
    };
}

k4!(
    /// Q4_K rows against Q8_K activations.
    Q4K, BlockQ4K, unpack_q4k
);
k4!(
    /// Q5_K rows against Q8_K activations.
    Q5K, BlockQ5K, unpack_q5k
);
