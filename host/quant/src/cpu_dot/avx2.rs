//! AVX2 block dot products, bit-identical to the scalar ones in [`crate::cpu_dot`].
//!
//! Every kernel computes the same exact integer sums as its scalar twin (only their evaluation
//! order differs, which integers do not notice), then applies the scalar code's f32 scale
//! expression unchanged, so a block's result has the very same bits. The integer bounds that
//! make the SIMD steps exact:
//! * `maddubs(u, q8)` multiplies unsigned weight levels `u ≤ 63` by signed activations
//!   `|q8| ≤ 128` and adds pairs: `|pair| ≤ 2·63·128 = 16128 < 2¹⁵`, never saturating;
//! * `madd(pair, scale)` with `|scale| ≤ 128` gives `|·| ≤ 2·16128·128 ≈ 4.1e6`, and a block
//!   adds at most 16 such terms per lane: far inside i32.
//!
//! Signed weight levels are therefore always offset to unsigned (`q − 32` becomes
//! `q·q8 − 32·q8`), the only form in which `maddubs` is exact for every `q8` including −128.
//! Q8_0 weights (full-range i8) and IQ4 code-book values (signed, up to ±127) go through
//! sign-extended 16-bit products (`madd`) instead. The grid types (IQ1/IQ2/IQ3, [`grid`]) move the
//! sign onto the weight instead: `maddubs(|q8|, w·sgn(q8))`, exact for every `|w| ≤ 127` and
//! every `q8`.
//!
//! Functions here carry `#[target_feature]`; the safe entry points in `super::rows` call them
//! only after `is_x86_feature_detected!` confirmed AVX2 and F16C.

use core::arch::x86_64::*;

pub(super) mod avx512;
mod grid;
pub(super) mod interleaved;
pub(super) mod interleaved_k;
pub(super) mod krows;
mod legacy_rows;
pub(super) mod packed_k;
pub(super) mod tiles;
pub(super) mod vnni;

pub(super) use grid::{iq1_m, iq1_s, iq2_s, iq2_xs, iq2_xxs, iq3_s, iq3_xxs};
pub(super) use legacy_rows::{
    iq4_nl_row, iq4_nl_row_multi, q4_0_row, q5_0_row, q8_0_row, q8_0_row_multi,
};

use ingot_abi::blocks::{
    iq4xs_scale, BlockIq4Nl, BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ5K,
    BlockQ5_0, BlockQ6K, BlockQ8K, BlockQ8_0, KVALUES_IQ4NL, QK_K,
};

/// 32 bytes from a 32-byte array (unaligned load).
#[inline]
#[target_feature(enable = "avx2")]
fn load<T: Copy>(a: &[T; 32]) -> __m256i {
    const { assert!(size_of::<T>() == 1) };
    // SAFETY: `a` is 32 readable bytes; `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_si256(a.as_ptr().cast()) }
}

/// 16 bytes from a 16-byte array (unaligned load).
#[inline]
#[target_feature(enable = "avx2")]
fn load128<T: Copy>(a: &[T; 16]) -> __m128i {
    const { assert!(size_of::<T>() == 1) };
    // SAFETY: `a` is 16 readable bytes; `loadu` has no alignment requirement.
    unsafe { _mm_loadu_si128(a.as_ptr().cast()) }
}

/// The 16 `bsums` of a Q8_K block as one vector of i16.
#[inline]
#[target_feature(enable = "avx2")]
fn load_bsums(y: &BlockQ8K) -> __m256i {
    // SAFETY: `bsums` is 16 i16 = 32 readable bytes; `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_si256(y.bsums.as_ptr().cast()) }
}

/// `[f(0), f(1), …]` in a plain loop that inlines. `array::map` and `array::from_fn` are not
/// compiled with the kernels' target features, so the closures they call (which are) cannot
/// inline into them: each element of an unpacking would become a call with its vectors passed
/// through memory.
#[inline(always)]
fn per_row<const N: usize, T: Copy>(zero: T, mut f: impl FnMut(usize) -> T) -> [T; N] {
    let mut out = [zero; N];
    for (r, o) in out.iter_mut().enumerate() {
        *o = f(r);
    }
    out
}

/// Four quants `qs[4j..4j + 4]` of an activation block as one i32 (the operand `vpdpbusd`
/// broadcasts to every row lane).
#[inline(always)]
fn quad<const N: usize>(qs: &[i8; N], j: usize) -> i32 {
    i32::from_le_bytes([
        qs[4 * j] as u8,
        qs[4 * j + 1] as u8,
        qs[4 * j + 2] as u8,
        qs[4 * j + 3] as u8,
    ])
}

