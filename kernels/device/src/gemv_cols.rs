//! `gemv_colsM_q4k`: one Q4_K weight stream against `M` q8_1 activation columns, `y_c = W·x_c`
//! for `c < M`: the shape of a speculative verify's gemv (the last verified token and its
//! drafts, issue 41), measured against `M` plain gemvs.
//!
//! Invariants:
//! - **Each column's bits are the plain gemv's** (`gemv_q4k_q8_1` on that column alone): the
//!   thread mapping, the unit order, each lane's accumulation order and the sub-warp reduction
//!   are [`crate::gemv`]'s, and a column's unit dot is `Q4K::dot`'s expression on the same
//!   values (`k_dot` with the header gathered once per unit).
//! - **Weights are read once for all columns**: a lane loads its unit's header word and `qs`
//!   chunk once and pairs them with each column's activations (`k_act`); the header's
//!   shuffles are issued once per unit, not per column.
//! - The block stages all `M` columns (`M · ncols/32` q8_1 blocks, column `c` from staged block
//!   `c · ncols/32` on); the host checked they fit the stage.

use crate::gemv::{prefetch_rows, row_map, RowMap, THREADS};
use crate::intrinsics::{st_f32, sub_sum, tid};
use crate::vecdot::{
    k_act, k_dot, k_head_word, k_header, row_bytes, stage_act, stage_base, ActSource, KLoads,
    SharedAct, WeightType, Q4K, Q4K_HEAD_LANE, Q8_BYTES,
};
use ingot_abi::blocks::BlockQ4K;
use ingot_abi::launch::{GEMV_BLOCK_WARPS, GEMV_UNITS_IN_FLIGHT, WARP_SIZE};

/// What a lane loads of one Q4_K unit's weights: its header word (four lanes of eight) and its
/// 16-byte `qs` chunk.
#[derive(Clone, Copy)]
struct UnitWeights {
    head: u32,
    qs: [u32; 4],
}

#[inline(always)]
unsafe fn load_weights(w: u64, part: u32) -> UnitWeights {
    UnitWeights {
        head: k_head_word(w, part, Q4K_HEAD_LANE),
        qs: crate::intrinsics::ld_v4(
            w + core::mem::offset_of!(BlockQ4K, qs) as u64 + 16 * part as u64,
        ),
    }
}

/// Each column's share of one unit: the header gathered once, then `Q4K::dot`'s expression per
/// column on the column's activations at `acts[c]`.
#[inline(always)]
unsafe fn unit_dots<const M: usize>(
    wt: &UnitWeights,
    acts: &[SharedAct; M],
    part: u32,
) -> [f32; M] {
    let head = k_header(wt.head, Q4K_HEAD_LANE);
    let mut dots = [0.0f32; M];
    let mut c = 0;
    while c < M {
        let (ds, u) = k_act(acts[c], part);
        let l = KLoads {
            head: wt.head,
            qs: wt.qs,
            qh: [0; 4],
            ds,
            u,
        };
        dots[c] = k_dot(&l, &head, part, |_| (0, 0));
        c += 1;
    }
    dots
}

