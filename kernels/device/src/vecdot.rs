//! Per-type dot products of quantized weights with q8_1 activations: the integer math of
//! ggml-cuda's `vecdotq.cuh` (spec §3.1, oracle `ingot_quant::vec_dot_q8_1`), kept together in
//! one file the way ggml keeps them, so every kernel that multiplies weights by q8_1 activations
//! (the gemvs here, the fused MoE kernels) shares one implementation per type.
//!
//! # Model
//!
//! A weight row is a sequence of *units*, each [`WeightType::LANES`] lanes work on together:
//!
//! * 32-element types (Q4_0, Q5_0, Q5_1, Q8_0, IQ4_NL): a unit is a **pair** of consecutive
//!   blocks (64 weights) handled by one lane, read with whole aligned 4-byte loads, never a
//!   byte twice. A row of an odd number of blocks (tiny test models; every V2-Lite row is
//!   even) ends in one unpaired block, added after the unit loop, and its odd rows may start
//!   2 bytes off a word boundary (see [`row_dot_lane`]).
//! * k-quants (Q3_K, Q4_K, Q5_K, Q6_K): a unit is one 256-element super-block shared by
//!   4 (Q3_K) or 8 lanes; each lane owns a fixed slice of positions (see each impl).
//!
//! The q8_1 activations matching unit `u` are the `QK/32` consecutive q8_1 blocks starting at
//! block `u·QK/32` of the activation vector.
//!
//! # Calling it from another kernel
//!
//! ```ignore
//! // One warp computes one row: `w_row` and `x` are global addresses (see `ptx::global`).
//! let partial = row_dot_lane::<Q4K>(w_row, x, ncols, lane, 32);
//! let y = ptx::warp_sum(partial);
//! ```
//!
//! `row_dot_lane` returns the lane's partial sum; the caller reduces over the lanes of the row
//! (every lane of the warp must take part in the shuffles). A sub-warp of `lanes` lanes (a power
//! of two, at least `LANES`) may compute one row, for short rows; [`sub_sum`] reduces it.
//!
//! # Convergence
//!
//! Each weight byte is loaded by one lane only; the k-quant `dot`s hand the shared fields (the
//! Q4_K/Q5_K header, Q5_K `qh`, the Q3_K/Q6_K scales, `d` and re-alignment words) to the other
//! lanes of their unit with `shfl.sync` over the full warp. So all 32 lanes must call `dot`
//! together: a loop over units must run the same number of iterations on every lane, and a lane
//! without a unit passes `Loads::default()` and discards the result, as [`row_dot_lane`] does.
//!
//! # Alignment
//!
//! Weight and activation buffers start 16-byte aligned. Q3_K and Q6_K blocks are only 2-byte
//! aligned; their loaders read aligned 4-byte words re-aligned by funnel shifts, and every
//! word read lies inside the block (no read leaves the weight buffer).

use crate::ptx::{dp4a, f16_to_f32, funnel_r, ld_u16, ld_u32, ld_v4, shfl_xor_f32};
use core::arch::asm;
use core::mem::{offset_of, size_of};
use ingot_abi::blocks::{
    BlockIq4Nl, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K, BlockQ8_0,
    BlockQ8_1, KVALUES_IQ4NL, QK8_1, QK_K,
};
use ingot_abi::launch::{
    GEMV_KQUANT_LANES, GEMV_KQUANT_QK, GEMV_PAIR_LANES, GEMV_PAIR_QK, GEMV_Q3K_LANES,
};

const _: () = assert!(GEMV_KQUANT_QK as usize == QK_K && GEMV_PAIR_QK as usize == 2 * QK8_1);

/// Bytes of one q8_1 activation block.
pub const Q8_BYTES: u64 = size_of::<BlockQ8_1>() as u64;
const Q8_QS_OFF: u64 = offset_of!(BlockQ8_1, qs) as u64;
const _: () = assert!(offset_of!(BlockQ8_1, d) == 0 && Q8_QS_OFF == 4 && Q8_BYTES == 36);

/// One quantized weight type as seen by a dot-product kernel.
pub trait WeightType {
    /// Weights per unit (see the module docs).
    const QK: u32;
    /// Bytes per unit.
    const UNIT_BYTES: u64;
    /// Lanes that share one unit; a power of two dividing 32.
    const LANES: u32;
    /// What one lane loads from one unit and its activations, held in registers so the loads of
    /// several units can be in flight before the first is used. `Default` is what a lane
    /// without a unit passes to `dot` so that it still takes part in the group's shuffles.
    type Loads: Default;
    /// Issues the loads of lane `part ∈ 0..LANES` for the unit at global address `w` whose
    /// activations are the q8_1 blocks starting at global address `act`.
    unsafe fn load(w: u64, act: u64, part: u32) -> Self::Loads;
    /// The lane's share of the unit's dot product. The k-quant impls shuffle values between
    /// the `LANES` lanes of a unit (each unit's lanes are consecutive and `LANES`-aligned within
    /// the warp): all 32 lanes of the warp must call it together.
    fn dot(l: &Self::Loads, part: u32) -> f32;
    /// Whether a row may end in one unpaired 32-weight block after its whole units (the
    /// 32-element types, rows of an odd number of blocks). k-quant rows are whole units, and
    /// for them [`Self::load_shifted`] and [`Self::tail_dot`] are never called.
    const TAIL: bool = false;
    /// As [`Self::load`] for a unit whose weights start at `w ≡ 2 (mod 4)`: the odd rows of a
    /// matrix whose rows hold an odd number of blocks of a type whose block size is `≡ 2 (mod
    /// 4)`. Reads the aligned words around the unit; the 2 bytes before it belong to the
    /// previous row and the 2 after it to the row's trailing block, so no read leaves the row
    /// pair (see `row_dot_lane`).
    #[inline(always)]
    unsafe fn load_shifted(w: u64, act: u64, part: u32) -> Self::Loads {
        Self::load(w, act, part)
    }
    /// The dot product of one trailing 32-weight block at `w` (2-byte aligned) with the q8_1
    /// block at `act`; one lane computes it, no shuffles.
    #[inline(always)]
    unsafe fn tail_dot(_w: u64, _act: u64) -> f32 {
        0.0
    }
}

