//! The AVX2 products of packed Q4_K rows ([`BlockQ4Kx8`]): the interleaved Q4_K kernel's sums
//! ([`super::interleaved_k`]) read straight from the packed quants, with no transpose and no
//! scale decoding per call.
//!
//! Lane `r` of packed vector `8p + i` holds row `r`'s quant bytes `4i..4i + 4` of chunk `p`; its
//! low nibbles are levels `4i..4i + 4` of group `2p`, its high nibbles those of group `2p + 1`.
//! Each activation's matching four quants are broadcast, `maddubs` adds two `u·q8` products in
//! i16 (`≤ 2·15·128`), a group's eight such vectors add exactly in i16 (`8·3840 = 30720 < 2^15`),
//! and one `madd` by the group's scale as an i16 pair widens and scales them (`≤ 63·2^16` per
//! lane); the eight groups add in i32. The tail is the interleaved kernel's ([`k4_tail`]), so each
//! lane has the scalar dot's bits.

use core::arch::x86_64::*;

use ingot_abi::blocks::BlockQ8K;

use super::interleaved::scales;
use super::interleaved_k::{k4_dot, k4_tail, K4Rows};
use super::{load, per_row, quad, K4Act};
use crate::cpu_dot::packed::{BlockQ4Kx8, ROWS_PER_GROUP};
use crate::cpu_dot::prefetch::prefetch;

/// `out[t·n + r] = row r · acts[t]` for the `n = out.len() / acts.len()` rows in `packed` (lengths
/// checked by the caller: `n` a multiple of 8, `n / 8` groups of `acts[0].len()` blocks, every
/// activation as long).
#[target_feature(enable = "avx2,f16c")]
pub(in crate::cpu_dot) fn q4k_x8(packed: &[BlockQ4Kx8], acts: &[&[BlockQ8K]], out: &mut [f32]) {
    let nb = acts[0].len();
    let n = out.len() / acts.len();
    // Token-major, `nb` per activation; on the stack for the small calls decode makes by the
    // thousand per token, which then allocate nothing (not measured apart: within the A/B noise).
    const STACK: usize = 64;
    let mut stack = [K4Act { pairs: [0; 4] }; STACK];
    let mut heap = Vec::new();
    let prepared: &mut [K4Act] = if acts.len() * nb <= STACK {
        &mut stack[..acts.len() * nb]
    } else {
        heap.resize(acts.len() * nb, K4Act { pairs: [0; 4] });
        &mut heap
    };
    for (p, y) in prepared.iter_mut().zip(acts.iter().flat_map(|a| &a[..nb])) {
        *p = K4Act::of(y);
    }
    let prepared = &*prepared;
    // SAFETY: `K4Rows` holds SIMD vectors only, for which all-zero bits are a value.
    let mut unpacked = if acts.len() >= UNPACK_FROM {
        vec![unsafe { core::mem::zeroed::<K4Rows>() }; nb]
    } else {
        Vec::new()
    };
    for (g, group) in packed.chunks_exact(nb).enumerate() {
        // With several activations, the next group streams in while this one's products run
        // (measured: pp64 +4%); decode's one activation leaves it to the hardware prefetchers
        // (the whole next group requested at once made decode 15% slower).
        if acts.len() > 1 {
            let next = &packed[((g + 1) * nb).min(packed.len())..];
            prefetch(bytemuck::cast_slice(&next[..next.len().min(nb)]));
        }
        if acts.len() >= UNPACK_FROM {
            for (w, x) in unpacked.iter_mut().zip(group) {
                unpack(x, w);
            }
            all_steps(&unpacked[..], acts, prepared, out, g * ROWS_PER_GROUP, n);
        } else {
            all_steps(group, acts, prepared, out, g * ROWS_PER_GROUP, n);
        }
    }
}

/// Activations from which a group's nibbles are split once into [`K4Rows`] for all of them
/// rather than per step of four (measured, docs/perf.md: splitting per step made pp512 3% slower
/// than the GGUF layout's unpacked groups; at a routed expert's 5-8 tokens the two are even).
const UNPACK_FROM: usize = 9;

