//! Eight weight rows interleaved across the eight lanes of a vector, for the legacy 32-weight
//! blocks (Q4_0, Q5_0, Q8_0, IQ4_NL) against several Q8_0 activations.
//!
//! A group of eight rows is unpacked block by block and transposed so that lane `r` of weight
//! vector `k` holds row `r`'s weights `4k..4k + 4` (or, widened to i16, `2k..2k + 2`). Each
//! activation's matching bytes are broadcast to all lanes, so the products accumulate row `r`'s
//! block sum in lane `r` directly: no horizontal reduction per block, and the per-block f32 tail
//! of all eight rows is one vector. The integer sums are the exact ones of the one-row kernels
//! (bounds at each step below), and each lane takes the scalar code's f32 steps in its order, so
//! every result has the scalar dot's bits.

use core::arch::x86_64::*;

use ingot_abi::blocks::{BlockIq4Nl, BlockQ4_0, BlockQ5_0, BlockQ8_0};

use crate::cpu_dot::prefetch::prefetch;

use super::{f16, hsum_i32, iq4_nl_levels, load, load128, nibbles32, per_row, q8_0_levels};

/// Rows of a group: the eight i32 (or f32) lanes of a vector.
pub(in crate::cpu_dot) const GROUP: usize = 8;

/// A legacy type's interleaved kernel.
pub(in crate::cpu_dot) trait Interleaved {
    /// The weight block.
    type Block: bytemuck::Pod;
    /// The activation block (Q8_0, or Q8_K for the k-quants).
    type Act;
    /// One block of a group of eight rows, interleaved: SIMD vectors only, so that all-zero bits
    /// are a value (the buffer the unpacking writes into starts as that).
    type Unpacked: Copy;
    /// What the products take of an activation block besides its quants (read in place).
    type Prepared: Copy;
    /// Fewest activations for which the interleaved rows beat the one-activation row kernels
    /// (the transposes are shared by the activations of a call).
    const MIN_ACTS: usize;

    /// Writes the eight blocks `x` into `w`, in place (an eight-row Q4_K block is 2.6 KiB).
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C (and AVX-VNNI for the kernels of [`super::vnni`]), as for
    /// every method here.
    unsafe fn unpack(x: [&Self::Block; GROUP], w: &mut Self::Unpacked);

    /// # Safety
    /// As [`Interleaved::unpack`].
    unsafe fn prepare(y: &Self::Act) -> Self::Prepared;

    /// Lane `r`: the scalar block dot of row `r`'s block in `w` with the activation block `y`
    /// (`p` prepared from it), bit for bit.
    ///
    /// # Safety
    /// As [`Interleaved::unpack`].
    unsafe fn dot(w: &Self::Unpacked, y: &Self::Act, p: &Self::Prepared) -> __m256;

    /// [`Interleaved::dot`] of `T` activations (a kernel may share each weight load among them).
    ///
    /// # Safety
    /// As [`Interleaved::unpack`].
    #[inline(always)]
    unsafe fn dots<const T: usize>(
        w: &Self::Unpacked,
        y: [&Self::Act; T],
        p: [&Self::Prepared; T],
    ) -> [__m256; T] {
        // SAFETY: the caller's CPU has the kernels' features.
        per_row(unsafe { _mm256_setzero_ps() }, |t| unsafe {
            Self::dot(w, y[t], p[t])
        })
    }
}

/// `out[t·n + r] = row r · acts[t]` for the first `8·⌊n/8⌋` of the `n = out.len() / acts.len()`
/// rows in `blocks` (each `acts[0].len()` blocks, every activation as long, `acts` not empty and
/// not 0 blocks: checked by the caller). Returns how many rows it wrote.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn rows<K: Interleaved>(
    blocks: &[K::Block],
    acts: &[&[K::Act]],
    out: &mut [f32],
) -> usize {
    // SAFETY: this function runs with AVX2 and F16C, all that the kernels of this module need.
    unsafe { rows_body::<K>(blocks, acts, out) }
}

