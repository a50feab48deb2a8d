//! Q6_K: 8 lanes per super-block.
//!
//! Lane part `p ∈ 0..8` does ggml's calls `iqs = 4p .. 4p+3`, which share chunk `n = p/4`,
//! `bq8_offset = 4n + (p%4)/2`, `vh_shift = 2·((p%4)/2)` and `scale_offset = 8n + p%4`: the 16
//! bytes of `ql` at `16p`, the 16 bytes of `qh` at `32n + 16·(p%2)`, scales `scale_offset` and
//! `+4`, and 4 ints of q8_1 blocks `bq8_offset` and `+2`.
//!
//! Blocks are 210 bytes (2-byte aligned), so a lane's 16 bytes span five aligned words from
//! `w & !3`, re-aligned by a funnel shift of `s = 8·(w & 3)`. Each byte is read once per
//! super-block: lane `p` reads four `ql` words and takes the fifth from lane `p+1` (lane 7 reads
//! it); `qh` is read by lanes 0, 1, 4, 5 (chunk `(n, p%2)`) and shuffled to lanes 2, 3, 6, 7, each
//! reader taking its fifth word from the next reader (lane 5 reads it); lane 0 reads `d`.

use super::{ActSource, WeightType};
use crate::intrinsics::{
    dp4a, f16_to_f32, funnel_r, lane_id, ld_u16_if, ld_u32_if, ld_u8, ld_words, ld_words4_if,
    shfl_idx,
};
use core::mem::offset_of;
use ingot_abi::blocks::BlockQ6K;
use ingot_abi::launch::GemvUnit;
use ingot_abi::weight_types::GemvType;

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
pub fn sub32_bytes(x: u32) -> u32 {
    let r = x ^ 0x2020_2020;
    r | (r & 0x2020_2020).wrapping_mul(6)
}

/// Four ints from five aligned words, shifted right by `s` bits (0 or 16).
#[inline(always)]
pub fn funnel4(w: [u32; 4], next: u32, s: u32) -> [u32; 4] {
    [
        funnel_r(w[0], w[1], s),
        funnel_r(w[1], w[2], s),
        funnel_r(w[2], w[3], s),
        funnel_r(w[3], next, s),
    ]
}

impl WeightType for Q6K {
    const UNIT: GemvUnit = GemvType::Q6K.unit();
    type Loads = Q6KLoads;
    #[inline(always)]
    unsafe fn load<A: ActSource>(w: u64, act: A, p: u32) -> Q6KLoads {
        let n = (p / 4) as u64;
        let so = 8 * n + (p % 4) as u64;
        let bq8 = 4 * n + ((p % 4) / 2) as u64;
        let lo = act.skip(bq8);
        let hi = lo.skip(2);
        let ints = 4 * (p % 2) as u64;
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
            ds: [lo.ds(0), hi.ds(0)],
            u: [lo.qs::<4>(0, ints), hi.qs::<4>(0, ints)],
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
            // Σ(q − 32)·q8 as Σq·q8 − Σ32·q8: one dp4a for the offset instead of the bytewise
            // subtraction ([`sub32_bytes`]) per int; the same integer (|Σ| < 2^16, no wrap).
            let mut dot = 0;
            let mut off = 0;
            let mut t = 0;
            while t < 4 {
                let vil = (ql[t] >> (4 * i)) & 0x0F0F_0F0F;
                let vih = ((qh[t] >> (vh_shift + 4 * i as u32)) << 4) & 0x3030_3030;
                dot = dp4a(vil | vih, l.u[i][t], dot);
                off = dp4a(0x2020_2020, l.u[i][t], off);
                t += 1;
            }
            let sc = l.sc[i] as u8 as i8 as i32;
            sumf += f16_to_f32(l.ds[i]) * ((dot - off) * sc) as f32;
            i += 1;
        }
        f16_to_f32(d) * sumf
    }
}