/// The pairwise `bsums` of a Q8_K block for the interleaved Q4_K/Q5_K kernels ([`vnni`],
/// [`avx512`]): `B_j = bsums_2j + bsums_2j+1` (`|B_j| ≤ 2·16·128`, an i16), packed two to an i32
/// (`B_2q` low, `B_2q+1` high) to meet their i16 pairs of mins in one `madd`.
#[derive(Clone, Copy)]
pub(super) struct K4Act {
    pairs: [i32; 4],
}

impl K4Act {
    #[inline(always)]
    fn of(y: &BlockQ8K) -> K4Act {
        let b = |j: usize| (y.bsums[2 * j] + y.bsums[2 * j + 1]) as u16 as u32;
        K4Act {
            pairs: core::array::from_fn(|q| (b(2 * q) | (b(2 * q + 1) << 16)) as i32),
        }
    }
}

/// Σ of the 8 i32 lanes (wrapping, which the callers' bounds make exact).
#[inline]
#[target_feature(enable = "avx2")]
fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    _mm_cvtsi128_si32(s)
}

/// IEEE binary16 bits → f32 with the F16C instruction (exact, like `half`'s conversion).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn f16(bits: u16) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
}

/// The 32-element groups of a Q8_K block's quants.
#[inline(always)]
fn q8k_groups(y: &BlockQ8K) -> &[[i8; 32]; 8] {
    bytemuck::cast_ref(&y.qs)
}

/// Every i16 of each 128-bit half of `v` set to that half's i16 number `j` (a `pshufb` of the
/// byte pair `2j, 2j+1`).
#[inline]
#[target_feature(enable = "avx2")]
fn splat_i16(v: __m256i, j: i16) -> __m256i {
    _mm256_shuffle_epi8(v, _mm256_set1_epi16(((2 * j + 1) << 8) | (2 * j)))
}

/// Q4_K/Q5_K 6-bit scales and mins (ggml `get_scale_min_k4` for all eight `j` at once): returns
/// `(sc_0..sc_7, m_0..m_7)` as little-endian bytes of two u64.
#[inline(always)]
fn scales_mins_k4(s: &[u8; 12]) -> (u64, u64) {
    let word = |i: usize| u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
    let (w0, w1, w2) = (word(0), word(1), word(2));
    // j < 4: low 6 bits of bytes 0..4 (scales) and 4..8 (mins).
    let sc_lo = w0 & 0x3f3f_3f3f;
    let m_lo = w1 & 0x3f3f_3f3f;
    // j ≥ 4: a nibble of byte j+4, plus the top two bits of byte j−4 (scales) or j (mins).
    let sc_hi = (w2 & 0x0f0f_0f0f) | (((w0 >> 6) & 0x0303_0303) << 4);
    let m_hi = ((w2 >> 4) & 0x0f0f_0f0f) | (((w1 >> 6) & 0x0303_0303) << 4);
    (
        u64::from(sc_lo) | (u64::from(sc_hi) << 32),
        u64::from(m_lo) | (u64::from(m_hi) << 32),
    )
}

/// The shared Q4_K/Q5_K tail: given `isum = Σ_j sc_j·Σ q·q8`, subtracts the mins term
/// `Σ_j m_j·(bsums_{2j} + bsums_{2j+1})` exactly as [`crate::cpu_dot`]'s `k4_like` does.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn k4_finish(isum: i32, mins: u64, d: u16, dmin: u16, y: &BlockQ8K) -> f32 {
    let summs = hsum_i32(k4_mins_lanes(mins, y));
    f16(d) * y.d * isum as f32 - f16(dmin) * y.d * summs as f32
}

/// The mins term `Σ_j m_j·(bsums_{2j} + bsums_{2j+1})` as 8 partial i32 sums.
#[inline]
#[target_feature(enable = "avx2")]
fn k4_mins_lanes(mins: u64, y: &BlockQ8K) -> __m256i {
    // Pairwise bsums: |b| ≤ 16·128, pair sums fit i32 trivially.
    let pairs = _mm256_madd_epi16(load_bsums(y), _mm256_set1_epi16(1));
    let m = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(mins as i64));
    _mm256_mullo_epi32(pairs, m)
}

/// `Σ_j sc_j·Σ q·q8` over the eight 32-element sub-blocks of 4-bit levels `qs` (Q4_K layout),
/// with optional 5th bits `qh` (Q5_K layout).
#[inline]
#[target_feature(enable = "avx2")]
fn k4_isum(qs: &[u8; QK_K / 2], qh: Option<&[u8; 32]>, scales: u64, y: &BlockQ8K) -> i32 {
    hsum_i32(k4_isum_lanes(qs, qh, scales, y))
}