/// The body of [`rows`] and of its twins on other instruction sets: always inlined, so that `K`'s
/// kernels inline into a caller compiled with their target features.
///
/// # Safety
/// The CPU has every target feature `K`'s kernels are compiled with.
#[inline(always)]
pub(in crate::cpu_dot) unsafe fn rows_body<K: Interleaved>(
    blocks: &[K::Block],
    acts: &[&[K::Act]],
    out: &mut [f32],
) -> usize {
    let nb = acts[0].len();
    let n = out.len() / acts.len();
    // Every activation block prepared once for all groups: token-major, `nb` per activation.
    let mut prepared = Vec::with_capacity(acts.len() * nb);
    for a in acts {
        for y in &a[..nb] {
            // SAFETY: the caller's CPU has `K`'s features.
            prepared.push(unsafe { K::prepare(y) });
        }
    }
    // SAFETY: `Unpacked` holds SIMD vectors only, for which all-zero bits are a value.
    let mut unpacked = vec![unsafe { core::mem::zeroed::<K::Unpacked>() }; nb];
    let mut groups = blocks.chunks_exact(GROUP * nb);
    for (g, group) in (&mut groups).enumerate() {
        for (b, w) in unpacked.iter_mut().enumerate() {
            let x = per_row(&group[0], |r| &group[r * nb + b]);
            // SAFETY: as above.
            unsafe { K::unpack(x, w) };
        }
        // The next group's weights (or the rows left over) are on their way from memory while
        // this group's products run: a group's rows are contiguous, but the unpacking reads them
        // block by block across the eight rows, eight short streams the hardware prefetchers
        // pick up late.
        let next = &blocks[((g + 1) * GROUP * nb).min(blocks.len())..];
        prefetch(bytemuck::cast_slice(&next[..next.len().min(GROUP * nb)]));
        let w = &unpacked[..nb];
        // Four activations per step, then two, then one.
        let mut t = 0;
        while t < acts.len() {
            let left = acts.len() - t;
            // SAFETY: as above.
            t += unsafe {
                if left >= 4 {
                    steps::<K, 4>(w, acts, &prepared, out, t, g)
                } else if left >= 2 {
                    steps::<K, 2>(w, acts, &prepared, out, t, g)
                } else {
                    steps::<K, 1>(w, acts, &prepared, out, t, g)
                }
            };
        }
    }
    n - groups.remainder().len() / nb
}

/// Activations `t0..t0 + T` against the unpacked blocks `w` of row group `g`: each one's block
/// results added to 0.0 in block order, written to `out`. Returns `T`.
///
/// # Safety
/// As [`rows_body`].
#[inline(always)]
unsafe fn steps<K: Interleaved, const T: usize>(
    w: &[K::Unpacked],
    acts: &[&[K::Act]],
    prepared: &[K::Prepared],
    out: &mut [f32],
    t0: usize,
    g: usize,
) -> usize {
    let nb = w.len();
    let n = out.len() / acts.len();
    // SAFETY: AVX is part of every instruction set the kernels use.
    let mut sums = [unsafe { _mm256_setzero_ps() }; T];
    for (b, wb) in w.iter().enumerate() {
        let y = per_row(&acts[t0][b], |t| &acts[t0 + t][b]);
        let p = per_row(&prepared[t0 * nb + b], |t| &prepared[(t0 + t) * nb + b]);
        // SAFETY: the caller's CPU has `K`'s features.
        let d = unsafe { K::dots::<T>(wb, y, p) };
        for t in 0..T {
            // SAFETY: as above.
            sums[t] = unsafe { _mm256_add_ps(sums[t], d[t]) };
        }
    }
    for (t, s) in sums.iter().enumerate() {
        let at = (t0 + t) * n + g * GROUP;
        let lanes: [f32; GROUP] = bytemuck::cast(*s);
        out[at..at + GROUP].copy_from_slice(&lanes);
    }
    T
}

