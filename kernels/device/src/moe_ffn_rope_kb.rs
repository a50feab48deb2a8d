//! `moe_ffn_rope_kb_*`: a MoE layer's FFN (`moe_ffn_*`, [`crate::moe_ffn`]) and the next layer's
//! projections (`gemv2_rope_kb_*`, `crate::attention::rope_kb`) in one chained launch
//! (`ingot_abi::launch::ffn_rope_kb`, [`crate::chain`]): a node less per layer, and the
//! projections' blocks stream their weight rows while the FFN's last blocks and its norm tail
//! run, where the unfused projections would wait for the launch boundary.
//!
//! Before its ticket a block prefetches the rows its index would draw (blocks mostly start in
//! index order). Tickets below the FFN's blocks are the FFN's work, unchanged; the down block
//! that runs the norm tail (the next layer's normed token, the projections' activation) then
//! counts itself in word `CHAIN_CTL_DONE` of the norm signal's control words. Every later
//! ticket is block `k − ffn` of the `gemv2_rope_kb_*` chain on its own control words: its
//! row blocks first wait for the norm signal (they read the tail's q8_1 output, written in this
//! launch, with coherent loads), its `attn_k_b` blocks for those row blocks as before. The FFN
//! and the projections stage their activations in the one stage array the gemv and down kernels
//! share (`crate::vecdot::STAGE_BYTES`), so the launch holds one stage, not two. Each part
//! computes the bits of its unfused kernel.

use crate::attention::rope_kb::{
    kb_block, rope_kb_blocks, rope_kb_spans, rows_then_rope, Pair, Tail,
};
use crate::attention::rope_kv::Dims;
use crate::chain::{done, ticket_at, wait_done};
use crate::gemv::{gemv2_at, GEMV_PREFETCH_LINES};
use crate::intrinsics::{bid, global, tid};
use crate::moe_down::NormTail;
use crate::moe_ffn::{ffn_block, ffn_blocks, ffn_spans, Down};
use crate::moe_gate_up::{fused_router, gate_up_args, FusedRouter, GateUp, GATE_UP_PREFETCH_LINES};
use crate::prefetch::{mark_wait, prefetch_spans};
use crate::vecdot::{self, WeightType};
use ingot_abi::blocks::BlockQ8_1;
use ingot_abi::launch::moe::{ExpertSelection, MOE_GATE_UP_WARPS};
use ingot_abi::launch::{ROUTE_CTL_TICKET, WARP_SIZE};
use ingot_abi::step::StepState;
use ingot_abi::weight_types::GemvType;

const THREADS: u32 = MOE_GATE_UP_WARPS * WARP_SIZE;

/// The projections' part: the `gemv2_rope_kb_*` arguments (its activation is the FFN's norm
/// tail's `norm_q8`) and its control words `ctl`, and the norm signal's control words.
struct Projections {
    pair: Pair,
    tail: Tail,
    kb: (u64, u64),
    ctl: u64,
    norm_ctl: u64,
}

/// See the module docs and `ingot_abi::launch::ffn_rope_kb` for the contract. `GR`/`GS`,
/// `DR`/`DS` as in `moe_ffn_*`; `P` the projections' pair type, `K` `attn_k_b`'s.
#[inline(always)]
unsafe fn moe_ffn_rope_kb<GR, GS, const MIXED: bool, DR, DS, P, K>(
    a: &GateUp,
    router: &FusedRouter,
    d: Down,
    ffn_ctl: u64,
    pr: Projections,
) where
    GR: WeightType,
    GS: WeightType,
    DR: WeightType,
    DS: WeightType,
    P: WeightType,
    K: WeightType,
{
    let blocks = ffn_blocks(a, &d);
    let ffn = blocks.0 + blocks.1;
    let parts = rope_kb_blocks::<P, K>(&pr.pair, &pr.tail.dims);
    let guess = bid();
    // Each part's rows, then the kernel's one wait.
    if guess < ffn {
        let spans = ffn_spans::<GR, GS, MIXED, DS>(a, router, &d, (guess, blocks.0));
        prefetch_spans::<GATE_UP_PREFETCH_LINES, 2>(spans, tid(), THREADS);
    } else {
        let spans = rope_kb_spans::<P, K>(guess - ffn, &pr.pair, &pr.tail.dims, pr.kb.0, parts);
        prefetch_spans::<GEMV_PREFETCH_LINES, 2>(spans, tid(), THREADS);
    }
    mark_wait();
    let k = ticket_at(router.ctl + 4 * ROUTE_CTL_TICKET as u64);
    if k < ffn {
        if ffn_block::<GR, GS, MIXED, DR, DS>(a, router, d, (ffn_ctl, blocks), k) {
            // Publishes the tail's q8_1 rows to the row blocks that wait for this count.
            done(pr.norm_ctl);
        }
        return;
    }
    let j = k - ffn;
    if j >= parts.0 {
        kb_block::<K>(j - parts.0, &pr.pair, &pr.tail.dims, pr.kb, pr.ctl, parts);
        return;
    }
    wait_done(pr.norm_ctl, 1, parts.0);
    // No early exit from a row block: every warp reaches the done counters' barriers.
    let p = &pr.pair;
    gemv2_at::<P, false, false, true>(j, p.w, p.x, p.y, p.ncols, p.nrows0, p.nrows1);
    rows_then_rope(p, pr.tail, pr.ctl, parts.0);
}