/// [`k4_isum`] as 8 partial i32 sums.
#[inline]
#[target_feature(enable = "avx2")]
fn k4_isum_lanes(qs: &[u8; QK_K / 2], qh: Option<&[u8; 32]>, scales: u64, y: &BlockQ8K) -> __m256i {
    let qs: &[[u8; 32]; 4] = bytemuck::cast_ref(qs);
    let ys = q8k_groups(y);
    let nibble = _mm256_set1_epi8(0x0F);
    let one = _mm256_set1_epi8(1);
    let sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(scales as i64)));
    let mut hbits = match qh {
        Some(h) => load(h),
        None => _mm256_setzero_si256(),
    };
    let mut acc = _mm256_setzero_si256();
    for (p, q) in qs.iter().enumerate() {
        let v = load(q);
        let mut lo = _mm256_and_si256(v, nibble);
        let mut hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble);
        if qh.is_some() {
            // Bit 2p of qh[l] is bit 4 of element 64p+l, bit 2p+1 that of element 64p+32+l.
            // 16-bit shifts leak the neighbour byte only into bits masked off here.
            lo = _mm256_or_si256(lo, _mm256_slli_epi16::<4>(_mm256_and_si256(hbits, one)));
            let h1 = _mm256_and_si256(_mm256_srli_epi16::<1>(hbits), one);
            hi = _mm256_or_si256(hi, _mm256_slli_epi16::<4>(h1));
            hbits = _mm256_srli_epi16::<2>(hbits);
        }
        let plo = _mm256_maddubs_epi16(lo, load(&ys[2 * p]));
        let phi = _mm256_maddubs_epi16(hi, load(&ys[2 * p + 1]));
        let j = 2 * p as i16;
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(plo, splat_i16(sc, j)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(phi, splat_i16(sc, j + 1)));
    }
    acc
}

/// Q4_K · Q8_K.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn q4_k(x: &BlockQ4K, y: &BlockQ8K) -> f32 {
    let (sc, m) = scales_mins_k4(&x.scales);
    let isum = k4_isum(&x.qs, None, sc, y);
    k4_finish(isum, m, x.d, x.dmin, y)
}

/// Activations [`q2_k_multi`] and [`q3_k_multi`] dot at once: enough to amortize the weight
/// unpacking, few enough that each one's accumulators stay in registers.
pub(super) const MULTI: usize = 4;

/// The per-activation half of the k-quant multi kernels: for each of [`MULTI`] activations,
/// `isum = Σ_k Σ maddubs(levels[k], group k)·scales[k]` over the eight 32-element groups, then
/// `finish(isum, activation)`. The weight half is unpacked once by the caller: `levels[k]` the
/// group's unsigned levels (`≤ 63`), `scales[k]` its i16 scales per 16-element half
/// (`|s| ≤ 128`), within the bounds of the module notes. These are the single kernels' products,
/// so `isum` is their integer.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn k_multi(
    levels: &[__m256i; 8],
    scales: &[__m256i; 8],
    ys: [&BlockQ8K; MULTI],
    finish: impl Fn(i32, &BlockQ8K) -> f32,
) -> [f32; MULTI] {
    let mut out = [0.0; MULTI];
    for (o, y) in out.iter_mut().zip(ys) {
        let groups = q8k_groups(y);
        let mut acc = _mm256_setzero_si256();
        for k in 0..8 {
            let p = _mm256_maddubs_epi16(levels[k], load(&groups[k]));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, scales[k]));
        }
        *o = finish(hsum_i32(acc), y);
    }
    out
}

/// A Q4_K/Q5_K block's unsigned levels (`≤ 31`) per 32-element group `k`, and its 6-bit scales
/// `sc_0..sc_7` as i16 in both 128-bit halves (group `k`'s scale in every lane is
/// `splat_i16(·, k)`): [`k4_isum`]'s operands, for kernels that reuse them.
#[inline]
#[target_feature(enable = "avx2")]
fn k4_unpack(qs: &[u8; QK_K / 2], qh: Option<&[u8; 32]>, sc: u64) -> ([__m256i; 8], __m256i) {
    let qs: &[[u8; 32]; 4] = bytemuck::cast_ref(qs);
    let nibble = _mm256_set1_epi8(0x0F);
    let one = _mm256_set1_epi8(1);
    let scv = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(sc as i64)));
    let mut hbits = match qh {
        Some(h) => load(h),
        None => _mm256_setzero_si256(),
    };
    let mut levels = [_mm256_setzero_si256(); 8];
    for (p, q) in qs.iter().enumerate() {
        let v = load(q);
        let mut lo = _mm256_and_si256(v, nibble);
        let mut hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble);
        if qh.is_some() {
            // As in `k4_isum`: bit 2p of qh[l] is bit 4 of element 64p+l, bit 2p+1 that of
            // element 64p+32+l.
            lo = _mm256_or_si256(lo, _mm256_slli_epi16::<4>(_mm256_and_si256(hbits, one)));
            let h1 = _mm256_and_si256(_mm256_srli_epi16::<1>(hbits), one);
            hi = _mm256_or_si256(hi, _mm256_slli_epi16::<4>(h1));
            hbits = _mm256_srli_epi16::<2>(hbits);
        }
        levels[2 * p] = lo;
        levels[2 * p + 1] = hi;
    }
    (levels, scv)
}

