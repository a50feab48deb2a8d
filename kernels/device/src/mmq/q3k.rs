//! Q3_K in `mmq`: levels `low2 − (hbit ? 0 : 4) ∈ −4..3` as s8, and per sub-block of 32 the
//! pair `(d, the signed scales S − 32 of its two 16-weight groups)`, folded as Q6_K's (two
//! `mma` per column, one per group, combined exactly in integers):
//! `acc += d·d8·(sc_lo·Σ_lo q·q8 + sc_hi·Σ_hi q·q8)`, the decode gemv's `vec_dot_q3_K_q8_1`
//! terms.
//!
//! Staging: thread `q = tid % 4` of row `r = tid / 4` takes half `h = q % 2` (positions
//! `16h .. 16h+16`) of the four sub-blocks `4n .. 4n+4`, `n = q / 2`: the 16 bytes of `qs` at
//! `32n + 16h` (bit pairs 0-1, 2-3, 4-5, 6-7 for sub-blocks `4n .. 4n+4`) and of `hmask` at
//! `16h` (bit `4n + i` for sub-block `4n + i`), and the scales of groups `4q .. 4q+4`. Blocks
//! are 110 bytes (2-byte aligned), so a row's block is read as the 28 aligned words from
//! `b & !3` (word 0 and word 27 as the 16 bits of them in the block, so exactly its 110
//! bytes): lane `q` reads the `qs` words `8 + 4q ..+4`; lanes 0 and 1 the `hmask` words
//! `4q ..+4`, lane 2 the scale words 24-26 and lane 3 word 27 (`d`); each lane fetches what it
//! needs of the others' by shuffles and re-aligns it by funnel shifts with the word after.

use super::{MmqWeights, STRIDE, W_PAIR_STRIDE};
use crate::intrinsics::{
    f16_to_f32, funnel_r, ld_u16_if, ld_u32_if, ld_words4_if, shfl_idx, sts_v2, sts_v4,
};
use crate::vecdot::{funnel4, sub32_bytes};
use core::mem::{offset_of, size_of};
use ingot_abi::blocks::BlockQ3K;
use ingot_abi::launch::{MMQ_K_STEP, MMQ_ROWS, MMQ_THREADS, WARP_SIZE};

/// Q3_K: `W = d·(S_group − 32)·level`.
pub struct Q3K;
const _: () = assert!(offset_of!(BlockQ3K, hmask) == 0 && offset_of!(BlockQ3K, qs) == 32);
const _: () = assert!(offset_of!(BlockQ3K, scales) == 96 && offset_of!(BlockQ3K, d) == 108);
const _: () = assert!(size_of::<BlockQ3K>() == 110 && MMQ_ROWS * 4 == MMQ_THREADS);

impl MmqWeights for Q3K {
    const BLOCK_WEIGHTS: u32 = MMQ_K_STEP;
    const BLOCK_BYTES: u32 = size_of::<BlockQ3K>() as u32;

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
        // qs words 8+4q ..+4 (block bytes 32+16q ..+16, inside the block either way).
        let m = ld_words4_if(live, wa + (32 + 16 * q) as u64);
        // Lane 0: hmask words 0-3, word 0 only its bytes in the block (all of it aligned, its
        // upper half unaligned); lane 1: hmask words 4-7; lane 2: scale words 24-26; lane 3:
        // word 27 (`d` at its low half aligned, the last scale bytes and `d` unaligned).
        let e0 = ld_u32_if(live && q == 0 && sh == 0, wa)
            | (ld_u16_if(live && q == 0 && sh != 0, wa + 2) << 16)
            | ld_u32_if(live && q == 1, wa + 16)
            | ld_u32_if(live && q == 2, wa + 96)
            | ld_u16_if(live && q == 3 && sh == 0, wa + 108)
            | ld_u32_if(live && q == 3 && sh != 0, wa + 108);
        let wide = live && q < 3;
        let e1 = ld_u32_if(wide, wa + (4 + 16 * q + 64 * (q / 2)) as u64);
        let e2 = ld_u32_if(wide, wa + (8 + 16 * q + 64 * (q / 2)) as u64);
        let e3 = ld_u32_if(live && q < 2, wa + (12 + 16 * q) as u64);

        // hmask half h (lane h's words) and the word after it (word 4: lane 1's first; word
        // 8: lane 0's first qs word).
        let hm = [
            shfl_idx(e0, first + h),
            shfl_idx(e1, first + h),
            shfl_idx(e2, first + h),
            shfl_idx(e3, first + h),
        ];
        let hm_after = shfl_idx(if q == 1 { e0 } else { m[0] }, first + (h ^ 1));
        // The word after lane q's qs words: lane q+1's first, or for q = 3 scale word 24.
        let m_next = shfl_idx(m[0], first + ((q + 1) & 3));
        let s0 = shfl_idx(e0, first + 2);
        let s1 = shfl_idx(e1, first + 2);
        let s2 = shfl_idx(e2, first + 2);
        let s3 = shfl_idx(e0, first + 3);
        let hm = funnel4(hm, hm_after, sh);
        let m = funnel4(m, if q == 3 { s0 } else { m_next }, sh);
        let (b24, b25, b26) = (
            funnel_r(s0, s1, sh),
            funnel_r(s1, s2, sh),
            funnel_r(s2, s3, sh),
        );
        let d = f16_to_f32((s3 >> sh) & 0xFFFF).to_bits();

        let row = tile + r * STRIDE + 16 * h;
        let mut i = 0;
        while i < 4 {
            let bit = 4 * n + i as u32;
            let mut v = [0u32; 4];
            let mut k = 0;
            while k < 4 {
                // low2 − 4 when the high bit is clear: 0xFC | low2 (−4 + low2) in that byte.
                let neg = ((!hm[k] >> bit) & 0x0101_0101) * 0xFC;
                v[k] = ((m[k] >> (2 * i as u32)) & 0x0303_0303) | neg;
                k += 1;
            }
            sts_v4(row + 32 * bit, v);
            i += 1;
        }
        // Scales of groups 4q .. 4q+4: low nibbles from bytes 0-3 (q = 0, 2) or 4-7 (q = 1,
        // 3) of the scales, bits 0-3 for q < 2 and 4-7 above; top bits from bytes 8-11 at 2q.
        let a = if q % 2 == 0 { b24 } else { b25 };
        let sc =
            sub32_bytes(((a >> (4 * n)) & 0x0F0F_0F0F) | (((b26 >> (2 * q)) & 0x0303_0303) << 4));
        let at = pairs + 2 * q * W_PAIR_STRIDE + r * 8;
        sts_v2(at, [d, sc & 0xFFFF]);
        sts_v2(at + W_PAIR_STRIDE, [d, sc >> 16]);
    }

    #[inline(always)]
    fn fold(acc: &mut [f32; 4], a: [u32; 4], b: [u32; 2], pa: [u32; 2], pb: [u32; 2], x: [f32; 4]) {
        super::q6k::Q6K::fold(acc, a, b, pa, pb, x);
    }
}
