//! AVX-512 VNNI kernels: sixteen weight rows across the sixteen i32 lanes of a 512-bit vector,
//! `vpdpbusd` adding four u8·i8 products per lane per instruction (twice the rows of
//! [`super::vnni`]'s 256-bit kernels per instruction, on the CPUs that have AVX-512 VNNI: Intel
//! since Ice Lake server and Sapphire Rapids, AMD since Zen 4).
//!
//! Same arithmetic as [`super::vnni`], so the same exactness argument and the same bits as the
//! scalar dot: levels made unsigned by a zero point (legacy types) or already unsigned
//! (Q4_K/Q5_K), exact i32 sums per row lane, each type's scalar f32 tail lane by lane, and block
//! results added to a per-activation running sum in block order.
//!
//! The loop runs block by block over all activations (each sixteen-row block unpacked once,
//! while it is in registers and L1), where [`super::interleaved`] unpacks a whole row group
//! first: a sixteen-row Q4_K block takes 5 KiB unpacked.

use core::arch::x86_64::*;

use ingot_abi::blocks::{
    BlockIq4Nl, BlockQ4K, BlockQ4_0, BlockQ5K, BlockQ5_0, BlockQ8K, BlockQ8_0, KVALUES_IQ4NL,
};

use super::interleaved::{dwords4, min_pairs, scales};
use super::{f16, hsum_i32, load, load128, per_row, quad, scales_mins_k4, K4Act};

/// Rows of a group: the sixteen i32 (or f32) lanes of a 512-bit vector.
pub(in crate::cpu_dot) const GROUP: usize = 16;

/// A weight type's sixteen-row kernel.
pub(in crate::cpu_dot) trait Rows16 {
    /// The weight block.
    type Block: bytemuck::Pod;
    /// The activation block (Q8_0, or Q8_K for the k-quants).
    type Act;
    /// One block of sixteen rows, interleaved: SIMD vectors only, so that all-zero bits are a
    /// value (the buffer the unpacking writes into starts as that).
    type Unpacked;
    /// What the products take of an activation block besides its quants (read in place).
    type Prepared: Copy;

    /// Writes the sixteen blocks `x` into `w`, in place (a sixteen-row Q4_K block is 5 KiB).
    ///
    /// # Safety
    /// The CPU has AVX2, F16C, AVX-512 F/BW/VL and AVX-512 VNNI, as for every method here.
    unsafe fn unpack(x: [&Self::Block; GROUP], w: &mut Self::Unpacked);

    /// # Safety
    /// As [`Rows16::unpack`].
    unsafe fn prepare(y: &Self::Act) -> Self::Prepared;

    /// Lane `r`: the scalar block dot of row `r`'s block in `w` with `y` (`p` prepared from it).
    ///
    /// # Safety
    /// As [`Rows16::unpack`].
    unsafe fn dot(w: &Self::Unpacked, y: &Self::Act, p: &Self::Prepared) -> __m512;

    /// [`Rows16::dot`] of two activations (a kernel may share each weight load between them).
    ///
    /// # Safety
    /// As [`Rows16::unpack`].
    #[inline(always)]
    unsafe fn dot2(w: &Self::Unpacked, y: [&Self::Act; 2], p: [&Self::Prepared; 2]) -> [__m512; 2] {
        // SAFETY: the caller's CPU has the kernels' features.
        unsafe { [Self::dot(w, y[0], p[0]), Self::dot(w, y[1], p[1])] }
    }
}