/// Bytes of a row of `ncols` weights of `T` (`ncols` a multiple of 32, and of `T::QK` for
/// types without a tail).
#[inline(always)]
pub const fn row_bytes<T: WeightType>(ncols: u32) -> u64 {
    ncols as u64 * T::UNIT_BYTES / T::QK as u64
}

/// Bytes of q8_1 activations per unit of `T`.
#[inline(always)]
pub const fn act_bytes<T: WeightType>() -> u64 {
    (T::QK as u64 / QK8_1 as u64) * Q8_BYTES
}

/// Lane `lane ∈ 0..lanes` of a group of `lanes` lanes computing one row's dot product: its
/// partial sum over units `lane/LANES, lane/LANES + lanes/LANES, …` of the row of `ncols`
/// weights at `w_row` against the activations at `x`. `ncols` is a multiple of `T::QK`, or for
/// `T::TAIL` types of 32: such a row ends in one unpaired 32-weight block and may start 2 bytes
/// past a 4-byte boundary.
///
/// Every lane of the warp runs the same number of iterations (units are taken in rounds of
/// `lanes/LANES`, two rounds per iteration so two units' loads are in flight), because the
/// k-quant `dot`s shuffle within their lane group. The last one or two rounds, where some
/// groups have no unit left, skip those groups' loads and discard their result; they run once,
/// after the loop, so the loop itself has no per-lane guard.
///
/// The trailing block and the shift are decided once per row, outside the unit loop: a
/// shifted row runs the loop with [`WeightType::load_shifted`], and the trailing block is added
/// by the lane that would own the next unit. k-quants (`!T::TAIL`) run the plain loop only.
///
/// Why the shifted reads stay in bounds: a row of an odd number of `b`-byte blocks with
/// `b ≡ 2 (mod 4)` is `≡ 2 (mod 4)` bytes long, so only odd rows start shifted; the 2 bytes
/// read before such a row are the end of the previous row, and every unit is followed by at
/// least the row's trailing block. Types with 4-byte multiple blocks (Q5_1) never shift.
#[inline(always)]
pub unsafe fn row_dot_lane<T: WeightType>(
    w_row: u64,
    x: u64,
    ncols: u32,
    lane: u32,
    lanes: u32,
) -> f32 {
    let nunits = ncols / T::QK;
    if !T::TAIL {
        return units_dot_lane::<T, false>(w_row, x, nunits, lane, lanes);
    }
    let mut acc = if w_row & 3 != 0 {
        units_dot_lane::<T, true>(w_row, x, nunits, lane, lanes)
    } else {
        units_dot_lane::<T, false>(w_row, x, nunits, lane, lanes)
    };
    if ncols % T::QK != 0 && lane / T::LANES == nunits % (lanes / T::LANES) {
        acc += T::tail_dot(
            w_row + nunits as u64 * T::UNIT_BYTES,
            x + nunits as u64 * act_bytes::<T>(),
        );
    }
    acc
}

/// The unit loop of [`row_dot_lane`]; `SHIFTED` selects [`WeightType::load_shifted`].
#[inline(always)]
unsafe fn units_dot_lane<T: WeightType, const SHIFTED: bool>(
    w_row: u64,
    x: u64,
    nunits: u32,
    lane: u32,
    lanes: u32,
) -> f32 {
    let load = |w: u64, a: u64, part: u32| {
        if SHIFTED {
            T::load_shifted(w, a, part)
        } else {
            T::load(w, a, part)
        }
    };
    let part = lane % T::LANES;
    let step = lanes / T::LANES;
    let group = lane / T::LANES;
    let w_at = |u: u32| w_row + u as u64 * T::UNIT_BYTES;
    let x_at = |u: u32| x + u as u64 * act_bytes::<T>();
    let iterations = nunits / (2 * step);
    let mut acc = 0.0f32;
    let mut i = 0;
    while i < iterations {
        let u0 = 2 * i * step + group;
        let u1 = u0 + step;
        let l0 = load(w_at(u0), x_at(u0), part);
        let l1 = load(w_at(u1), x_at(u1), part);
        acc += T::dot(&l0, part);
        acc += T::dot(&l1, part);
        i += 1;
    }
    let mut round = iterations * 2 * step;
    while round < nunits {
        let u = round + group;
        let l = if u < nunits {
            load(w_at(u), x_at(u), part)
        } else {
            T::Loads::default()
        };
        let v = T::dot(&l, part);
        if u < nunits {
            acc += v;
        }
        round += step;
    }
    acc
}

/// Sum over aligned groups of `lanes` lanes (a power of two ≤ 32); every lane of a group gets
/// its group's sum. Every lane of the warp must execute it.
#[inline(always)]
pub fn sub_sum(mut v: f32, lanes: u32) -> f32 {
    let mut m = lanes / 2;
    while m > 0 {
        v += shfl_xor_f32(v, m);
        m >>= 1;
    }
    v
}

// ---------------------------------------------------------------------------------------------
// Instructions only this file needs.

/// `prmt.b32` (default mode): byte `i` of the result is byte `sel.nibble(i) & 7` of `hi:lo`.
/// Selectors here never set bit 3 of a nibble (sign replication).
#[inline(always)]
fn prmt(lo: u32, hi: u32, sel: u32) -> u32 {
    let d: u32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("prmt.b32 {d}, {a}, {b}, {c};", d = out(reg32) d, a = in(reg32) lo,
             b = in(reg32) hi, c = in(reg32) sel, options(pure, nomem, nostack));
    }
    d
}

/// This lane's index in its warp (`%laneid`).
#[inline(always)]
fn lane_id() -> u32 {
    let d: u32;
    // SAFETY: reads a special register.
    unsafe {
        asm!("mov.u32 {d}, %laneid;", d = out(reg32) d, options(pure, nomem, nostack));
    }
    d
}

/// `v` of lane `src` of the warp (`shfl.sync.idx`). Every lane of the warp must execute it.
#[inline(always)]
fn shfl_idx(v: u32, src: u32) -> u32 {
    let d: u32;
    // SAFETY: register-only warp instruction; callers keep the whole warp converged.
    unsafe {
        asm!("shfl.sync.idx.b32 {d}, {v}, {s}, 0x1f, 0xffffffff;", d = out(reg32) d,
             v = in(reg32) v, s = in(reg32) src, options(nomem, nostack));
    }
    d
}