/// Q5_K · Q8_K.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn q5_k(x: &BlockQ5K, y: &BlockQ8K) -> f32 {
    let (sc, m) = scales_mins_k4(&x.scales);
    let isum = k4_isum(&x.qs, Some(&x.qh), sc, y);
    k4_finish(isum, m, x.d, x.dmin, y)
}

/// Sixteen i16 scales `s_0..s_15` rearranged as `[s_0 s_2 … s_14 | s_1 s_3 … s_15]`, so that the
/// scales of a 32-element group (sub-blocks `2k` in the low half, `2k+1` in the high half) sit at
/// i16 index `k` of each half, where [`pair_scales`] reaches them with an in-lane shuffle.
#[inline]
#[target_feature(enable = "avx2")]
fn even_odd_scales(scales: __m128i) -> __m256i {
    let split = _mm_shuffle_epi8(
        scales,
        _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15),
    );
    _mm256_cvtepi8_epi16(split)
}

/// For group `k ∈ 0..8` of 32 elements, `[s_2k ×8 | s_2k+1 ×8]` from [`even_odd_scales`].
#[inline]
#[target_feature(enable = "avx2")]
fn pair_scales(eo: __m256i, k: usize) -> __m256i {
    splat_i16(eo, k as i16)
}

/// Q6_K · Q8_K: `Σ_j s_j·Σ (q − 32)·q8 = Σ_j s_j·Σ q·q8 − 32·Σ_j s_j·bsums_j`. The second form
/// needs `bsums` to be the group sums of `qs`, which [`crate::quantize_q8_k`] guarantees (and
/// which the mins term of Q2_K/Q4_K/Q5_K relies on in the scalar code as well).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn q6_k(x: &BlockQ6K, y: &BlockQ8K) -> f32 {
    let isum = hsum_i32(q6_k_lanes(x, y));
    f16(x.d) * y.d * isum as f32
}

/// [`q6_k`]'s integer `Σ_j s_j·Σ (q − 32)·q8` as 8 partial i32 sums (wrapping, like the sums).
#[inline]
#[target_feature(enable = "avx2")]
fn q6_k_lanes(x: &BlockQ6K, y: &BlockQ8K) -> __m256i {
    let ql: &[[u8; 32]; 4] = bytemuck::cast_ref(&x.ql);
    let qh: &[[u8; 32]; 2] = bytemuck::cast_ref(&x.qh);
    let ys = q8k_groups(y);
    let nibble = _mm256_set1_epi8(0x0F);
    let two_bits = _mm256_set1_epi8(3);
    let raw = load128(&x.scales);
    let sc = even_odd_scales(raw);
    let mut acc = _mm256_setzero_si256();
    for n in 0..2 {
        let (l0, l1, h) = (load(&ql[2 * n]), load(&ql[2 * n + 1]), load(&qh[n]));
        // Bits 2g..2g+2 of qh[l] are bits 4-5 of element 128n + 32g + l (masks drop the bits
        // that 16-bit shifts carry over from the neighbour byte).
        let high = |shifted: __m256i| _mm256_slli_epi16::<4>(_mm256_and_si256(shifted, two_bits));
        let q = [
            _mm256_or_si256(_mm256_and_si256(l0, nibble), high(h)),
            _mm256_or_si256(
                _mm256_and_si256(l1, nibble),
                high(_mm256_srli_epi16::<2>(h)),
            ),
            _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(l0), nibble),
                high(_mm256_srli_epi16::<4>(h)),
            ),
            _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(l1), nibble),
                high(_mm256_srli_epi16::<6>(h)),
            ),
        ];
        for (g, qg) in q.into_iter().enumerate() {
            let k = 4 * n + g;
            let p = _mm256_maddubs_epi16(qg, load(&ys[k]));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, pair_scales(sc, k)));
        }
    }
    // |s·bsums| ≤ 128·2048 per group, 16 groups: exact in i32. Lane-wise `acc − 32·offset` adds
    // up to the scalar `Σ acc − 32·Σ offset` (i32 arithmetic wraps alike in any order).
    let offset = _mm256_madd_epi16(_mm256_cvtepi8_epi16(raw), load_bsums(y));
    _mm256_sub_epi32(acc, _mm256_slli_epi32::<5>(offset))
}