macro_rules! moe_ffn_rope_kb_kernel {
    ($name:expr, $gr:ident, $gs:ident, $dr:ident, $ds:ident, $p:ident, $k:ident) => {
        const _: () = {
            /// See [`moe_ffn_rope_kb`] and `ingot_abi::launch::ffn_rope_kb`.
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
                w0: *const u8,
                w1: *const u8,
                q: *mut f32,
                kv: *mut f32,
                kb_ncols: u32,
                nrows0: u32,
                nrows1: u32,
                kv_norm: *const f32,
                rope_freq: *const f64,
                state: *const StepState,
                q_pe: *mut f32,
                _q_nope_q8: *mut BlockQ8_1,
                cache: *mut u16,
                rope_count: *mut u32,
                n_head: u32,
                d_nope: u32,
                kv_lora: u32,
                n_rope: u32,
                ctx: u32,
                rope_eps: f32,
                mscale: f32,
                cache_type: u32,
                w_kb: *const u8,
                q_abs: *mut f32,
                kb_ctl: *mut u32,
                norm_ctl: *mut u32,
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
                let pr = Projections {
                    pair: Pair {
                        w: (global(w0), global(w1)),
                        x: global(norm_q8),
                        y: (global(q), global(kv)),
                        ncols: kb_ncols,
                        nrows0,
                        nrows1,
                    },
                    tail: Tail {
                        kv_norm: global(kv_norm),
                        rope_freq: global(rope_freq),
                        state,
                        q_pe: global(q_pe),
                        cache: global(cache),
                        count: global(rope_count),
                        dims: Dims {
                            n_head,
                            d_nope,
                            kv_lora,
                            n_rope,
                            ctx,
                            cache_type,
                        },
                        eps: rope_eps,
                        mscale,
                    },
                    kb: (global(w_kb), global(q_abs)),
                    ctl: global(kb_ctl),
                    norm_ctl: global(norm_ctl),
                };
                const MIXED: bool = GemvType::$gr as u32 != GemvType::$gs as u32;
                moe_ffn_rope_kb::<
                    vecdot::$gr,
                    vecdot::$gs,
                    MIXED,
                    vecdot::$dr,
                    vecdot::$ds,
                    vecdot::$p,
                    vecdot::$k,
                >(&a, &router, d, global(chain_ctl), pr);
            }
        };
    };
}

// The registry's `chain_ffn_rope_kb` rows.
macro_rules! moe_ffn_rope_kb_kernels {
    (
        types { $($t:tt)* } mixed_down { $($m:tt)* } mixed_gate_up { $($g:tt)* }
        argmax { $($a:tt)* } chain_ffn { $($f:tt)* } chain_rope_kb { $($r:tt)* }
        chain_ffn_rope_kb { $($gr:ident $grt:ident $gs:ident $gst:ident
                              $dr:ident $drt:ident $ds:ident $dst:ident
                              $p:ident $pt:ident $k:ident $kt:ident;)* }
        $($rest:tt)*
    ) => {
        $(
            moe_ffn_rope_kb_kernel!(
                ingot_abi::kernel_name!(moe_ffn_rope_kb, $grt, $gst, $drt, $dst, $pt, $kt),
                $gr,
                $gs,
                $dr,
                $ds,
                $p,
                $k
            );
        )*
    };
}

ingot_abi::weight_types!(moe_ffn_rope_kb_kernels);