/// `ld_u32(a)` on lanes where `p` holds, 0 elsewhere: a predicated load, so lanes that read
/// nothing do not branch around it (the other lanes get the value by shuffle).
#[inline(always)]
unsafe fn ld_u32_if(p: bool, a: u64) -> u32 {
    let v: u32;
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; mov.u32 {v}, 0; @p ld.global.nc.u32 {v}, [{a}]; }}",
         c = in(reg32) p as u32, v = out(reg32) v, a = in(reg64) a,
         options(pure, readonly, nostack));
    v
}

/// `ld_u16(a)` (zero-extended) where `p` holds, 0 elsewhere; see [`ld_u32_if`].
#[inline(always)]
unsafe fn ld_u16_if(p: bool, a: u64) -> u32 {
    let v: u32;
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; mov.u32 {v}, 0; @p ld.global.nc.u16 {v}, [{a}]; }}",
         c = in(reg32) p as u32, v = out(reg32) v, a = in(reg64) a,
         options(pure, readonly, nostack));
    v
}

/// 16-byte `ld_v4(a)` where `p` holds, zeros elsewhere; see [`ld_u32_if`].
#[inline(always)]
unsafe fn ld_v4_if(p: bool, a: u64) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; mov.u32 {x}, 0; mov.u32 {y}, 0; mov.u32 {z}, 0; \
          mov.u32 {w}, 0; @p ld.global.nc.v4.u32 {{{x}, {y}, {z}, {w}}}, [{a}]; }}",
         c = in(reg32) p as u32, x = out(reg32) x, y = out(reg32) y, z = out(reg32) z,
         w = out(reg32) w, a = in(reg64) a, options(pure, readonly, nostack));
    [x, y, z, w]
}

/// Four aligned words from `a` where `p` holds, zeros elsewhere; see [`ld_u32_if`].
#[inline(always)]
unsafe fn ld_words4_if(p: bool, a: u64) -> [u32; 4] {
    [
        ld_u32_if(p, a),
        ld_u32_if(p, a + 4),
        ld_u32_if(p, a + 8),
        ld_u32_if(p, a + 12),
    ]
}

/// 1-byte read-only load, zero-extended.
#[inline(always)]
unsafe fn ld_u8(a: u64) -> u32 {
    let v: u16;
    asm!("ld.global.nc.u8 {v}, [{a}];", v = out(reg16) v, a = in(reg64) a,
         options(pure, readonly, nostack));
    u32::from(v)
}

/// `n` consecutive 4-byte words from the 4-byte aligned global address `a`.
#[inline(always)]
unsafe fn ld_words<const N: usize>(a: u64) -> [u32; N] {
    let mut w = [0u32; N];
    let mut i = 0;
    while i < N {
        w[i] = ld_u32(a + 4 * i as u64);
        i += 1;
    }
    w
}

/// Int at byte offset `off` (even) of a word array: a whole word, or the two middle bytes of two.
#[inline(always)]
fn int_at<const N: usize>(w: &[u32; N], off: usize) -> u32 {
    if off.is_multiple_of(4) {
        w[off / 4]
    } else {
        (w[off / 4] >> 16) | (w[off / 4 + 1] << 16)
    }
}

/// Half-word (raw binary16 bits) at byte offset `off` (even) of a word array.
#[inline(always)]
fn half_at<const N: usize>(w: &[u32; N], off: usize) -> u32 {
    (w[off / 4] >> (8 * (off % 4))) & 0xFFFF
}

/// `(d, s)` of a q8_1 block's `ds` word as floats.
#[inline(always)]
fn ds(word: u32) -> (f32, f32) {
    (f16_to_f32(word), f16_to_f32(word >> 16))
}

// ---------------------------------------------------------------------------------------------
// 32-element types: one lane per pair of blocks.

/// The activations of one pair unit: two q8_1 blocks (72 bytes, 4-byte aligned) as words;
/// block `j`'s `ds` is word `9j`, its quant ints words `9j+1 ..= 9j+8`.
#[inline(always)]
unsafe fn ld_act_pair(act: u64) -> [u32; 18] {
    ld_words::<18>(act)
}

/// Weights and activations of one pair unit of a 32-element type, `W` words of weights.
pub struct PairLoads<const W: usize> {
    w: [u32; W],
    a: [u32; 18],
}

impl<const W: usize> Default for PairLoads<W> {
    fn default() -> Self {
        Self {
            w: [0; W],
            a: [0; 18],
        }
    }
}

/// Σ dp4a of the low nibbles of 4 ints (elements `4k..4k+3`) with activation ints `k` and of the
/// high nibbles (elements `16+4k..`) with ints `k+4`; `hi_bits(k)` = (bit-4 words for the low
/// and the high nibbles of int `k`) for 5-bit types, zeros for 4-bit ones.
#[inline(always)]
fn nibble_dot(q: [u32; 4], a: &[u32; 18], j: usize, hi_bits: impl Fn(usize) -> (u32, u32)) -> i32 {
    let mut sumi = 0;
    let mut k = 0;
    while k < 4 {
        let (h0, h1) = hi_bits(k);
        sumi = dp4a((q[k] & 0x0F0F_0F0F) | h0, a[9 * j + 1 + k], sumi);
        sumi = dp4a(((q[k] >> 4) & 0x0F0F_0F0F) | h1, a[9 * j + 5 + k], sumi);
        k += 1;
    }
    sumi
}

/// Four quant ints at byte offset `off` of block data held in words.
#[inline(always)]
fn ints4<const N: usize>(w: &[u32; N], off: usize) -> [u32; 4] {
    [
        int_at(w, off),
        int_at(w, off + 4),
        int_at(w, off + 8),
        int_at(w, off + 12),
    ]
}

