//! IQ1_S: 8 lanes per super-block.
//!
//! Lane part `c ∈ 0..8` owns sub-block `c` (32 weights, four 8-value points of the ternary
//! code book `IQ1S_GRID`, values −1, 0, 1 stored as signed bytes) and q8_1 block `c`: its 4
//! low index bytes `qs[4c..4c+4]` and its `qh[c]` (3 high bits per index, the 3-bit scale in
//! bits 12-14, the shift's sign in bit 15), read as 2-byte loads (the block is 50 bytes, 2-byte
//! aligned); lane 0 reads `d` and shuffles it. The shift `±IQ1S_DELTA` multiplies the sum of
//! the activation ints, taken exactly with `dp4a(0x01010101, q)`:
//! `d·(2s + 1)·d8·(Σ grid·q + delta·Σ q)`.

use super::grid::{grid8, ld_u32_a2, IQ1S_GRID};
use super::{ActSource, WeightType};
use crate::intrinsics::{dp4a, f16_to_f32, lane_id, ld_u16, ld_u16_if, select_f32, shfl_idx};
use core::mem::offset_of;
use ingot_abi::blocks::BlockIq1S;
use ingot_abi::iq_grids::IQ1S_DELTA;
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
        let d = f16_to_f32(shfl_idx(l.d, lane_id() & !7));
        let mut sumi = 0;
        let mut sumq = 0;
        let mut k = 0;
        while k < 4 {
            let i = (l.qs >> (8 * k) & 0xFF) | ((l.qh >> (3 * k) & 7) << 8);
            let g = grid8(&IQ1S_GRID, i);
            sumi = dp4a(g as u32, l.u[2 * k], sumi);
            sumi = dp4a((g >> 32) as u32, l.u[2 * k + 1], sumi);
            sumq = dp4a(0x0101_0101, l.u[2 * k], sumq);
            sumq = dp4a(0x0101_0101, l.u[2 * k + 1], sumq);
            k += 1;
        }
        let delta = select_f32(l.qh & 0x8000 != 0, -IQ1S_DELTA, IQ1S_DELTA);
        let dl = d * (2 * (l.qh >> 12 & 7) + 1) as f32;
        dl * f16_to_f32(l.ds) * (sumi as f32 + delta * sumq as f32)
    }
}