/// `out[t·n + r] = row r · acts[t]` for the first `16·⌊n/16⌋` of the `n = out.len() / acts.len()`
/// rows in `blocks` (each `acts[0].len()` blocks, every activation as long, `acts` not empty and
/// not 0 blocks: checked by the caller). Returns how many rows it wrote.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(in crate::cpu_dot) fn rows<K: Rows16>(
    blocks: &[K::Block],
    acts: &[&[K::Act]],
    out: &mut [f32],
) -> usize {
    let nb = acts[0].len();
    let n = out.len() / acts.len();
    let mut prepared = Vec::with_capacity(acts.len() * nb);
    for a in acts {
        for y in &a[..nb] {
            // SAFETY: this function runs with every feature the kernels need.
            prepared.push(unsafe { K::prepare(y) });
        }
    }
    let mut sums = vec![_mm512_setzero_ps(); acts.len()];
    // SAFETY: `Unpacked` holds SIMD vectors only, for which all-zero bits are a value.
    let mut w: K::Unpacked = unsafe { core::mem::zeroed() };
    let mut groups = blocks.chunks_exact(GROUP * nb);
    for (g, group) in (&mut groups).enumerate() {
        sums.fill(_mm512_setzero_ps());
        for b in 0..nb {
            // SAFETY: as above.
            unsafe { K::unpack(per_row(&group[0], |r| &group[r * nb + b]), &mut w) };
            // Two activations per step, then the odd one.
            let mut t = 0;
            while t + 2 <= acts.len() {
                let y = [&acts[t][b], &acts[t + 1][b]];
                let p = [&prepared[t * nb + b], &prepared[(t + 1) * nb + b]];
                // SAFETY: as above.
                let [d0, d1] = unsafe { K::dot2(&w, y, p) };
                sums[t] = _mm512_add_ps(sums[t], d0);
                sums[t + 1] = _mm512_add_ps(sums[t + 1], d1);
                t += 2;
            }
            if t < acts.len() {
                // SAFETY: as above.
                let d = unsafe { K::dot(&w, &acts[t][b], &prepared[t * nb + b]) };
                sums[t] = _mm512_add_ps(sums[t], d);
            }
        }
        for (t, s) in sums.iter().enumerate() {
            let at = t * n + g * GROUP;
            let lanes = &mut out[at..at + GROUP];
            // SAFETY: `lanes` is sixteen writable f32; `storeu` has no alignment requirement.
            unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), *s) };
        }
    }
    n - groups.remainder().len() / nb
}

/// Two 256-bit halves as one 512-bit vector (`lo` in lanes 0..8).
#[inline]
#[target_feature(enable = "avx512f")]
fn join(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

/// The 16×8 transpose of 32-bit elements: lane `r` of result `k` is element `k` of `v[r]`.
/// Rows `j` and `j + 8` share a vector, and the eight-row transpose of
/// [`super::interleaved::transpose`] runs on both 256-bit halves at once (24 shuffles for
/// sixteen rows where two eight-row transposes take 48).
#[inline]
#[target_feature(enable = "avx2,avx512f")]
fn transpose16(v: [__m256i; GROUP]) -> [__m512i; 8] {
    let z: [__m512i; 8] = per_row(_mm512_setzero_si512(), |j| join(v[j], v[j + 8]));
    // [a0 b0 a1 b1 | a4 b4 a5 b5] and [a2 b2 a3 b3 | a6 b6 a7 b7] in each half.
    let t: [__m512i; 8] = per_row(_mm512_setzero_si512(), |i| {
        let (a, b) = (z[i & !1], z[i | 1]);
        if i % 2 == 0 {
            _mm512_unpacklo_epi32(a, b)
        } else {
            _mm512_unpackhi_epi32(a, b)
        }
    });
    // Element k of rows 0..4 (of the half) in its low 128 bits, element k + 4 in its high.
    let s: [__m512i; 8] = per_row(_mm512_setzero_si512(), |i| {
        let base = 4 * (i / 4) + (i % 4) / 2;
        let (a, b) = (t[base], t[base + 2]);
        if i % 2 == 0 {
            _mm512_unpacklo_epi64(a, b)
        } else {
            _mm512_unpackhi_epi64(a, b)
        }
    });
    // Qword indices (b's offset by 8): the low 128 bits of a and b in each half, or the high.
    let low = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    let high = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    per_row(_mm512_setzero_si512(), |k| {
        let (a, b) = (s[k % 4], s[k % 4 + 4]);
        _mm512_permutex2var_epi64(a, if k < 4 { low } else { high }, b)
    })
}

/// The sixteen rows' f16 scales as f32 lanes (exact conversions).
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f")]
fn scales16(d: [u16; GROUP]) -> __m512 {
    let [d0, d1, d2, d3, d4, d5, d6, d7, d8, d9, da, db, dc, dd, de, df] = d;
    let lo = scales([d0, d1, d2, d3, d4, d5, d6, d7]);
    let hi = scales([d8, d9, da, db, dc, dd, de, df]);
    _mm512_castsi512_ps(join(_mm256_castps_si256(lo), _mm256_castps_si256(hi)))
}

/// Sixteen rows of unsigned levels interleaved by 4 bytes (lane `r` of vector `k` holds row `r`'s
/// levels `4k..4k + 4`), and their f32 scales.
pub(in crate::cpu_dot) struct Unsigned {
    u: [__m512i; 8],
    dx: __m512,
}

/// An activation block for [`Unsigned`] rows: `Z·Σ q8` and its f32 scale.
#[derive(Clone, Copy)]
pub(in crate::cpu_dot) struct UnsignedAct {
    zsum: i32,
    dy: f32,
}

#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn prepare_unsigned<const Z: i32>(y: &BlockQ8_0) -> UnsignedAct {
    let ones = _mm256_set1_epi8(1);
    let sum = hsum_i32(_mm256_dpbusd_epi32(
        _mm256_setzero_si256(),
        ones,
        load(&y.qs),
    ));
    UnsignedAct {
        zsum: Z * sum,
        dy: f16(y.d),
    }
}

