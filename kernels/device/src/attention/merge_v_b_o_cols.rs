//! `attn_merge_v_b_o_colsM_*`: [`super::merge_v_b_o`] on the `M` positions (columns) of a
//! speculative verify in one launch (`ingot_abi::launch::attn_out::MERGE_V_B_O_COLS_Q4K`): each
//! column's merge items, then `attn_output` with its weight rows streamed once for all columns.
//!
//! Invariants:
//! - **Each column's bits are the one-column launch's.** A merge item runs [`merge_v_b`] on its
//!   column's buffers; an output warp's row dot of column `c` is `rows_dot_lane1`'s lanes, units
//!   and order of additions on column `c`'s staged activation (the lockstep `rows_dot_laneM`
//!   gives each row its own accumulators), reduced and added to the residual as `moe_down`'s
//!   `rows` does with no routed slot (`warp_sum(0.0 + dot)`); the last block runs each column's
//!   norm tail ([`rmsnorm_tail`]) on that column alone.
//! - **The weight rows are read once**: the `M` lockstep rows share one address, and their
//!   loads are pure asm with the same operands, which the compiler issues once.
//! - Tickets `c·items + i` are merge item `i` of column `c` (each column's pair counters and
//!   scratch are its own); every output block waits for all `M·items` of them.
//! - Types whose units are staged through shared memory (`WeightType::STAGED`) are not
//!   compiled: their one-column path differs ([`crate::moe_dot::staged_row_dot`]).

use super::merge_v_b::merge_v_b;
use super::merge_v_b_o::{Merge, Output};
use crate::chain::{done, ticket, wait_done};
use crate::intrinsics::{bid, global, ld_f32_coherent, st_f32, tid, warp_sum};
use crate::last_block::{last_of, reset};
use crate::moe_dot::{rows_dot_lane2, rows_dot_lane3, rows_dot_lane4};
use crate::moe_down::{shared_rows, NormTail, DOWN_PREFETCH_LINES, THREADS};
use crate::norm_q8::rmsnorm_tail;
use crate::prefetch::prefetch_then_wait;
use crate::vecdot::{self, stage_act_wide, SharedAct, WeightType};
use core::arch::nvptx;
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::moe::{DOWN_NORM_NONE, MOE_DOWN_BLOCK_ROWS, MOE_DOWN_WARPS};
use ingot_abi::launch::WARP_SIZE;
use ingot_abi::launch::{merge_v_b_items, merge_v_b_o_cols_stage_stride, merge_v_b_o_out_blocks};
use ingot_abi::step::StepState;

/// Bytes between consecutive columns' copies of each per-position buffer
/// (`ingot_abi::launch::MergeVbOColsArgs`' strides).
struct Strides {
    part_o: u32,
    part_ml: u32,
    state: u32,
    y: u32,
    scratch: u32,
    pair_count: u32,
    resid: u32,
    out: u32,
    norm_q8: u32,
    norm_f32: u32,
}

#[inline(always)]
fn col(base: u64, stride: u32, c: u32) -> u64 {
    base + c as u64 * stride as u64
}

/// Lane `lane`'s partial sums of one weight row at `w` (`nunits` units of `T`) against each
/// column's activation `x[c]`: `rows_dot_laneM` with every row at `w`.
#[inline(always)]
unsafe fn row_dots<T: WeightType, const M: usize>(
    w: u64,
    x: &[SharedAct; M],
    nunits: u32,
    lane: u32,
) -> [f32; M] {
    // `M` is a constant: one arm is compiled, and every index below is a constant in it.
    let mut d = [0.0f32; M];
    match M {
        2 => {
            let v = rows_dot_lane2::<T, SharedAct>(&[w; 2], &[x[0], x[1]], nunits, lane);
            (d[0], d[1]) = (v[0], v[1]);
        }
        3 => {
            let v = rows_dot_lane3::<T, SharedAct>(&[w; 3], &[x[0], x[1], x[2]], nunits, lane);
            (d[0], d[1], d[2]) = (v[0], v[1], v[2]);
        }
        _ => {
            let v =
                rows_dot_lane4::<T, SharedAct>(&[w; 4], &[x[0], x[1], x[2], x[3]], nunits, lane);
            (d[0], d[1], d[2], d[3]) = (v[0], v[1], v[2], v[3]);
        }
    }
    d
}

