//! 32-element types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL): one lane per pair of blocks.

use super::{ActSource, WeightType};
use crate::intrinsics::{dp4a, f16_to_f32, funnel_r, ld_u16, ld_words, lds_words, prmt};
use core::mem::{offset_of, size_of};
use ingot_abi::blocks::{
    BlockIq4Nl, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, KVALUES_IQ4NL,
};
use ingot_abi::launch::GemvUnit;
use ingot_abi::weight_types::GemvType;

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

/// The activations of one q8_1 block as its 9 words in place: `ds`, then the 8 quant ints.
#[inline(always)]
unsafe fn ld_act_block<A: ActSource>(act: A, b: u64) -> [u32; 9] {
    let d = act.ds(b);
    let q = act.qs::<8>(b, 0);
    [d, q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]]
}

/// The activations of one pair unit: two q8_1 blocks as words; block `j`'s `ds` is word `9j`,
/// its quant ints words `9j+1 ..= 9j+8`.
#[inline(always)]
unsafe fn ld_act_pair<A: ActSource>(act: A) -> [u32; 18] {
    let (b0, b1) = (ld_act_block(act, 0), ld_act_block(act, 1));
    let mut a = [0u32; 18];
    let mut i = 0;
    while i < 9 {
        a[i] = b0[i];
        a[9 + i] = b1[i];
        i += 1;
    }
    a
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
/// byte, from `vh = qh >> 4k`: bits 0..3 of `vh` for `.0` and bits 16..19 for `.1`, the words
/// ggml's shifts in `vec_dot_q5_0_q8_1` give (the oracle keeps those shifts). One multiply
/// spreads a nibble `x` over the bytes: `x·0x0204_0810 = x<<4 | x<<11 | x<<18 | x<<25`, four
/// copies that cannot overlap or carry (`x < 16`), whose bits 4, 12, 20 and 28 are `x`'s bits
/// 0 to 3; 3 or 4 instructions per word instead of 11.
#[inline(always)]
pub fn q5_high_bits(vh: u32) -> (u32, u32) {
    const SPREAD: u32 = 0x0204_0810;
    const BIT4: u32 = 0x1010_1010;
    (
        ((vh & 0xF).wrapping_mul(SPREAD)) & BIT4,
        (((vh >> 16) & 0xF).wrapping_mul(SPREAD)) & BIT4,
    )
}

macro_rules! pair_type {
    ($name:ident, $block:ty, $words:expr, $doc:literal, |$l:ident, $j:ident, $base:ident| $body:block) => {
        #[doc = $doc]
        pub struct $name;
        const _: () = assert!(2 * size_of::<$block>() == 4 * $words);
        impl WeightType for $name {
            const UNIT: GemvUnit = GemvType::$name.unit();
            type Loads = PairLoads<$words>;
            #[inline(always)]
            unsafe fn load<A: ActSource>(w: u64, act: A, _part: u32) -> Self::Loads {
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
            const STAGED: bool = true;
            #[inline(always)]
            unsafe fn load_staged<A: ActSource>(w: u32, act: A, _part: u32) -> Self::Loads {
                PairLoads {
                    w: lds_words::<$words>(w),
                    a: ld_act_pair(act),
                }
            }
            #[inline(always)]
            unsafe fn load_shifted<A: ActSource>(w: u64, act: A, _part: u32) -> Self::Loads {
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
            unsafe fn tail_dot<A: ActSource>(w: u64, act: A) -> f32 {
                // The block as 2-byte halves: it may start at either alignment, and a word read
                // past its end could leave the buffer (the last row's block ends 2 bytes short
                // of a word boundary when the row count is odd).
                let mut l = PairLoads::<$words>::default();
                let mut h = 0;
                while h < size_of::<$block>() / 2 {
                    l.w[h / 2] |= ld_u16(w + 2 * h as u64) << (16 * (h % 2));
                    h += 1;
                }
                let b = ld_act_block(act, 0);
                let mut i = 0;
                while i < 9 {
                    l.a[i] = b[i];
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
    Q4_1,
    BlockQ4_1,
    10,
    "Q4_1: `sumi·d·d8 + m·s8` per block (f32 scale products, as the oracle; Q5_1 without `qh`).",
    |l, j, base| {
        let d = f16_to_f32(half_at(&l.w, base + offset_of!(BlockQ4_1, d)));
        let m = f16_to_f32(half_at(&l.w, base + offset_of!(BlockQ4_1, m)));
        let q = ints4(&l.w, base + offset_of!(BlockQ4_1, qs));
        let sumi = nibble_dot(q, &l.a, j, |_| (0, 0));
        let (d8, s8) = ds(l.a[9 * j]);
        sumi as f32 * (d * d8) + m * s8
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
pub fn iq4nl_values(q: u32) -> (u32, u32) {
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
