//! Q5_K in `mmq`: levels 0..31 (the low nibble and the fifth bit from `qh`) as s8, and Q4_K's
//! pairs `(d·sc_j, dmin·m_j)` and fold: per sub-block `acc += scale·d8·Σq·q8 − min·(d8·Σq8)`
//! (the decode gemv's `vec_dot_q5_K_q8_1` terms).
//!
//! Staging follows Q4_K's (the same `qs` chunks per lane, 48 bytes on in the block, the same
//! header words); the 32 `qh` bytes of a row are read once, one word per lane of the row's 8
//! (two rows per thread): lane `(b, k)` of a row (`b = (lane/4) % 2`, `k = lane/8`, chunks
//! `c ≡ k mod 2`) reads word `4·(k%2) + 2·(k/2) + b`, and each lane fetches the 4 words of its
//! chunks' half (`qh[16·(c%2) ..+16]`) from the four lanes of its parity by shuffles.

use super::{MmqWeights, STRIDE, W_PAIR_STRIDE};
use crate::intrinsics::{f16_to_f32, ld_u32_if, ld_v4_if, shfl_idx, sts_v2_f32, sts_v4};
use crate::vecdot::k_scales;
use core::mem::{offset_of, size_of};
use ingot_abi::blocks::BlockQ5K;
use ingot_abi::launch::{MMQ_K_STEP, MMQ_ROWS, MMQ_THREADS, WARP_SIZE};

/// Q5_K: `W = scale·level − min`.
pub struct Q5K;
const _: () = assert!(offset_of!(BlockQ5K, qh) == 16 && offset_of!(BlockQ5K, qs) == 48);
const _: () = assert!(size_of::<BlockQ5K>() == 176 && size_of::<BlockQ5K>() % 16 == 0);
/// Q5_K staging: each row's 8 `qs` chunks of 16 bytes (`MMQ_ROWS·8` chunks, `Q5K_CHUNKS` per
/// thread), its 8 `qh` words (one per chunk's lane) and 4 header words (one per thread).
const Q5K_CHUNKS: u32 = MMQ_ROWS * 8 / MMQ_THREADS;
const _: () = assert!(MMQ_ROWS * 8 == Q5K_CHUNKS * MMQ_THREADS && MMQ_ROWS * 4 == MMQ_THREADS);

impl MmqWeights for Q5K {
    const BLOCK_WEIGHTS: u32 = MMQ_K_STEP;
    const BLOCK_BYTES: u32 = size_of::<BlockQ5K>() as u32;

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
        // As Q4_K: qs chunk c of a row holds positions 16·(c%2) ..+16 of sub-blocks 2·(c/2)
        // (low nibbles, fifth bit 2·(c/2) of qh) and 2·(c/2)+1 (high nibbles, bit 2·(c/2)+1).
        let mut h = 0;
        while h < Q5K_CHUNKS {
            let i = tid + h * MMQ_THREADS;
            let (lane, k) = (i % 32, (i % 32) / 8);
            let b = (lane / 4) % 2;
            let r = 4 * (i / 32) + lane % 4;
            let c = 4 * (k / 2) + k % 2 + 2 * b;
            let row = w + r as u64 * row_bytes;
            let q = ld_v4_if(r < rows, row + 48 + 16 * c as u64);
            let own = ld_u32_if(
                r < rows,
                row + 16 + 4 * (4 * (k % 2) + 2 * (k / 2) + b) as u64,
            );
            // Word e of this half is lane (b = e%2, k = 2·(e/2) + k%2) of this row's.
            let src = (i % 32) % 4 + 8 * (k % 2);
            let qh = [
                shfl_idx(own, src),
                shfl_idx(own, src + 4),
                shfl_idx(own, src + 16),
                shfl_idx(own, src + 20),
            ];
            let p = c / 2;
            let dst = tile + r * STRIDE + 64 * p + 16 * (c % 2);
            let mut lo = [0u32; 4];
            let mut hi = [0u32; 4];
            let mut e = 0;
            while e < 4 {
                lo[e] = (q[e] & 0x0F0F_0F0F) | (((qh[e] >> (2 * p)) & 0x0101_0101) << 4);
                hi[e] = ((q[e] >> 4) & 0x0F0F_0F0F) | (((qh[e] >> (2 * p + 1)) & 0x0101_0101) << 4);
                e += 1;
            }
            sts_v4(dst, lo);
            sts_v4(dst + 32, hi);
            h += 1;
        }
        // Header: as Q4_K's (the same 16 bytes at the block's start).
        let (r, q) = (tid / 4, tid % 4);
        let own = ld_u32_if(r < rows, w + r as u64 * row_bytes + 4 * q as u64);
        let first = (tid % WARP_SIZE) & !3;
        let head = [
            shfl_idx(own, first),
            shfl_idx(own, first + 1),
            shfl_idx(own, first + 2),
            shfl_idx(own, first + 3),
        ];
        let (sc, m) = k_scales(&head, 2 * q);
        let (d, dmin) = (f16_to_f32(head[0]), f16_to_f32(head[0] >> 16));
        let at = pairs + 2 * q * W_PAIR_STRIDE + r * 8;
        sts_v2_f32(at, [d * (sc & 0xFF) as f32, dmin * (m & 0xFF) as f32]);
        sts_v2_f32(
            at + W_PAIR_STRIDE,
            [d * (sc >> 8) as f32, dmin * (m >> 8) as f32],
        );
    }

    #[inline(always)]
    fn fold(acc: &mut [f32; 4], a: [u32; 4], b: [u32; 2], pa: [u32; 2], pb: [u32; 2], x: [f32; 4]) {
        super::q4k::Q4K::fold(acc, a, b, pa, pb, x);
    }
}
