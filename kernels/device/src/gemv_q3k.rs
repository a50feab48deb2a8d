//! `gemv_q3k_q8_1`: `y = W·x` with Q3_K weight rows and a q8_1 activation vector, the integer
//! math of ggml-cuda's `vec_dot_q3_K_q8_1` (3-bit quants `low2 − 4·!hbit` times q8_1 via dp4a,
//! per-16 signed 6-bit scales, one `d` per super-block).
//!
//! Thread mapping: one warp per output row, `GEMV_WARPS` rows per block. Lane `l` works on
//! super-blocks `l/4, l/4 + 8, …`; within a super-block it owns positions `8·(l%4) .. +8` of
//! every 32-element group, i.e. element `e = 128n + 32k + pos` for chunk `n ∈ 0..2`, bit pair
//! `k ∈ 0..4`: 64 weights per lane, 8 bytes of `hmask`, 2×8 bytes of `qs`, all 12 scale bytes
//! and `d`.
//!
//! Loads: a Q3_K block is 110 bytes, so blocks are only 2-byte aligned (block `b` of a row
//! starts at `110·b`) and 16-byte loads cannot be used. Each field is read with aligned 4-byte
//! loads starting at or below it and re-aligned with a funnel shift by `s = 8·(addr & 3)`
//! (0 or 16 bits). The first word read never starts before the block's own first aligned
//! word (`addr − 2` belongs to the previous block, or the block is aligned), and the last word
//! never ends past the block, so no read leaves the weight buffer.

use crate::ptx::{self, dp4a, f16_to_f32, funnel_r, global, ld_u16, ld_u32, st_f32, warp_sum};
use core::mem::{offset_of, size_of};
use ingot_abi::blocks::{BlockQ3K, BlockQ8_1, QK8_1, QK_K};
use ingot_abi::launch::{GEMV_WARPS, WARP_SIZE};

const LANES_PER_SB: u32 = 4;
const SB_PER_STEP: u32 = WARP_SIZE / LANES_PER_SB;
const SB_BYTES: u64 = size_of::<BlockQ3K>() as u64;
const HMASK_OFF: u64 = offset_of!(BlockQ3K, hmask) as u64;
const QS_OFF: u64 = offset_of!(BlockQ3K, qs) as u64;
const SCALES_OFF: u64 = offset_of!(BlockQ3K, scales) as u64;
const D_OFF: u64 = offset_of!(BlockQ3K, d) as u64;
const Q8_BYTES: u64 = size_of::<BlockQ8_1>() as u64;
const Q8_QS_OFF: u64 = offset_of!(BlockQ8_1, qs) as u64;
const Q8_PER_SB: u64 = (QK_K / QK8_1) as u64;

// The re-alignment scheme relies on these offsets: every field a lane reads with 4-byte words
// starts at a multiple of 4 within the block, and scales+d end the block.
const _: () = assert!(HMASK_OFF == 0 && QS_OFF == 32 && SCALES_OFF == 96 && D_OFF == 108);
const _: () = assert!(SB_BYTES == 110 && offset_of!(BlockQ8_1, d) == 0 && Q8_QS_OFF == 4);

/// Two ints at block offset `off` (a multiple of 4) of the block at `blk`: three aligned words
/// from `(blk + off) & !3`, shifted by `s`. Reads `[blk + off − 2, blk + off + 10)` at most.
#[inline(always)]
unsafe fn ld_2ints(blk: u64, off: u64, s: u32) -> [u32; 2] {
    let a = (blk + off) & !3;
    let (w0, w1, w2) = (ld_u32(a), ld_u32(a + 4), ld_u32(a + 8));
    [funnel_r(w0, w1, s), funnel_r(w1, w2, s)]
}

/// What one lane needs from one super-block.
struct Loads {
    hm: [u32; 2],
    ql: [[u32; 2]; 2],
    sc: [u32; 3],
    d: u32,
    ds: [u32; 8],
    u: [[u32; 2]; 8],
}

