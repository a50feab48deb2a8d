//! Several row dot products in lockstep, for the MoE kernels: the gate and up rows of two
//! consecutive FFN rows (all against the same activations, in global memory), or two output
//! rows of two experts (two activation vectors, in the down block's shared-memory stage). Each
//! round issues every row's loads before any is used, so one unit per row is in flight per lane;
//! rows given the same activation source share its loads (the loaders' asm is pure, so the
//! compiler issues identical loads once), which divides the activation reads, and the load
//! instructions they cost, by the number of rows sharing them.
//!
//! As in `vecdot::row_dot_lane`, every lane of the warp runs the same number of rounds (the
//! k-quant `dot`s shuffle within their lane group): full rounds in the loop, then at most one
//! partial round after it, where lanes without a unit pass default loads and discard the
//! result, so the loop itself carries no per-lane guard.

use crate::intrinsics::{cp_async_u32, cp_async_u32_if, cp_async_wait_warp, syncwarp};
use crate::vecdot::{act_blocks, ActSource, WeightType};
use ingot_abi::launch::WARP_SIZE;

macro_rules! rows_dot_lane {
    ($name:ident, $n:literal, [$($j:literal),+]) => {
        /// Lane `lane`'s partial sums of `w[j]·x[j]` for every row `j`, each row `nunits` units
        /// of `T` (global addresses) against the q8_1 blocks of `x[j]` from its block 0 on. The
        /// whole warp must call it; the caller reduces each sum over the warp. Written out per
        /// row index (no loop over rows) so every load stays in registers and identical
        /// activation loads can be merged.
        #[inline(always)]
        pub unsafe fn $name<T: WeightType, A: ActSource>(
            w: &[u64; $n],
            x: &[A; $n],
            nunits: u32,
            lane: u32,
        ) -> [f32; $n] {
            let part = lane % T::LANES;
            let step = WARP_SIZE / T::LANES;
            let group = lane / T::LANES;
            let load = |j: usize, u: u32| {
                // SAFETY: the caller's addresses hold `nunits` units per row and their
                // activations.
                unsafe {
                    T::load(
                        w[j] + u as u64 * T::UNIT_BYTES,
                        x[j].skip(u as u64 * act_blocks::<T>()),
                        part,
                    )
                }
            };
            let rounds = nunits / step;
            let mut acc = [0.0f32; $n];
            let mut i = 0;
            while i < rounds {
                let u = i * step + group;
                let loads = [$(load($j, u)),+];
                $(acc[$j] += T::dot(&loads[$j], part);)+
                i += 1;
            }
            if rounds * step < nunits {
                let u = rounds * step + group;
                let have = u < nunits;
                // One branch for all rows, so identical activation loads share a basic block
                // and are merged as in the loop.
                let loads = if have {
                    [$(load($j, u)),+]
                } else {
                    [$({ let _ = $j; T::Loads::default() }),+]
                };
                $(
                    let v = T::dot(&loads[$j], part);
                    if have {
                        acc[$j] += v;
                    }
                )+
            }
            acc
        }
    };
}

rows_dot_lane!(rows_dot_lane1, 1, [0]);
rows_dot_lane!(rows_dot_lane2, 2, [0, 1]);
rows_dot_lane!(rows_dot_lane3, 3, [0, 1, 2]);
rows_dot_lane!(rows_dot_lane4, 4, [0, 1, 2, 3]);

/// Bytes of one warp's unit stage for [`staged_row_dot`]: a round of 32 units of the widest
/// staged type (Q8_0's 68-byte block pair).
pub const UNIT_STAGE_BYTES: u32 = WARP_SIZE * 68;

/// [`rows_dot_lane1`] for a type with [`WeightType::STAGED`] units (one lane per 4-byte aligned
/// unit, at most [`UNIT_STAGE_BYTES`]`/32` bytes): the same lanes, units, dot products and
/// order of additions, so the same bits, but the warp first copies each round's units to its
/// stage at shared address `stage` (4-byte aligned, [`UNIT_STAGE_BYTES`] bytes of its own) with
/// coalesced 4-byte `cp.async` requests, lane `l` taking words `l, l + 32, …` of the round, and
/// each lane then reads its unit there. Reading its own unit from global memory, a lane's
/// 4-byte loads are a unit apart from its neighbours', so each load request touches 32
/// sectors for 128 useful bytes; here a request is 128 consecutive bytes. The whole warp calls
/// it; `w` is the row's first unit (4-byte aligned), the row has `nunits` units. As in
/// [`rows_dot_lane1`], full rounds run in the loop without a per-lane guard and the partial
/// round, if any, once after it.
#[inline(always)]
pub unsafe fn staged_row_dot<T: WeightType, A: ActSource>(
    w: u64,
    x: A,
    nunits: u32,
    lane: u32,
    stage: u32,
) -> f32 {
    // Holds for every type this is compiled for: the staged ones fit the stage, one lane each.
    const {
        assert!(
            !T::STAGED || (T::LANES == 1 && T::UNIT_BYTES <= (UNIT_STAGE_BYTES / WARP_SIZE) as u64)
        )
    };
    // A constant per type: each copy below unrolls into `words` requests.
    let words = T::UNIT_BYTES as u32 / 4;
    let mine = stage + lane * T::UNIT_BYTES as u32;
    let act = |u: u32| x.skip(u as u64 * act_blocks::<T>());
    let rounds = nunits / WARP_SIZE;
    let mut acc = 0.0f32;
    let mut i = 0;
    while i < rounds {
        let src = w + (i * WARP_SIZE) as u64 * T::UNIT_BYTES;
        let mut k = 0;
        while k < words {
            let j = k * WARP_SIZE + lane;
            cp_async_u32(stage + 4 * j, src + 4 * j as u64);
            k += 1;
        }
        cp_async_wait_warp();
        acc += T::dot(&T::load_staged(mine, act(i * WARP_SIZE + lane), 0), 0);
        // Every lane has read its unit before the next round's copies overwrite the stage.
        syncwarp();
        i += 1;
    }
    let first = rounds * WARP_SIZE;
    if first < nunits {
        let live = (nunits - first) * words;
        let src = w + first as u64 * T::UNIT_BYTES;
        let mut k = 0;
        while k < words {
            let j = k * WARP_SIZE + lane;
            cp_async_u32_if(j < live, stage + 4 * j, src + 4 * j as u64);
            k += 1;
        }
        cp_async_wait_warp();
        let have = first + lane < nunits;
        let loads = if have {
            T::load_staged(mine, act(first + lane), 0)
        } else {
            T::Loads::default()
        };
        let v = T::dot(&loads, 0);
        if have {
            acc += v;
        }
        // As in the loop: a later call reuses the stage.
        syncwarp();
    }
    acc
}
