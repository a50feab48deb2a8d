//! Per-type dot products of quantized weights with q8_1 activations: the integer math of
//! ggml-cuda's `vecdotq.cuh` (docs/quant-formats.md#gpu-dot-products, oracle
//! `ingot_quant::vec_dot_q8_1`), one file per quant family, so every kernel that multiplies
//! weights by q8_1 activations (the gemvs, the fused MoE kernels) shares one implementation.
//!
//! A weight row is a sequence of *units*, each [`WeightType::LANES`] lanes work on together:
//! * 32-element types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL): a **pair** of blocks (64 weights)
//!   for one lane, whole aligned 4-byte loads, never a byte twice; a row of an odd number of
//!   blocks ends in one unpaired block after the unit loop (see [`row_dot_lane`]);
//! * float types (F32, F16, BF16): 32 weights shared by 4 lanes (`float.rs`);
//! * k-quants, IQ4_XS and the code-book types: one 256-element super-block shared by 4 (Q2_K,
//!   Q3_K) or 8 lanes, each lane owning a fixed slice of positions (see each impl).
//! Unit `u` pairs with the `QK/32` q8_1 blocks from block `u·QK/32`; a type's `load` reads them
//! through an [`ActSource`]: global memory ([`GlobalAct`]) or a gemv block's shared-memory stage
//! ([`SharedAct`], [`stage_act`]).
//!
//! Calling it: one warp per row, `warp_sum(row_dot_lane::<Q4K, _>(w_row, GlobalAct(x), ncols,
//! lane, 32))`; a sub-warp of `lanes` lanes (a power of two, at least `LANES`) may compute a short
//! row, reduced by `intrinsics::sub_sum`.
//!
//! Convergence: each weight byte is loaded by one lane only, and the k-quant `dot`s hand the
//! shared fields (headers, `qh`, scales, `d`, re-alignment words) to the unit's other lanes with
//! `shfl.sync` over the full warp. So all 32 lanes call `dot` together: a loop over units runs the
//! same number of iterations on every lane, and a lane without a unit passes `Loads::default()`
//! and discards the result, as [`row_dot_lane`] does.
//!
//! Alignment: weight and activation buffers start 16-byte aligned; Q3_K and Q6_K blocks are only
//! 2-byte aligned, read as aligned 4-byte words re-aligned by funnel shifts, every word inside the
//! block (no read leaves the weight buffer).

mod act;
mod float;
mod grid;
mod iq1;
mod iq2;
mod iq3;
mod iq4xs;
mod kquant45;
mod pair;
mod q2k;
mod q3k;
mod q6k;

pub use act::{
    stage_act, stage_act_wide, stage_base, ActSource, GlobalAct, SharedAct, STAGE_BYTES,
};
pub use float::{Bf16, F16, F32};
pub use iq1::{Iq1M, Iq1S};
pub use iq2::{Iq2S, Iq2Xs, Iq2Xxs};
pub use iq3::{Iq3S, Iq3Xxs};
pub use iq4xs::Iq4Xs;
pub(crate) use kquant45::{k_act, k_dot, k_head_word, k_header, KLoads, Q4K_HEAD_LANE};
pub use kquant45::{k_scales, Q4K, Q5K};
pub use pair::{iq4nl_values, q5_high_bits, Iq4Nl, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0};
pub use q2k::Q2K;
pub use q3k::Q3K;
pub use q6k::{funnel4, sub32_bytes, Q6K};

use core::mem::{offset_of, size_of};
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::{GemvUnit, GEMV_UNITS_IN_FLIGHT};

/// Bytes of one q8_1 activation block.
pub const Q8_BYTES: u64 = size_of::<BlockQ8_1>() as u64;
/// Byte offset of the quant ints in a q8_1 block.
const Q8_QS_OFF: u64 = offset_of!(BlockQ8_1, qs) as u64;
const _: () = assert!(offset_of!(BlockQ8_1, d) == 0 && Q8_QS_OFF == 4 && Q8_BYTES == 36);