#[inline(always)]
unsafe fn load(wrow: u64, x: u64, sb: u32, pos: u64) -> Loads {
    let blk = wrow + sb as u64 * SB_BYTES;
    let s = 8 * (blk & 3) as u32;
    // Scales: the 12 bytes before `d`. Words from `(blk + 94) & !3` ([blk+92, blk+108) when the
    // block is 4-aligned, [blk+94, blk+110) otherwise), shifted by 32 − s.
    let a = (blk + SCALES_OFF - 2) & !3;
    let wsc = [ld_u32(a), ld_u32(a + 4), ld_u32(a + 8), ld_u32(a + 12)];
    let ssc = 32 - s;
    let xb = x + sb as u64 * Q8_PER_SB * Q8_BYTES;
    let mut ds = [0u32; 8];
    let mut u = [[0u32; 2]; 8];
    let mut g = 0;
    while g < 8 {
        let q8 = xb + g as u64 * Q8_BYTES;
        ds[g] = ld_u32(q8);
        u[g] = [
            ld_u32(q8 + Q8_QS_OFF + pos),
            ld_u32(q8 + Q8_QS_OFF + pos + 4),
        ];
        g += 1;
    }
    Loads {
        hm: ld_2ints(blk, HMASK_OFF + pos, s),
        ql: [
            ld_2ints(blk, QS_OFF + pos, s),
            ld_2ints(blk, QS_OFF + 32 + pos, s),
        ],
        sc: [
            funnel_r(wsc[0], wsc[1], ssc),
            funnel_r(wsc[1], wsc[2], ssc),
            funnel_r(wsc[2], wsc[3], ssc),
        ],
        d: ld_u16(blk + D_OFF),
        ds,
        u,
    }
}

/// The lane's share of one super-block's dot product. `upper` = positions 16..32 (odd
/// sub-blocks of each 32-element group).
#[inline(always)]
fn dot(l: &Loads, upper: bool) -> f32 {
    let hi = upper as u32;
    let mut sumf = 0.0f32;
    let mut n = 0;
    while n < 2 {
        let mut k = 0;
        while k < 4 {
            // Sub-block j = 8n + 2k + hi (ggml q3k scale packing, see `q3k_scale`).
            let j = 8 * n + 2 * k + hi;
            let low_word = l.sc[(j % 8 / 4) as usize];
            let low = (low_word >> (8 * (j % 4) + 4 * (j / 8))) & 0xF;
            let high = (l.sc[2] >> (8 * (j % 4) + 2 * (j / 4))) & 3;
            let scale = (low | (high << 4)) as i32 - 32;

            // Quant bytes: low two bits at bit 2k of qs, high bit at bit 4n+k of hmask; a clear
            // high bit means −4, i.e. byte = low2 | 0xFC (two's complement).
            let mut dot = 0;
            let mut i = 0;
            while i < 2 {
                let low2 = (l.ql[n as usize][i] >> (2 * k)) & 0x0303_0303;
                let neg = (!l.hm[i] >> (4 * n + k)) & 0x0101_0101;
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
    f16_to_f32(l.d) * sumf
}

/// `w`: `nrows × ncols/256` blocks; `x`: `ncols/32` blocks; `y`: `nrows` floats;
/// `ncols` a multiple of 256. Grid: `ceil(nrows / GEMV_WARPS)` blocks of `GEMV_WARPS` warps.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn gemv_q3k_q8_1(
    w: *const BlockQ3K,
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
    let part = lane % LANES_PER_SB;
    let pos = 8 * part as u64;
    let upper = part >= 2;

    let mut acc = 0.0f32;
    let mut sb = lane / LANES_PER_SB;
    while sb + SB_PER_STEP < nsb {
        let l0 = load(wrow, xg, sb, pos);
        let l1 = load(wrow, xg, sb + SB_PER_STEP, pos);
        acc += dot(&l0, upper);
        acc += dot(&l1, upper);
        sb += 2 * SB_PER_STEP;
    }
    if sb < nsb {
        acc += dot(&load(wrow, xg, sb, pos), upper);
    }

    let total = warp_sum(acc);
    if lane == 0 {
        st_f32(global(y) + row as u64 * 4, total);
    }
}
