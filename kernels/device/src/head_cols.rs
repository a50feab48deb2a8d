//! `gemv_argmax_colsM_T_q8_1`: the fused lm_head gemv and greedy choice of `crate::gemv`
//! (`gemv_argmax_*`) on the `M` columns of a speculative verify (issue 41): the last verified
//! token and its drafts, each column with its own activation, logits, key and step state.
//!
//! Invariants:
//! - **Each column's logits and token are the one-column kernel's bits**: the same launch shape,
//!   row assignment and thread mapping (`gemv_rows_then`'s, one group), each column's row dot
//!   `vecdot::row_dot_lane` on the same staged bytes reduced by `sub_sum` over the same lanes,
//!   the same key (`argmax::key`) folded by the same atomic maximum, the same advance
//!   (`argmax::finish`).
//! - **The weights stream from DRAM once for all columns**: a lane computes its row's columns
//!   back to back, so every column after the first loads addresses the first just loaded (an
//!   L1 or L2 hit). What is shared is the DRAM stream, not the instructions: each column costs a
//!   one-column kernel's work.
//! - The block stages every column (column `c` from staged block `c·ncols/32` on); the host
//!   checked `M·ncols/32 ≤ GEMV_STAGE_BLOCKS` and 4-byte aligned strides.
//! - As in the one-column kernel, every key is 0 before the launch and `count` is 0 before and
//!   after it; warps past the last row compute it and store nothing (no exit before the tail).

use crate::argmax::{finish, key};
use crate::gemv::{prefetch_rows, red_max_u64, row_map, RowMap, THREADS};
use crate::intrinsics::{bid, global, ld_u32, st_f32, sts_u32, sub_sum, tid};
use crate::last_block::{last_block_done, reset};
use crate::vecdot::Q8_BYTES;
use crate::vecdot::{self, row_bytes, row_dot_lane, stage_base, SharedAct, WeightType};
use core::arch::nvptx;
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::{GEMV_BLOCK_WARPS, WARP_SIZE};
use ingot_abi::step::StepState;

/// Copies the `ncols/32` q8_1 blocks of each of the `M` columns at `x + c·x_stride` into the
/// stage, column after column, and waits for the whole block; returns the staged bytes of one
/// column (column `c` starts `c` times that past `stage_base()`). Thread `t` copies words
/// `t, t + THREADS, …` of each column.
#[inline(always)]
unsafe fn stage_columns<const M: usize>(x: u64, x_stride: u32, ncols: u32) -> u32 {
    let words = ncols / QK8_1 as u32 * (Q8_BYTES / 4) as u32;
    let stage = stage_base();
    let mut c = 0;
    while c < M as u32 {
        let (from, to) = (x + c as u64 * x_stride as u64, stage + c * words * 4);
        let mut k = tid();
        while k < words {
            sts_u32(to + 4 * k, ld_u32(from + 4 * k as u64));
            k += THREADS;
        }
        c += 1;
    }
    nvptx::_syncthreads();
    words * 4
}

/// Block `bid()` of the `M`-column head: rows of `ncols` weights of `T` at `w`; column `c`'s
/// activation at `x + c·x_stride`, logits at `y + c·y_stride`, key at `acc + c·acc_stride`,
/// step state at `state + c·state_stride` (all bytes).
#[inline(always)]
unsafe fn gemv_argmax_cols<T: WeightType, const M: usize>(
    (w, x, y): (u64, u64, u64),
    (ncols, nrows): (u32, u32),
    (acc, state, count): (u64, *mut StepState, u64),
    (x_stride, y_stride, acc_stride, state_stride): (u32, u32, u32, u32),
) {
    let RowMap {
        lanes,
        per_pass,
        passes,
        row0,
        last,
    } = row_map::<T, false>(bid(), ncols, nrows);
    let row_bytes = row_bytes::<T>(ncols);
    prefetch_rows(w, row_bytes, row0, last + 1);
    let col_bytes = stage_columns::<M>(x, x_stride, ncols);
    let t = tid();
    let lane = t % WARP_SIZE;
    let sub = lane % lanes;
    let mut first = row0 + (t / WARP_SIZE) * per_pass;
    let mut p = 0;
    while p < passes {
        // A row past the end recomputes the last row so its lanes take part in the shuffles;
        // it stores nothing.
        let want = first + lane / lanes;
        let r = if want < nrows { want } else { nrows - 1 };
        let wrow = w + r as u64 * row_bytes;
        let mut c = 0;
        while c < M {
            let act = SharedAct(stage_base() + c as u32 * col_bytes);
            let dot = row_dot_lane::<T, SharedAct>(wrow, act, ncols, sub, lanes);
            let total = sub_sum(dot, lanes);
            if want < nrows && sub == 0 {
                st_f32(y + c as u64 * y_stride as u64 + want as u64 * 4, total);
                red_max_u64(acc + c as u64 * acc_stride as u64, key(total, want));
            }
            c += 1;
        }
        first += GEMV_BLOCK_WARPS * per_pass;
        p += 1;
    }
    if last_block_done(count, GEMV_BLOCK_WARPS) {
        let mut c = 0;
        while c < M {
            let s = (state as u64 + c as u64 * state_stride as u64) as *mut StepState;
            finish(acc + c as u64 * acc_stride as u64, s);
            c += 1;
        }
        reset(count);
    }
}

macro_rules! head_cols_kernels {
    ($($name:literal $v:ident $block:ident $m:literal;)*) => {$(
        const _: () = {
            /// [`gemv_argmax_cols`]; `ingot_abi::launch::GEMV_ARGMAX_COLS_Q6K`.
            #[export_name = $name]
            pub unsafe extern "ptx-kernel" fn kernel(
                w: *const ingot_abi::blocks::$block,
                x: *const BlockQ8_1,
                y: *mut f32,
                acc: *mut u64,
                state: *mut StepState,
                count: *mut u32,
                ncols: u32,
                nrows: u32,
                x_stride: u32,
                y_stride: u32,
                acc_stride: u32,
                state_stride: u32,
            ) {
                gemv_argmax_cols::<vecdot::$v, $m>(
                    (global(w), global(x), global(y)),
                    (ncols, nrows),
                    (global(acc), state, global(count)),
                    (x_stride, y_stride, acc_stride, state_stride),
                );
            }
        };
    )*};
}

head_cols_kernels! {
    "gemv_argmax_cols2_q6k_q8_1" Q6K BlockQ6K 2;
    "gemv_argmax_cols3_q6k_q8_1" Q6K BlockQ6K 3;
    "gemv_argmax_cols4_q6k_q8_1" Q6K BlockQ6K 4;
    "gemv_argmax_cols2_q8_0_q8_1" Q8_0 BlockQ8_0 2;
    "gemv_argmax_cols3_q8_0_q8_1" Q8_0 BlockQ8_0 3;
    "gemv_argmax_cols4_q8_0_q8_1" Q8_0 BlockQ8_0 4;
}