/// Lane `r`: `Σ (u − Z)·q8`, then `(isum·dx)·dy` or (`SCALES_FIRST`, IQ4_NL) `(dx·dy)·isum`.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn dot_unsigned<const SCALES_FIRST: bool>(w: &Unsigned, y: &BlockQ8_0, p: &UnsignedAct) -> __m512 {
    // Four chains, so that `vpdpbusd`'s latency overlaps.
    let mut acc = [_mm512_setzero_si512(); 4];
    for k in 0..8 {
        let q = _mm512_set1_epi32(quad(&y.qs, k));
        acc[k % 4] = _mm512_dpbusd_epi32(acc[k % 4], w.u[k], q);
    }
    let acc = _mm512_add_epi32(
        _mm512_add_epi32(acc[0], acc[1]),
        _mm512_add_epi32(acc[2], acc[3]),
    );
    let isum = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc, _mm512_set1_epi32(p.zsum)));
    let dy = _mm512_set1_ps(p.dy);
    if SCALES_FIRST {
        _mm512_mul_ps(_mm512_mul_ps(w.dx, dy), isum)
    } else {
        _mm512_mul_ps(_mm512_mul_ps(isum, w.dx), dy)
    }
}

/// The signed bytes `v` as unsigned `v + 128`.
#[inline]
#[target_feature(enable = "avx2")]
fn offset_128(v: __m256i) -> __m256i {
    _mm256_xor_si256(v, _mm256_set1_epi8(i8::MIN))
}

