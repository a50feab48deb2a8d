//! Q6_K: 8 lanes per super-block.
//!
//! Lane part `p ∈ 0..8` does ggml's calls `iqs = 4p .. 4p+3`, which share chunk `n = p/4`,
//! `bq8_offset = 4n + (p%4)/2`, `vh_shift = 2·((p%4)/2)` and `scale_offset = 8n + p%4`: the 16
//! bytes of `ql` at `16p`, the 16 bytes of `qh` at `32n + 16·(p%2)`, scales `scale_offset` and
//! `+4`, and 4 ints of q8_1 blocks `bq8_offset` and `+2`.
//!
//! Blocks are 210 bytes (2-byte aligned), so a lane's 16 bytes span five aligned words from
//! `w & !3`, re-aligned by a funnel shift of `s = 8·(w & 3)`. Each byte is read once per
//! super-block: lane `p` reads four `ql` words and takes the fifth from lane `p+1` (lane 7 from
//! lane 0, the first `qh` word); lane `j` reads `qh` words `2j, 2j+1` (each load instruction then
//! covers 64 contiguous bytes) and a lane takes its chunk's five words from their readers, the
//! fifth of the last chunk being the word after `qh`, which lane 0 reads with `d`.

use super::{ActSource, WeightType};
use crate::intrinsics::{
    bitselect, dp4a, f16_to_f32, funnel_r, lane_id, ld_i8_pair4, ld_u32_u16_if, ld_words2_imm,
    ld_words4_imm, shfl_idx,
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
    /// Lane `j`: aligned `qh` words `2j` and `2j + 1`.
    qh: [u32; 2],
    /// Lane 0: the aligned word after the `qh` words.
    tail: u32,
    /// Scales `scale_offset` and `+4`, sign-extended.
    sc: [i32; 2],
    /// Lane 0: `d` (binary16 bits).
    d: u32,
    /// The q8_1 blocks' `d`, widened to f32.
    d8: [f32; 2],
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
        let ints = 4 * (p % 2) as u64;
        let sc = w + offset_of!(BlockQ6K, scales) as u64 + so;
        // Aligned base of the block; every word read below lies inside the block (the word
        // after `qh` lies in `scales`).
        let wa = w & !3;
        let qh_at = wa + offset_of!(BlockQ6K, qh) as u64;
        let (tail, d) = ld_u32_u16_if(p == 0, qh_at + 64, w + offset_of!(BlockQ6K, d) as u64);
        Q6KLoads {
            s: 8 * (w & 3) as u32,
            ql: ld_words4_imm(wa + 16 * p as u64),
            qh: ld_words2_imm(qh_at + 8 * p as u64),
            tail,
            sc: ld_i8_pair4(sc),
            d,
            d8: [lo.d(0), lo.d(2)],
            u: [lo.qs4(0, ints), lo.qs4(2, ints)],
        }
    }
    #[inline(always)]
    fn dot(l: &Q6KLoads, p: u32) -> f32 {
        let base = lane_id() & !7;
        // ql: the fifth word is the next lane's first; lane 7's is `qh` word 0, which lane 0
        // (pulled by lane 7 alone here) hands out instead of its own.
        let next = shfl_idx(if p == 0 { l.qh[0] } else { l.ql[0] }, base + ((p + 1) & 7));
        let ql = funnel4(l.ql, next, l.s);
        // qh: chunk `c = 2n + p%2` is words `4c .. 4c+4` of lanes `2c` and `2c + 1`; the fifth is
        // word `4c + 4` of lane `2c + 2`, or for `c = 3` lane 0's `tail` (lane 0 is pulled by
        // the lanes of chunk 3 alone in that shuffle).
        let c = 2 * (p / 4) + p % 2;
        let qh_w = [
            shfl_idx(l.qh[0], base + 2 * c),
            shfl_idx(l.qh[1], base + 2 * c),
            shfl_idx(l.qh[0], base + 2 * c + 1),
            shfl_idx(l.qh[1], base + 2 * c + 1),
        ];
        let qh_next = shfl_idx(
            if p == 0 { l.tail } else { l.qh[0] },
            base + ((2 * c + 2) & 7),
        );
        // Re-aligned and shifted right by `vh_shift` in one funnel shift (`s + vh_shift ≤ 18`):
        // bits 0-1 of each byte are then the weights' bits 4-5 of half 0, bits 4-5 those of
        // half 1 (the bits the next word shifts in land in bits 6-7 of the top byte, masked).
        let vh_shift = 2 * ((p % 4) / 2);
        let qh = funnel4(qh_w, qh_next, l.s + vh_shift);
        let d = shfl_idx(l.d, base);

        let mut sumf = 0.0f32;
        let mut i = 0;
        while i < 2 {
            // Σ(q − 32)·q8 as Σq·q8 − Σ32·q8: one dp4a for the offset instead of the bytewise
            // subtraction ([`sub32_bytes`]) per int; the same integer (|Σ| < 2^16, no wrap).
            let mut dot = 0;
            let mut off = 0;
            let mut t = 0;
            while t < 4 {
                // q = low nibble of `ql` | 2 bits of `qh` << 4, bytewise: bits 0-1 of each
                // byte of `h` for half 0 (moved up by 4), bits 4-5 for half 1.
                let h = qh[t] & 0x3333_3333;
                let q = if i == 0 {
                    bitselect(0x0F0F_0F0F, ql[t], h << 4)
                } else {
                    bitselect(0x0F0F_0F0F, ql[t] >> 4, h)
                };
                dot = dp4a(q, l.u[i][t], dot);
                off = dp4a(0x2020_2020, l.u[i][t], off);
                t += 1;
            }
            sumf += l.d8[i] * ((dot - off) * l.sc[i]) as f32;
            i += 1;
        }
        f16_to_f32(d) * sumf
    }
}