/// `attn_output`'s row block `blk` on every column: `out_c[r] = resid_c[r] + w_o[r]·y_c`.
/// Column `c`'s q8_1 input is `y + c·s.y`, written by this launch's merge blocks (staged with
/// coherent loads after [`wait_done`]).
#[inline(always)]
unsafe fn rows_cols<T: WeightType, const M: usize>(
    blk: u32,
    (y, w_o): (u64, u64),
    o: &Output,
    s: &Strides,
    ncols: u32,
) {
    let t = tid();
    let lane = t % WARP_SIZE;
    // As `moe_down`'s rows: a warp past the last row computes the last row and stores nothing.
    let first = blk * MOE_DOWN_BLOCK_ROWS + t / WARP_SIZE;
    let valid = first < o.nrows;
    let r = if valid { first } else { o.nrows - 1 };
    let nunits = ncols / T::QK;
    let row = w_o + r as u64 * nunits as u64 * T::UNIT_BYTES;
    let blocks = ncols / QK8_1 as u32;
    let stride = merge_v_b_o_cols_stage_stride(ncols);
    let stage = vecdot::stage_base();
    let mut c = 0;
    while c < M as u32 {
        stage_act_wide::<true>(stage + c * stride, col(y, s.y, c), blocks, THREADS);
        c += 1;
    }
    // Built apart from the (not unrolled) staging loop, so the array stays in registers.
    let xs: [SharedAct; M] = core::array::from_fn(|c| SharedAct(stage + c as u32 * stride));
    let dots = row_dots::<T, M>(row, &xs, nunits, lane);
    // Every column's reduction before any store: the shuffles stay outside the lane-0 branch.
    let sums: [f32; M] = core::array::from_fn(|c| warp_sum(0.0 + dots[c]));
    if lane == 0 && valid {
        let a = r as u64 * 4;
        let mut c = 0;
        while c < M {
            let resid = col(o.resid, s.resid, c as u32);
            st_f32(
                col(o.out, s.out, c as u32) + a,
                ld_f32_coherent(resid + a) + sums[c],
            );
            c += 1;
        }
    }
}

/// See the module docs and `ingot_abi::launch::attn_out::MERGE_V_B_O_COLS_Q4K`.
#[inline(always)]
unsafe fn merge_v_b_o_cols<T: WeightType, const M: usize>(
    m: Merge,
    o: Output,
    s: Strides,
    ctl: u64,
) {
    const { assert!(!T::STAGED && M >= 2 && M <= 4) };
    let items = merge_v_b_items(m.n_head, m.d_v);
    let merges = M as u32 * items;
    let out_blocks = merge_v_b_o_out_blocks(o.nrows);
    let ncols = m.n_head * m.d_v;
    let guess = bid().wrapping_sub(merges);
    let span = if guess < out_blocks {
        shared_rows::<T>(guess, o.w_o, o.nrows, ncols)
    } else {
        (0, 0)
    };
    prefetch_then_wait::<DOWN_PREFETCH_LINES, 1>([span], tid(), THREADS);
    let k = ticket(ctl);
    if k < merges {
        // `k < M·items`, so `items ≥ 1` here (the `max` spares the division its zero check).
        let (c, item) = (k / items.max(1), k % items.max(1));
        let bytes = |stride: u32| c as usize * stride as usize;
        merge_v_b::<T>(
            item,
            m.part_o.byte_add(bytes(s.part_o)),
            m.part_ml.byte_add(bytes(s.part_ml)),
            m.state.byte_add(bytes(s.state)),
            m.w,
            col(m.y, s.y, c),
            col(m.scratch, s.scratch, c),
            col(m.pair_count, s.pair_count, c),
            m.n_head,
            m.d_v,
            m.ctx,
            m.max_segments,
        );
        done(ctl);
        return;
    }
    wait_done(ctl, merges, out_blocks);
    rows_cols::<T, M>(k - merges, (m.y, o.w_o), &o, &s, ncols);
    // Launch-uniform: without a tail no block waits for the others.
    if o.tail.mode == DOWN_NORM_NONE {
        return;
    }
    let count = global(o.tail.count as *const u32);
    if !last_of(count, MOE_DOWN_WARPS, out_blocks) {
        return;
    }
    let mut c = 0;
    while c < M as u32 {
        if c > 0 {
            // The previous tail's shared slots are read before this one writes them.
            nvptx::_syncthreads();
        }
        rmsnorm_tail::<{ MOE_DOWN_WARPS * WARP_SIZE }>(
            col(o.out, s.out, c),
            global(o.tail.w),
            col(global(o.tail.q8), s.norm_q8, c),
            col(global(o.tail.f32), s.norm_f32, c),
            o.nrows,
            o.tail.eps,
        );
        c += 1;
    }
    reset(count);
}