/// Block `bid` of `y_c = W·x_c` over `nrows` rows of `ncols` Q4_K weights (a multiple of 256) at
/// `w`, `M` columns of q8_1 blocks at `x` (column `c` from block `c · ncols/32`), into `y`
/// (column `c` from float `c · nrows`).
#[inline(always)]
pub(crate) unsafe fn gemv_cols<const M: usize>(
    block: u32,
    w: u64,
    x: u64,
    y: u64,
    ncols: u32,
    nrows: u32,
) {
    let nunits = ncols / Q4K::QK;
    let RowMap {
        lanes,
        per_pass,
        passes,
        row0,
        last,
    } = row_map::<Q4K, false>(block, ncols, nrows);
    let row_bytes = row_bytes::<Q4K>(ncols);
    prefetch_rows(w, row_bytes, row0, last + 1);
    let col_blocks = ncols / 32;
    stage_act::<false>(x, M as u32 * col_blocks, THREADS);
    let mut cols = [SharedAct(0); M];
    let mut c = 0;
    while c < M {
        cols[c] = SharedAct(stage_base() + c as u32 * col_blocks * Q8_BYTES as u32);
        c += 1;
    }
    let t = tid();
    let lane = t % WARP_SIZE;
    let sub = lane % lanes;
    let (part, step, group) = (sub % Q4K::LANES, lanes / Q4K::LANES, sub / Q4K::LANES);
    let act_blocks = (Q4K::QK / 32) as u64;
    let mut first = row0 + (t / WARP_SIZE) * per_pass;
    let mut p = 0;
    while p < passes {
        if first >= nrows {
            break;
        }
        let want = first + lane / lanes;
        let r = if want < nrows { want } else { nrows - 1 };
        let wrow = w + r as u64 * row_bytes;
        let w_at = |u: u32| wrow + u as u64 * Q4K::UNIT_BYTES;
        let acts_at = |u: u32| {
            let mut a = cols;
            let mut c = 0;
            while c < M {
                a[c] = cols[c].skip(u as u64 * act_blocks);
                c += 1;
            }
            a
        };
        let mut acc = [0.0f32; M];
        // `units_dot_lane`'s loop: two units' weights in flight, then their dots in order.
        const _: () = assert!(GEMV_UNITS_IN_FLIGHT == 2);
        let iterations = nunits / (GEMV_UNITS_IN_FLIGHT * step);
        let mut i = 0;
        while i < iterations {
            let u0 = 2 * i * step + group;
            let u1 = u0 + step;
            let w0 = load_weights(w_at(u0), part);
            let w1 = load_weights(w_at(u1), part);
            let d0 = unit_dots::<M>(&w0, &acts_at(u0), part);
            let d1 = unit_dots::<M>(&w1, &acts_at(u1), part);
            let mut c = 0;
            while c < M {
                acc[c] += d0[c];
                acc[c] += d1[c];
                c += 1;
            }
            i += 1;
        }
        let mut round = iterations * GEMV_UNITS_IN_FLIGHT * step;
        while round < nunits {
            // A group past the last unit reads the last unit again and discards its dots: no
            // branch around the loads or the dots, whose header shuffles need the whole warp
            // (a branch there let LLVM sink the shuffles into it).
            let u = round + group;
            let valid = u < nunits;
            let at = u.min(nunits - 1);
            let v = unit_dots::<M>(&load_weights(w_at(at), part), &acts_at(at), part);
            let mut c = 0;
            while c < M {
                let sum = acc[c] + v[c];
                acc[c] = if valid { sum } else { acc[c] };
                c += 1;
            }
            round += step;
        }
        let mut c = 0;
        while c < M {
            let total = sub_sum(acc[c], lanes);
            if want < nrows && sub == 0 {
                st_f32(y + (c as u64 * nrows as u64 + want as u64) * 4, total);
            }
            c += 1;
        }
        first += GEMV_BLOCK_WARPS * per_pass;
        p += 1;
    }
}

macro_rules! gemv_cols_kernels {
    ($($name:ident $m:literal;)*) => {$(
        /// [`gemv_cols`] with this many columns; `ingot_abi::launch::GEMV_COLS_Q4K`.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(
            w: *const BlockQ4K,
            x: *const ingot_abi::blocks::BlockQ8_1,
            y: *mut f32,
            ncols: u32,
            nrows: u32,
        ) {
            use crate::intrinsics::{bid, global};
            gemv_cols::<$m>(bid(), global(w), global(x), global(y), ncols, nrows);
        }
    )*};
}

gemv_cols_kernels! {
    gemv_cols2_q4k 2;
    gemv_cols3_q4k 3;
    gemv_cols4_q4k 4;
}