/// The fifth bits of elements `4k..4k+3` (`.0`) and `16+4k..` (`.1`) moved to bit 4 of each
/// byte, from `vh = qh >> 4k` (ggml's shifts in `vec_dot_q5_0_q8_1`).
#[inline(always)]
fn q5_high_bits(vh: u32) -> (u32, u32) {
    let lo = ((vh << 4) & 0x10)
        | ((vh << 11) & 0x1000)
        | ((vh << 18) & 0x10_0000)
        | ((vh << 25) & 0x1000_0000);
    let hi = ((vh >> 12) & 0x10)
        | ((vh >> 5) & 0x1000)
        | ((vh << 2) & 0x10_0000)
        | ((vh << 9) & 0x1000_0000);
    (lo, hi)
}

macro_rules! pair_type {
    ($name:ident, $block:ty, $words:expr, $doc:literal, |$l:ident, $j:ident, $base:ident| $body:block) => {
        #[doc = $doc]
        pub struct $name;
        const _: () = assert!(2 * size_of::<$block>() == 4 * $words);
        impl WeightType for $name {
            const QK: u32 = GEMV_PAIR_QK;
            const UNIT_BYTES: u64 = 2 * size_of::<$block>() as u64;
            const LANES: u32 = GEMV_PAIR_LANES;
            type Loads = PairLoads<$words>;
            #[inline(always)]
            unsafe fn load(w: u64, act: u64, _part: u32) -> Self::Loads {
                PairLoads {
                    w: ld_words::<$words>(w),
                    a: ld_act_pair(act),
                }
            }
            #[inline(always)]
            fn dot(l: &Self::Loads, _part: u32) -> f32 {
                // Both blocks written out with constant arguments so every word index is a
                // constant once inlined (a dynamic index would put the arrays in local memory).
                $name::block_dot(l, 0, 0) + $name::block_dot(l, 1, size_of::<$block>())
            }
            const TAIL: bool = true;
            #[inline(always)]
            unsafe fn load_shifted(w: u64, act: u64, _part: u32) -> Self::Loads {
                let raw = ld_words::<{ $words + 1 }>(w - 2);
                let mut words = [0u32; $words];
                let mut i = 0;
                while i < $words {
                    words[i] = funnel_r(raw[i], raw[i + 1], 16);
                    i += 1;
                }
                PairLoads {
                    w: words,
                    a: ld_act_pair(act),
                }
            }
            #[inline(always)]
            unsafe fn tail_dot(w: u64, act: u64) -> f32 {
                // The block as 2-byte halves: it may start at either alignment, and a word read
                // past its end could leave the buffer (the last row's block ends 2 bytes short
                // of a word boundary when the row count is odd).
                let mut l = PairLoads::<$words>::default();
                let mut h = 0;
                while h < size_of::<$block>() / 2 {
                    l.w[h / 2] |= ld_u16(w + 2 * h as u64) << (16 * (h % 2));
                    h += 1;
                }
                let mut i = 0;
                while i < 9 {
                    l.a[i] = ld_u32(act + 4 * i as u64);
                    i += 1;
                }
                $name::block_dot(&l, 0, 0)
            }
        }
        impl $name {
            /// Block `j` (at byte `base` of the unit) of a pair unit.
            #[inline(always)]
            fn block_dot($l: &PairLoads<$words>, $j: usize, $base: usize) -> f32 $body
        }
    };
}

pair_type!(
    Q4_0,
    BlockQ4_0,
    9,
    "Q4_0: `d·(sumi·d8 − 8·s8)` per block (ggml applies `−4·s8` in each of its two calls).",
    |l, j, base| {
        let d = f16_to_f32(half_at(&l.w, base + offset_of!(BlockQ4_0, d)));
        let q = ints4(&l.w, base + offset_of!(BlockQ4_0, qs));
        let sumi = nibble_dot(q, &l.a, j, |_| (0, 0));
        let (d8, s8) = ds(l.a[9 * j]);
        d * (sumi as f32 * d8 - 8.0 * s8)
    }
);

pair_type!(
    Q5_0,
    BlockQ5_0,
    11,
    "Q5_0: `d·(sumi·d8 − 16·s8)` per block, bit 4 of each quant from `qh`.",
    |l, j, base| {
        let d = f16_to_f32(half_at(&l.w, base + offset_of!(BlockQ5_0, d)));
        let qh = int_at(&l.w, base + offset_of!(BlockQ5_0, qh));
        let q = ints4(&l.w, base + offset_of!(BlockQ5_0, qs));
        let sumi = nibble_dot(q, &l.a, j, |k| q5_high_bits(qh >> (4 * k)));
        let (d8, s8) = ds(l.a[9 * j]);
        d * (sumi as f32 * d8 - 16.0 * s8)
    }
);

pair_type!(
    Q5_1,
    BlockQ5_1,
    12,
    "Q5_1: `sumi·d·d8 + m·s8` per block (f32 scale products, as the oracle).",
    |l, j, base| {
        let d = f16_to_f32(half_at(&l.w, base + offset_of!(BlockQ5_1, d)));
        let m = f16_to_f32(half_at(&l.w, base + offset_of!(BlockQ5_1, m)));
        let qh = int_at(&l.w, base + offset_of!(BlockQ5_1, qh));
        let q = ints4(&l.w, base + offset_of!(BlockQ5_1, qs));
        let sumi = nibble_dot(q, &l.a, j, |k| q5_high_bits(qh >> (4 * k)));
        let (d8, s8) = ds(l.a[9 * j]);
        sumi as f32 * (d * d8) + m * s8
    }
);

pair_type!(
    Q8_0,
    BlockQ8_0,
    17,
    "Q8_0: `d·d8·Σ dp4a` per block (`s` of the activations unused).",
    |l, j, base| {
        let d = f16_to_f32(half_at(&l.w, base + offset_of!(BlockQ8_0, d)));
        let qs = base + offset_of!(BlockQ8_0, qs);
        let mut sumi = 0;
        let mut k = 0;
        while k < 8 {
            sumi = dp4a(int_at(&l.w, qs + 4 * k), l.a[9 * j + 1 + k], sumi);
            k += 1;
        }
        d * f16_to_f32(l.a[9 * j]) * sumi as f32
    }
);