macro_rules! merge_v_b_o_cols_kernels {
    ($($name:literal $v:ident $block:ident $m:literal;)*) => {$(
        const _: () = {
            /// See [`merge_v_b_o_cols`]; `ingot_abi::launch::attn_out::MERGE_V_B_O_COLS_Q4K`.
            #[export_name = $name]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "ptx-kernel" fn kernel(
                part_o: *const u16,
                part_ml: *const f32,
                state: *const StepState,
                w: *const ingot_abi::blocks::$block,
                y: *mut BlockQ8_1,
                scratch: *mut f32,
                pair_count: *mut u32,
                n_head: u32,
                d_v: u32,
                ctx: u32,
                max_segments: u32,
                w_o: *const ingot_abi::blocks::$block,
                resid: *const f32,
                out: *mut f32,
                nrows: u32,
                norm_w: *const f32,
                norm_q8: *mut BlockQ8_1,
                norm_f32: *mut f32,
                count: *mut u32,
                norm: u32,
                eps: f32,
                chain_ctl: *mut u32,
                part_o_stride: u32,
                part_ml_stride: u32,
                state_stride: u32,
                y_stride: u32,
                scratch_stride: u32,
                pair_count_stride: u32,
                resid_stride: u32,
                out_stride: u32,
                norm_q8_stride: u32,
                norm_f32_stride: u32,
            ) {
                merge_v_b_o_cols::<vecdot::$v, $m>(
                    Merge {
                        part_o,
                        part_ml,
                        state,
                        w: global(w),
                        y: global(y),
                        scratch: global(scratch),
                        pair_count: global(pair_count),
                        n_head,
                        d_v,
                        ctx,
                        max_segments,
                    },
                    Output {
                        w_o: global(w_o),
                        resid: global(resid),
                        out: global(out),
                        nrows,
                        tail: NormTail::new(norm_w, norm_q8, norm_f32, count, norm, eps),
                    },
                    Strides {
                        part_o: part_o_stride,
                        part_ml: part_ml_stride,
                        state: state_stride,
                        y: y_stride,
                        scratch: scratch_stride,
                        pair_count: pair_count_stride,
                        resid: resid_stride,
                        out: out_stride,
                        norm_q8: norm_q8_stride,
                        norm_f32: norm_f32_stride,
                    },
                    global(chain_ctl),
                );
            }
        };
    )*};
}

merge_v_b_o_cols_kernels! {
    "attn_merge_v_b_o_cols2_q4k" Q4K BlockQ4K 2;
    "attn_merge_v_b_o_cols3_q4k" Q4K BlockQ4K 3;
    "attn_merge_v_b_o_cols4_q4k" Q4K BlockQ4K 4;
}
