//! IQ1_S and IQ1_M: 8 lanes per super-block.
//!
//! IQ1_S: lane part `c ∈ 0..8` owns sub-block `c` (32 weights, four 8-value points of the ternary
//! code book `IQ1S_GRID`, values −1, 0, 1 stored as signed bytes) and q8_1 block `c`: its 4
//! low index bytes `qs[4c..4c+4]` and its `qh[c]` (3 high bits per index, the 3-bit scale in
//! bits 12-14, the shift's sign in bit 15), read as 2-byte loads (the block is 50 bytes, 2-byte
//! aligned); lane 0 reads `d` and shuffles it. The shift `±IQ1S_DELTA` multiplies the sum of
//! the activation ints, taken exactly with `dp4a(0x01010101, q)`:
//! `d·(2s + 1)·d8·(Σ grid·q + delta·Σ q)`.
//!
//! IQ1_M: lane part `c` owns sub-block `c` the same way, with a shift sign per 8-value group
//! (bit 3 of its `qh` nibble) and a 3-bit scale per 16 weights. Blocks are 56 bytes, so every
//! block is 8-byte aligned: the lane reads `qs[4c..4c+4]` as a word and `qh[2c..2c+2]` as a
//! u16; lanes 0 and 1 read the two words of `scales` (where `d` lives, in the top nibbles of
//! its four u16) and shuffle them to the other six.

use super::grid::{grid8, group_act, lane0_d, ld_u32_a2, IQ1S_GRID};
use super::{ActSource, WeightType};
use crate::intrinsics::{
    dp4a, f16_to_f32, lane_id, ld_u16, ld_u16_if, ld_u32, ld_u32_if, select_f32, shfl_idx,
};
use core::mem::offset_of;
use ingot_abi::blocks::{BlockIq1M, BlockIq1S};
use ingot_abi::iq_grids::{IQ1M_DELTA, IQ1S_DELTA};
use ingot_abi::launch::GemvUnit;
use ingot_abi::weight_types::GemvType;

/// What an IQ1_S lane loads from one super-block.
#[derive(Default)]
pub struct Iq1SLoads {
    d: u32,
    qs: u32,
    qh: u32,
    ds: u32,
    u: [u32; 8],
}

/// IQ1_S (ggml `dequantize_row_iq1_s`: `y = d·(2s + 1)·(grid ± IQ1S_DELTA)`).
pub struct Iq1S;
const _: () = assert!(offset_of!(BlockIq1S, qs) == 2 && offset_of!(BlockIq1S, qh) == 34);

impl WeightType for Iq1S {
    const UNIT: GemvUnit = GemvType::Iq1S.unit();
    type Loads = Iq1SLoads;
    #[inline(always)]
    unsafe fn load<A: ActSource>(w: u64, act: A, c: u32) -> Iq1SLoads {
        Iq1SLoads {
            d: ld_u16_if(c == 0, w),
            qs: ld_u32_a2(w + 2 + 4 * c as u64),
            qh: ld_u16(w + offset_of!(BlockIq1S, qh) as u64 + 2 * c as u64),
            ds: act.ds(c as u64),
            u: act.qs::<8>(c as u64, 0),
        }
    }
    #[inline(always)]
    fn dot(l: &Iq1SLoads, _c: u32) -> f32 {
        let d = lane0_d(l.d);
        let mut sums = (0, 0);
        let mut k = 0;
        while k < 4 {
            let i = (l.qs >> (8 * k) & 0xFF) | ((l.qh >> (3 * k) & 7) << 8);
            sums = ternary_group(i, group_act(&l.u, k), sums);
            k += 1;
        }
        let (sumi, sumq) = sums;
        let delta = select_f32(l.qh & 0x8000 != 0, -IQ1S_DELTA, IQ1S_DELTA);
        let dl = d * (2 * (l.qh >> 12 & 7) + 1) as f32;
        dl * f16_to_f32(l.ds) * (sumi as f32 + delta * sumq as f32)
    }
}