/// One quantized weight type as seen by a dot-product kernel.
pub trait WeightType {
    /// The type's unit, from its row of the registry (`ingot_abi::weight_types`), so the
    /// device's thread mapping and the host's launch shapes cannot differ.
    const UNIT: GemvUnit;
    /// Weights per unit (see the module docs).
    const QK: u32 = Self::UNIT.elems;
    /// Bytes per unit.
    const UNIT_BYTES: u64 = Self::UNIT.bytes as u64;
    /// Lanes that share one unit; a power of two dividing 32.
    const LANES: u32 = Self::UNIT.lanes;
    /// What one lane loads from one unit and its activations, held in registers so the loads of
    /// several units can be in flight before the first is used. `Default` is what a lane
    /// without a unit passes to `dot` so that it still takes part in the group's shuffles.
    type Loads: Default;
    /// Issues the loads of lane `part ∈ 0..LANES` for the unit at global address `w` whose
    /// activations are the q8_1 blocks of `act` from its block 0 on.
    unsafe fn load<A: ActSource>(w: u64, act: A, part: u32) -> Self::Loads;
    /// The lane's share of the unit's dot product. The k-quant impls shuffle values between
    /// the `LANES` lanes of a unit (each unit's lanes are consecutive and `LANES`-aligned within
    /// the warp): all 32 lanes of the warp must call it together.
    fn dot(l: &Self::Loads, part: u32) -> f32;
    /// Whether a row may end in one unpaired 32-weight block after its whole units (the
    /// 32-element types, rows of an odd number of blocks). k-quant rows are whole units, and
    /// for them [`Self::load_shifted`] and [`Self::tail_dot`] are never called.
    const TAIL: bool = false;
    /// As [`Self::load`] for a unit whose weights start at `w ≡ 2 (mod 4)`: the odd rows of a
    /// matrix whose rows hold an odd number of blocks of a type whose block size is `≡ 2 (mod
    /// 4)`. Reads the aligned words around the unit; the 2 bytes before it belong to the
    /// previous row and the 2 after it to the row's trailing block, so no read leaves the row
    /// pair (see `row_dot_lane`).
    #[inline(always)]
    unsafe fn load_shifted<A: ActSource>(w: u64, act: A, part: u32) -> Self::Loads {
        Self::load(w, act, part)
    }
    /// The dot product of one trailing 32-weight block at `w` (2-byte aligned) with block 0 of
    /// `act`; one lane computes it, no shuffles.
    #[inline(always)]
    unsafe fn tail_dot<A: ActSource>(_w: u64, _act: A) -> f32 {
        0.0
    }
    /// Whether [`Self::load_staged`] reads a unit: one lane per 4-byte aligned unit (the
    /// 32-element types), so a warp can copy a round of 32 units to shared memory with coalesced
    /// requests and each lane read its own unit there (`moe_dot::staged_row_dot`).
    const STAGED: bool = false;
    /// As [`Self::load`] for the unit whose bytes were copied to shared address `w` (4-byte
    /// aligned). Only types with [`Self::STAGED`] implement it; the others return the default.
    #[inline(always)]
    unsafe fn load_staged<A: ActSource>(_w: u32, _act: A, _part: u32) -> Self::Loads {
        Self::Loads::default()
    }
}

/// `T`'s unit as the launch shapes of `ingot_abi::launch::gemv` see it.
#[inline(always)]
pub const fn gemv_unit<T: WeightType>() -> GemvUnit {
    T::UNIT
}

/// Bytes of a row of `ncols` weights of `T` (`ncols` a multiple of 32, and of `T::QK` for
/// types without a tail).
#[inline(always)]
pub const fn row_bytes<T: WeightType>(ncols: u32) -> u64 {
    ncols as u64 * T::UNIT_BYTES / T::QK as u64
}

/// q8_1 activation blocks per unit of `T`.
#[inline(always)]
pub const fn act_blocks<T: WeightType>() -> u64 {
    (T::QK / QK8_1 as u32) as u64
}