/// `KVALUES_IQ4NL` as four little-endian words (bytes `4i..4i+4` in word `i`).
const IQ4NL_WORDS: [u32; 4] = {
    let t = KVALUES_IQ4NL;
    let mut w = [0u32; 4];
    let mut i = 0;
    while i < 16 {
        w[i / 4] |= (t[i] as u8 as u32) << (8 * (i % 4));
        i += 1;
    }
    w
};

/// Code-book bytes of the four nibbles in the low 16 bits of `sel`, via two byte permutes
/// (nibble values 0..7 from words 0-1, 8..15 from words 2-3) and a third that picks per nibble.
#[inline(always)]
fn iq4nl_lookup4(sel: u32) -> u32 {
    let idx = sel & 0x7777;
    let low = prmt(IQ4NL_WORDS[0], IQ4NL_WORDS[1], idx);
    let high = prmt(IQ4NL_WORDS[2], IQ4NL_WORDS[3], idx);
    prmt(low, high, 0x3210 | ((sel & 0x8888) >> 1))
}

/// Code-book values of the 8 nibbles of `q`: (low nibbles of bytes 0..3, high nibbles).
#[inline(always)]
fn iq4nl_values(q: u32) -> (u32, u32) {
    let t0 = iq4nl_lookup4(q);
    let t1 = iq4nl_lookup4(q >> 16);
    (prmt(t0, t1, 0x6420), prmt(t0, t1, 0x7531))
}

pair_type!(
    Iq4Nl,
    BlockIq4Nl,
    9,
    "IQ4_NL: `d·d8·Σ dp4a(codebook bytes, q8)` per block.",
    |l, j, base| {
        let d = f16_to_f32(half_at(&l.w, base + offset_of!(BlockIq4Nl, d)));
        let q = ints4(&l.w, base + offset_of!(BlockIq4Nl, qs));
        let mut sumi = 0;
        let mut k = 0;
        while k < 4 {
            let (lo, hi) = iq4nl_values(q[k]);
            sumi = dp4a(lo, l.a[9 * j + 1 + k], sumi);
            sumi = dp4a(hi, l.a[9 * j + 5 + k], sumi);
            k += 1;
        }
        d * f16_to_f32(l.a[9 * j]) * sumi as f32
    }
);

// ---------------------------------------------------------------------------------------------
// Q4_K / Q5_K: 8 lanes per super-block.
//
// Lane part `c ∈ 0..8` owns the 16-byte `qs` chunk `c`: pair `p = c/2`, positions
// `16·(c%2) .. +16` of sub-blocks `2p` (low nibbles) and `2p+1` (high nibbles), 32 weights,
// read with one 16-byte load (both types' blocks and `qs` are 16-byte aligned). The 16-byte
// header (d, dmin, scales) is read once per super-block, one word by each of four lanes, and
// shuffled to the others; Q5_K's two 16-byte `qh` chunks likewise by two lanes. Each lane reads
// `ds` and 4 ints of q8_1 blocks 2p and 2p+1.

/// What a Q4_K/Q5_K lane loads from one super-block.
#[derive(Default)]
pub struct KLoads {
    /// Header word `c − HEAD_LANE` for the four lanes that read one, else 0.
    head: u32,
    qs: [u32; 4],
    /// Q5_K: `qh` chunk `c` for lanes 0 and 1, else zeros.
    qh: [u32; 4],
    ds: [u32; 2],
    u: [[u32; 4]; 2],
}

/// First of the four lanes that read a header word: Q4_K lanes 0..4, Q5_K lanes 4..8 (lanes 0
/// and 1 read Q5_K's `qh`).
const Q4K_HEAD_LANE: u32 = 0;
const Q5K_HEAD_LANE: u32 = 4;

#[inline(always)]
unsafe fn k_act(act: u64, c: u32) -> ([u32; 2], [[u32; 4]; 2]) {
    let pair = (c / 2) as u64;
    let lo = act + 2 * pair * Q8_BYTES;
    let hi = lo + Q8_BYTES;
    let pos = Q8_QS_OFF + 16 * (c % 2) as u64;
    (
        [ld_u32(lo), ld_u32(hi)],
        [ld_words::<4>(lo + pos), ld_words::<4>(hi + pos)],
    )
}

/// Lane `c`'s header word if it is one of the four header lanes starting at `first`.
#[inline(always)]
unsafe fn k_head_word(w: u64, c: u32, first: u32) -> u32 {
    let k = c.wrapping_sub(first);
    ld_u32_if(k < 4, w + 4 * (k % 4) as u64)
}

/// The whole 16-byte header, gathered from the group's four header lanes.
#[inline(always)]
fn k_header(own: u32, first: u32) -> [u32; 4] {
    let base = (lane_id() & !7) + first;
    [
        shfl_idx(own, base),
        shfl_idx(own, base + 1),
        shfl_idx(own, base + 2),
        shfl_idx(own, base + 3),
    ]
}

/// 6-bit (scale, min) of sub-blocks `2p` (low byte) and `2p+1` (high byte), the 16-bit form of
/// ggml's `get_scale_min_k4` applied to header words 1..3.
#[inline(always)]
fn k_scales(head: &[u32; 4], c: u32) -> (u32, u32) {
    let pair = c / 2;
    let sh = 16 * (pair % 2);
    let a = (head[1] >> sh) & 0xFFFF;
    let b = (head[2] >> sh) & 0xFFFF;
    let cc = (head[3] >> sh) & 0xFFFF;
    // Both decodes, combined by a mask rather than a branch (the hot loop stays branch-free).
    let upper = 0u32.wrapping_sub((pair >= 2) as u32);
    let sc_hi = (cc & 0x0F0F) | ((a >> 2) & 0x3030);
    let m_hi = ((cc >> 4) & 0x0F0F) | ((b >> 2) & 0x3030);
    (
        (sc_hi & upper) | (a & 0x3F3F & !upper),
        (m_hi & upper) | (b & 0x3F3F & !upper),
    )
}

