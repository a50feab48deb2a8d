//! `gemv_q4k_q8_1`: `y = W·x` with Q4_K weight rows and a q8_1 activation vector, the integer
//! math of ggml-cuda's `vec_dot_q4_K_q8_1` (dp4a over 4-bit quants, min correction from the
//! dp4a sum of the quantized activations).
//!
//! Thread mapping: one warp per output row, `GEMV_WARPS` rows per block. Lane `l` works on
//! super-blocks `l/8, l/8 + 4, …` of its row; within a super-block it owns the 16-byte `qs`
//! chunk `c = l%8`, i.e. pair `p = c/2`, positions `16·(c%2) .. +16` of sub-blocks `2p` (low
//! nibbles) and `2p+1` (high nibbles): 32 weights per lane per super-block. Each lane reads the
//! 16-byte header (d, dmin, scales) and its 16-byte `qs` chunk with one load each, and 4 ints +
//! `ds` of the two matching q8_1 blocks. The super-block loop is unrolled by two so a lane has
//! two super-blocks' loads in flight; the odd one left over is done after the loop.

use crate::ptx::{self, dp4a, f16_to_f32, global, ld_u32, ld_v4, st_f32, warp_sum};
use core::mem::{offset_of, size_of};
use ingot_abi::blocks::{BlockQ4K, BlockQ8_1, QK8_1, QK_K};
use ingot_abi::launch::{GEMV_WARPS, WARP_SIZE};

const LANES_PER_SB: u32 = 8;
const SB_PER_STEP: u32 = WARP_SIZE / LANES_PER_SB;
const SB_BYTES: u64 = size_of::<BlockQ4K>() as u64;
const QS_OFF: u64 = offset_of!(BlockQ4K, qs) as u64;
const Q8_BYTES: u64 = size_of::<BlockQ8_1>() as u64;
const Q8_QS_OFF: u64 = offset_of!(BlockQ8_1, qs) as u64;
const Q8_PER_SB: u64 = (QK_K / QK8_1) as u64;

// 16-byte loads of the header and of each qs chunk need these alignments (row starts are
// multiples of 144 = 9·16 bytes from a 16-byte aligned base).
const _: () = assert!(SB_BYTES % 16 == 0 && QS_OFF == 16 && offset_of!(BlockQ4K, d) == 0);
const _: () = assert!(offset_of!(BlockQ4K, dmin) == 2 && offset_of!(BlockQ4K, scales) == 4);
const _: () = assert!(offset_of!(BlockQ8_1, d) == 0 && Q8_QS_OFF == 4);

/// What one lane needs from one super-block, loaded up front so several are in flight.
struct Loads {
    head: [u32; 4],
    qs: [u32; 4],
    ds_lo: u32,
    ds_hi: u32,
    u_lo: [u32; 4],
    u_hi: [u32; 4],
}

/// Per-lane constants: byte offsets of the lane's chunk, of its two q8_1 blocks (relative to
/// the super-block's first q8_1 block) and of its 16 activation bytes within each.
struct Lane {
    qs_off: u64,
    act_lo: u64,
    act_hi: u64,
    act_qs: u64,
    /// Shift selecting the 16-bit scale pair of sub-blocks `2p, 2p+1` within a scales word.
    pair_shift: u32,
    /// Sub-blocks 4..7 use the split 6-bit encoding of `get_scale_min_k4`.
    upper: bool,
}

#[inline(always)]
unsafe fn load(wrow: u64, x: u64, sb: u32, ln: &Lane) -> Loads {
    let wb = wrow + sb as u64 * SB_BYTES;
    let xb = x + sb as u64 * Q8_PER_SB * Q8_BYTES;
    let lo = xb + ln.act_lo;
    let hi = xb + ln.act_hi;
    let ulo = lo + ln.act_qs;
    let uhi = hi + ln.act_qs;
    Loads {
        head: ld_v4(wb),
        qs: ld_v4(wb + ln.qs_off),
        ds_lo: ld_u32(lo),
        ds_hi: ld_u32(hi),
        u_lo: [
            ld_u32(ulo),
            ld_u32(ulo + 4),
            ld_u32(ulo + 8),
            ld_u32(ulo + 12),
        ],
        u_hi: [
            ld_u32(uhi),
            ld_u32(uhi + 4),
            ld_u32(uhi + 8),
            ld_u32(uhi + 12),
        ],
    }
}