/// A Q6_K block's unsigned levels (`≤ 63`) per 32-element group `k`, and its sixteen scales in
/// the [`even_odd_scales`] arrangement (group `k`'s two sub-block scales are
/// [`pair_scales`]`(·, k)`): [`q6_k`]'s operands, for kernels that reuse them.
#[inline]
#[target_feature(enable = "avx2")]
fn q6_k_unpack(x: &BlockQ6K) -> ([__m256i; 8], __m256i) {
    let ql: &[[u8; 32]; 4] = bytemuck::cast_ref(&x.ql);
    let qh: &[[u8; 32]; 2] = bytemuck::cast_ref(&x.qh);
    let nibble = _mm256_set1_epi8(0x0F);
    let two_bits = _mm256_set1_epi8(3);
    let sc = even_odd_scales(load128(&x.scales));
    let high = |shifted: __m256i| _mm256_slli_epi16::<4>(_mm256_and_si256(shifted, two_bits));
    let mut levels = [_mm256_setzero_si256(); 8];
    for n in 0..2 {
        // As in `q6_k`: bits 2g..2g+2 of qh[l] are bits 4-5 of element 128n + 32g + l.
        let (l0, l1, h) = (load(&ql[2 * n]), load(&ql[2 * n + 1]), load(&qh[n]));
        levels[4 * n] = _mm256_or_si256(_mm256_and_si256(l0, nibble), high(h));
        levels[4 * n + 1] = _mm256_or_si256(
            _mm256_and_si256(l1, nibble),
            high(_mm256_srli_epi16::<2>(h)),
        );
        levels[4 * n + 2] = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16::<4>(l0), nibble),
            high(_mm256_srli_epi16::<4>(h)),
        );
        levels[4 * n + 3] = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16::<4>(l1), nibble),
            high(_mm256_srli_epi16::<6>(h)),
        );
    }
    (levels, sc)
}

/// The sixteen signed Q3_K scales `S_j − 32` (ggml's 32-bit unpacking of `q3k_scale`) in the
/// [`even_odd_scales`] arrangement.
#[inline]
#[target_feature(enable = "avx2")]
fn q3_k_scales(s: &[u8; 12]) -> __m256i {
    even_odd_scales(q3_k_scale_bytes(s))
}

/// The sixteen signed Q3_K scales `S_j − 32` as i8, `j` in order.
#[inline]
#[target_feature(enable = "avx2")]
fn q3_k_scale_bytes(s: &[u8; 12]) -> __m128i {
    let word = |i: usize| u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
    let (w0, w1, hi) = (word(0), word(1), word(2));
    // Low nibble of S_j: scales[j%8] bits 4·(j/8); top two bits: scales[8 + j%4] bits 2·(j/4).
    let lo = |w: u32, shift: u32, hshift: u32| {
        ((w >> shift) & 0x0f0f_0f0f) | (((hi >> hshift) & 0x0303_0303) << 4)
    };
    let words = [lo(w0, 0, 0), lo(w1, 0, 2), lo(w0, 4, 4), lo(w1, 4, 6)];
    let bytes = _mm_setr_epi32(
        words[0] as i32,
        words[1] as i32,
        words[2] as i32,
        words[3] as i32,
    );
    // S_j ≤ 63, so `S_j − 32` fits i8 (and the signed widenings keep it).
    _mm_sub_epi8(bytes, _mm_set1_epi8(32))
}

/// Q3_K · Q8_K: `Σ_j S_j·Σ q3·q8` with `q3 = low2 − 4·[high bit clear]`, evaluated as
/// `low2·q8 − (4·[clear])·q8` so both products have unsigned weights.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn q3_k(x: &BlockQ3K, y: &BlockQ8K) -> f32 {
    let qs: &[[u8; 32]; 2] = bytemuck::cast_ref(&x.qs);
    let ys = q8k_groups(y);
    let sc = q3_k_scales(&x.scales);
    let hmask = load(&x.hmask);
    let three = _mm256_set1_epi8(3);
    let four = _mm256_set1_epi8(4);
    let mut acc = _mm256_setzero_si256();
    for (n, q) in qs.iter().enumerate() {
        let mut bits = load(q);
        for s in 0..4 {
            // Element 128n + 32s + l: low bits 2s..2s+2 of qs[32n+l], high bit 4n+s of hmask[l].
            let k = 4 * n + s;
            let low = _mm256_and_si256(bits, three);
            bits = _mm256_srli_epi16::<2>(bits);
            let bit = _mm256_set1_epi8((1u8 << k) as i8);
            let clear = _mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), _mm256_setzero_si256());
            let y8 = load(&ys[k]);
            let p = _mm256_sub_epi16(
                _mm256_maddubs_epi16(low, y8),
                _mm256_maddubs_epi16(_mm256_and_si256(clear, four), y8),
            );
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, pair_scales(sc, k)));
        }
    }
    f16(x.d) * y.d * hsum_i32(acc) as f32
}