/// `d·Σ d8·sc·dot − dmin·Σ d8·m·Σq8` over the lane's two sub-blocks; `hbit(k)` = the bit-4
/// words of int `k` for the low and high nibbles.
#[inline(always)]
fn k_dot(l: &KLoads, head: &[u32; 4], c: u32, hbit: impl Fn(usize) -> (u32, u32)) -> f32 {
    let (sc, m) = k_scales(head, c);
    let mut dot_lo = 0;
    let mut dot_hi = 0;
    let mut sum_lo = 0;
    let mut sum_hi = 0;
    let mut k = 0;
    while k < 4 {
        let (h0, h1) = hbit(k);
        dot_lo = dp4a((l.qs[k] & 0x0F0F_0F0F) | h0, l.u[0][k], dot_lo);
        dot_hi = dp4a(((l.qs[k] >> 4) & 0x0F0F_0F0F) | h1, l.u[1][k], dot_hi);
        sum_lo = dp4a(0x0101_0101, l.u[0][k], sum_lo);
        sum_hi = dp4a(0x0101_0101, l.u[1][k], sum_hi);
        k += 1;
    }
    let d8_lo = f16_to_f32(l.ds[0]);
    let d8_hi = f16_to_f32(l.ds[1]);
    let sumf_d =
        d8_lo * (dot_lo * (sc & 0xFF) as i32) as f32 + d8_hi * (dot_hi * (sc >> 8) as i32) as f32;
    let sumf_m =
        d8_lo * (sum_lo * (m & 0xFF) as i32) as f32 + d8_hi * (sum_hi * (m >> 8) as i32) as f32;
    f16_to_f32(head[0]) * sumf_d - f16_to_f32(head[0] >> 16) * sumf_m
}

/// Q4_K (`vec_dot_q4_K_q8_1`): min correction from the integer Σq8 times `d8`, not `ds.y`.
pub struct Q4K;
const _: () = assert!(size_of::<BlockQ4K>().is_multiple_of(16) && offset_of!(BlockQ4K, qs) == 16);
const _: () = assert!(offset_of!(BlockQ4K, dmin) == 2 && offset_of!(BlockQ4K, scales) == 4);

impl WeightType for Q4K {
    const QK: u32 = GEMV_KQUANT_QK;
    const UNIT_BYTES: u64 = size_of::<BlockQ4K>() as u64;
    const LANES: u32 = GEMV_KQUANT_LANES;
    type Loads = KLoads;
    #[inline(always)]
    unsafe fn load(w: u64, act: u64, c: u32) -> KLoads {
        let (ds, u) = k_act(act, c);
        KLoads {
            head: k_head_word(w, c, Q4K_HEAD_LANE),
            qs: ld_v4(w + offset_of!(BlockQ4K, qs) as u64 + 16 * c as u64),
            qh: [0; 4],
            ds,
            u,
        }
    }
    #[inline(always)]
    fn dot(l: &KLoads, c: u32) -> f32 {
        let head = k_header(l.head, Q4K_HEAD_LANE);
        k_dot(l, &head, c, |_| (0, 0))
    }
}

/// Q5_K (`vec_dot_q5_K_q8_1`): Q4_K plus bit `2p` (low nibbles) / `2p+1` (high) of `qh[pos]`
/// as bit 4; the lane's 16 `qh` bytes are chunk `c%2` of `qh`, read by lane `c%2`.
pub struct Q5K;
const _: () = assert!(size_of::<BlockQ5K>().is_multiple_of(16) && offset_of!(BlockQ5K, qh) == 16);
const _: () = assert!(offset_of!(BlockQ5K, qs) == 48 && offset_of!(BlockQ5K, scales) == 4);

