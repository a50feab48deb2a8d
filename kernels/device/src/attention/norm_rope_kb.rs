//! `gemv2_norm_rope_kb_*`: a low-rank query's three projection launches in one chained launch
//! (`ingot_abi::launch::projections`, [`crate::chain`]): `gemv2_norm_*` (`attn_q_a` and
//! `attn_kv_a_mqa`, with `attn_q_a_norm` as its last block's tail, `super::projections`) in
//! front of `gemv2_rope_kb_*` (`attn_q_b` with the rope tail, then `attn_k_b`, `super::rope_kb`).
//! A node less per layer of GLM-4.7-Flash, V3, Kimi-K2 or Moonlight, and `attn_q_b`'s blocks
//! stream their weight rows while the first products compute.
//!
//! Ticket `k < norm_blocks` is the first products' row block `k`; the one that finishes last
//! among them (its own counter) runs the norm tail, then counts itself in word
//! `CHAIN_CTL_DONE` of the norm's control words. Every later ticket is block
//! `k − norm_blocks` of the `gemv2_rope_kb_*` chain on the main control words; its `attn_q_b`
//! row blocks first wait for the norm (they read its q8_1 output, written in this launch, with
//! coherent loads), its `attn_k_b` blocks for those row blocks as before. A block prefetches
//! the rows its index would draw before its ticket. Each part computes the bits of its unfused
//! kernel.

use super::rope_kb::{kb_block, rope_kb_blocks, rope_kb_spans, rows_then_rope, Pair, Tail};
use super::rope_kv::Dims;
use crate::chain::{done, ticket, wait_done};
use crate::gemv::{block_span, gemv2_at, gemv2_spans, GEMV_PREFETCH_LINES, THREADS};
use crate::intrinsics::{bid, global, tid};
use crate::last_block::{last_of, reset};
use crate::norm_q8::rmsnorm_block;
use crate::prefetch::prefetch_then_wait;
use crate::vecdot::{self, gemv_unit, WeightType};
use ingot_abi::blocks::BlockQ8_1;
use ingot_abi::launch::{gemv2_norm_blocks, GEMV_BLOCK_WARPS};
use ingot_abi::step::StepState;

/// The first products and their norm tail (`ingot_abi::launch::Gemv2NormRopeKbArgs`' last
/// ten): `q_a = attn_q_a·x`, `kv = attn_kv_a_mqa·x` (`kv` is the rope part's), then
/// `q8 = q8_1(rmsnorm(q_a)·norm_w)` (the rope part's activation `x`).
struct Norm {
    w: (u64, u64),
    x: u64,
    q_a: u64,
    ncols: u32,
    nrows0: u32,
    nrows1: u32,
    norm_w: u64,
    count: u64,
    ctl: u64,
}

/// See the module docs and `ingot_abi::launch::projections` for the contract.
#[inline(always)]
unsafe fn gemv2_norm_rope_kb<P: WeightType, K: WeightType>(
    n: Norm,
    p: Pair,
    r: Tail,
    kb: (u64, u64),
    ctl: u64,
) {
    let norm_blocks = gemv2_norm_blocks(gemv_unit::<P>(), n.ncols / P::QK, n.nrows0 + n.nrows1);
    let parts = rope_kb_blocks::<P, K>(&p, &r.dims);
    let guess = bid();
    let spans = if guess < norm_blocks {
        gemv2_spans::<P>(
            n.w,
            n.ncols,
            n.nrows0,
            block_span::<P, true>(guess, n.ncols, n.nrows0 + n.nrows1),
        )
    } else {
        rope_kb_spans::<P, K>(guess - norm_blocks, &p, &r.dims, kb.0, parts)
    };
    prefetch_then_wait::<GEMV_PREFETCH_LINES, 2>(spans, tid(), THREADS);
    let k = ticket(ctl);
    // No early exit from a row part: every warp reaches the done counters' barriers.
    if k < norm_blocks {
        gemv2_at::<P, false, false, false>(
            k,
            n.w,
            n.x,
            (n.q_a, p.y.1),
            n.ncols,
            n.nrows0,
            n.nrows1,
        );
        if !last_of(n.count, GEMV_BLOCK_WARPS, norm_blocks) {
            return;
        }
        rmsnorm_block::<THREADS, false, true>(n.q_a, n.norm_w, p.x, 0, n.nrows0, r.eps);
        reset(n.count);
        // Publishes the norm's q8_1 rows (and, before them, every block's `kv` rows, which
        // the acquire in `last_of` saw) to the blocks that wait for this count.
        done(n.ctl);
        return;
    }
    let j = k - norm_blocks;
    if j >= parts.0 {
        kb_block::<K>(j - parts.0, &p, &r.dims, kb, ctl, parts);
        return;
    }
    wait_done(n.ctl, 1, parts.0);
    gemv2_at::<P, false, false, true>(j, p.w, p.x, p.y, p.ncols, p.nrows0, p.nrows1);
    rows_then_rope(&p, r, ctl, parts.0);
}

