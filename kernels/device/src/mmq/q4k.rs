//! Q4_K in `mmq`: levels 0..15 as s8, pairs `(d·sc_j, dmin·m_j)` as f32, and per sub-block
//! `acc += scale·d8·Σq·q8 − min·(d8·Σq8)` (the decode gemv's `vec_dot_q4_K_q8_1` terms).

use super::{MmqWeights, STRIDE, W_PAIR_STRIDE};
use crate::intrinsics::{
    f16_to_f32, fma, ld_u32_if, ld_v4_if, mma_s8_s32, shfl_idx, sts_v2_f32, sts_v4,
};
use crate::vecdot::k_scales;
use core::mem::{offset_of, size_of};
use ingot_abi::blocks::BlockQ4K;
use ingot_abi::launch::{MMQ_K_STEP, MMQ_ROWS, MMQ_THREADS, WARP_SIZE};

/// Q4_K: `W = scale·level − min`.
pub struct Q4K;
const _: () = assert!(offset_of!(BlockQ4K, qs) == 16 && size_of::<BlockQ4K>() == 144);
/// Q4_K staging: each row's 8 `qs` chunks of 16 bytes (`MMQ_ROWS·8` chunks, `Q4K_CHUNKS` per
/// thread) and 4 header words (one per thread).
const Q4K_CHUNKS: u32 = MMQ_ROWS * 8 / MMQ_THREADS;
const _: () = assert!(MMQ_ROWS * 8 == Q4K_CHUNKS * MMQ_THREADS && MMQ_ROWS * 4 == MMQ_THREADS);

impl MmqWeights for Q4K {
    const BLOCK_WEIGHTS: u32 = MMQ_K_STEP;
    const BLOCK_BYTES: u32 = size_of::<BlockQ4K>() as u32;

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
        // qs chunk c of a row holds positions 16·(c%2) ..+16 of sub-blocks 2·(c/2) (low
        // nibbles) and 2·(c/2)+1 (high nibbles). Each 32 consecutive threads take 4 rows'
        // 8 chunks (a warp's loads cover 4 rows' 128 contiguous bytes); lanes 8k .. 8k+8 take
        // 4 rows × chunks {c, c+2}, c = 4·(k/2) + k%2, whose stores fall in 8 different
        // 16-byte bank groups (rows 17 units apart, chunks c and c+2 4 apart).
        let mut h = 0;
        while h < Q4K_CHUNKS {
            let i = tid + h * MMQ_THREADS;
            let (lane, k) = (i % 32, (i % 32) / 8);
            let r = 4 * (i / 32) + lane % 4;
            let c = 4 * (k / 2) + k % 2 + 2 * ((lane / 4) % 2);
            let q = ld_v4_if(r < rows, w + r as u64 * row_bytes + 16 + 16 * c as u64);
            let dst = tile + r * STRIDE + 64 * (c / 2) + 16 * (c % 2);
            sts_v4(dst, q.map(|v| v & 0x0F0F_0F0F));
            sts_v4(dst + 32, q.map(|v| (v >> 4) & 0x0F0F_0F0F));
            h += 1;
        }
        // Header: the four lanes of row r read one word each and share them; lane q decodes
        // the (scale, min) of sub-blocks 2q and 2q+1.
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
        let c = mma_s8_s32(a, b, [0; 4]);
        let (pa, pb) = (pa.map(f32::from_bits), pb.map(f32::from_bits));
        let [d0, s0, d1, s1] = x;
        acc[0] = fma(pa[0] * d0, c[0] as f32, fma(-pa[1], s0, acc[0]));
        acc[1] = fma(pa[0] * d1, c[1] as f32, fma(-pa[1], s1, acc[1]));
        acc[2] = fma(pb[0] * d0, c[2] as f32, fma(-pb[1], s0, acc[2]));
        acc[3] = fma(pb[0] * d1, c[3] as f32, fma(-pb[1], s1, acc[3]));
    }
}