/// The 8×8 transpose of 32-bit elements: lane `r` of result `k` is element `k` of `v[r]`.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn transpose(v: [__m256i; 8]) -> [__m256i; 8] {
    let [v0, v1, v2, v3, v4, v5, v6, v7] = v;
    // [a0 b0 a1 b1 | a4 b4 a5 b5] and [a2 b2 a3 b3 | a6 b6 a7 b7].
    let (t0, t1) = (_mm256_unpacklo_epi32(v0, v1), _mm256_unpackhi_epi32(v0, v1));
    let (t2, t3) = (_mm256_unpacklo_epi32(v2, v3), _mm256_unpackhi_epi32(v2, v3));
    let (t4, t5) = (_mm256_unpacklo_epi32(v4, v5), _mm256_unpackhi_epi32(v4, v5));
    let (t6, t7) = (_mm256_unpacklo_epi32(v6, v7), _mm256_unpackhi_epi32(v6, v7));
    // Element k of rows 0..4 in the low half, element k + 4 in the high half.
    let s0 = _mm256_unpacklo_epi64(t0, t2);
    let s1 = _mm256_unpackhi_epi64(t0, t2);
    let s2 = _mm256_unpacklo_epi64(t1, t3);
    let s3 = _mm256_unpackhi_epi64(t1, t3);
    let s4 = _mm256_unpacklo_epi64(t4, t6);
    let s5 = _mm256_unpackhi_epi64(t4, t6);
    let s6 = _mm256_unpacklo_epi64(t5, t7);
    let s7 = _mm256_unpackhi_epi64(t5, t7);
    [
        _mm256_permute2x128_si256::<0x20>(s0, s4),
        _mm256_permute2x128_si256::<0x20>(s1, s5),
        _mm256_permute2x128_si256::<0x20>(s2, s6),
        _mm256_permute2x128_si256::<0x20>(s3, s7),
        _mm256_permute2x128_si256::<0x31>(s0, s4),
        _mm256_permute2x128_si256::<0x31>(s1, s5),
        _mm256_permute2x128_si256::<0x31>(s2, s6),
        _mm256_permute2x128_si256::<0x31>(s3, s7),
    ]
}

/// Eight rows of four dwords each (`v[r]`), transposed: result `m`, lane `r` = dword `m` of row
/// `r`. Rows `r` and `r + 4` share a vector, transposed within its 128-bit halves.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn dwords4(v: [__m128i; 8]) -> [__m256i; 4] {
    let rows = |r: usize| _mm256_set_m128i(v[r + 4], v[r]);
    let (a, b) = (
        _mm256_unpacklo_epi32(rows(0), rows(1)),
        _mm256_unpackhi_epi32(rows(0), rows(1)),
    );
    let (c, e) = (
        _mm256_unpacklo_epi32(rows(2), rows(3)),
        _mm256_unpackhi_epi32(rows(2), rows(3)),
    );
    [
        _mm256_unpacklo_epi64(a, c),
        _mm256_unpackhi_epi64(a, c),
        _mm256_unpacklo_epi64(b, e),
        _mm256_unpackhi_epi64(b, e),
    ]
}

/// Eight rows' mins (bytes of `m[r]`) as four i16 pairs each: result `q`, lane `r` = row `r`'s
/// pair `q`.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn min_pairs(m: [u64; 8]) -> [__m256i; 4] {
    dwords4(per_row(_mm_setzero_si128(), |r| {
        _mm_cvtepu8_epi16(_mm_cvtsi64_si128(m[r] as i64))
    }))
}

/// The eight rows' f16 scales as f32 lanes (exact conversions).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn scales(d: [u16; GROUP]) -> __m256 {
    _mm256_cvtph_ps(load128(bytemuck::cast_ref::<[u16; GROUP], [u8; 16]>(&d)))
}

