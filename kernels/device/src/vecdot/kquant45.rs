//! Q4_K / Q5_K: 8 lanes per super-block.
//!
//! Lane part `c ∈ 0..8` owns the 16-byte `qs` chunk `c`: pair `p = c/2`, positions
//! `16·(c%2) .. +16` of sub-blocks `2p` (low nibbles) and `2p+1` (high nibbles), 32 weights,
//! read with one 16-byte load (both types' blocks and `qs` are 16-byte aligned). The 16-byte
//! header (d, dmin, scales) is read once per super-block, one word by each of four lanes, and
//! shuffled to the others; Q5_K's two 16-byte `qh` chunks likewise by two lanes. Each lane reads
//! `ds` and 4 ints of q8_1 blocks 2p and 2p+1.

use super::{ActSource, WeightType};
use crate::intrinsics::{dp4a, f16_to_f32, lane_id, ld_u32_if, ld_v4, ld_v4_if, shfl_idx};
use core::mem::{offset_of, size_of};
use ingot_abi::blocks::{BlockQ4K, BlockQ5K};
use ingot_abi::launch::GemvUnit;
use ingot_abi::weight_types::GemvType;

/// What a Q4_K/Q5_K lane loads from one super-block.
#[derive(Default)]
pub struct KLoads {
    /// Header word `c − HEAD_LANE` for the four lanes that read one, else 0.
    pub(crate) head: u32,
    pub(crate) qs: [u32; 4],
    /// Q5_K: `qh` chunk `c` for lanes 0 and 1, else zeros.
    pub(crate) qh: [u32; 4],
    pub(crate) ds: [u32; 2],
    pub(crate) u: [[u32; 4]; 2],
}

/// First of the four lanes that read a header word: Q4_K lanes 0..4, Q5_K lanes 4..8 (lanes 0
/// and 1 read Q5_K's `qh`).
pub(crate) const Q4K_HEAD_LANE: u32 = 0;
const Q5K_HEAD_LANE: u32 = 4;

/// Lane `c`'s activations: `ds` and ints `4·(c%2) ..+4` of blocks `2p` and `2p+1`, `p = c/2`.
#[inline(always)]
pub(crate) unsafe fn k_act<A: ActSource>(act: A, c: u32) -> ([u32; 2], [[u32; 4]; 2]) {
    let lo = act.skip(2 * (c / 2) as u64);
    let hi = lo.skip(1);
    let i = 4 * (c % 2) as u64;
    ([lo.ds(0), hi.ds(0)], [lo.qs::<4>(0, i), hi.qs::<4>(0, i)])
}

/// Lane `c`'s header word if it is one of the four header lanes starting at `first`.
#[inline(always)]
pub(crate) unsafe fn k_head_word(w: u64, c: u32, first: u32) -> u32 {
    let k = c.wrapping_sub(first);
    ld_u32_if(k < 4, w + 4 * (k % 4) as u64)
}

/// The whole 16-byte header, gathered from the group's four header lanes.
#[inline(always)]
pub(crate) fn k_header(own: u32, first: u32) -> [u32; 4] {
    let base = (lane_id() & !7) + first;
    [
        shfl_idx(own, base),
        shfl_idx(own, base + 1),
        shfl_idx(own, base + 2),
        shfl_idx(own, base + 3),
    ]
}

/// 6-bit (scale, min) of sub-blocks `2p` (low byte) and `2p+1` (high byte), the 16-bit form of
/// ggml's `get_scale_min_k4` applied to header words 1..3 (`mmq` stages them the same way).
#[inline(always)]
pub fn k_scales(head: &[u32; 4], c: u32) -> (u32, u32) {
    let pair = c / 2;
    let sh = 16 * (pair % 2);
    let a = (head[1] >> sh) & 0xFFFF;
    let b = (head[2] >> sh) & 0xFFFF;
    let cc = (head[3] >> sh) & 0xFFFF;
    // Both decodes, combined by a mask rather than a branch (the hot loop stays branch-free).
    let upper = 0u32.wrapping_sub((pair >= 2) as u32);
    let sc_hi = (cc & 0x0F0F) | ((a >> 2) & 0x3030);
    let m_hi = ((cc >> 4) & 0x0F0F) | ((b >> 2) & 0x3030);
    (
        (sc_hi & upper) | (a & 0x3F3F & !upper),
        (m_hi & upper) | (b & 0x3F3F & !upper),
    )
}

