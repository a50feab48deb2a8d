//! Q6_K in `mmq`: levels `q − 32 ∈ −32..31` as s8, and per sub-block of 32 the pair `(d, the
//! signed scales of its two 16-weight groups)`. A sub-block takes two `mma` per column, one
//! per group (the activation fragment's other half zeroed), combined exactly in integers:
//! `acc += d·d8·(sc_lo·Σ_lo (q−32)·q8 + sc_hi·Σ_hi (q−32)·q8)`, the decode gemv's
//! `vec_dot_q6_K_q8_1` terms.
//!
//! Staging: thread `q = tid % 4` of row `r = tid / 4` takes half `h = q % 2` (positions
//! `16h .. 16h+16`) of the four sub-blocks `4n .. 4n+4`, `n = q / 2`: the 16 bytes of `ql` at
//! `64n + 16h` (low nibbles: sub-block `4n`, high: `4n+2`) and at `64n + 32 + 16h` (`4n+1`,
//! `4n+3`), and of `qh` at `32n + 16h` (bit pairs 0-1, 2-3, 4-5, 6-7 for sub-blocks `4n ..
//! 4n+4`). Blocks are 210 bytes (2-byte aligned), so each 16-byte chunk is read as four
//! aligned words from `chunk & !3` and re-aligned by a funnel shift with the aligned word after
//! them, which is the first word of the chunk 16 bytes on: another lane of the row's four reads
//! it, and the shuffles below fetch it, so each byte of a block is read once (an unaligned block
//! adds the 2 bytes before it and 2 of `d`).

use super::{MmqWeights, STRIDE, W_PAIR_STRIDE};
use crate::intrinsics::{
    f16_to_f32, fma, funnel_r, ld_u16_if, ld_u32_if, ld_words4_if, mma_s8_s32, shfl_idx, sts_v2,
    sts_v4,
};
use crate::vecdot::{funnel4, sub32_bytes};
use core::mem::{offset_of, size_of};
use ingot_abi::blocks::BlockQ6K;
use ingot_abi::launch::{MMQ_K_STEP, MMQ_ROWS, MMQ_THREADS, WARP_SIZE};

/// Q6_K: `W = d·sc_group·level`.
pub struct Q6K;
const _: () = assert!(offset_of!(BlockQ6K, ql) == 0 && offset_of!(BlockQ6K, qh) == 128);
const _: () = assert!(offset_of!(BlockQ6K, scales) == 192 && offset_of!(BlockQ6K, d) == 208);
const _: () = assert!(MMQ_ROWS * 4 == MMQ_THREADS);

/// Sign-extends byte 0 of `x`.
#[inline(always)]
fn sext8(x: u32) -> i32 {
    ((x << 24) as i32) >> 24
}

impl MmqWeights for Q6K {
    const BLOCK_WEIGHTS: u32 = MMQ_K_STEP;
    const BLOCK_BYTES: u32 = size_of::<BlockQ6K>() as u32;

