//! The 32-weight types in `mmq`: Q4_0 (levels `q − 8 ∈ −8..7`, `q` a nibble of `qs`), IQ4_NL
//! (levels `KVALUES_IQ4NL[q]`), Q5_0 (levels `q − 16 ∈ −16..15`, `q` five bits from `qs` and
//! `qh`) and Q8_0 (levels as stored), each block's `d` as its sub-block's factor, and per
//! sub-block `acc += d·d8·Σ level·q8`: the decode gemv's Q8_0 and IQ4_NL formula, and for Q4_0
//! and Q5_0 its `d·(d8·Σq·q8 − 8·s8)` and `d·(d8·Σq·q8 − 16·s8)` with `s8 = d8·Σq8` from the
//! integer sum. The types with a min, Q4_1 and Q5_1 (levels `q ∈ 0..16`, `0..32`, `W = d·q +
//! m`), stage the pair `(d, −m)` and fold as Q4_K does (`acc += d·d8·Σq·q8 − (−m)·s8`, the
//! decode gemv's `d·d8·Σq·q8 + m·s8` with `s8` from the integer sum).
//!
//! A step is 8 blocks of each row (`SUBS` sub-blocks, one block each); a row of `ncols/32`
//! blocks may end inside its last step, whose blocks past the row read nothing (zero pair, so
//! they add zeros). Q4_1 and Q5_1 blocks are `4n` bytes (20, 24), read as `n` aligned words.
//! The others are `4n − 2` bytes (18, 22, 34), so every other one starts 2 bytes off a 4-byte
//! word: each block is read as `n` aligned words from its start rounded down, the word the
//! block only begins or ends in read as the 16 bits the block has of it. Either way each byte
//! of the block is read once and no byte past it (not even past the last row).

use super::q4k::Q4K;
use super::{MmqWeights, STRIDE, SUBS, W_PAIR_STRIDE};
use crate::intrinsics::{
    f16_to_f32, fma, funnel_r, ld_u16_if, ld_u32_if, mma_s8_s32, sts_v2, sts_v4,
};
use crate::vecdot::{iq4nl_values, q5_high_bits};
use core::mem::{offset_of, size_of};
use ingot_abi::blocks::{BlockIq4Nl, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, QK8_1};
use ingot_abi::launch::{MMQ_ROWS, MMQ_THREADS};

/// Q4_0: `W = d·(q − 8)`.
pub struct Q4_0;
/// IQ4_NL: `W = d·KVALUES_IQ4NL[q]`.
pub struct Iq4Nl;
/// Q5_0: `W = d·(q − 16)`.
pub struct Q5_0;
/// Q8_0: `W = d·q`.
pub struct Q8_0;
/// Q4_1: `W = d·q + m`.
pub struct Q4_1;
/// Q5_1: `W = d·q + m`.
pub struct Q5_1;
const _: () = assert!(offset_of!(BlockQ4_0, d) == 0 && offset_of!(BlockQ4_0, qs) == 2);
const _: () = assert!(size_of::<BlockQ4_0>() == 4 * 5 - 2);
const _: () = assert!(offset_of!(BlockIq4Nl, d) == 0 && offset_of!(BlockIq4Nl, qs) == 2);
const _: () = assert!(size_of::<BlockIq4Nl>() == 4 * 5 - 2);
const _: () = assert!(offset_of!(BlockQ5_0, d) == 0 && offset_of!(BlockQ5_0, qh) == 2);
const _: () = assert!(offset_of!(BlockQ5_0, qs) == 6 && size_of::<BlockQ5_0>() == 4 * 6 - 2);
const _: () = assert!(offset_of!(BlockQ8_0, d) == 0 && offset_of!(BlockQ8_0, qs) == 2);
const _: () = assert!(size_of::<BlockQ8_0>() == 4 * 9 - 2);
const _: () = assert!(offset_of!(BlockQ4_1, d) == 0 && offset_of!(BlockQ4_1, m) == 2);
const _: () = assert!(offset_of!(BlockQ4_1, qs) == 4 && size_of::<BlockQ4_1>() == 4 * 5);
const _: () = assert!(offset_of!(BlockQ5_1, d) == 0 && offset_of!(BlockQ5_1, m) == 2);
const _: () = assert!(offset_of!(BlockQ5_1, qh) == 4 && offset_of!(BlockQ5_1, qs) == 8);
const _: () = assert!(size_of::<BlockQ5_1>() == 4 * 6);

/// `(row, block)` items of a step per thread.
const ITEMS: u32 = MMQ_ROWS * SUBS / MMQ_THREADS;
const _: () = assert!(MMQ_ROWS * SUBS == ITEMS * MMQ_THREADS && SUBS == 8);