/// `d·Σ d8·sc·dot − dmin·Σ d8·m·Σq8` over the lane's two sub-blocks; `hbit(k)` = the bit-4
/// words of int `k` for the low and high nibbles.
#[inline(always)]
pub(crate) fn k_dot(
    l: &KLoads,
    head: &[u32; 4],
    c: u32,
    hbit: impl Fn(usize) -> (u32, u32),
) -> f32 {
    let (sc, m) = k_scales(head, c);
    let mut dot_lo = 0;
    let mut dot_hi = 0;
    let mut sum_lo = 0;
    let mut sum_hi = 0;
    let mut k = 0;
    while k < 4 {
        let (h0, h1) = hbit(k);
        dot_lo = dp4a((l.qs[k] & 0x0F0F_0F0F) | h0, l.u[0][k], dot_lo);
        dot_hi = dp4a(((l.qs[k] >> 4) & 0x0F0F_0F0F) | h1, l.u[1][k], dot_hi);
        sum_lo = dp4a(0x0101_0101, l.u[0][k], sum_lo);
        sum_hi = dp4a(0x0101_0101, l.u[1][k], sum_hi);
        k += 1;
    }
    let d8_lo = f16_to_f32(l.ds[0]);
    let d8_hi = f16_to_f32(l.ds[1]);
    let sumf_d =
        d8_lo * (dot_lo * (sc & 0xFF) as i32) as f32 + d8_hi * (dot_hi * (sc >> 8) as i32) as f32;
    let sumf_m =
        d8_lo * (sum_lo * (m & 0xFF) as i32) as f32 + d8_hi * (sum_hi * (m >> 8) as i32) as f32;
    f16_to_f32(head[0]) * sumf_d - f16_to_f32(head[0] >> 16) * sumf_m
}

/// Q4_K (`vec_dot_q4_K_q8_1`): min correction from the integer Σq8 times `d8`, not `ds.y`.
pub struct Q4K;
const _: () = assert!(size_of::<BlockQ4K>().is_multiple_of(16) && offset_of!(BlockQ4K, qs) == 16);
const _: () = assert!(offset_of!(BlockQ4K, dmin) == 2 && offset_of!(BlockQ4K, scales) == 4);

impl WeightType for Q4K {
    const UNIT: GemvUnit = GemvType::Q4K.unit();
    type Loads = KLoads;
    #[inline(always)]
    unsafe fn load<A: ActSource>(w: u64, act: A, c: u32) -> KLoads {
        let (ds, u) = k_act(act, c);
        KLoads {
            head: k_head_word(w, c, Q4K_HEAD_LANE),
            qs: ld_v4(w + offset_of!(BlockQ4K, qs) as u64 + 16 * c as u64),
            qh: [0; 4],
            ds,
            u,
        }
    }
    #[inline(always)]
    fn dot(l: &KLoads, c: u32) -> f32 {
        let head = k_header(l.head, Q4K_HEAD_LANE);
        k_dot(l, &head, c, |_| (0, 0))
    }
}

/// Q5_K (`vec_dot_q5_K_q8_1`): Q4_K plus bit `2p` (low nibbles) / `2p+1` (high) of `qh[pos]`
/// as bit 4; the lane's 16 `qh` bytes are chunk `c%2` of `qh`, read by lane `c%2`.
pub struct Q5K;
const _: () = assert!(size_of::<BlockQ5K>().is_multiple_of(16) && offset_of!(BlockQ5K, qh) == 16);
const _: () = assert!(offset_of!(BlockQ5K, qs) == 48 && offset_of!(BlockQ5K, scales) == 4);

impl WeightType for Q5K {
    const UNIT: GemvUnit = GemvType::Q5K.unit();
    type Loads = KLoads;
    #[inline(always)]
    unsafe fn load<A: ActSource>(w: u64, act: A, c: u32) -> KLoads {
        let (ds, u) = k_act(act, c);
        KLoads {
            head: k_head_word(w, c, Q5K_HEAD_LANE),
            qs: ld_v4(w + offset_of!(BlockQ5K, qs) as u64 + 16 * c as u64),
            qh: ld_v4_if(
                c < 2,
                w + offset_of!(BlockQ5K, qh) as u64 + 16 * (c % 2) as u64,
            ),
            ds,
            u,
        }
    }
    #[inline(always)]
    fn dot(l: &KLoads, c: u32) -> f32 {
        let head = k_header(l.head, Q5K_HEAD_LANE);
        let src = (lane_id() & !7) + c % 2;
        let qh = [
            shfl_idx(l.qh[0], src),
            shfl_idx(l.qh[1], src),
            shfl_idx(l.qh[2], src),
            shfl_idx(l.qh[3], src),
        ];
        let sh = 2 * (c / 2);
        k_dot(l, &head, c, |k| {
            let vh = qh[k] >> sh;
            ((vh << 4) & 0x1010_1010, (vh << 3) & 0x1010_1010)
        })
    }
}
