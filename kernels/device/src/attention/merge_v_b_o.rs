//! `attn_merge_v_b_o_*`: `attn_merge_v_b_*` ([`merge_v_b`]) and `attn_output` (the down kernel
//! of the same type with no routed slots, its residual add and norm tail, [`down`]) in one
//! chained launch (`ingot_abi::launch::attn_out`, [`crate::chain`]), which saves the step a node
//! per layer and lets `attn_output`'s blocks stream their weight rows while the merge computes.
//!
//! Before its ticket, a block prefetches the `attn_output` rows its index would draw (blocks
//! mostly start in index order; a merge block prefetches nothing: its latent partials are the
//! flash kernel's output). Ticket `k < items` is merge item `k`, which counts itself done once
//! its pair's q8_1 output is stored; ticket `items + j` is `attn_output`'s row block `j`, which
//! waits for every merge item, then runs the unfused kernel's code reading `y` with coherent
//! loads. Each part computes the bits of its unfused kernel.

use super::merge_v_b::merge_v_b;
use crate::chain::{done, ticket, wait_done};
use crate::intrinsics::{bid, global, tid};
use crate::moe_down::{down, shared_rows, NormTail, DOWN_PREFETCH_LINES, THREADS};
use crate::prefetch::prefetch_then_wait;
use crate::vecdot::{self, WeightType};
use ingot_abi::blocks::BlockQ8_1;
use ingot_abi::launch::{merge_v_b_items, merge_v_b_o_out_blocks};
use ingot_abi::step::StepState;

/// `attn_merge_v_b`'s arguments (`ingot_abi::launch::MergeVbArgs`), as the kernel takes them.
pub(super) struct Merge {
    pub part_o: *const u16,
    pub part_ml: *const f32,
    pub state: *const StepState,
    pub w: u64,
    pub y: u64,
    pub scratch: u64,
    pub pair_count: u64,
    pub n_head: u32,
    pub d_v: u32,
    pub ctx: u32,
    pub max_segments: u32,
}

/// `attn_output`'s arguments: a dense down launch on the merge's `y`.
pub(super) struct Output {
    pub w_o: u64,
    pub resid: u64,
    pub out: u64,
    pub nrows: u32,
    pub tail: NormTail,
}

/// See the module docs and `ingot_abi::launch::attn_out` for the contract.
#[inline(always)]
unsafe fn merge_v_b_o<T: WeightType>(m: Merge, o: Output, ctl: u64) {
    let items = merge_v_b_items(m.n_head, m.d_v);
    let out_blocks = merge_v_b_o_out_blocks(o.nrows);
    let ncols = m.n_head * m.d_v;
    let guess = bid().wrapping_sub(items);
    let span = if guess < out_blocks {
        shared_rows::<T>(guess, o.w_o, o.nrows, ncols)
    } else {
        (0, 0)
    };
    prefetch_then_wait::<DOWN_PREFETCH_LINES, 1>([span], tid(), THREADS);
    let k = ticket(ctl);
    if k < items {
        merge_v_b::<T>(
            k,
            m.part_o,
            m.part_ml,
            m.state,
            m.w,
            m.y,
            m.scratch,
            m.pair_count,
            m.n_head,
            m.d_v,
            m.ctx,
            m.max_segments,
        );
        done(ctl);
        return;
    }
    wait_done(ctl, items, out_blocks);
    // `sel` and the routed table are never read with no routed slots; `w_o` stands in.
    down::<T, T, true>(
        (k - items, out_blocks),
        m.y,
        o.w_o,
        o.w_o,
        o.w_o,
        o.resid,
        o.out,
        (o.nrows, ncols, 0, ncols, 1),
        o.tail,
    );
}

macro_rules! merge_v_b_o_kernels {
    (types { $($v:ident $tag:ident $block:ident $($col:literal)* [$($f16:literal),*];)* } $($rest:tt)*) => {$(
        const _: () = {
            /// See `ingot_abi::weight_types::GemvType::merge_v_b_o` and the module docs.
            #[export_name = ingot_abi::kernel_name!(merge_v_b_o, $tag)]
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
            ) {
                merge_v_b_o::<vecdot::$v>(
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
                    global(chain_ctl),
                );
            }
        };
    )*};
}

ingot_abi::weight_types!(merge_v_b_o_kernels);
