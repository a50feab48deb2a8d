//! IQ2_XXS, IQ2_XS, IQ2_S: 8 lanes per super-block.
//!
//! Lane part `c ∈ 0..8` owns sub-block `c` (32 weights, four 8-value groups on the type's code
//! book) and q8_1 block `c`: its grid indices, sign bits and scale (layouts in
//! `ingot_abi::blocks`), read as 2-byte aligned words (see `grid.rs`). Lane 0 reads `d` and
//! shuffles it to the other seven. The lane's share is `d·d8·Σ_h db_h·sumi_h` with the integer
//! dot `sumi_h` of the signed grid values of each scale's weights (ggml's dequantization
//! `d·(0.5 + s)·0.25·grid·sign`, multiplied out per scale).

use super::grid::{
    grid8, group_act, ksigns, lane0_d, ld_u32_a2, signed_group_dot, IQ2S_GRID, IQ2XS_GRID,
    IQ2XXS_GRID,
};
use super::{ActSource, WeightType};
use crate::intrinsics::{f16_to_f32, ld_u16_if, ld_u8};
use core::mem::offset_of;
use ingot_abi::blocks::{BlockIq2S, BlockIq2Xs, BlockIq2Xxs};
use ingot_abi::launch::GemvUnit;
use ingot_abi::weight_types::GemvType;

/// What an IQ2 lane loads from one super-block: `d` (lane 0 only), the sub-block's words (see
/// each type) and its q8_1 block.
#[derive(Default)]
pub struct Iq2Loads {
    d: u32,
    q: [u32; 2],
    /// IQ2_XS: the scale byte; IQ2_S: `qh | scales << 8`.
    extra: u32,
    ds: u32,
    u: [u32; 8],
}

/// `0.25·((0.5 + s_lo)·lo + (0.5 + s_hi)·hi)` for the two 4-bit scales of byte `sc`.
#[inline(always)]
fn two_scales(sc: u32, lo: i32, hi: i32) -> f32 {
    0.25 * ((0.5 + (sc & 15) as f32) * lo as f32 + (0.5 + (sc >> 4 & 15) as f32) * hi as f32)
}

/// IQ2_XXS: `qs` words `2c, 2c+1` of sub-block `c` are four 8-bit grid indices, then four 7-bit
/// sign indices and the 4-bit scale.
pub struct Iq2Xxs;
const _: () = assert!(offset_of!(BlockIq2Xxs, qs) == 2);

impl WeightType for Iq2Xxs {
    const UNIT: GemvUnit = GemvType::Iq2Xxs.unit();
    type Loads = Iq2Loads;
    #[inline(always)]
    unsafe fn load<A: ActSource>(w: u64, act: A, c: u32) -> Iq2Loads {
        let qs = w + 2 + 8 * c as u64;
        Iq2Loads {
            d: ld_u16_if(c == 0, w),
            q: [ld_u32_a2(qs), ld_u32_a2(qs + 4)],
            extra: 0,
            ds: act.ds(c as u64),
            u: act.qs::<8>(c as u64, 0),
        }
    }
    #[inline(always)]
    fn dot(l: &Iq2Loads, _c: u32) -> f32 {
        let d = lane0_d(l.d);
        let mut sumi = 0;
        let mut k = 0;
        while k < 4 {
            let g = grid8(&IQ2XXS_GRID, l.q[0] >> (8 * k));
            sumi = signed_group_dot(g, ksigns(l.q[1] >> (7 * k)), group_act(&l.u, k), sumi);
            k += 1;
        }
        let s = (l.q[1] >> 28) as f32;
        d * (0.5 + s) * 0.25 * f16_to_f32(l.ds) * sumi as f32
    }
}

/// IQ2_XS: the four u16 of sub-block `c` are 9-bit grid indices with 7-bit sign indices above;
/// `scales[c]` holds the scales of its two halves.
pub struct Iq2Xs;
const _: () = assert!(offset_of!(BlockIq2Xs, qs) == 2 && offset_of!(BlockIq2Xs, scales) == 66);

impl WeightType for Iq2Xs {
    const UNIT: GemvUnit = GemvType::Iq2Xs.unit();
    type Loads = Iq2Loads;
    #[inline(always)]
    unsafe fn load<A: ActSource>(w: u64, act: A, c: u32) -> Iq2Loads {
        let qs = w + 2 + 8 * c as u64;
        Iq2Loads {
            d: ld_u16_if(c == 0, w),
            q: [ld_u32_a2(qs), ld_u32_a2(qs + 4)],
            extra: ld_u8(w + offset_of!(BlockIq2Xs, scales) as u64 + c as u64),
            ds: act.ds(c as u64),
            u: act.qs::<8>(c as u64, 0),
        }
    }
    #[inline(always)]
    fn dot(l: &Iq2Loads, _c: u32) -> f32 {
        let d = lane0_d(l.d);
        let mut sumi = [0i32; 2];
        let mut k = 0;
        while k < 4 {
            let v = l.q[k / 2] >> (16 * (k % 2));
            let g = grid8(&IQ2XS_GRID, v);
            sumi[k / 2] = signed_group_dot(g, ksigns(v >> 9), group_act(&l.u, k), sumi[k / 2]);
            k += 1;
        }
        d * f16_to_f32(l.ds) * two_scales(l.extra, sumi[0], sumi[1])
    }
}

/// IQ2_S: sub-block `c` has the low index bytes `qs[4c..4c+4]`, the sign bytes
/// `qs[32+4c..32+4c+4]` (8 explicit signs per group), 2 high index bits per group in `qh[c]` and
/// the two scales in `scales[c]`.
pub struct Iq2S;
const _: () = assert!(offset_of!(BlockIq2S, qs) == 2 && offset_of!(BlockIq2S, qh) == 66);
const _: () = assert!(offset_of!(BlockIq2S, scales) == 74);

impl WeightType for Iq2S {
    const UNIT: GemvUnit = GemvType::Iq2S.unit();
    type Loads = Iq2Loads;
    #[inline(always)]
    unsafe fn load<A: ActSource>(w: u64, act: A, c: u32) -> Iq2Loads {
        let qs = w + 2 + 4 * c as u64;
        let qh = ld_u8(w + offset_of!(BlockIq2S, qh) as u64 + c as u64);
        let sc = ld_u8(w + offset_of!(BlockIq2S, scales) as u64 + c as u64);
        Iq2Loads {
            d: ld_u16_if(c == 0, w),
            q: [ld_u32_a2(qs), ld_u32_a2(qs + 32)],
            extra: qh | (sc << 8),
            ds: act.ds(c as u64),
            u: act.qs::<8>(c as u64, 0),
        }
    }
    #[inline(always)]
    fn dot(l: &Iq2Loads, _c: u32) -> f32 {
        let d = lane0_d(l.d);
        let mut sumi = [0i32; 2];
        let mut k = 0;
        while k < 4 {
            let i = (l.q[0] >> (8 * k) & 0xFF) | ((l.extra >> (2 * k) & 3) << 8);
            let g = grid8(&IQ2S_GRID, i);
            let signs = l.q[1] >> (8 * k);
            sumi[k / 2] = signed_group_dot(g, signs, group_act(&l.u, k), sumi[k / 2]);
            k += 1;
        }
        d * f16_to_f32(l.ds) * two_scales(l.extra >> 8, sumi[0], sumi[1])
    }
}