    #[inline(always)]
    unsafe fn stage(
        w: u64,
        row_bytes: u64,
        rows: u32,
        _subs: u32,
        tid: u32,
        tile: u32,
        pairs: u32,
    ) {
        let (r, q) = (tid / 4, tid % 4);
        let (n, h) = (q / 2, q % 2);
        let live = r < rows;
        let b = w + r as u64 * row_bytes;
        let (wa, sh) = (b & !3, 8 * (b & 3) as u32);
        let first = (tid % WARP_SIZE) & !3;
        let lo = ld_words4_if(live, wa + (64 * n + 16 * h) as u64);
        let hi = ld_words4_if(live, wa + (64 * n + 32 + 16 * h) as u64);
        let qh = ld_words4_if(live, wa + (128 + 32 * n + 16 * h) as u64);
        let sc = ld_u32_if(live, wa + (192 + 4 * q) as u64);
        let d = ld_u16_if(live && q == 0, b + 208);
        // The word after each window is the first word of the chunk 16 bytes on: `ql` chunk
        // 64n+16h+16 is lane q+1's low chunk (h = 0) or lane q−1's high chunk (h = 1);
        // 64n+48+16h is lane q+1's high chunk (h = 0), lane 2's low chunk (q = 1) or the
        // first `qh` chunk (q = 3); `qh` chunk 144+32n+16h is lane q+1's, or for q = 3 the
        // scales' first word. The scales' window ends in a word only lane 3 reads, only when
        // the block is unaligned (aligned, it would lie past the block).
        let pair = first + (q ^ 1);
        let lo_pair = shfl_idx(lo[0], pair);
        let hi_pair = shfl_idx(hi[0], pair);
        let lo_2 = shfl_idx(lo[0], first + 2);
        let qh_0 = shfl_idx(qh[0], first);
        let qh_next = shfl_idx(qh[0], first + ((q + 1) & 3));
        let sc_0 = shfl_idx(sc, first);
        let sc_next = shfl_idx(sc, first + ((q + 1) & 3));
        let sc_tail = ld_u32_if(live && q == 3 && sh != 0, wa + 208);
        let lo_after = if h == 0 { lo_pair } else { hi_pair };
        let hi_after = if h == 0 {
            hi_pair
        } else if n == 0 {
            lo_2
        } else {
            qh_0
        };
        let lo = funnel4(lo, lo_after, sh);
        let hi = funnel4(hi, hi_after, sh);
        let qh = funnel4(qh, if q == 3 { sc_0 } else { qh_next }, sh);
        let sc = funnel_r(sc, if q == 3 { sc_tail } else { sc_next }, sh);

        let row = tile + r * STRIDE + 16 * h;
        let mut k = 0;
        let mut m0 = [0u32; 4];
        let mut m1 = [0u32; 4];
        let mut m2 = [0u32; 4];
        let mut m3 = [0u32; 4];
        while k < 4 {
            m0[k] = sub32_bytes((lo[k] & 0x0F0F_0F0F) | ((qh[k] << 4) & 0x3030_3030));
            m1[k] = sub32_bytes((hi[k] & 0x0F0F_0F0F) | ((qh[k] << 2) & 0x3030_3030));
            m2[k] = sub32_bytes(((lo[k] >> 4) & 0x0F0F_0F0F) | (qh[k] & 0x3030_3030));
            m3[k] = sub32_bytes(((hi[k] >> 4) & 0x0F0F_0F0F) | ((qh[k] >> 2) & 0x3030_3030));
            k += 1;
        }
        sts_v4(row + 32 * (4 * n), m0);
        sts_v4(row + 32 * (4 * n + 1), m1);
        sts_v4(row + 32 * (4 * n + 2), m2);
        sts_v4(row + 32 * (4 * n + 3), m3);
        // Scale bytes 4q .. 4q+4 are the two groups of sub-blocks 2q and 2q+1.
        let d = f16_to_f32(shfl_idx(d, first)).to_bits();
        let at = pairs + 2 * q * W_PAIR_STRIDE + r * 8;
        sts_v2(at, [d, sc & 0xFFFF]);
        sts_v2(at + W_PAIR_STRIDE, [d, sc >> 16]);
    }

    #[inline(always)]
    fn fold(acc: &mut [f32; 4], a: [u32; 4], b: [u32; 2], pa: [u32; 2], pb: [u32; 2], x: [f32; 4]) {
        let c_lo = mma_s8_s32(a, [b[0], 0], [0; 4]);
        let c_hi = mma_s8_s32(a, [0, b[1]], [0; 4]);
        // |sc·Σ| ≤ 128·16·32·127 per group: the integer combination is exact, and below 2^24,
        // so its conversion to f32 is exact too.
        let (da, db) = (f32::from_bits(pa[0]), f32::from_bits(pb[0]));
        let (la, ha) = (sext8(pa[1]), sext8(pa[1] >> 8));
        let (lb, hb) = (sext8(pb[1]), sext8(pb[1] >> 8));
        let [d0, _, d1, _] = x;
        acc[0] = fma(da * d0, (la * c_lo[0] + ha * c_hi[0]) as f32, acc[0]);
        acc[1] = fma(da * d1, (la * c_lo[1] + ha * c_hi[1]) as f32, acc[1]);
        acc[2] = fma(db * d0, (lb * c_lo[2] + hb * c_hi[2]) as f32, acc[2]);
        acc[3] = fma(db * d1, (lb * c_lo[3] + hb * c_hi[3]) as f32, acc[3]);
    }
}