impl WeightType for Q5K {
    const QK: u32 = GEMV_KQUANT_QK;
    const UNIT_BYTES: u64 = size_of::<BlockQ5K>() as u64;
    const LANES: u32 = GEMV_KQUANT_LANES;
    type Loads = KLoads;
    #[inline(always)]
    unsafe fn load(w: u64, act: u64, c: u32) -> KLoads {
        let (ds, u) = k_act(act, c);
        KLoads {
            head: k_head_word(w, c, Q5K_HEAD_LANE),
            qs: ld_v4(w + offset_of!(BlockQ5K, qs) as u64 + 16 * c as u64),
            qh: ld_v4_if(
                c < 2,
                w + offset_of!(BlockQ5K, qh) as u64 + 16 * (c % 2) as u64,
            ),
            ds,
            u,
        }
    }
    #[inline(always)]
    fn dot(l: &KLoads, c: u32) -> f32 {
        let head = k_header(l.head, Q5K_HEAD_LANE);
        let src = (lane_id() & !7) + c % 2;
        let qh = [
            shfl_idx(l.qh[0], src),
            shfl_idx(l.qh[1], src),
            shfl_idx(l.qh[2], src),
            shfl_idx(l.qh[3], src),
        ];
        let sh = 2 * (c / 2);
        k_dot(l, &head, c, |k| {
            let vh = qh[k] >> sh;
            ((vh << 4) & 0x1010_1010, (vh << 3) & 0x1010_1010)
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Q3_K: 4 lanes per super-block.
//
// Lane part `t ∈ 0..4` owns positions `8t .. 8t+8` of every 32-element group: element
// `128n + 32k + 8t + i` for chunk `n ∈ 0..2`, bit pair `k ∈ 0..4`: 64 weights, 8 bytes of
// `hmask`, 2×8 bytes of `qs`, all 12 scale bytes and `d`.
//
// Blocks are 110 bytes (2-byte aligned), so fields are read as aligned words from `w & !3` and
// re-aligned by a funnel shift of `s = 8·(w & 3)`. Each byte is read once per super-block: lane
// `t` reads two words of `hmask` and two of each `qs` half and takes the third of each from lane
// `t+1` (lane 3 from the lane holding the next field's first word); the scales are four words
// from `(w + 94) & !3`, one per lane, ending inside the block; lane 0 reads `d`.

/// What a Q3_K lane loads from one super-block (own words before the shuffles).
#[derive(Default)]
pub struct Q3KLoads {
    s: u32,
    hm: [u32; 2],
    q0: [u32; 2],
    q1: [u32; 2],
    sc: u32,
    d: u32,
    ds: [u32; 8],
    u: [[u32; 2]; 8],
}

/// Q3_K (`vec_dot_q3_K_q8_1`): quants `low2 − 4·!hbit`, signed 6-bit scales, one `d`.
pub struct Q3K;
const _: () = assert!(offset_of!(BlockQ3K, hmask) == 0 && offset_of!(BlockQ3K, qs) == 32);
const _: () = assert!(offset_of!(BlockQ3K, scales) == 96 && offset_of!(BlockQ3K, d) == 108);

/// Two ints from three aligned words shifted right by `s` bits (0 or 16).
#[inline(always)]
fn funnel2(w: [u32; 2], next: u32, s: u32) -> [u32; 2] {
    [
        crate::ptx::funnel_r(w[0], w[1], s),
        crate::ptx::funnel_r(w[1], next, s),
    ]
}

impl WeightType for Q3K {
    const QK: u32 = GEMV_KQUANT_QK;
    const UNIT_BYTES: u64 = size_of::<BlockQ3K>() as u64;
    const LANES: u32 = GEMV_Q3K_LANES;
    type Loads = Q3KLoads;
    #[inline(always)]
    unsafe fn load(w: u64, act: u64, t: u32) -> Q3KLoads {
        let pos = 8 * t as u64;
        let mut ds = [0u32; 8];
        let mut u = [[0u32; 2]; 8];
        let mut g = 0;
        while g < 8 {
            let q8 = act + g as u64 * Q8_BYTES;
            ds[g] = ld_u32(q8);
            u[g] = ld_words::<2>(q8 + Q8_QS_OFF + pos);
            g += 1;
        }
        let wa = w & !3;
        let qs = wa + offset_of!(BlockQ3K, qs) as u64;
        Q3KLoads {
            s: 8 * (w & 3) as u32,
            hm: ld_words::<2>(wa + offset_of!(BlockQ3K, hmask) as u64 + pos),
            q0: ld_words::<2>(qs + pos),
            q1: ld_words::<2>(qs + 32 + pos),
            // [w+92, w+108) when w is 4-aligned, [w+94, w+110) otherwise.
            sc: ld_u32(((w + offset_of!(BlockQ3K, scales) as u64 - 2) & !3) + 4 * t as u64),
            d: ld_u16_if(t == 0, w + offset_of!(BlockQ3K, d) as u64),
            ds,
            u,
        }
    }
    #[inline(always)]
    fn dot(l: &Q3KLoads, t: u32) -> f32 {
        let base = lane_id() & !3;
        let next_lane = base + ((t + 1) & 3);
        let last = t == 3;
        // The word after each lane's pair: the next lane's first word; for lane 3 the first
        // word of the next field (q0 of lane 0, q1 of lane 0, then the scale word at
        // `(w & !3) + 96`, which is lane 1's when w is 4-aligned and lane 0's otherwise).
        let hm_a = shfl_idx(l.hm[0], next_lane);
        let hm_b = shfl_idx(l.q0[0], base);
        let q0_a = shfl_idx(l.q0[0], next_lane);
        let q0_b = shfl_idx(l.q1[0], base);
        let q1_a = shfl_idx(l.q1[0], next_lane);
        let q1_b = shfl_idx(l.sc, base + (l.s == 0) as u32);
        let hm = funnel2(l.hm, if last { hm_b } else { hm_a }, l.s);
        let ql = [
            funnel2(l.q0, if last { q0_b } else { q0_a }, l.s),
            funnel2(l.q1, if last { q1_b } else { q1_a }, l.s),
        ];
        let scw = [
            shfl_idx(l.sc, base),
            shfl_idx(l.sc, base + 1),
            shfl_idx(l.sc, base + 2),
            shfl_idx(l.sc, base + 3),
        ];
        let ssc = 32 - l.s;
        let sc = [
            crate::ptx::funnel_r(scw[0], scw[1], ssc),
            crate::ptx::funnel_r(scw[1], scw[2], ssc),
            crate::ptx::funnel_r(scw[2], scw[3], ssc),
        ];
        let d = shfl_idx(l.d, base);

        let hi = (t >= 2) as u32;
        let mut sumf = 0.0f32;
        let mut n = 0;
        while n < 2 {
            let mut k = 0;
            while k < 4 {
                // Sub-block j = 8n + 2k + hi; scale packing as `ingot_abi::blocks::q3k_scale`.
                let j = 8 * n + 2 * k + hi;
                let low = (sc[(j % 8 / 4) as usize] >> (8 * (j % 4) + 4 * (j / 8))) & 0xF;
                let high = (sc[2] >> (8 * (j % 4) + 2 * (j / 4))) & 3;
                let scale = (low | (high << 4)) as i32 - 32;
                // Low two bits at bit 2k of qs, high bit at bit 4n+k of hmask; a clear high
                // bit means −4, i.e. byte = low2 | 0xFC (two's complement).
                let mut dot = 0;
                let mut i = 0;
                while i < 2 {
                    let low2 = (ql[n as usize][i] >> (2 * k)) & 0x0303_0303;
                    let neg = (!hm[i] >> (4 * n + k)) & 0x0101_0101;
                    dot = dp4a(
                        low2 | neg.wrapping_mul(0xFC),
                        l.u[(4 * n + k) as usize][i],
                        dot,
                    );
                    i += 1;
                }
                sumf += f16_to_f32(l.ds[(4 * n + k) as usize]) * (dot * scale) as f32;
                k += 1;
            }
            n += 1;
        }
        f16_to_f32(d) * sumf
    }
}

// ---------------------------------------------------------------------------------------------
// Q6_K: 8 lanes per super-block.
//
// Lane part `p ∈ 0..8` does ggml's calls `iqs = 4p .. 4p+3`, which share chunk `n = p/4`,
// `bq8_offset = 4n + (p%4)/2`, `vh_shift = 2·((p%4)/2)` and `scale_offset = 8n + p%4`: the 16
// bytes of `ql` at `16p`, the 16 bytes of `qh` at `32n + 16·(p%2)`, scales `scale_offset` and
// `+4`, and 4 ints of q8_1 blocks `bq8_offset` and `+2`.
//
// Blocks are 210 bytes (2-byte aligned), so a lane's 16 bytes span five aligned words from
// `w & !3`, re-aligned by a funnel shift of `s = 8·(w & 3)`. Each byte is read once per
// super-block: lane `p` reads four `ql` words and takes the fifth from lane `p+1` (lane 7 reads
// it); `qh` is read by lanes 0, 1, 4, 5 (chunk `(n, p%2)`) and shuffled to lanes 2, 3, 6, 7, each
// reader taking its fifth word from the next reader (lane 5 reads it); lane 0 reads `d`.

/// What a Q6_K lane loads from one super-block (own words before the shuffles).
#[derive(Default)]
pub struct Q6KLoads {
    /// Funnel shift re-aligning the block: `8·(w & 3)`.
    s: u32,
    ql: [u32; 4],
    /// Lane 7: the aligned word after the `ql` words; lane 5: after the `qh` words.
    tail: u32,
    /// Lanes 0, 1, 4, 5: their `qh` chunk's four aligned words.
    qh: [u32; 4],
    sc: [u32; 2],
    /// Lane 0: `d`.
    d: u32,
    ds: [u32; 2],
    u: [[u32; 4]; 2],
}

/// Q6_K (`vec_dot_q6_K_q8_1`): `d·Σ d8·sc·dp4a(q − 32, q8)`.
pub struct Q6K;
const _: () = assert!(offset_of!(BlockQ6K, ql) == 0 && offset_of!(BlockQ6K, qh) == 128);
const _: () = assert!(offset_of!(BlockQ6K, scales) == 192 && offset_of!(BlockQ6K, d) == 208);

/// Bytewise `x − 32` for bytes `x ∈ 0..64`, without borrows between bytes: flipping bit 5 gives
/// `x − 32` for `x ≥ 32` and `x + 32` otherwise; the latter then needs bits 6-7 set
/// (`x + 32 + 192 ≡ x − 32 mod 256`), and exactly those bytes have bit 5 set after the flip.
#[inline(always)]
fn sub32_bytes(x: u32) -> u32 {
    let r = x ^ 0x2020_2020;
    r | (r & 0x2020_2020).wrapping_mul(6)
}

/// Four ints from five aligned words, shifted right by `s` bits (0 or 16).
#[inline(always)]
fn funnel4(w: [u32; 4], next: u32, s: u32) -> [u32; 4] {
    [
        crate::ptx::funnel_r(w[0], w[1], s),
        crate::ptx::funnel_r(w[1], w[2], s),
        crate::ptx::funnel_r(w[2], w[3], s),
        crate::ptx::funnel_r(w[3], next, s),
    ]
}

impl WeightType for Q6K {
    const QK: u32 = GEMV_KQUANT_QK;
    const UNIT_BYTES: u64 = size_of::<BlockQ6K>() as u64;
    const LANES: u32 = GEMV_KQUANT_LANES;
    type Loads = Q6KLoads;
    #[inline(always)]
    unsafe fn load(w: u64, act: u64, p: u32) -> Q6KLoads {
        let n = (p / 4) as u64;
        let so = 8 * n + (p % 4) as u64;
        let bq8 = 4 * n + ((p % 4) / 2) as u64;
        let lo = act + bq8 * Q8_BYTES;
        let hi = lo + 2 * Q8_BYTES;
        let pos = Q8_QS_OFF + 16 * (p % 2) as u64;
        let sc = w + offset_of!(BlockQ6K, scales) as u64 + so;
        // Aligned base of the block; every word read below lies inside the block (the last
        // `ql` and `qh` tails end at most 2 bytes into `qh` and `scales`).
        let wa = w & !3;
        let qh_at = wa + offset_of!(BlockQ6K, qh) as u64;
        Q6KLoads {
            s: 8 * (w & 3) as u32,
            ql: ld_words::<4>(wa + 16 * p as u64),
            tail: ld_u32_if(p == 7 || p == 5, qh_at + if p == 7 { 0 } else { 64 }),
            qh: ld_words4_if(p % 4 < 2, qh_at + 32 * n + 16 * (p % 2) as u64),
            sc: [ld_u8(sc), ld_u8(sc + 4)],
            d: ld_u16_if(p == 0, w + offset_of!(BlockQ6K, d) as u64),
            ds: [ld_u32(lo), ld_u32(hi)],
            u: [ld_words::<4>(lo + pos), ld_words::<4>(hi + pos)],
        }
    }
    #[inline(always)]
    fn dot(l: &Q6KLoads, p: u32) -> f32 {
        let base = lane_id() & !7;
        // ql: the fifth word is the next lane's first (lane 7 read its own).
        let next = shfl_idx(l.ql[0], base + ((p + 1) & 7));
        let ql = funnel4(l.ql, if p == 7 { l.tail } else { next }, l.s);
        // qh: reader lane r = p with bit 1 cleared (0, 1, 4, 5); its successor among the
        // readers holds the fifth word (lane 5 read its own into `tail`).
        let r = p & !2;
        let qh_w = [
            shfl_idx(l.qh[0], base + r),
            shfl_idx(l.qh[1], base + r),
            shfl_idx(l.qh[2], base + r),
            shfl_idx(l.qh[3], base + r),
        ];
        let succ = if r == 1 { 4 } else { r + 1 };
        let qh_next = shfl_idx(l.qh[0], base + (succ & 7));
        let qh_tail = shfl_idx(l.tail, base + 5);
        let qh = funnel4(qh_w, if r == 5 { qh_tail } else { qh_next }, l.s);
        let d = shfl_idx(l.d, base);

        let vh_shift = 2 * ((p % 4) / 2);
        let mut sumf = 0.0f32;
        let mut i = 0;
        while i < 2 {
            let mut dot = 0;
            let mut t = 0;
            while t < 4 {
                let vil = (ql[t] >> (4 * i)) & 0x0F0F_0F0F;
                let vih = ((qh[t] >> (vh_shift + 4 * i as u32)) << 4) & 0x3030_3030;
                dot = dp4a(sub32_bytes(vil | vih), l.u[i][t], dot);
                t += 1;
            }
            let sc = l.sc[i] as u8 as i8 as i32;
            sumf += f16_to_f32(l.ds[i]) * (dot * sc) as f32;
            i += 1;
        }
        f16_to_f32(d) * sumf
    }
}