/// The lane's share of one super-block's dot product.
#[inline(always)]
fn dot(l: &Loads, ln: &Lane) -> f32 {
    // Scales/mins of sub-blocks 2p (low byte) and 2p+1 (high byte), per get_scale_min_k4.
    let a = (l.head[1] >> ln.pair_shift) & 0xFFFF;
    let b = (l.head[2] >> ln.pair_shift) & 0xFFFF;
    let c = (l.head[3] >> ln.pair_shift) & 0xFFFF;
    let (sc, m) = if ln.upper {
        (
            (c & 0x0F0F) | ((a >> 2) & 0x3030),
            ((c >> 4) & 0x0F0F) | ((b >> 2) & 0x3030),
        )
    } else {
        (a & 0x3F3F, b & 0x3F3F)
    };

    let mut dot_lo = 0;
    let mut dot_hi = 0;
    let mut sum_lo = 0;
    let mut sum_hi = 0;
    let mut k = 0;
    while k < 4 {
        dot_lo = dp4a(l.qs[k] & 0x0F0F_0F0F, l.u_lo[k], dot_lo);
        dot_hi = dp4a((l.qs[k] >> 4) & 0x0F0F_0F0F, l.u_hi[k], dot_hi);
        sum_lo = dp4a(0x0101_0101, l.u_lo[k], sum_lo);
        sum_hi = dp4a(0x0101_0101, l.u_hi[k], sum_hi);
        k += 1;
    }
    let d8_lo = f16_to_f32(l.ds_lo);
    let d8_hi = f16_to_f32(l.ds_hi);
    let sumf_d =
        d8_lo * (dot_lo * (sc & 0xFF) as i32) as f32 + d8_hi * (dot_hi * (sc >> 8) as i32) as f32;
    let sumf_m =
        d8_lo * (sum_lo * (m & 0xFF) as i32) as f32 + d8_hi * (sum_hi * (m >> 8) as i32) as f32;
    f16_to_f32(l.head[0]) * sumf_d - f16_to_f32(l.head[0] >> 16) * sumf_m
}

/// `w`: `nrows × ncols/256` blocks; `x`: `ncols/32` blocks; `y`: `nrows` floats;
/// `ncols` a multiple of 256. Grid: `ceil(nrows / GEMV_WARPS)` blocks of `GEMV_WARPS` warps.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn gemv_q4k_q8_1(
    w: *const BlockQ4K,
    x: *const BlockQ8_1,
    y: *mut f32,
    ncols: u32,
    nrows: u32,
) {
    let t = ptx::tid();
    let lane = t % WARP_SIZE;
    let row = ptx::bid() * GEMV_WARPS + t / WARP_SIZE;
    // Whole warps leave together, so the shuffles below always see a full warp.
    if row >= nrows {
        return;
    }
    let nsb = ncols / QK_K as u32;
    let wrow = global(w) + row as u64 * nsb as u64 * SB_BYTES;
    let xg = global(x);

    let chunk = lane % LANES_PER_SB;
    let pair = chunk / 2;
    let ln = Lane {
        qs_off: QS_OFF + 16 * chunk as u64,
        act_lo: 2 * pair as u64 * Q8_BYTES,
        act_hi: (2 * pair + 1) as u64 * Q8_BYTES,
        act_qs: Q8_QS_OFF + 16 * (chunk % 2) as u64,
        pair_shift: 16 * (pair % 2),
        upper: pair >= 2,
    };

    let mut acc = 0.0f32;
    let mut sb = lane / LANES_PER_SB;
    while sb + SB_PER_STEP < nsb {
        let l0 = load(wrow, xg, sb, &ln);
        let l1 = load(wrow, xg, sb + SB_PER_STEP, &ln);
        acc += dot(&l0, &ln);
        acc += dot(&l1, &ln);
        sb += 2 * SB_PER_STEP;
    }
    if sb < nsb {
        acc += dot(&load(wrow, xg, sb, &ln), &ln);
    }

    let total = warp_sum(acc);
    if lane == 0 {
        st_f32(global(y) + row as u64 * 4, total);
    }
}
