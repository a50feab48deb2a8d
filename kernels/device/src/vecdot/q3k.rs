//! Q3_K: 4 lanes per super-block.
//!
//! Lane part `t ∈ 0..4` owns positions `8t .. 8t+8` of every 32-element group: element
//! `128n + 32k + 8t + i` for chunk `n ∈ 0..2`, bit pair `k ∈ 0..4`: 64 weights, 8 bytes of
//! `hmask`, 2×8 bytes of `qs`, all 12 scale bytes and `d`.
//!
//! Blocks are 110 bytes (2-byte aligned), so fields are read as aligned words from `w & !3` and
//! re-aligned by a funnel shift of `s = 8·(w & 3)`. Each byte is read once per super-block: lane
//! `t` reads two words of `hmask` and two of each `qs` half and takes the third of each from lane
//! `t+1` (lane 3 from the lane holding the next field's first word); the scales are four words
//! from `(w + 94) & !3`, one per lane, ending inside the block; lane 0 reads `d`.

use super::{ActSource, WeightType};
use crate::intrinsics::{
    dp4a, f16_to_f32, funnel_r, lane_id, ld_u16_if, ld_u32, ld_words, shfl_idx,
};
use core::mem::offset_of;
use ingot_abi::blocks::BlockQ3K;
use ingot_abi::launch::GemvUnit;
use ingot_abi::weight_types::GemvType;

/// What a Q3_K lane loads from one super-block (own words before the shuffles).
#[derive(Default)]
pub struct Q3KLoads {
    s: u32,
    hm: [u32; 2],
    q0: [u32; 2],
    q1: [u32; 2],
    sc: u32,
    d: u32,
    ds: [u32; 8],
    u: [[u32; 2]; 8],
}

/// Q3_K (`vec_dot_q3_K_q8_1`): quants `low2 − 4·!hbit`, signed 6-bit scales, one `d`.
pub struct Q3K;
const _: () = assert!(offset_of!(BlockQ3K, hmask) == 0 && offset_of!(BlockQ3K, qs) == 32);
const _: () = assert!(offset_of!(BlockQ3K, scales) == 96 && offset_of!(BlockQ3K, d) == 108);

/// Two ints from three aligned words shifted right by `s` bits (0 or 16).
#[inline(always)]
fn funnel2(w: [u32; 2], next: u32, s: u32) -> [u32; 2] {
    [funnel_r(w[0], w[1], s), funnel_r(w[1], next, s)]
}

impl WeightType for Q3K {
    const UNIT: GemvUnit = GemvType::Q3K.unit();
    type Loads = Q3KLoads;
    #[inline(always)]
    unsafe fn load<A: ActSource>(w: u64, act: A, t: u32) -> Q3KLoads {
        let pos = 8 * t as u64;
        let mut ds = [0u32; 8];
        let mut u = [[0u32; 2]; 8];
        let mut g = 0;
        while g < 8 {
            ds[g] = act.ds(g as u64);
            u[g] = act.qs::<2>(g as u64, pos / 4);
            g += 1;
        }
        let wa = w & !3;
        let qs = wa + offset_of!(BlockQ3K, qs) as u64;
        Q3KLoads {
            s: 8 * (w & 3) as u32,
            hm: ld_words::<2>(wa + offset_of!(BlockQ3K, hmask) as u64 + pos),
            q0: ld_words::<2>(qs + pos),
            q1: ld_words::<2>(qs + 32 + pos),
            // [w+92, w+108) when w is 4-aligned, [w+94, w+110) otherwise.
            sc: ld_u32(((w + offset_of!(BlockQ3K, scales) as u64 - 2) & !3) + 4 * t as u64),
            d: ld_u16_if(t == 0, w + offset_of!(BlockQ3K, d) as u64),
            ds,
            u,
        }
    }
    #[inline(always)]
    fn dot(l: &Q3KLoads, t: u32) -> f32 {
        let base = lane_id() & !3;
        let next_lane = base + ((t + 1) & 3);
        let last = t == 3;
        // The word after each lane's pair: the next lane's first word; for lane 3 the first
        // word of the next field (q0 of lane 0, q1 of lane 0, then the scale word at
        // `(w & !3) + 96`, which is lane 1's when w is 4-aligned and lane 0's otherwise).
        let hm_a = shfl_idx(l.hm[0], next_lane);
        let hm_b = shfl_idx(l.q0[0], base);
        let q0_a = shfl_idx(l.q0[0], next_lane);
        let q0_b = shfl_idx(l.q1[0], base);
        let q1_a = shfl_idx(l.q1[0], next_lane);
        let q1_b = shfl_idx(l.sc, base + (l.s == 0) as u32);
        let hm = funnel2(l.hm, if last { hm_b } else { hm_a }, l.s);
        let ql = [
            funnel2(l.q0, if last { q0_b } else { q0_a }, l.s),
            funnel2(l.q1, if last { q1_b } else { q1_a }, l.s),
        ];
        let scw = [
            shfl_idx(l.sc, base),
            shfl_idx(l.sc, base + 1),
            shfl_idx(l.sc, base + 2),
            shfl_idx(l.sc, base + 3),
        ];
        let ssc = 32 - l.s;
        let sc = [
            funnel_r(scw[0], scw[1], ssc),
            funnel_r(scw[1], scw[2], ssc),
            funnel_r(scw[2], scw[3], ssc),
        ];
        let d = shfl_idx(l.d, base);

        let hi = (t >= 2) as u32;
        let mut sumf = 0.0f32;
        let mut n = 0;
        while n < 2 {
            let mut k = 0;
            while k < 4 {
                // Sub-block j = 8n + 2k + hi; scale packing as `ingot_abi::blocks::q3k_scale`.
                let j = 8 * n + 2 * k + hi;
                let low = (sc[(j % 8 / 4) as usize] >> (8 * (j % 4) + 4 * (j / 8))) & 0xF;
                let high = (sc[2] >> (8 * (j % 4) + 2 * (j / 4))) & 3;
                let scale = (low | (high << 4)) as i32 - 32;
                // Low two bits at bit 2k of qs, high bit at bit 4n+k of hmask; a clear high
                // bit means −4, i.e. byte = low2 | 0xFC (two's complement).
                let mut dot = 0;
                let mut i = 0;
                while i < 2 {
                    let low2 = (ql[n as usize][i] >> (2 * k)) & 0x0303_0303;
                    let neg = (!hm[i] >> (4 * n + k)) & 0x0101_0101;
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
        f16_to_f32(d) * sumf
    }
}
