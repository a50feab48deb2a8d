//! Q2_K: 4 lanes per super-block.
//!
//! ggml's `vec_dot_q2_K_q8_1` runs 16 calls per super-block, call `iqs` taking `qs` word `iqs`
//! (4 bit pairs per byte) against word `iqs % 8` of q8_1 blocks `4·(iqs/8) .. +4`. Lane part
//! `t ∈ 0..4` runs calls `2t + j` and `8 + 2t + j` (`j ∈ 0..2`): `qs` words `2t, 2t+1` and
//! `8+2t, 9+2t`, words `2t, 2t+1` of all 8 q8_1 blocks (as Q3_K's lanes), the scale bytes
//! `s0 + 2i` and `8 + s0 + 2i` (`s0 = t/2`, `i ∈ 0..4`: in scale words 0-1 and 2-3, at a
//! static word index) and `d`, `dmin`. Blocks are 84 bytes, so every field is 4-byte aligned.
//! Each byte is read once per super-block: lane `t` reads scale word `t` and lane 0 the
//! `d`/`dmin` word, and the lanes of the unit shuffle them to each other.

use super::{ActSource, WeightType};
use crate::intrinsics::{dp4a, f16_to_f32, lane_id, ld_u32, ld_u32_if, ld_words, shfl_idx};
use core::mem::{offset_of, size_of};
use ingot_abi::blocks::BlockQ2K;
use ingot_abi::launch::GemvUnit;
use ingot_abi::weight_types::GemvType;

/// What a Q2_K lane loads from one super-block.
#[derive(Default)]
pub struct Q2KLoads {
    /// Scale word `t` (`scales` as four little-endian words).
    sc: u32,
    /// Lane 0: `d | dmin << 16`; 0 on the other lanes.
    dm: u32,
    /// `qs` words `2t, 2t+1` (`[0]`) and `8+2t, 9+2t` (`[1]`).
    q: [[u32; 2]; 2],
    ds: [u32; 8],
    u: [[u32; 2]; 8],
}

/// Q2_K (`vec_dot_q2_K_q8_1`): `d·Σ d8·(sc & 15)·dot − dmin·Σ d8·(sc >> 4)·Σq8` per call.
pub struct Q2K;
const _: () = assert!(offset_of!(BlockQ2K, scales) == 0 && offset_of!(BlockQ2K, qs) == 16);
const _: () = assert!(offset_of!(BlockQ2K, d) == 80 && offset_of!(BlockQ2K, dmin) == 82);
const _: () = assert!(size_of::<BlockQ2K>() == 84);

impl WeightType for Q2K {
    const UNIT: GemvUnit = GemvType::Q2K.unit();
    type Loads = Q2KLoads;
    #[inline(always)]
    unsafe fn load<A: ActSource>(w: u64, act: A, t: u32) -> Q2KLoads {
        let mut ds = [0u32; 8];
        let mut u = [[0u32; 2]; 8];
        let mut g = 0;
        while g < 8 {
            ds[g] = act.ds(g as u64);
            u[g] = act.qs::<2>(g as u64, 2 * t as u64);
            g += 1;
        }
        let qs = w + offset_of!(BlockQ2K, qs) as u64 + 8 * t as u64;
        Q2KLoads {
            sc: ld_u32(w + 4 * t as u64),
            dm: ld_u32_if(t == 0, w + offset_of!(BlockQ2K, d) as u64),
            q: [ld_words::<2>(qs), ld_words::<2>(qs + 32)],
            ds,
            u,
        }
    }
    #[inline(always)]
    fn dot(l: &Q2KLoads, t: u32) -> f32 {
        // The four calls written out with constant arguments so every array index is a
        // constant once inlined (a dynamic index would put the arrays in local memory).
        let base = lane_id() & !3;
        let h = Header {
            sc: [
                shfl_idx(l.sc, base),
                shfl_idx(l.sc, base + 1),
                shfl_idx(l.sc, base + 2),
                shfl_idx(l.sc, base + 3),
            ],
            dm: shfl_idx(l.dm, base),
        };
        call(l, &h, t, 0, 0) + call(l, &h, t, 0, 1) + call(l, &h, t, 1, 0) + call(l, &h, t, 1, 1)
    }
}

/// The super-block's scale words and `d | dmin << 16`, gathered from the unit's lanes.
struct Header {
    sc: [u32; 4],
    dm: u32,
}

/// Call `8h + 2t + j` of `vec_dot_q2_K_q8_1`: `qs` word `l.q[h][j]` against word `j` of the
/// lane's pair in q8_1 blocks `4h .. 4h+4`.
#[inline(always)]
fn call(l: &Q2KLoads, hd: &Header, t: u32, h: usize, j: usize) -> f32 {
    let (d, dmin) = (f16_to_f32(hd.dm), f16_to_f32(hd.dm >> 16));
    let s0 = t / 2;
    let v = l.q[h][j];
    let mut sumf_d = 0.0f32;
    let mut sumf_m = 0.0f32;
    let mut i = 0;
    while i < 4 {
        let g = 4 * h + i;
        // Scale byte `8h + s0 + 2i`: word `2h + i/2`, byte `s0 + 2·(i%2)`.
        let sc = ((hd.sc[2 * h + i / 2] >> (8 * (s0 + 2 * (i as u32 % 2)))) & 0xFF) as i32;
        let uq = l.u[g][j];
        let d8 = f16_to_f32(l.ds[g]);
        let vi = (v >> (2 * i)) & 0x0303_0303;
        sumf_d += d8 * (dp4a(vi, uq, 0) * (sc & 0xF)) as f32;
        sumf_m += d8 * dp4a((sc >> 4) as u32 * 0x0101_0101, uq, 0) as f32;
        i += 1;
    }
    d * sumf_d - dmin * sumf_m
}
