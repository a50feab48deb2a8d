//! `moe_ffn_*`: a MoE layer's FFN in one chained launch (`ingot_abi::launch::moe_ffn`): the
//! gate/up kernel with its router ([`router_item`]) and the down kernel ([`down`]) share a grid,
//! which saves the step a node per MoE layer and lets the down kernel's blocks request their
//! weight rows while the gate/up blocks still stream theirs.
//!
//! Before its ticket a block prefetches the rows its index would draw: a gate/up block's
//! ([`router_spans`]), a down block's shared-expert rows. Tickets below the gate/up launch's
//! block count are its work, unchanged (a row block then counts itself done, [`done`]); the
//! rest are the down kernel's row blocks, which wait for the routing, prefetch their routed
//! experts' rows, wait for every gate/up row block ([`wait_done`]) and run the down kernel's
//! code reading `act` and `sel` with coherent loads. Each part computes the bits of its unfused
//! kernel.

use crate::chain::{done, ticket_at, wait_done};
use crate::intrinsics::{bid, global, ld_u32_relaxed, ld_u64, prefetch_l2_if, tid};
use crate::moe_down::{down, shared_rows, NormTail};
use crate::moe_gate_up::{
    fused_router, gate_up_args, router_item, router_launch_blocks, router_spans, wait_for_routing,
    FusedRouter, GateUp, GATE_UP_PREFETCH_LINES,
};
use crate::prefetch::{prefetch_then_wait, LINE};
use crate::vecdot::{self, WeightType};
use core::mem::offset_of;
use ingot_abi::blocks::BlockQ8_1;
use ingot_abi::launch::moe::{ExpertSelection, MOE_DOWN_BLOCK_ROWS, MOE_GATE_UP_WARPS};
use ingot_abi::launch::{ROUTE_CTL_TICKET, WARP_SIZE};
use ingot_abi::weight_types::GemvType;

const THREADS: u32 = MOE_GATE_UP_WARPS * WARP_SIZE;

/// The down kernel's arguments beyond the gate/up's.
pub(crate) struct Down {
    pub down: u64,
    pub down_sh: u64,
    pub resid: u64,
    pub y: u64,
    pub nrows: u32,
    pub tail: NormTail,
}

/// The chained FFN's blocks: the gate/up launch's (the router's, the shared experts' and the
/// routed slots' row blocks), then the down kernel's.
#[inline(always)]
pub(crate) fn ffn_blocks(a: &GateUp, d: &Down) -> (u32, u32) {
    (
        router_launch_blocks(a),
        d.nrows.div_ceil(MOE_DOWN_BLOCK_ROWS),
    )
}

/// The weight rows FFN block `guess` (of [`ffn_blocks`]) would draw, to prefetch before its
/// ticket: a gate/up block's ([`router_spans`]), a down block's shared-expert rows.
#[inline(always)]
pub(crate) unsafe fn ffn_spans<GR, GS, const MIXED: bool, DS>(
    a: &GateUp,
    router: &FusedRouter,
    d: &Down,
    (guess, first): (u32, u32),
) -> [(u64, u64); 2]
where
    GR: WeightType,
    GS: WeightType,
    DS: WeightType,
{
    if guess < first {
        router_spans::<GR, GS, MIXED>(a, router, guess)
    } else {
        [
            shared_rows::<DS>(guess - first, d.down_sh, d.nrows, a.ff_sh),
            (0, 0),
        ]
    }
}

/// The work of FFN ticket `k` (below the sum of `blocks`, the [`ffn_blocks`]); whether this
/// block ran the down kernel's norm tail (block-uniform). See the module docs.
#[inline(always)]
pub(crate) unsafe fn ffn_block<GR, GS, const MIXED: bool, DR, DS>(
    a: &GateUp,
    router: &FusedRouter,
    d: Down,
    (ctl, (first, down_blocks)): (u64, (u32, u32)),
    k: u32,
) -> bool
where
    GR: WeightType,
    GS: WeightType,
    DR: WeightType,
    DS: WeightType,
{
    if k < first {
        router_item::<GR, GS, MIXED>(a, router, k, down_blocks);
        // Block-uniform: a router block's extra warps have returned; its work is the routing,
        // which the down blocks wait for on its own word.
        if k >= a.router_blocks() {
            done(ctl);
        }
        return false;
    }
    let j = k - first;
    wait_for_routing(router.ctl, a.n_used, a.routed_blocks() + down_blocks);
    prefetch_routed::<DR>(a, d.down, j, d.nrows);
    wait_done(ctl, first - a.router_blocks(), down_blocks);
    down::<DR, DS, true>(
        (j, down_blocks),
        a.act,
        a.sel,
        d.down,
        d.down_sh,
        d.resid,
        d.y,
        (d.nrows, a.ff, a.n_used, a.ff_sh, a.n_expert),
        d.tail,
    )
}