macro_rules! legacy {
    ($(#[$doc:meta])* $name:ident, $block:ty, $z:literal, $scales_first:literal, |$x:ident| $levels:expr) => {
        $(#[$doc])*
        pub(in crate::cpu_dot) struct $name;

        impl Rows16 for $name {
            type Block = $block;
            type Act = BlockQ8_0;
            type Unpacked = Unsigned;
            type Prepared = UnsignedAct;

            #[inline]
            #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
            unsafe fn unpack($x: [&$block; GROUP], w: &mut Unsigned) {
                w.u = $levels;
                w.dx = scales16(per_row(0, |r| $x[r].d));
            }

            #[inline]
            #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
            unsafe fn prepare(y: &BlockQ8_0) -> UnsignedAct {
                prepare_unsigned::<$z>(y)
            }

            #[inline]
            #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
            unsafe fn dot(w: &Unsigned, y: &BlockQ8_0, p: &UnsignedAct) -> __m512 {
                dot_unsigned::<$scales_first>(w, y, p)
            }
        }
    };
}

legacy!(
    /// Q4_0 rows: nibbles, zero point 8.
    Q4_0, BlockQ4_0, 8, false, |x| nibble_rows(per_row(&x[0].qs, |r| &x[r].qs))
);
legacy!(
    /// Q5_0 rows: five-bit levels, zero point 16.
    Q5_0, BlockQ5_0, 16, false, |x| {
        let mut u = nibble_rows(per_row(&x[0].qs, |r| &x[r].qs));
        add_fifth_bits(&mut u, per_row(0, |r| x[r].qh_bits()));
        u
    }
);
legacy!(
    /// Q8_0 rows: the signed weights offset by 128.
    Q8_0, BlockQ8_0, 128, false, |x| {
        transpose16(per_row(_mm256_setzero_si256(), |r| offset_128(load(&x[r].qs))))
    }
);
legacy!(
    /// IQ4_NL rows: the code-book values offset by 128.
    Iq4Nl, BlockIq4Nl, 128, true, |x| {
        let table = _mm512_broadcast_i32x4(load128(&KVALUES_IQ4NL));
        let mut u = nibble_rows(per_row(&x[0].qs, |r| &x[r].qs));
        for v in &mut u {
            *v = _mm512_xor_si512(_mm512_shuffle_epi8(table, *v), _mm512_set1_epi8(i8::MIN));
        }
        u
    }
);

/// Sixteen Q4_K/Q5_K rows' super-block, interleaved (the layout of [`super::vnni::K4Rows`] on
/// sixteen lanes).
pub(in crate::cpu_dot) struct K4Rows {
    /// `u[8k + i]`: lane `r` holds row `r`'s levels `4i..4i + 4` of group `k` (`≤ 31`).
    u: [__m512i; 64],
    /// `sc[k]`: group `k`'s scale of each row, as i32 lanes.
    sc: [__m512i; 8],
    /// `mins[q]`: lane `r` holds row `r`'s mins `m_2q`, `m_2q+1` as an i16 pair.
    mins: [__m512i; 4],
    d: __m512,
    dmin: __m512,
}

/// [`dwords4`] of sixteen rows.
#[inline]
#[target_feature(enable = "avx2,avx512f")]
fn dwords4x16(v: [__m128i; GROUP]) -> [__m512i; 4] {
    let [v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, va, vb, vc, vd, ve, vf] = v;
    let lo = dwords4([v0, v1, v2, v3, v4, v5, v6, v7]);
    let hi = dwords4([v8, v9, va, vb, vc, vd, ve, vf]);
    let mut out = [_mm512_setzero_si512(); 4];
    for m in 0..4 {
        out[m] = join(lo[m], hi[m]);
    }
    out
}

/// Sixteen rows of the nibble layout (`qs[j]`: low nibble element `j`, high nibble element
/// `j + 16`), interleaved: vector `k`, lane `r` = row `r`'s elements `4k..4k + 4`. Elements
/// `4m..4m + 4` are the low nibbles of row dword `m`, elements `16 + 4m..` its high nibbles, so
/// one 16×4 dword transpose of the packed bytes interleaves all 32.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw")]
fn nibble_rows(qs: [&[u8; 16]; GROUP]) -> [__m512i; 8] {
    let q = dwords4x16(per_row(_mm_setzero_si128(), |r| load128(qs[r])));
    let nibble = _mm512_set1_epi8(0x0F);
    let mut u = [_mm512_setzero_si512(); 8];
    for m in 0..4 {
        u[m] = _mm512_and_si512(q[m], nibble);
        u[m + 4] = _mm512_and_si512(_mm512_srli_epi16::<4>(q[m]), nibble);
    }
    u
}

/// Adds the Q5_0 fifth bits (bit `e` of row `r`'s `bits[r]` is bit 4 of element `e`) to
/// interleaved nibbles `u`. For vector `k` the four bits `4k..4k + 4` of each lane go to bit 4
/// of its four bytes: `t·(2^4 + 2^11 + 2^18 + 2^25)` puts bit `b` of `t < 16` at `8b + 4` and
/// every other product at a distinct position (no carries), which the mask keeps out.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw")]
fn add_fifth_bits(u: &mut [__m512i; 8], bits: [u32; GROUP]) {
    // SAFETY: `bits` is sixteen u32 = 64 readable bytes; `loadu` has no alignment requirement.
    let h = unsafe { _mm512_loadu_si512(bits.as_ptr().cast()) };
    let spread = _mm512_set1_epi32((1 << 4) | (1 << 11) | (1 << 18) | (1 << 25));
    let four = _mm512_set1_epi32(0xF);
    let fifth = _mm512_set1_epi32(0x1010_1010);
    let mut t = h;
    for v in u.iter_mut() {
        let b = _mm512_and_si512(_mm512_mullo_epi32(_mm512_and_si512(t, four), spread), fifth);
        *v = _mm512_or_si512(*v, b);
        t = _mm512_srli_epi32::<4>(t);
    }
}

/// The sixteen rows' quants `qs` (and fifth bits `qh`, Q5_K), 12-byte scales, `d`, `dmin`, into
/// `w`.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw")]
fn k4_rows(
    qs: [&[u8; 128]; GROUP],
    qh: Option<[&[u8; 32]; GROUP]>,
    s: [&[u8; 12]; GROUP],
    d: [u16; GROUP],
    dmin: [u16; GROUP],
    w: &mut K4Rows,
) {
    let nibble = _mm512_set1_epi8(0x0F);
    let fifth = _mm512_set1_epi8(0x10);
    let u = &mut w.u;
    // Bit 2p of qh byte l is bit 4 of element l of group 2p, bit 2p + 1 that of group 2p + 1:
    // the interleaved fifth bits sit under the interleaved quants, shifted down 2 per p.
    let z = _mm256_setzero_si256();
    let mut high = qh.map(|h| transpose16(per_row(z, |r| load(h[r]))));
    for p in 0..4 {
        let t = transpose16(per_row(z, |r| {
            load(&bytemuck::cast_ref::<_, [[u8; 32]; 4]>(qs[r])[p])
        }));
        for i in 0..8 {
            let mut lo = _mm512_and_si512(t[i], nibble);
            let mut hi = _mm512_and_si512(_mm512_srli_epi16::<4>(t[i]), nibble);
            if let Some(h) = &mut high {
                lo = _mm512_or_si512(lo, _mm512_and_si512(_mm512_slli_epi16::<4>(h[i]), fifth));
                hi = _mm512_or_si512(hi, _mm512_and_si512(_mm512_slli_epi16::<3>(h[i]), fifth));
                h[i] = _mm512_srli_epi16::<2>(h[i]);
            }
            u[16 * p + i] = lo;
            u[16 * p + 8 + i] = hi;
        }
    }
    let sm: [(u64, u64); GROUP] = per_row((0, 0), |r| scales_mins_k4(s[r]));
    let sc = transpose16(per_row(z, |r| {
        _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(sm[r].0 as i64))
    }));
    let [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, ma, mb, mc, md, me, mf] = per_row(0, |r| sm[r].1);
    let lo = min_pairs([m0, m1, m2, m3, m4, m5, m6, m7]);
    let hi = min_pairs([m8, m9, ma, mb, mc, md, me, mf]);
    for q in 0..4 {
        w.mins[q] = join(lo[q], hi[q]);
    }
    w.sc = sc;
    w.d = scales16(d);
    w.dmin = scales16(dmin);
}

#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn k4_dot<const T: usize>(w: &K4Rows, y: [&BlockQ8K; T], p: [&K4Act; T]) -> [__m512; T] {
    // The eight groups' sums of each activation as chains advanced side by side, so that
    // `vpdpbusd`'s latency is hidden behind the other chains' work; each weight vector loaded
    // once for the `T` activations.
    let mut acc = [[_mm512_setzero_si512(); 8]; T];
    for i in 0..8 {
        for k in 0..8 {
            let u = w.u[8 * k + i];
            for t in 0..T {
                let q = _mm512_set1_epi32(quad(&y[t].qs, 8 * k + i));
                acc[t][k] = _mm512_dpbusd_epi32(acc[t][k], u, q);
            }
        }
    }
    let mut out = [_mm512_setzero_ps(); T];
    for t in 0..T {
        let mut isum = _mm512_setzero_si512();
        for (a, sc) in acc[t].iter().zip(&w.sc) {
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(*a, *sc));
        }
        let mut summs = _mm512_setzero_si512();
        for (m, &b) in w.mins.iter().zip(&p[t].pairs) {
            summs = _mm512_add_epi32(summs, _mm512_madd_epi16(*m, _mm512_set1_epi32(b)));
        }
        let yd = _mm512_set1_ps(y[t].d);
        out[t] = _mm512_sub_ps(
            _mm512_mul_ps(_mm512_mul_ps(w.d, yd), _mm512_cvtepi32_ps(isum)),
            _mm512_mul_ps(_mm512_mul_ps(w.dmin, yd), _mm512_cvtepi32_ps(summs)),
        );
    }
    out
}