/// The `4n − 2` bytes of a block at `a` (2-byte aligned) as `n` words, little-endian from `a`
/// (the last word's high half zero), or zeros without reading if `!live`. With `wa = a & !3`:
/// the words at `wa + 4 .. wa + 4(n−1)` lie inside the block; the one at `wa` does when `a` is
/// aligned, else only its high half (`d`); the one at `wa + 4(n−1)` does when `a` is not, else
/// only its low half.
#[inline(always)]
unsafe fn ld_block<const N: usize>(live: bool, a: u64) -> [u32; N] {
    let (wa, odd) = (a & !3, a & 2 != 0);
    let mut s = [0u32; N];
    s[0] = ld_u32_if(live && !odd, wa) | (ld_u16_if(live && odd, a) << 16);
    let mut i = 1;
    while i < N - 1 {
        s[i] = ld_u32_if(live, wa + 4 * i as u64);
        i += 1;
    }
    let end = wa + 4 * (N - 1) as u64;
    s[N - 1] = ld_u32_if(live && odd, end) | ld_u16_if(live && !odd, end);
    let sh = 8 * (a & 3) as u32;
    let mut t = [0u32; N];
    let mut i = 0;
    while i < N {
        t[i] = funnel_r(s[i], if i + 1 < N { s[i + 1] } else { 0 }, sh);
        i += 1;
    }
    t
}

/// The `4n` bytes of a block at `a` (4-byte aligned: blocks and rows are whole words) as `n`
/// words, or zeros without reading if `!live`.
#[inline(always)]
unsafe fn ld_words<const N: usize>(live: bool, a: u64) -> [u32; N] {
    let mut s = [0u32; N];
    let mut i = 0;
    while i < N {
        s[i] = ld_u32_if(live, a + 4 * i as u64);
        i += 1;
    }
    s
}

/// Bytes 2 .. 4 of word `w[i]` and 0 .. 2 of `w[i+1]`: the int at byte offset `4i + 2`.
#[inline(always)]
fn mid<const N: usize>(w: &[u32; N], i: usize) -> u32 {
    funnel_r(w[i], w[i + 1], 16)
}

/// Bytewise `x − H` for bytes `x ∈ 0..2H` (`H` 8 or 16), without borrows between bytes:
/// flipping bit `log2 H` gives `x − H` for `x ≥ H` and `x + H` otherwise; the latter then
/// needs the bits above it set (`x + H + (256 − 2H) ≡ x − H mod 256`), and exactly those bytes
/// have the bit set after the flip; the multiplier `(256 − 2H)/H` turns that bit into
/// `256 − 2H`, inside the byte.
#[inline(always)]
fn sub_bytes<const H: u32>(x: u32) -> u32 {
    const { assert!(H == 8 || H == 16) };
    let bit = H * 0x0101_0101;
    let r = x ^ bit;
    r | (r & bit).wrapping_mul((256 - 2 * H) / H)
}

/// A 32-weight type: how its blocks are read and how a block's words become its sub-block
/// pair and 32 levels.
trait Legacy {
    /// The block at `a` as `N` words (`ld_block`: `4N − 2` bytes; `ld_words`: `4N`), zeros
    /// without reading if `!live`.
    unsafe fn load<const N: usize>(live: bool, a: u64) -> [u32; N] {
        ld_block::<N>(live, a)
    }

    /// The block's sub-block pair (f32 bits, as its `fold` takes it) and its 32 levels (s8,
    /// element order) from its words; zero words give a zero pair.
    fn levels<const N: usize>(w: &[u32; N]) -> ([u32; 2], [u32; 8]);
}

/// The pair of a type without a min: `(d, 0)`, `d` the raw binary16 in the low half of `w0`.
#[inline(always)]
fn d_pair(w0: u32) -> [u32; 2] {
    [f16_to_f32(w0 & 0xFFFF).to_bits(), 0]
}

/// The pair of a type with a min (`d` then `m` as binary16 in `w0`): `(d, −m)`, so that
/// Q4_K's fold, which subtracts `pair[1]·s8`, adds `m·s8`.
#[inline(always)]
fn min_pair(w0: u32) -> [u32; 2] {
    [
        f16_to_f32(w0 & 0xFFFF).to_bits(),
        (-f16_to_f32(w0 >> 16)).to_bits(),
    ]
}

/// The 32 nibbles of a Q4_0 / IQ4_NL block's `qs` (byte 2 on) as `(low, high)` nibble words
/// `k`, each nibble in its own byte: element `4k + i` is the low nibble of `qs[4k + i]` and
/// element `16 + 4k + i` its high nibble, so `low` is level word `k` and `high` word `4 + k`.
#[inline(always)]
fn nibbles<const N: usize>(w: &[u32; N], k: usize) -> (u32, u32) {
    let q = mid(w, k);
    (q & 0x0F0F_0F0F, (q >> 4) & 0x0F0F_0F0F)
}