/// See the module docs and `ingot_abi::launch::moe_ffn` for the contract. `GR`/`GS`: the
/// gate/up weights' routed and shared types (`MIXED`: they differ); `DR`/`DS` the down's.
#[inline(always)]
unsafe fn moe_ffn<GR, GS, const MIXED: bool, DR, DS>(
    a: &GateUp,
    router: &FusedRouter,
    d: Down,
    ctl: u64,
) where
    GR: WeightType,
    GS: WeightType,
    DR: WeightType,
    DS: WeightType,
{
    let blocks = ffn_blocks(a, &d);
    let spans = ffn_spans::<GR, GS, MIXED, DS>(a, router, &d, (bid(), blocks.0));
    prefetch_then_wait::<GATE_UP_PREFETCH_LINES, 2>(spans, tid(), THREADS);
    let k = ticket_at(router.ctl + 4 * ROUTE_CTL_TICKET as u64);
    ffn_block::<GR, GS, MIXED, DR, DS>(a, router, d, (ctl, blocks), k);
}

/// Prefetches row block `j`'s rows (of `nrows`) of each routed slot's down slab (type `T`,
/// rows of `ff` weights) into L2: thread `t` takes line `t` of each slot's span. The routing
/// has been published to the block (read with `.relaxed.gpu` loads).
#[inline(always)]
unsafe fn prefetch_routed<T: WeightType>(a: &GateUp, table: u64, j: u32, nrows: u32) {
    let row_bytes = (a.ff / T::QK) as u64 * T::UNIT_BYTES;
    let r0 = (j * MOE_DOWN_BLOCK_ROWS).min(nrows) as u64;
    let r1 = ((j + 1) * MOE_DOWN_BLOCK_ROWS).min(nrows) as u64;
    let ids = a.sel + offset_of!(ExpertSelection, ids) as u64;
    let t = tid() as u64;
    let mut s = 0;
    while s < a.n_used {
        let e = ld_u32_relaxed(ids + 4 * s as u64).min(a.n_expert - 1) as u64;
        let base = ld_u64(table + 8 * e);
        let (start, end) = (base + r0 * row_bytes, base + r1 * row_bytes);
        let line = start + t * LINE;
        prefetch_l2_if(line < end, line);
        s += 1;
    }
}

macro_rules! moe_ffn_kernel {
    ($name:expr, $gr:ident, $gs:ident, $dr:ident, $ds:ident) => {
        const _: () = {
            /// See [`moe_ffn`] and `ingot_abi::launch::moe_ffn`.
            #[export_name = $name]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "ptx-kernel" fn kernel(
                x: *const BlockQ8_1,
                sel: *const ExpertSelection,
                gate: *const u8,
                up: *const u8,
                gate_sh: *const u8,
                up_sh: *const u8,
                act: *mut BlockQ8_1,
                ncols: u32,
                ff: u32,
                n_used: u32,
                ff_sh: u32,
                n_expert: u32,
                layout: u32,
                rw: *const f32,
                rx: *const f32,
                logits: *mut f32,
                bias: *const f32,
                route_ctl: *mut u32,
                n_group: u32,
                n_group_used: u32,
                route_flags: u32,
                scale: f32,
                down_w: *const u8,
                down_sh: *const u8,
                resid: *const f32,
                y: *mut f32,
                nrows: u32,
                norm_w: *const f32,
                norm_q8: *mut BlockQ8_1,
                norm_f32: *mut f32,
                count: *mut u32,
                norm: u32,
                eps: f32,
                chain_ctl: *mut u32,
            ) {
                let router = fused_router!(
                    rw,
                    rx,
                    logits,
                    route_ctl,
                    bias,
                    sel,
                    n_expert,
                    n_used,
                    n_group,
                    n_group_used,
                    route_flags,
                    scale
                );
                let a = gate_up_args!(
                    x, sel, gate, up, gate_sh, up_sh, act, ncols, ff, n_used, ff_sh, n_expert,
                    layout
                );
                let d = Down {
                    down: global(down_w),
                    down_sh: global(down_sh),
                    resid: global(resid),
                    y: global(y),
                    nrows,
                    tail: NormTail::new(norm_w, norm_q8, norm_f32, count, norm, eps),
                };
                const MIXED: bool = GemvType::$gr as u32 != GemvType::$gs as u32;
                moe_ffn::<vecdot::$gr, vecdot::$gs, MIXED, vecdot::$dr, vecdot::$ds>(
                    &a,
                    &router,
                    d,
                    global(chain_ctl),
                );
            }
        };
    };
}

// The registry's `chain_ffn` rows.
macro_rules! moe_ffn_kernels {
    (
        types { $($t:tt)* } mixed_down { $($m:tt)* } mixed_gate_up { $($g:tt)* }
        argmax { $($a:tt)* }
        chain_ffn { $($gr:ident $grt:ident $gs:ident $gst:ident
                      $dr:ident $drt:ident $ds:ident $dst:ident;)* }
        $($rest:tt)*
    ) => {
        $(
            moe_ffn_kernel!(
                ingot_abi::kernel_name!(moe_ffn, $grt, $gst, $drt, $dst),
                $gr,
                $gs,
                $dr,
                $ds
            );
        )*
    };
}

ingot_abi::weight_types!(moe_ffn_kernels);