macro_rules! k4 {
    ($(#[$doc:meta])* $name:ident, $block:ty, |$x:ident| $qh:expr) => {
        $(#[$doc])*
        pub(in crate::cpu_dot) struct $name;

        impl Rows16 for $name {
            type Block = $block;
            type Act = BlockQ8K;
            type Unpacked = K4Rows;
            type Prepared = K4Act;

            #[inline]
            #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
            unsafe fn unpack($x: [&$block; GROUP], w: &mut K4Rows) {
                k4_rows(
                    per_row(&$x[0].qs, |r| &$x[r].qs),
                    $qh,
                    per_row(&$x[0].scales, |r| &$x[r].scales),
                    per_row(0, |r| $x[r].d),
                    per_row(0, |r| $x[r].dmin),
                    w,
                )
            }

            #[inline]
            #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
            unsafe fn prepare(y: &BlockQ8K) -> K4Act {
                K4Act::of(y)
            }

            #[inline]
            #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
            unsafe fn dot(w: &K4Rows, y: &BlockQ8K, p: &K4Act) -> __m512 {
                k4_dot::<1>(w, [y], [p])[0]
            }

            #[inline]
            #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
            unsafe fn dot2(w: &K4Rows, y: [&BlockQ8K; 2], p: [&K4Act; 2]) -> [__m512; 2] {
                k4_dot::<2>(w, y, p)
            }
        }
    };
}

k4!(
    /// Q4_K rows against Q8_K activations.
    Q4K, BlockQ4K, |x| None
);
k4!(
    /// Q5_K rows against Q8_K activations.
    Q5K, BlockQ5K, |x| Some(per_row(&x[0].qh, |r| &x[r].qh))
);