/// Every activation against one group's blocks `w`, four at a time, then two, then one.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn all_steps<W: Rows8>(
    w: &[W],
    acts: &[&[BlockQ8K]],
    prepared: &[K4Act],
    out: &mut [f32],
    row: usize,
    n: usize,
) {
    let mut t = 0;
    while t < acts.len() {
        let left = acts.len() - t;
        t += if left >= 4 {
            steps::<W, 4>(w, acts, prepared, out, t, row, n)
        } else if left >= 2 {
            steps::<W, 2>(w, acts, prepared, out, t, row, n)
        } else {
            steps::<W, 1>(w, acts, prepared, out, t, row, n)
        };
    }
}

/// A super-block of eight Q4_K rows in a form the products read: packed or unpacked.
trait Rows8 {
    /// Lane `r`: row `r`'s block dot with each of the `T` activations, the scalar bits.
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C.
    unsafe fn dots<const T: usize>(&self, y: [&BlockQ8K; T], p: [&K4Act; T]) -> [__m256; T];
}

impl Rows8 for BlockQ4Kx8 {
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn dots<const T: usize>(&self, y: [&BlockQ8K; T], p: [&K4Act; T]) -> [__m256; T] {
        dots::<T>(self, y, p)
    }
}

impl Rows8 for K4Rows {
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn dots<const T: usize>(&self, y: [&BlockQ8K; T], p: [&K4Act; T]) -> [__m256; T] {
        k4_dot::<1, T>(self, y, p)
    }
}

/// `x` unpacked into `w`: each level in its own byte, the scales as i32 lanes and i16 pairs.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn unpack(x: &BlockQ4Kx8, w: &mut K4Rows) {
    let nibble = _mm256_set1_epi8(0x0F);
    for (v, qs) in x.qs.iter().enumerate() {
        let (p, i) = (v / 8, v % 8);
        let q = load(qs);
        w.u[16 * p + i] = _mm256_and_si256(q, nibble);
        w.u[16 * p + 8 + i] = _mm256_and_si256(_mm256_srli_epi16::<4>(q), nibble);
    }
    let (sc, mins) = scales_mins(x);
    for k in 0..8 {
        w.sc_pairs[k] = _mm256_shuffle_epi8(sc[k / 4], pick_pair(k % 4, k % 4));
        w.sc[k] = _mm256_and_si256(w.sc_pairs[k], _mm256_set1_epi32(0xFFFF));
    }
    for q in 0..4 {
        w.mins[q] = _mm256_shuffle_epi8(mins[q / 2], pick_pair(2 * (q % 2), 2 * (q % 2) + 1));
    }
    w.d = scales(x.d);
    w.dmin = scales(x.dmin);
}

/// Activations `t0..t0 + T` against one group's blocks: each one's block results added to 0.0 in
/// block order (the scalar row's order), written to `out[t·n + row..]`. Returns `T`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn steps<W: Rows8, const T: usize>(
    group: &[W],
    acts: &[&[BlockQ8K]],
    prepared: &[K4Act],
    out: &mut [f32],
    t0: usize,
    row: usize,
    n: usize,
) -> usize {
    let nb = group.len();
    let mut sums = [_mm256_setzero_ps(); T];
    for (b, w) in group.iter().enumerate() {
        let y = per_row(&acts[t0][b], |t| &acts[t0 + t][b]);
        let p = per_row(&prepared[t0 * nb + b], |t| &prepared[(t0 + t) * nb + b]);
        // SAFETY: this function runs with AVX2 and F16C.
        let d = unsafe { w.dots::<T>(y, p) };
        for t in 0..T {
            sums[t] = _mm256_add_ps(sums[t], d[t]);
        }
    }
    for (t, s) in sums.iter().enumerate() {
        let at = (t0 + t) * n + row;
        let lanes: [f32; ROWS_PER_GROUP] = bytemuck::cast(*s);
        out[at..at + ROWS_PER_GROUP].copy_from_slice(&lanes);
    }
    T
}