/// Q2_K · Q8_K: `d·y.d·Σ_j (sc_j&15)·Σ q·q8 − dmin·y.d·Σ_j (sc_j>>4)·bsums_j`, levels `q ∈ 0..=3`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn q2_k(x: &BlockQ2K, y: &BlockQ8K) -> f32 {
    let qs: &[[u8; 32]; 2] = bytemuck::cast_ref(&x.qs);
    let ys = q8k_groups(y);
    let raw = load128(&x.scales);
    let nibble = _mm_set1_epi8(0x0F);
    let sc = even_odd_scales(_mm_and_si128(raw, nibble));
    let mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16::<4>(raw), nibble));
    let three = _mm256_set1_epi8(3);
    let mut acc = _mm256_setzero_si256();
    for (n, q) in qs.iter().enumerate() {
        let mut bits = load(q);
        for s in 0..4 {
            // Element 128n + 32s + l: bits 2s..2s+2 of qs[32n+l].
            let k = 4 * n + s;
            let p = _mm256_maddubs_epi16(_mm256_and_si256(bits, three), load(&ys[k]));
            bits = _mm256_srli_epi16::<2>(bits);
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, pair_scales(sc, k)));
        }
    }
    let summs = hsum_i32(_mm256_madd_epi16(mins, load_bsums(y)));
    let dall = y.d * f16(x.d);
    let dmin = y.d * f16(x.dmin);
    dall * hsum_i32(acc) as f32 - dmin * summs as f32
}

/// Q3_K · Q8_K for [`MULTI`] activations, with each weight block's levels and scales unpacked
/// once. The levels go in unsigned: `q3 = u − 4` with `u = low2 + 4·[high bit set] ∈ 0..=7`, so
/// `Σ_j S_j·Σ q3·q8 = Σ_j S_j·Σ u·q8 − 4·Σ_j S_j·bsums_j`. That is [`q3_k`]'s integer (so its
/// result) when `bsums` are the 16-element sums of `qs`, which [`crate::quantize_q8_k`]
/// guarantees and [`q6_k`] relies on in the same way.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn q3_k_multi(x: &BlockQ3K, ys: [&BlockQ8K; MULTI]) -> [f32; MULTI] {
    let qs: &[[u8; 32]; 2] = bytemuck::cast_ref(&x.qs);
    let raw = q3_k_scale_bytes(&x.scales);
    let sc = even_odd_scales(raw);
    let wide = _mm256_cvtepi8_epi16(raw);
    let hmask = load(&x.hmask);
    let three = _mm256_set1_epi8(3);
    let four = _mm256_set1_epi8(4);
    let mut levels = [_mm256_setzero_si256(); 8];
    let mut scales = [_mm256_setzero_si256(); 8];
    for (n, q) in qs.iter().enumerate() {
        let mut bits = load(q);
        for s in 0..4 {
            // As in `q3_k`: element 128n + 32s + l has low bits 2s..2s+2 of qs[32n+l] and high
            // bit 4n+s of hmask[l].
            let k = 4 * n + s;
            let low = _mm256_and_si256(bits, three);
            bits = _mm256_srli_epi16::<2>(bits);
            let bit = _mm256_set1_epi8((1u8 << k) as i8);
            let set = _mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), bit);
            levels[k] = _mm256_or_si256(low, _mm256_and_si256(set, four));
            scales[k] = pair_scales(sc, k);
        }
    }
    let d = f16(x.d);
    k_multi(&levels, &scales, ys, |acc, y| {
        // |S·bsums| ≤ 32·2048 per group, 16 groups: exact in i32.
        let offset = hsum_i32(_mm256_madd_epi16(wide, load_bsums(y)));
        let isum = acc.wrapping_sub(offset.wrapping_mul(4));
        d * y.d * isum as f32
    })
}

