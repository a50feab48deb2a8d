//! IQ3_XXS, IQ3_S: 8 lanes per super-block.
//!
//! Lane part `c ∈ 0..8` owns sub-block `c` (32 weights: eight 4-value points of the type's
//! code book, in four 8-value sign groups) and q8_1 block `c`, read as 2-byte aligned words
//! (see `grid.rs`); lane 0 reads `d` and shuffles it to the other seven (IQ3_S: lanes 0 and 1
//! read its four scale bytes the same way). The lane's share is
//! `d·d8·db·sumi` (ggml's dequantization multiplied out).

use super::grid::{
    grid4, group_act, ksigns, lane0_d, ld_u32_a2, signed_group_dot, IQ3S_GRID, IQ3XXS_GRID,
};
use super::{ActSource, WeightType};
use crate::intrinsics::{f16_to_f32, lane_id, ld_u16_if, ld_u8, shfl_idx};
use core::mem::offset_of;
use ingot_abi::blocks::{BlockIq3S, BlockIq3Xxs};
use ingot_abi::launch::GemvUnit;
use ingot_abi::weight_types::GemvType;

/// What an IQ3 lane loads from one super-block: `d` (lane 0 only), its 8 grid-index bytes, its
/// sign word, IQ3_S's `qh` byte and scale bytes, and its q8_1 block.
#[derive(Default)]
pub struct Iq3Loads {
    d: u32,
    q: [u32; 2],
    signs: u32,
    /// IQ3_S: `qh[c]`.
    qh: u32,
    /// IQ3_S, lanes 0 and 1: `scales[2c..2c+2]` (the four scale bytes are read once per
    /// super-block and shuffled); 0 on the other lanes.
    sc: u32,
    ds: u32,
    u: [u32; 8],
}

/// `d·d8` of the lane's unit (`d` from lane 0 of its group of 8); all 32 lanes call it together.
#[inline(always)]
fn unit_dd8(l: &Iq3Loads) -> f32 {
    lane0_d(l.d) * f16_to_f32(l.ds)
}

/// Points `2k` and `2k + 1` of `grid` (indices from `index`) as one 8-value group; each index
/// is computed just before its lookup (that order keeps the IQ3_S loop within its SASS budget).
#[inline(always)]
fn group_points<const N: usize>(
    grid: &'static [u32; N],
    index: impl Fn(usize) -> u32,
    k: usize,
) -> u64 {
    let lo = grid4(grid, index(2 * k));
    let hi = grid4(grid, index(2 * k + 1));
    lo as u64 | (hi as u64) << 32
}

/// Index byte `j ∈ 0..8` of the lane's grid-index bytes.
#[inline(always)]
fn index_byte(l: &Iq3Loads, j: usize) -> u32 {
    l.q[j / 4] >> (8 * (j % 4)) & 0xFF
}

/// IQ3_XXS: `qs[8c..8c+8]` are the grid indices of sub-block `c`, `qs[64+4c..]` its word of four
/// 7-bit sign indices and the 4-bit scale: `db = (0.5 + s)·0.5`.
pub struct Iq3Xxs;
const _: () = assert!(offset_of!(BlockIq3Xxs, qs) == 2);

impl WeightType for Iq3Xxs {
    const UNIT: GemvUnit = GemvType::Iq3Xxs.unit();
    type Loads = Iq3Loads;
    #[inline(always)]
    unsafe fn load<A: ActSource>(w: u64, act: A, c: u32) -> Iq3Loads {
        let qs = w + 2 + 8 * c as u64;
        Iq3Loads {
            d: ld_u16_if(c == 0, w),
            q: [ld_u32_a2(qs), ld_u32_a2(qs + 4)],
            signs: ld_u32_a2(w + 2 + 64 + 4 * c as u64),
            qh: 0,
            sc: 0,
            ds: act.ds(c as u64),
            u: act.qs::<8>(c as u64, 0),
        }
    }
    #[inline(always)]
    fn dot(l: &Iq3Loads, _c: u32) -> f32 {
        let dd8 = unit_dd8(l);
        let mut sumi = 0;
        let mut k = 0;
        while k < 4 {
            let g = group_points(&IQ3XXS_GRID, |j| index_byte(l, j), k);
            let signs = ksigns(l.signs >> (7 * k));
            sumi = signed_group_dot(g, signs, group_act(&l.u, k), sumi);
            k += 1;
        }
        let s = (l.signs >> 28) as f32;
        dd8 * ((0.5 + s) * 0.5) * sumi as f32
    }
}

/// IQ3_S: 9-bit indices (`qs[8c+j]` and bit `j` of `qh[c]`), explicit sign bytes
/// `signs[4c..4c+4]`, the 4-bit scale nibble `c % 2` of `scales[c/2]`: `db = 1 + 2s`.
pub struct Iq3S;
const _: () = assert!(offset_of!(BlockIq3S, qs) == 2 && offset_of!(BlockIq3S, qh) == 66);
const _: () = assert!(offset_of!(BlockIq3S, signs) == 74 && offset_of!(BlockIq3S, scales) == 106);

impl WeightType for Iq3S {
    const UNIT: GemvUnit = GemvType::Iq3S.unit();
    type Loads = Iq3Loads;
    #[inline(always)]
    unsafe fn load<A: ActSource>(w: u64, act: A, c: u32) -> Iq3Loads {
        let qs = w + 2 + 8 * c as u64;
        let scales = w + offset_of!(BlockIq3S, scales) as u64;
        Iq3Loads {
            d: ld_u16_if(c == 0, w),
            q: [ld_u32_a2(qs), ld_u32_a2(qs + 4)],
            signs: ld_u32_a2(w + offset_of!(BlockIq3S, signs) as u64 + 4 * c as u64),
            qh: ld_u8(w + offset_of!(BlockIq3S, qh) as u64 + c as u64),
            sc: ld_u16_if(c < 2, scales + 2 * (c % 2) as u64),
            ds: act.ds(c as u64),
            u: act.qs::<8>(c as u64, 0),
        }
    }
    #[inline(always)]
    fn dot(l: &Iq3Loads, c: u32) -> f32 {
        let dd8 = unit_dd8(l);
        // Scale byte c/2 is in the word of lane c/4, nibble c%2.
        let sc = shfl_idx(l.sc, (lane_id() & !7) + c / 4) >> (8 * (c / 2 % 2) + 4 * (c % 2));
        let index = |j: usize| index_byte(l, j) | (l.qh >> j & 1) << 8;
        let mut sumi = 0;
        let mut k = 0;
        while k < 4 {
            let g = group_points(&IQ3S_GRID, index, k);
            sumi = signed_group_dot(g, l.signs >> (8 * k), group_act(&l.u, k), sumi);
            k += 1;
        }
        let s = (sc & 15) as f32;
        dd8 * (1.0 + 2.0 * s) * sumi as f32
    }
}