impl Legacy for Q4_0 {
    #[inline(always)]
    fn levels<const N: usize>(w: &[u32; N]) -> ([u32; 2], [u32; 8]) {
        let mut v = [0u32; 8];
        let mut k = 0;
        while k < 4 {
            let (lo, hi) = nibbles(w, k);
            v[k] = sub_bytes::<8>(lo);
            v[4 + k] = sub_bytes::<8>(hi);
            k += 1;
        }
        (d_pair(w[0]), v)
    }
}

impl Legacy for Iq4Nl {
    #[inline(always)]
    fn levels<const N: usize>(w: &[u32; N]) -> ([u32; 2], [u32; 8]) {
        // The decode gemv's code-book lookup: byte permutes of the nibbles of `qs[4k..4k+4]`.
        let mut v = [0u32; 8];
        let mut k = 0;
        while k < 4 {
            let (lo, hi) = iq4nl_values(mid(w, k));
            v[k] = lo;
            v[4 + k] = hi;
            k += 1;
        }
        (d_pair(w[0]), v)
    }
}

impl Legacy for Q5_0 {
    #[inline(always)]
    fn levels<const N: usize>(w: &[u32; N]) -> ([u32; 2], [u32; 8]) {
        // `qh` at byte 2, `qs` at 6: element k < 16 is the low nibble of `qs[k]`, element
        // 16 + k its high nibble, bit k (16 + k) of `qh` their fifth bit.
        let qh = mid(w, 0);
        let mut v = [0u32; 8];
        let mut k = 0;
        while k < 4 {
            let q = mid(w, 1 + k);
            let (h0, h1) = q5_high_bits(qh >> (4 * k));
            v[k] = sub_bytes::<16>((q & 0x0F0F_0F0F) | h0);
            v[4 + k] = sub_bytes::<16>(((q >> 4) & 0x0F0F_0F0F) | h1);
            k += 1;
        }
        (d_pair(w[0]), v)
    }
}

impl Legacy for Q8_0 {
    #[inline(always)]
    fn levels<const N: usize>(w: &[u32; N]) -> ([u32; 2], [u32; 8]) {
        let mut v = [0u32; 8];
        let mut k = 0;
        while k < 8 {
            v[k] = mid(w, k);
            k += 1;
        }
        (d_pair(w[0]), v)
    }
}

impl Legacy for Q4_1 {
    #[inline(always)]
    unsafe fn load<const N: usize>(live: bool, a: u64) -> [u32; N] {
        ld_words::<N>(live, a)
    }

    #[inline(always)]
    fn levels<const N: usize>(w: &[u32; N]) -> ([u32; 2], [u32; 8]) {
        // `qs` at word 1: element k < 16 is the low nibble of `qs[k]`, element 16 + k its high
        // nibble; the levels are the nibbles (0..15, so s8 as they are).
        let mut v = [0u32; 8];
        let mut k = 0;
        while k < 4 {
            let q = w[1 + k];
            v[k] = q & 0x0F0F_0F0F;
            v[4 + k] = (q >> 4) & 0x0F0F_0F0F;
            k += 1;
        }
        (min_pair(w[0]), v)
    }
}

impl Legacy for Q5_1 {
    #[inline(always)]
    unsafe fn load<const N: usize>(live: bool, a: u64) -> [u32; N] {
        ld_words::<N>(live, a)
    }

    #[inline(always)]
    fn levels<const N: usize>(w: &[u32; N]) -> ([u32; 2], [u32; 8]) {
        // `qh` at word 1, `qs` at 2: as Q5_0, but the levels are `q` itself (0..31, s8 as
        // they are).
        let qh = w[1];
        let mut v = [0u32; 8];
        let mut k = 0;
        while k < 4 {
            let q = w[2 + k];
            let (h0, h1) = q5_high_bits(qh >> (4 * k));
            v[k] = (q & 0x0F0F_0F0F) | h0;
            v[4 + k] = ((q >> 4) & 0x0F0F_0F0F) | h1;
            k += 1;
        }
        (min_pair(w[0]), v)
    }
}