/// Q2_K · Q8_K for [`MULTI`] activations: [`q2_k`] with the 2-bit levels, scales and mins
/// unpacked once; each result is exactly [`q2_k`]'s.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn q2_k_multi(x: &BlockQ2K, ys: [&BlockQ8K; MULTI]) -> [f32; MULTI] {
    let qs: &[[u8; 32]; 2] = bytemuck::cast_ref(&x.qs);
    let raw = load128(&x.scales);
    let nibble = _mm_set1_epi8(0x0F);
    let sc = even_odd_scales(_mm_and_si128(raw, nibble));
    let mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16::<4>(raw), nibble));
    let three = _mm256_set1_epi8(3);
    let mut levels = [_mm256_setzero_si256(); 8];
    let mut scales = [_mm256_setzero_si256(); 8];
    for (n, q) in qs.iter().enumerate() {
        let mut bits = load(q);
        for s in 0..4 {
            // Element 128n + 32s + l: bits 2s..2s+2 of qs[32n+l].
            let k = 4 * n + s;
            levels[k] = _mm256_and_si256(bits, three);
            bits = _mm256_srli_epi16::<2>(bits);
            scales[k] = pair_scales(sc, k);
        }
    }
    let (d, dmin) = (f16(x.d), f16(x.dmin));
    k_multi(&levels, &scales, ys, |isum, y| {
        let summs = hsum_i32(_mm256_madd_epi16(mins, load_bsums(y)));
        let dall = y.d * d;
        let dmin = y.d * dmin;
        dall * isum as f32 - dmin * summs as f32
    })
}

/// The IQ4_NL code book as a byte-shuffle table (both 128-bit halves).
#[inline]
#[target_feature(enable = "avx2")]
fn iq4nl_table() -> __m256i {
    _mm256_broadcastsi128_si256(load128(&KVALUES_IQ4NL))
}

/// 32 signed bytes as two vectors of 16 sign-extended i16 (elements 0..16, 16..32).
#[inline]
#[target_feature(enable = "avx2")]
fn widen(v: __m256i) -> (__m256i, __m256i) {
    (
        _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v)),
        _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(v)),
    )
}

/// `Σ w·q8` of 32 [`widen`]ed signed weights against 32 activations, as 8 partial i32 sums, on
/// sign-extended 16-bit lanes: exact for every pair of i8 (`|pair sum| ≤ 2·128·128 = 2¹⁵`, which
/// `madd` widens to i32 before adding), −128·−128 included, where `maddubs`' sign trick would
/// overflow.
#[inline]
#[target_feature(enable = "avx2")]
fn wide_isums(w: (__m256i, __m256i), y: &[i8; 32]) -> __m256i {
    let (y0, y1) = widen(load(y));
    _mm256_add_epi32(_mm256_madd_epi16(w.0, y0), _mm256_madd_epi16(w.1, y1))
}

/// `Σ v·q8` of 32 signed code-book values against 32 activations, as 8 partial i32 sums
/// ([`wide_isums`]).
#[inline]
#[target_feature(enable = "avx2")]
fn signed_isums(v: __m256i, y: &[i8; 32]) -> __m256i {
    wide_isums(widen(v), y)
}

/// `Σ (u − zero)·q8` of 32 unsigned levels `u ≤ 31` against 32 activations, as 8 partial i32 sums:
/// `maddubs(u, q8) − maddubs(zero, q8)`, each pair at most `2·31·128` and `2·16·128` in magnitude,
/// so neither product nor their difference saturates i16.
#[inline]
#[target_feature(enable = "avx2")]
fn offset_isums(u: __m256i, zero: i8, y: &[i8; 32]) -> __m256i {
    let y8 = load(y);
    let p = _mm256_sub_epi16(
        _mm256_maddubs_epi16(u, y8),
        _mm256_maddubs_epi16(_mm256_set1_epi8(zero), y8),
    );
    _mm256_madd_epi16(p, _mm256_set1_epi16(1))
}

/// IQ4_XS · Q8_K: `d·y.d·Σ_ib (ls_ib − 32)·Σ kvalues·q8` over 8 sub-blocks of 32.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn iq4_xs(x: &BlockIq4Xs, y: &BlockQ8K) -> f32 {
    let qs: &[[u8; 16]; 8] = bytemuck::cast_ref(&x.qs);
    let ys = q8k_groups(y);
    let table = iq4nl_table();
    let mut acc = _mm256_setzero_si256();
    for (ib, q) in qs.iter().enumerate() {
        let v = _mm256_shuffle_epi8(table, nibbles32(q));
        // |Σ v·q8| ≤ 32·127·128 and |ls − 32| ≤ 32: the product fits i32.
        let scale = _mm256_set1_epi32(iq4xs_scale(x.scales_h, &x.scales_l, ib));
        acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(signed_isums(v, &ys[ib]), scale));
    }
    f16(x.d) * y.d * hsum_i32(acc) as f32
}

