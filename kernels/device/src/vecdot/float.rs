//! F32, F16 and BF16 weights: 4 lanes per 32 weights.
//!
//! A unit is 32 consecutive weights (one [`ingot_abi::blocks::BlockF32`] / `BlockF16` /
//! `BlockBf16`) against one q8_1 activation block. Lane part `p ∈ 0..4` owns weights
//! `8p .. 8p+8`: 32 bytes of F32 (two 16-byte loads) or 16 bytes of F16/BF16 (one), and
//! activation ints `2p, 2p+1` with the block's `ds`. The lane's share is
//! `d8 · Σ w_i · q_i` in f32 (the weights are used as stored, widened exactly to f32).

use super::{ActSource, WeightType};
use crate::intrinsics::{f16_to_f32, ld_v4};
use ingot_abi::launch::GemvUnit;
use ingot_abi::weight_types::GemvType;

/// What a float lane loads from one unit: its 8 weights as f32 bits, the activation block's
/// `ds` word and the lane's two activation ints.
#[derive(Default)]
pub struct FloatLoads {
    w: [u32; 8],
    ds: u32,
    u: [u32; 2],
}

/// `d8 · Σ w_i · q_i` over the lane's 8 weights (`w` as f32 bits) and activation bytes.
#[inline(always)]
fn float_dot(l: &FloatLoads) -> f32 {
    let mut sum = 0.0f32;
    let mut i = 0;
    while i < 8 {
        let q = ((l.u[i / 4] >> (8 * (i % 4))) as u8 as i8) as f32;
        sum += f32::from_bits(l.w[i]) * q;
        i += 1;
    }
    f16_to_f32(l.ds) * sum
}

/// The lane's activation words (see the module docs).
#[inline(always)]
unsafe fn float_act<A: ActSource>(act: A, p: u32) -> (u32, [u32; 2]) {
    (act.ds(0), act.qs::<2>(0, 2 * p as u64))
}

/// F32 weights.
pub struct F32;

impl WeightType for F32 {
    const UNIT: GemvUnit = GemvType::F32.unit();
    type Loads = FloatLoads;
    #[inline(always)]
    unsafe fn load<A: ActSource>(w: u64, act: A, p: u32) -> FloatLoads {
        let a = ld_v4(w + 32 * p as u64);
        let b = ld_v4(w + 32 * p as u64 + 16);
        let (ds, u) = float_act(act, p);
        FloatLoads {
            w: [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]],
            ds,
            u,
        }
    }
    #[inline(always)]
    fn dot(l: &FloatLoads, _p: u32) -> f32 {
        float_dot(l)
    }
}

/// The 8 halves of four words, widened to f32 bits by `widen`.
#[inline(always)]
fn halves(h: [u32; 4], widen: impl Fn(u32) -> u32) -> [u32; 8] {
    [
        widen(h[0] & 0xFFFF),
        widen(h[0] >> 16),
        widen(h[1] & 0xFFFF),
        widen(h[1] >> 16),
        widen(h[2] & 0xFFFF),
        widen(h[2] >> 16),
        widen(h[3] & 0xFFFF),
        widen(h[3] >> 16),
    ]
}

/// F16 weights.
pub struct F16;

impl WeightType for F16 {
    const UNIT: GemvUnit = GemvType::F16.unit();
    type Loads = FloatLoads;
    #[inline(always)]
    unsafe fn load<A: ActSource>(w: u64, act: A, p: u32) -> FloatLoads {
        let (ds, u) = float_act(act, p);
        FloatLoads {
            w: halves(ld_v4(w + 16 * p as u64), |h| f16_to_f32(h).to_bits()),
            ds,
            u,
        }
    }
    #[inline(always)]
    fn dot(l: &FloatLoads, _p: u32) -> f32 {
        float_dot(l)
    }
}

/// BF16 weights.
pub struct Bf16;

impl WeightType for Bf16 {
    const UNIT: GemvUnit = GemvType::Bf16.unit();
    type Loads = FloatLoads;
    #[inline(always)]
    unsafe fn load<A: ActSource>(w: u64, act: A, p: u32) -> FloatLoads {
        let (ds, u) = float_act(act, p);
        FloatLoads {
            w: halves(ld_v4(w + 16 * p as u64), |h| h << 16),
            ds,
            u,
        }
    }
    #[inline(always)]
    fn dot(l: &FloatLoads, _p: u32) -> f32 {
        float_dot(l)
    }
}