/// Eight rows of unsigned levels `u ≤ 31` with zero point `Z` (Q4_0, Q5_0), interleaved by 4
/// bytes, and their scales.
#[derive(Clone, Copy)]
pub(in crate::cpu_dot) struct Offset {
    u: [__m256i; 8],
    dx: __m256,
}

/// An activation block for rows of unsigned levels with zero point `Z` ([`Offset`] here, the
/// AVX-VNNI rows of [`super::vnni`]): its quants as 4-byte groups, `Z·Σ q8` (`|Σ q8| ≤ 32·128`, so
/// exact in i32 for every `Z ≤ 128`) and its f32 scale.
#[derive(Clone, Copy)]
pub(in crate::cpu_dot) struct OffsetAct {
    pub(super) qs: [i32; 8],
    pub(super) zsum: i32,
    pub(super) dy: f32,
}

#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn offset_prepare<const Z: i32>(y: &BlockQ8_0) -> OffsetAct {
    // maddubs of 1 by q8 adds exact pairs; madd by 1 widens them to i32.
    let pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), load(&y.qs));
    let sum = hsum_i32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
    OffsetAct {
        qs: bytemuck::cast(y.qs),
        zsum: Z * sum,
        dy: f16(y.d),
    }
}

/// `Σ (u − Z)·q8 = Σ u·q8 − Z·Σ q8` per lane, for each of `T` activations (each weight vector
/// loaded once for all of them): `maddubs` pairs are at most `2·31·128 = 7936`, so four of them
/// add exactly in i16 (`≤ 31744`) before `madd` widens to i32; then `(isum·dx)·dy`, the scalar
/// Q4_0/Q5_0 order.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn offset_dots<const T: usize>(w: &Offset, y: [&OffsetAct; T]) -> [__m256; T] {
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_si256(); T];
    for half in 0..2 {
        let mut s = [_mm256_setzero_si256(); T];
        for k in 4 * half..4 * half + 4 {
            let u = w.u[k];
            for t in 0..T {
                let p = _mm256_maddubs_epi16(u, _mm256_set1_epi32(y[t].qs[k]));
                s[t] = _mm256_add_epi16(s[t], p);
            }
        }
        for t in 0..T {
            acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(s[t], ones));
        }
    }
    per_row(_mm256_setzero_ps(), |t| {
        let isum = _mm256_cvtepi32_ps(_mm256_sub_epi32(acc[t], _mm256_set1_epi32(y[t].zsum)));
        _mm256_mul_ps(_mm256_mul_ps(isum, w.dx), _mm256_set1_ps(y[t].dy))
    })
}

/// Eight rows' 32 unsigned levels each, interleaved by 4 bytes.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn offset_unpack(levels: [__m256i; GROUP], d: [u16; GROUP]) -> Offset {
    Offset {
        u: transpose(levels),
        dx: scales(d),
    }
}

/// Q4_0 rows (zero point 8).
pub(in crate::cpu_dot) struct Q4_0;