/// Lane `lane ∈ 0..lanes` of a group of `lanes` lanes computing one row's dot product: its partial
/// sum over units `lane/LANES, lane/LANES + lanes/LANES, …` of the row of `ncols` weights at
/// `w_row` against the activations of `x` (from its block 0 on). `ncols` is a multiple of `T::QK`,
/// or for `T::TAIL` types of 32: such a row ends in one unpaired 32-weight block and may start 2
/// bytes past a 4-byte boundary.
///
/// Every lane of the warp runs the same number of iterations (units are taken in rounds of
/// `lanes/LANES`, two rounds per iteration so two units' loads are in flight), because the
/// k-quant `dot`s shuffle within their lane group. The last one or two rounds, where some
/// groups have no unit left, skip those groups' loads and discard their result; they run once,
/// after the loop, so the loop itself has no per-lane guard.
///
/// The trailing block and the shift are decided once per row, outside the unit loop: a
/// shifted row runs the loop with [`WeightType::load_shifted`], and the trailing block is added
/// by the lane that would own the next unit. k-quants (`!T::TAIL`) run the plain loop only.
///
/// Why the shifted reads stay in bounds: a row of an odd number of `b`-byte blocks with
/// `b ≡ 2 (mod 4)` is `≡ 2 (mod 4)` bytes long, so only odd rows start shifted; the 2 bytes
/// read before such a row are the end of the previous row, and every unit is followed by at
/// least the row's trailing block. Types with 4-byte multiple blocks (Q5_1) never shift.
#[inline(always)]
pub unsafe fn row_dot_lane<T: WeightType, A: ActSource>(
    w_row: u64,
    x: A,
    ncols: u32,
    lane: u32,
    lanes: u32,
) -> f32 {
    let nunits = ncols / T::QK;
    if !T::TAIL {
        return units_dot_lane::<T, A, false>(w_row, x, nunits, lane, lanes);
    }
    let mut acc = if w_row & 3 != 0 {
        units_dot_lane::<T, A, true>(w_row, x, nunits, lane, lanes)
    } else {
        units_dot_lane::<T, A, false>(w_row, x, nunits, lane, lanes)
    };
    if ncols % T::QK != 0 && lane / T::LANES == nunits % (lanes / T::LANES) {
        acc += T::tail_dot(
            w_row + nunits as u64 * T::UNIT_BYTES,
            x.skip(nunits as u64 * act_blocks::<T>()),
        );
    }
    acc
}

/// The unit loop of [`row_dot_lane`]; `SHIFTED` selects [`WeightType::load_shifted`].
#[inline(always)]
unsafe fn units_dot_lane<T: WeightType, A: ActSource, const SHIFTED: bool>(
    w_row: u64,
    x: A,
    nunits: u32,
    lane: u32,
    lanes: u32,
) -> f32 {
    let load = |w: u64, a: A, part: u32| {
        if SHIFTED {
            T::load_shifted(w, a, part)
        } else {
            T::load(w, a, part)
        }
    };
    let part = lane % T::LANES;
    let step = lanes / T::LANES;
    let group = lane / T::LANES;
    let w_at = |u: u32| w_row + u as u64 * T::UNIT_BYTES;
    let x_at = |u: u32| x.skip(u as u64 * act_blocks::<T>());
    // Two loads written out below: `GEMV_UNITS_IN_FLIGHT` units per iteration.
    const _: () = assert!(GEMV_UNITS_IN_FLIGHT == 2);
    let iterations = nunits / (GEMV_UNITS_IN_FLIGHT * step);
    let mut acc = 0.0f32;
    let mut i = 0;
    while i < iterations {
        let u0 = 2 * i * step + group;
        let u1 = u0 + step;
        let l0 = load(w_at(u0), x_at(u0), part);
        let l1 = load(w_at(u1), x_at(u1), part);
        acc += T::dot(&l0, part);
        acc += T::dot(&l1, part);
        i += 1;
    }
    let mut round = iterations * GEMV_UNITS_IN_FLIGHT * step;
    while round < nunits {
        let u = round + group;
        let l = if u < nunits {
            load(w_at(u), x_at(u), part)
        } else {
            T::Loads::default()
        };
        let v = T::dot(&l, part);
        if u < nunits {
            acc += v;
        }
        round += step;
    }
    acc
}