/// Lane `r`: row `r`'s block dot with each of the `T` activations (module notes).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn dots<const T: usize>(w: &BlockQ4Kx8, y: [&BlockQ8K; T], p: [&K4Act; T]) -> [__m256; T] {
    let nibble = _mm256_set1_epi8(0x0F);
    let (sc, mins) = scales_mins(w);
    let mut isum = [_mm256_setzero_si256(); T];
    for k in 0..8 {
        // The group's scale in both i16 halves of each lane.
        let sc = _mm256_shuffle_epi8(sc[k / 4], pick_pair(k % 4, k % 4));
        let mut s = [_mm256_setzero_si256(); T];
        for i in 0..8 {
            let v = load(&w.qs[8 * (k / 2) + i]);
            let u = if k % 2 == 0 {
                _mm256_and_si256(v, nibble)
            } else {
                _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble)
            };
            for t in 0..T {
                let q = _mm256_set1_epi32(quad(&y[t].qs, 8 * k + i));
                s[t] = _mm256_add_epi16(s[t], _mm256_maddubs_epi16(u, q));
            }
        }
        for t in 0..T {
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s[t], sc));
        }
    }
    // `mins[q]` lane `r`: row `r`'s `(m_2q, m_2q+1)` as an i16 pair.
    let mins: [__m256i; 4] = per_row(_mm256_setzero_si256(), |q| {
        _mm256_shuffle_epi8(mins[q / 2], pick_pair(2 * (q % 2), 2 * (q % 2) + 1))
    });
    let (d, dmin) = (scales(w.d), scales(w.dmin));
    per_row(_mm256_setzero_ps(), |t| {
        k4_tail(&mins, d, dmin, y[t], p[t], isum[t])
    })
}

/// The eight rows' six-bit scales and mins, lane by lane as [`get_scale_min_k4`] decodes them:
/// `(sc, m)` with byte `j` of lane `r` of `sc[h]` row `r`'s scale of group `4h + j`, of `m[h]` its
/// min.
///
/// [`get_scale_min_k4`]: ingot_abi::blocks::get_scale_min_k4
#[inline]
#[target_feature(enable = "avx2")]
fn scales_mins(w: &BlockQ4Kx8) -> ([__m256i; 2], [__m256i; 2]) {
    let word = |j: usize| load(bytemuck::cast_ref::<[u32; 8], [u8; 32]>(&w.scales[j]));
    let (w0, w1, w2) = (word(0), word(1), word(2));
    let six = _mm256_set1_epi32(0x3f3f_3f3f);
    let four = _mm256_set1_epi32(0x0f0f_0f0f);
    let two = _mm256_set1_epi32(0x0303_0303);
    // Groups 0..4: the low six bits of bytes 0..4 (scales) and 4..8 (mins); groups 4..8: a
    // nibble of bytes 8..12 and the top two bits of bytes 0..4 (scales) or 4..8 (mins).
    let top = |x: __m256i| _mm256_slli_epi32::<4>(_mm256_and_si256(_mm256_srli_epi32::<6>(x), two));
    let sc_hi = _mm256_or_si256(_mm256_and_si256(w2, four), top(w0));
    let m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32::<4>(w2), four), top(w1));
    (
        [_mm256_and_si256(w0, six), sc_hi],
        [_mm256_and_si256(w1, six), m_hi],
    )
}

/// The `shuffle_epi8` control that turns each lane's bytes `a` and `b` into the i16 pair
/// `(byte a, byte b)` of that lane (zeros elsewhere).
#[inline]
#[target_feature(enable = "avx2")]
fn pick_pair(a: usize, b: usize) -> __m256i {
    let lane = |j: usize| {
        let at = |x: usize| (4 * j + x) as u32;
        (at(a) | 0x80 << 8 | at(b) << 16 | 0x80 << 24) as i32
    };
    _mm256_setr_epi32(
        lane(0),
        lane(1),
        lane(2),
        lane(3),
        lane(0),
        lane(1),
        lane(2),
        lane(3),
    )
}