impl Interleaved for Q4_0 {
    type Block = BlockQ4_0;
    type Act = BlockQ8_0;
    type Unpacked = Offset;
    type Prepared = OffsetAct;
    const MIN_ACTS: usize = 2;

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn unpack(x: [&BlockQ4_0; GROUP], w: &mut Offset) {
        let z = _mm256_setzero_si256();
        *w = offset_unpack(per_row(z, |r| nibbles32(&x[r].qs)), per_row(0, |r| x[r].d));
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn prepare(y: &BlockQ8_0) -> OffsetAct {
        offset_prepare::<8>(y)
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn dot(w: &Offset, _: &BlockQ8_0, p: &OffsetAct) -> __m256 {
        let [d] = offset_dots::<1>(w, [p]);
        d
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn dots<const T: usize>(
        w: &Offset,
        _: [&BlockQ8_0; T],
        p: [&OffsetAct; T],
    ) -> [__m256; T] {
        offset_dots::<T>(w, p)
    }
}

/// Eight Q5_0 blocks' unsigned levels `u = nibble | fifth bit·16`, interleaved by 4 bytes (lane `r`
/// of vector `k`: row `r`'s levels `4k..4k + 4`), transposed while still packed: dword `m` of a
/// block's `qs` holds the nibbles of levels `4m..4m + 4` (low) and `16 + 4m..` (high), and the
/// fifth bits of levels `4k..4k + 4` are bits `4k..4k + 4` of `qh`. For vector `k` those four bits
/// go to bit 4 of the lane's four bytes: `t·(2^4 + 2^11 + 2^18 + 2^25)` puts bit `b` of `t < 16` at
/// `8b + 4` and every other product at a distinct position (no carries), which the mask keeps out
/// (as the AVX-512 kernels do).
#[inline]
#[target_feature(enable = "avx2")]
fn q5_0_interleaved(x: [&BlockQ5_0; GROUP]) -> [__m256i; 8] {
    let p = dwords4(per_row(_mm_setzero_si128(), |r| load128(&x[r].qs)));
    let bits: [u32; GROUP] = per_row(0, |r| x[r].qh_bits());
    let mut t = load(bytemuck::cast_ref::<_, [u8; 32]>(&bits));
    let nibble = _mm256_set1_epi8(0x0F);
    let four = _mm256_set1_epi32(0xF);
    let spread = _mm256_set1_epi32((1 << 4) | (1 << 11) | (1 << 18) | (1 << 25));
    let fifth = _mm256_set1_epi32(0x1010_1010);
    let mut u = [_mm256_setzero_si256(); 8];
    for (k, v) in u.iter_mut().enumerate() {
        let packed = p[k % 4];
        let levels = if k < 4 {
            packed
        } else {
            _mm256_srli_epi16::<4>(packed)
        };
        let high = _mm256_and_si256(_mm256_mullo_epi32(_mm256_and_si256(t, four), spread), fifth);
        *v = _mm256_or_si256(_mm256_and_si256(levels, nibble), high);
        t = _mm256_srli_epi32::<4>(t);
    }
    u
}

/// Q5_0 rows (zero point 16).
pub(in crate::cpu_dot) struct Q5_0;

impl Interleaved for Q5_0 {
    type Block = BlockQ5_0;
    type Act = BlockQ8_0;
    type Unpacked = Offset;
    type Prepared = OffsetAct;
    const MIN_ACTS: usize = 2;

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn unpack(x: [&BlockQ5_0; GROUP], w: &mut Offset) {
        *w = Offset {
            u: q5_0_interleaved(x),
            dx: scales(per_row(0, |r| x[r].d)),
        };
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn prepare(y: &BlockQ8_0) -> OffsetAct {
        offset_prepare::<16>(y)
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn dot(w: &Offset, _: &BlockQ8_0, p: &OffsetAct) -> __m256 {
        let [d] = offset_dots::<1>(w, [p]);
        d
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn dots<const T: usize>(
        w: &Offset,
        _: [&BlockQ8_0; T],
        p: [&OffsetAct; T],
    ) -> [__m256; T] {
        offset_dots::<T>(w, p)
    }
}

/// Eight rows of signed weights widened to i16, interleaved by pairs (lane `r` of vector `k`
/// holds row `r`'s weights `2k` and `2k + 1`), and their scales.
#[derive(Clone, Copy)]
pub(in crate::cpu_dot) struct Wide {
    w: [__m256i; 16],
    dx: __m256,
}

/// An activation block for [`Wide`] rows: its quants widened to i16 (pairs as i32) and its f32
/// scale.
#[derive(Clone, Copy)]
pub(in crate::cpu_dot) struct WideAct {
    pairs: [i32; 16],
    dy: f32,
}

#[inline]
#[target_feature(enable = "avx2,f16c")]
fn wide_prepare(y: &BlockQ8_0) -> WideAct {
    let v = load(&y.qs);
    let lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v));
    let hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(v));
    let halves: [[i32; 8]; 2] = [bytemuck::cast(lo), bytemuck::cast(hi)];
    WideAct {
        pairs: bytemuck::cast(halves),
        dy: f16(y.d),
    }
}

/// Eight rows' widened weights (`q8_0_levels`, `iq4_nl_levels`: elements 0..16, 16..32),
/// interleaved by i16 pairs.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn wide_unpack(levels: [(__m256i, __m256i); GROUP], d: [u16; GROUP]) -> Wide {
    let z = _mm256_setzero_si256();
    let lo = transpose(per_row(z, |r| levels[r].0));
    let hi = transpose(per_row(z, |r| levels[r].1));
    let mut w = [_mm256_setzero_si256(); 16];
    w[..8].copy_from_slice(&lo);
    w[8..].copy_from_slice(&hi);
    Wide { w, dx: scales(d) }
}

/// `Σ w·q8` per lane on sign-extended i16 (`madd` of two products, each at most `128·128`
/// in magnitude, widened to i32; sixteen of them per block: exact), then `(isum·dx)·dy` (Q8_0)
/// or `(dx·dy)·isum` (IQ4_NL).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn wide_dot<const SCALES_FIRST: bool>(w: &Wide, y: &WideAct) -> __m256 {
    let p = |k: usize| _mm256_madd_epi16(w.w[k], _mm256_set1_epi32(y.pairs[k]));
    let quad = |k: usize| {
        _mm256_add_epi32(
            _mm256_add_epi32(p(k), p(k + 1)),
            _mm256_add_epi32(p(k + 2), p(k + 3)),
        )
    };
    let isum = _mm256_cvtepi32_ps(_mm256_add_epi32(
        _mm256_add_epi32(quad(0), quad(4)),
        _mm256_add_epi32(quad(8), quad(12)),
    ));
    let dy = _mm256_set1_ps(y.dy);
    if SCALES_FIRST {
        _mm256_mul_ps(_mm256_mul_ps(w.dx, dy), isum)
    } else {
        _mm256_mul_ps(_mm256_mul_ps(isum, w.dx), dy)
    }
}

/// Q8_0 rows.
pub(in crate::cpu_dot) struct Q8_0;

impl Interleaved for Q8_0 {
    type Block = BlockQ8_0;
    type Act = BlockQ8_0;
    type Unpacked = Wide;
    type Prepared = WideAct;
    const MIN_ACTS: usize = 5;

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn unpack(x: [&BlockQ8_0; GROUP], w: &mut Wide) {
        let z = (_mm256_setzero_si256(), _mm256_setzero_si256());
        *w = wide_unpack(per_row(z, |r| q8_0_levels(x[r])), per_row(0, |r| x[r].d));
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn prepare(y: &BlockQ8_0) -> WideAct {
        wide_prepare(y)
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn dot(w: &Wide, _: &BlockQ8_0, p: &WideAct) -> __m256 {
        wide_dot::<false>(w, p)
    }
}

/// IQ4_NL rows.
pub(in crate::cpu_dot) struct Iq4Nl;

impl Interleaved for Iq4Nl {
    type Block = BlockIq4Nl;
    type Act = BlockQ8_0;
    type Unpacked = Wide;
    type Prepared = WideAct;
    const MIN_ACTS: usize = 5;

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn unpack(x: [&BlockIq4Nl; GROUP], w: &mut Wide) {
        let z = (_mm256_setzero_si256(), _mm256_setzero_si256());
        *w = wide_unpack(per_row(z, |r| iq4_nl_levels(x[r])), per_row(0, |r| x[r].d));
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn prepare(y: &BlockQ8_0) -> WideAct {
        wide_prepare(y)
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn dot(w: &Wide, _: &BlockQ8_0, p: &WideAct) -> __m256 {
        wide_dot::<true>(w, p)
    }
}
