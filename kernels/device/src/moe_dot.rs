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
rows_dot_lane!(rows_dot_lane4, 4, [0, 1, 2, 3]);