/// The 32 levels of a 16-byte nibble array, element `j` = low nibble of byte `j`, element
/// `j + 16` = high nibble (the Q4_0/Q5_0 layout), as unsigned bytes.
#[inline]
#[target_feature(enable = "avx2")]
fn nibbles32(qs: &[u8; 16]) -> __m256i {
    let v = load128(qs);
    let both = _mm256_set_m128i(_mm_srli_epi16::<4>(v), v);
    _mm256_and_si256(both, _mm256_set1_epi8(0x0F))
}

/// `0xFF` in byte `e` where bit `e` of `bits` is set, else 0.
#[inline]
#[target_feature(enable = "avx2")]
fn bytes_from_bits(bits: u32) -> __m256i {
    // Byte e takes byte e/8 of `bits` (a lane-local shuffle: every 32-bit lane holds all four).
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(bits as i32),
        _mm256_setr_epi8(
            0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, //
            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
        ),
    );
    let select = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select)
}

/// The 32 unsigned Q5_0 levels `u = nibble | fifth bit·16` (value `u − 16`).
#[inline]
#[target_feature(enable = "avx2")]
fn q5_0_levels(x: &BlockQ5_0) -> __m256i {
    let fifth = _mm256_and_si256(bytes_from_bits(x.qh_bits()), _mm256_set1_epi8(16));
    _mm256_or_si256(nibbles32(&x.qs), fifth)
}

/// The 32 Q8_0 weights, [`widen`]ed.
#[inline]
#[target_feature(enable = "avx2")]
fn q8_0_levels(x: &BlockQ8_0) -> (__m256i, __m256i) {
    widen(load(&x.qs))
}

/// The 32 IQ4_NL code-book values, [`widen`]ed.
#[inline]
#[target_feature(enable = "avx2")]
fn iq4_nl_levels(x: &BlockIq4Nl) -> (__m256i, __m256i) {
    widen(_mm256_shuffle_epi8(iq4nl_table(), nibbles32(&x.qs)))
}

/// Q5_0 · Q8_0 as 8 partial i32 sums: `Σ (u − 16)·q8`.
#[inline]
#[target_feature(enable = "avx2")]
fn q5_0_isums(x: &BlockQ5_0, y: &BlockQ8_0) -> __m256i {
    offset_isums(q5_0_levels(x), 16, &y.qs)
}

/// Q8_0 · Q8_0 as 8 partial i32 sums ([`wide_isums`]).
#[inline]
#[target_feature(enable = "avx2")]
fn q8_0_isums(x: &BlockQ8_0, y: &BlockQ8_0) -> __m256i {
    wide_isums(q8_0_levels(x), &y.qs)
}

/// Q4_0 · Q8_0 as 8 partial i32 sums: `Σ (u − 8)·q8`.
#[inline]
#[target_feature(enable = "avx2")]
fn q4_0_isums(x: &BlockQ4_0, y: &BlockQ8_0) -> __m256i {
    offset_isums(nibbles32(&x.qs), 8, &y.qs)
}

/// IQ4_NL · Q8_0 as 8 partial i32 sums: `Σ kvalues·q8`.
#[inline]
#[target_feature(enable = "avx2")]
fn iq4_nl_isums(x: &BlockIq4Nl, y: &BlockQ8_0) -> __m256i {
    wide_isums(iq4_nl_levels(x), &y.qs)
}

/// Q4_0 · Q8_0 for one block: `isum as f32 · d · d8`, the scalar expression.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn q4_0(x: &BlockQ4_0, y: &BlockQ8_0) -> f32 {
    hsum_i32(q4_0_isums(x, y)) as f32 * f16(x.d) * f16(y.d)
}

/// IQ4_NL · Q8_0 for one block: `d · d8 · isum as f32`, the scalar expression (note the order).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn iq4_nl(x: &BlockIq4Nl, y: &BlockQ8_0) -> f32 {
    f16(x.d) * f16(y.d) * hsum_i32(iq4_nl_isums(x, y)) as f32
}

/// Q5_0 · Q8_0 for one block: `isum as f32 · d · d8`, the scalar expression.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn q5_0(x: &BlockQ5_0, y: &BlockQ8_0) -> f32 {
    hsum_i32(q5_0_isums(x, y)) as f32 * f16(x.d) * f16(y.d)
}

/// Q8_0 · Q8_0 for one block: `isum as f32 · d · d8`, the scalar expression.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn q8_0(x: &BlockQ8_0, y: &BlockQ8_0) -> f32 {
    hsum_i32(q8_0_isums(x, y)) as f32 * f16(x.d) * f16(y.d)
}
