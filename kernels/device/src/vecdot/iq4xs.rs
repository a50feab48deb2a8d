//! IQ4_XS: 8 lanes per super-block.
//!
//! Lane part `c ∈ 0..8` owns sub-block `c` (32 weights): its 16 `qs` bytes (low nibbles are
//! elements `0..16`, high nibbles `16..32`, as IQ4_NL's block), its 6-bit scale (4 bits of
//! `scales_l[c/2]`, 2 of `scales_h`) and q8_1 block `c`. Blocks are 136 bytes, so every field is
//! 8-byte aligned and read as words; each lane reads the 8-byte header (`d`, `scales_h`,
//! `scales_l`) are read once per super-block, one word by each of lanes 0 and 1, and shuffled to
//! the others; the `qs` bytes as two 8-byte loads per lane.

use super::pair::iq4nl_values;
use super::{ActSource, WeightType};
use crate::intrinsics::{dp4a, f16_to_f32, lane_id, ld_u32_if, ld_u64, shfl_idx};
use core::mem::offset_of;
use ingot_abi::blocks::BlockIq4Xs;
use ingot_abi::launch::GemvUnit;
use ingot_abi::weight_types::GemvType;

/// What an IQ4_XS lane loads from one super-block.
#[derive(Default)]
pub struct Iq4XsLoads {
    /// Lanes 0 and 1: header word `c` (`d | scales_h << 16`, then `scales_l` as one
    /// little-endian word); 0 on the other lanes.
    head: u32,
    qs: [u32; 4],
    ds: u32,
    u: [u32; 8],
}

/// IQ4_XS (`vec_dot_iq4_xs_q8_1`): `d·d8·(ls − 32)·Σ dp4a(code-book bytes, q8)` per sub-block.
pub struct Iq4Xs;
const _: () =
    assert!(offset_of!(BlockIq4Xs, scales_h) == 2 && offset_of!(BlockIq4Xs, scales_l) == 4);
const _: () = assert!(offset_of!(BlockIq4Xs, qs) == 8 && core::mem::size_of::<BlockIq4Xs>() == 136);

impl WeightType for Iq4Xs {
    const UNIT: GemvUnit = GemvType::Iq4Xs.unit();
    type Loads = Iq4XsLoads;
    #[inline(always)]
    unsafe fn load<A: ActSource>(w: u64, act: A, c: u32) -> Iq4XsLoads {
        let qs = w + offset_of!(BlockIq4Xs, qs) as u64 + 16 * c as u64;
        let (lo, hi) = (ld_u64(qs), ld_u64(qs + 8));
        Iq4XsLoads {
            head: ld_u32_if(c < 2, w + 4 * (c % 2) as u64),
            qs: [lo as u32, (lo >> 32) as u32, hi as u32, (hi >> 32) as u32],
            ds: act.ds(c as u64),
            u: act.qs::<8>(c as u64, 0),
        }
    }
    #[inline(always)]
    fn dot(l: &Iq4XsLoads, c: u32) -> f32 {
        let base = lane_id() & !7;
        let head = [shfl_idx(l.head, base), shfl_idx(l.head, base + 1)];
        // `ingot_abi::blocks::iq4xs_scale` on the header words: low 4 bits from `scales_l[c/2]`
        // (nibble c%2, so bits 4c.. of the word), high 2 bits from bits 2c.. of `scales_h`.
        let low = (head[1] >> (4 * c)) & 0xF;
        let high = (head[0] >> (16 + 2 * c)) & 3;
        let ls = (low | (high << 4)) as i32 - 32;
        let mut sumi = 0;
        let mut k = 0;
        while k < 4 {
            let (lo, hi) = iq4nl_values(l.qs[k]);
            sumi = dp4a(lo, l.u[k], sumi);
            sumi = dp4a(hi, l.u[4 + k], sumi);
            k += 1;
        }
        f16_to_f32(head[0]) * f16_to_f32(l.ds) * (sumi * ls) as f32
    }
}