/// `(sumi, sumq)` plus `Σ grid·q` and `Σ q` of one 8-value group: grid point `i` of
/// `IQ1S_GRID` (signed bytes) against the activation ints `u`.
#[inline(always)]
fn ternary_group(i: u32, u: [u32; 2], (sumi, sumq): (i32, i32)) -> (i32, i32) {
    let g = grid8(&IQ1S_GRID, i);
    let sumi = dp4a((g >> 32) as u32, u[1], dp4a(g as u32, u[0], sumi));
    let sumq = dp4a(0x0101_0101, u[1], dp4a(0x0101_0101, u[0], sumq));
    (sumi, sumq)
}

/// What an IQ1_M lane loads from one super-block.
#[derive(Default)]
pub struct Iq1MLoads {
    /// Lanes 0 and 1: word `c` of `scales`; 0 on the other lanes.
    head: u32,
    qs: u32,
    qh: u32,
    ds: u32,
    u: [u32; 8],
}

/// IQ1_M (ggml `dequantize_row_iq1_m`: `y = d·(2s + 1)·(grid ± IQ1M_DELTA)`, `d` from
/// `ingot_abi::blocks::iq1m_d`, `s` from `iq1m_scale`).
pub struct Iq1M;
const _: () = assert!(offset_of!(BlockIq1M, qh) == 32 && offset_of!(BlockIq1M, scales) == 48);
const _: () = assert!(core::mem::size_of::<BlockIq1M>() == 56);

impl WeightType for Iq1M {
    const UNIT: GemvUnit = GemvType::Iq1M.unit();
    type Loads = Iq1MLoads;
    #[inline(always)]
    unsafe fn load<A: ActSource>(w: u64, act: A, c: u32) -> Iq1MLoads {
        let scales = w + offset_of!(BlockIq1M, scales) as u64;
        Iq1MLoads {
            head: ld_u32_if(c < 2, scales + 4 * (c % 2) as u64),
            qs: ld_u32(w + 4 * c as u64),
            qh: ld_u16(w + offset_of!(BlockIq1M, qh) as u64 + 2 * c as u64),
            ds: act.ds(c as u64),
            u: act.qs::<8>(c as u64, 0),
        }
    }
    #[inline(always)]
    fn dot(l: &Iq1MLoads, c: u32) -> f32 {
        let base = lane_id() & !7;
        let head = [shfl_idx(l.head, base), shfl_idx(l.head, base + 1)];
        // `iq1m_d`: the top nibble of each of the four u16 of `scales`, the first lowest.
        let d = (head[0] >> 12 & 0xF)
            | (head[0] >> 24 & 0xF0)
            | (head[1] >> 4 & 0xF00)
            | (head[1] >> 16 & 0xF000);
        // `iq1m_scale`: u16 `c/2` of `scales`, bits `6(c%2) + 3h ..` for half `h`.
        // (A select, not `head[c / 4]`: an indexed pair would live in local memory.)
        let word = if c < 4 { head[0] } else { head[1] };
        let sc = word >> (16 * (c / 2 % 2) + 6 * (c % 2));
        let mut sum = [0.0f32; 2];
        let mut k = 0;
        while k < 4 {
            let n = l.qh >> (4 * k);
            let i = (l.qs >> (8 * k) & 0xFF) | ((n & 7) << 8);
            let (sumi, sumq) = ternary_group(i, group_act(&l.u, k), (0, 0));
            let delta = select_f32(n & 8 != 0, -IQ1M_DELTA, IQ1M_DELTA);
            sum[k / 2] += sumi as f32 + delta * sumq as f32;
            k += 1;
        }
        let scaled = (2 * (sc & 7) + 1) as f32 * sum[0] + (2 * (sc >> 3 & 7) + 1) as f32 * sum[1];
        f16_to_f32(d) * f16_to_f32(l.ds) * scaled
    }
}