macro_rules! gemv2_norm_rope_kb_kernels {
    (
        types { $($t:tt)* } mixed_down { $($m:tt)* } mixed_gate_up { $($g:tt)* }
        argmax { $($a:tt)* } chain_ffn { $($f:tt)* }
        chain_rope_kb { $($pv:ident $pt:ident $kv:ident $kt:ident;)* }
        $($rest:tt)*
    ) => {$(
        const _: () = {
            /// See `ingot_abi::weight_types::GemvType::pair_norm_rope_kb` and the module docs.
            #[export_name = ingot_abi::kernel_name!(pair_norm_rope_kb, $pt, $kt)]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "ptx-kernel" fn kernel(
                w0: *const u8,
                w1: *const u8,
                x: *mut BlockQ8_1,
                q: *mut f32,
                kv: *mut f32,
                ncols: u32,
                nrows0: u32,
                nrows1: u32,
                kv_norm: *const f32,
                rope_freq: *const f64,
                state: *const StepState,
                q_pe: *mut f32,
                _q_nope_q8: *mut BlockQ8_1,
                cache: *mut u16,
                count: *mut u32,
                n_head: u32,
                d_nope: u32,
                kv_lora: u32,
                n_rope: u32,
                ctx: u32,
                eps: f32,
                mscale: f32,
                cache_type: u32,
                w_kb: *const u8,
                q_abs: *mut f32,
                chain_ctl: *mut u32,
                wa0: *const u8,
                wa1: *const u8,
                xa: *const BlockQ8_1,
                q_a: *mut f32,
                ncols_a: u32,
                nrows_a0: u32,
                nrows_a1: u32,
                norm_w: *const f32,
                norm_count: *mut u32,
                norm_ctl: *mut u32,
            ) {
                gemv2_norm_rope_kb::<vecdot::$pv, vecdot::$kv>(
                    Norm {
                        w: (global(wa0), global(wa1)),
                        x: global(xa),
                        q_a: global(q_a),
                        ncols: ncols_a,
                        nrows0: nrows_a0,
                        nrows1: nrows_a1,
                        norm_w: global(norm_w),
                        count: global(norm_count),
                        ctl: global(norm_ctl),
                    },
                    Pair {
                        w: (global(w0), global(w1)),
                        x: global(x),
                        y: (global(q), global(kv)),
                        ncols,
                        nrows0,
                        nrows1,
                    },
                    Tail {
                        kv_norm: global(kv_norm),
                        rope_freq: global(rope_freq),
                        state,
                        q_pe: global(q_pe),
                        cache: global(cache),
                        count: global(count),
                        dims: Dims {
                            n_head,
                            d_nope,
                            kv_lora,
                            n_rope,
                            ctx,
                            cache_type,
                        },
                        eps,
                        mscale,
                    },
                    (global(w_kb), global(q_abs)),
                    global(chain_ctl),
                );
            }
        };
    )*};
}

ingot_abi::weight_types!(gemv2_norm_rope_kb_kernels);