/// Stages thread `tid`'s `ITEMS` blocks of the step (see [`MmqWeights::stage`]): warp-lane
/// `L = tid % 32` takes rows `4·(tid/32) + L%2 + 2·(L/8 % 2)` and that plus 32, block
/// `L/2 % 4 + 4·(L/16)`, so a warp reads 4 rows' 8 consecutive blocks at a time, and the 8
/// lanes of each quarter-warp (2 rows × 4 blocks) store to 8 different 16-byte bank groups
/// (rows 17 units apart, blocks 2). The two rows are staged by two calls, not a loop: LLVM
/// keeps a two-trip loop for Q5_0, a branch per step.
#[inline(always)]
unsafe fn stage_legacy<T: Legacy + MmqWeights, const N: usize>(
    w: u64,
    row_bytes: u64,
    rows: u32,
    subs: u32,
    tid: u32,
    tile: u32,
    pairs: u32,
) {
    const _: () = assert!(ITEMS == 2 && MMQ_THREADS / 32 * 4 == MMQ_ROWS / 2);
    let l = tid % 32;
    let r = 4 * (tid / 32) + l % 2 + 2 * ((l / 8) % 2);
    let b = (l / 2) % 4 + 4 * (l / 16);
    let at = (b * T::BLOCK_BYTES) as u64;
    let live = b < subs;
    stage_block::<T, N>(w + at, row_bytes, r, live && r < rows, b, tile, pairs);
    let r = r + MMQ_ROWS / 2;
    stage_block::<T, N>(w + at, row_bytes, r, live && r < rows, b, tile, pairs);
}

/// Stages block `b` of tile row `r` (`w`: its address in the tile's first row): its levels and
/// its pair, or zeros without reading if `!live`.
#[inline(always)]
unsafe fn stage_block<T: Legacy, const N: usize>(
    w: u64,
    row_bytes: u64,
    r: u32,
    live: bool,
    b: u32,
    tile: u32,
    pairs: u32,
) {
    let words = T::load::<N>(live, w + r as u64 * row_bytes);
    let (pair, v) = T::levels(&words);
    let dst = tile + r * STRIDE + QK8_1 as u32 * b;
    sts_v4(dst, [v[0], v[1], v[2], v[3]]);
    sts_v4(dst + 16, [v[4], v[5], v[6], v[7]]);
    sts_v2(pairs + b * W_PAIR_STRIDE + r * 8, pair);
}

/// One sub-block's products of 16 rows × 8 tokens: `acc += (d·d8)·Σ level·q8`. `d·d8` (two
/// f16 values) is exact in f32, and so is the integer sum (`|Σ| ≤ 32·128·127 < 2^24`): one
/// rounding, the fused add.
#[inline(always)]
fn fold_legacy(
    acc: &mut [f32; 4],
    a: [u32; 4],
    b: [u32; 2],
    pa: [u32; 2],
    pb: [u32; 2],
    x: [f32; 4],
) {
    let c = mma_s8_s32(a, b, [0; 4]);
    let (da, db) = (f32::from_bits(pa[0]), f32::from_bits(pb[0]));
    let [d0, _, d1, _] = x;
    acc[0] = fma(da * d0, c[0] as f32, acc[0]);
    acc[1] = fma(da * d1, c[1] as f32, acc[1]);
    acc[2] = fma(db * d0, c[2] as f32, acc[2]);
    acc[3] = fma(db * d1, c[3] as f32, acc[3]);
}

macro_rules! legacy_mmq {
    ($t:ty, $block:ty, $n:literal, $fold:expr) => {
        impl MmqWeights for $t {
            const BLOCK_WEIGHTS: u32 = QK8_1 as u32;
            const BLOCK_BYTES: u32 = size_of::<$block>() as u32;

            #[inline(always)]
            unsafe fn stage(
                w: u64,
                row_bytes: u64,
                rows: u32,
                subs: u32,
                tid: u32,
                tile: u32,
                pairs: u32,
            ) {
                const _: () = assert!(size_of::<$block>().div_ceil(4) == $n);
                stage_legacy::<$t, $n>(w, row_bytes, rows, subs, tid, tile, pairs);
            }

            #[inline(always)]
            fn fold(
                acc: &mut [f32; 4],
                a: [u32; 4],
                b: [u32; 2],
                pa: [u32; 2],
                pb: [u32; 2],
                x: [f32; 4],
            ) {
                $fold(acc, a, b, pa, pb, x);
            }
        }
    };
}

legacy_mmq!(Q4_0, BlockQ4_0, 5, fold_legacy);
legacy_mmq!(Iq4Nl, BlockIq4Nl, 5, fold_legacy);
legacy_mmq!(Q5_0, BlockQ5_0, 6, fold_legacy);
legacy_mmq!(Q8_0, BlockQ8_0, 9, fold_legacy);
legacy_mmq!(Q4_1, BlockQ4_1, 5, <Q4K as MmqWeights>::fold);
legacy_mmq!(Q5_1, BlockQ5_1, 6, <Q4K as MmqWeights>::fold);
