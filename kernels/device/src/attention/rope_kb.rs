//! `gemv2_rope_kb_*`: `gemv2_rope_*` (the attention's projections with the rope as the last
//! block's tail, `super::projections`) and `attn_k_b`'s grouped gemv (`q_abs[h] =
//! W_kb[h]·q_nope_q8[h]`, `crate::gemv`) in one chained launch (`ingot_abi::launch::projections`,
//! [`crate::chain`]): a node less per layer, and `attn_k_b`'s blocks stream their weight rows
//! while the projections compute.
//!
//! Before its ticket, a block prefetches the rows its index would draw (blocks mostly start in
//! index order): a gemv2 row block's, or `attn_k_b`'s. Ticket `k < first` is the gemv2's row
//! block `k`, which counts itself in the chain's done word once its rows are stored; the one
//! that finishes last among them runs the rope tail (without `q_nope_q8`, which nothing reads).
//! Ticket `first + j` is `attn_k_b`'s row block `j`, which waits for every gemv2 row block,
//! then quantizes its heads' `q_nope` from `q` into its stage itself (the bits the rope tail
//! writes to `q_nope_q8` in the unfused launch) and runs the grouped gemv: the rope tail runs
//! beside it, off its path. Each part computes the bits of its unfused kernel.

use super::rope_kv::{rope_kv_impl, step_pos, Dims};
use crate::chain::{done, ticket, wait_done};
use crate::gemv::{block_span, gemv2_at, gemv2_spans, gemv_q_nope, GEMV_PREFETCH_LINES, THREADS};
use crate::intrinsics::{bid, global, tid};
use crate::last_block::{last_of, reset};
use crate::prefetch::prefetch_then_wait;
use crate::vecdot::{self, gemv_unit, row_bytes, WeightType};
use ingot_abi::blocks::BlockQ8_1;
use ingot_abi::launch::{gemv2_rope_kb_blocks, GEMV_BLOCK_WARPS};
use ingot_abi::step::StepState;

/// The two-matrix gemv's arguments (`ingot_abi::launch::Gemv2RopeArgs`' first eight).
pub(crate) struct Pair {
    pub w: (u64, u64),
    pub x: u64,
    pub y: (u64, u64),
    pub ncols: u32,
    pub nrows0: u32,
    pub nrows1: u32,
}

/// The rope tail's arguments beyond the gemv's outputs.
pub(crate) struct Tail {
    pub kv_norm: u64,
    pub rope_freq: u64,
    pub state: *const StepState,
    pub q_pe: u64,
    pub cache: u64,
    pub count: u64,
    pub dims: Dims,
    pub eps: f32,
    pub mscale: f32,
}

/// The chain's parts in blocks: the gemv2's row blocks (`first`), then `attn_k_b`'s.
#[inline(always)]
pub(crate) fn rope_kb_blocks<P: WeightType, K: WeightType>(p: &Pair, d: &Dims) -> (u32, u32) {
    gemv2_rope_kb_blocks(
        (gemv_unit::<P>(), p.ncols / P::QK, p.nrows0 + p.nrows1),
        (gemv_unit::<K>(), d.d_nope / K::QK, d.n_head * d.kv_lora),
    )
}

/// The weight rows block `j` of the chain (ticket order: the gemv2's first) reads, to prefetch
/// before its ticket; nothing past the last block.
#[inline(always)]
pub(crate) fn rope_kb_spans<P: WeightType, K: WeightType>(
    j: u32,
    p: &Pair,
    d: &Dims,
    w_kb: u64,
    (first, kb_blocks): (u32, u32),
) -> [(u64, u64); 2] {
    let kb_rows = d.n_head * d.kv_lora;
    if j < first {
        gemv2_spans::<P>(
            p.w,
            p.ncols,
            p.nrows0,
            block_span::<P, true>(j, p.ncols, p.nrows0 + p.nrows1),
        )
    } else if j - first < kb_blocks {
        let (lo, hi) = block_span::<K, false>(j - first, d.d_nope, kb_rows);
        let rb = row_bytes::<K>(d.d_nope);
        [(w_kb + lo as u64 * rb, w_kb + (hi + 1) as u64 * rb), (0, 0)]
    } else {
        [(0, 0); 2]
    }
}

/// After a gemv2 row block stored its rows: counts it done, and the last of the `first` row
/// blocks runs the rope tail. Every thread of the block calls it.
#[inline(always)]
pub(crate) unsafe fn rows_then_rope(p: &Pair, r: Tail, ctl: u64, first: u32) {
    done(ctl);
    if !last_of(r.count, GEMV_BLOCK_WARPS, first) {
        return;
    }
    rope_kv_impl::<false, THREADS, true>(
        p.y.0,
        p.y.1,
        r.kv_norm,
        r.rope_freq,
        step_pos(r.state),
        r.q_pe,
        0,
        r.cache,
        r.dims,
        r.eps,
        r.mscale,
    );
    reset(r.count);
}

/// `attn_k_b`'s row block `i`: waits for every gemv2 row block, then runs the grouped gemv on
/// the q8_1 of `q_nope` it quantizes from `q` itself.
#[inline(always)]
pub(crate) unsafe fn kb_block<K: WeightType>(
    i: u32,
    p: &Pair,
    d: &Dims,
    (w_kb, q_abs): (u64, u64),
    ctl: u64,
    (first, kb_blocks): (u32, u32),
) {
    wait_done(ctl, first, kb_blocks);
    gemv_q_nope::<K>(
        i,
        w_kb,
        (p.y.0, d.d_nope + d.n_rope),
        q_abs,
        d.d_nope,
        d.n_head * d.kv_lora,
        d.kv_lora,
    );
}

/// See the module docs and `ingot_abi::launch::projections` for the contract. `attn_k_b` is
/// the grouped gemv of `n_head·kv_lora` rows of `d_nope` weights of `K`, groups of `kv_lora`
/// rows reading `d_nope/32` blocks of `q_nope_q8` `d_nope/32` apart.
#[inline(always)]
unsafe fn gemv2_rope_kb<P: WeightType, K: WeightType>(p: Pair, r: Tail, kb: (u64, u64), ctl: u64) {
    let parts = rope_kb_blocks::<P, K>(&p, &r.dims);
    let spans = rope_kb_spans::<P, K>(bid(), &p, &r.dims, kb.0, parts);
    prefetch_then_wait::<GEMV_PREFETCH_LINES, 2>(spans, tid(), THREADS);
    let k = ticket(ctl);
    if k < parts.0 {
        // No early exit: every warp reaches the done counter's barriers.
        gemv2_at::<P, false, false, false>(k, p.w, p.x, p.y, p.ncols, p.nrows0, p.nrows1);
        rows_then_rope(&p, r, ctl, parts.0);
    } else {
        kb_block::<K>(k - parts.0, &p, &r.dims, kb, ctl, parts);
    }
}

macro_rules! gemv2_rope_kb_kernels {
    (
        types { $($t:tt)* } mixed_down { $($m:tt)* } mixed_gate_up { $($g:tt)* }
        argmax { $($a:tt)* } chain_ffn { $($f:tt)* }
        chain_rope_kb { $($pv:ident $pt:ident $kv:ident $kt:ident;)* }
        $($rest:tt)*
    ) => {$(
        const _: () = {
            /// See `ingot_abi::weight_types::GemvType::pair_rope_kb` and the module docs.
            #[export_name = ingot_abi::kernel_name!(pair_rope_kb, $pt, $kt)]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "ptx-kernel" fn kernel(
                w0: *const u8,
                w1: *const u8,
                x: *const BlockQ8_1,
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
            ) {
                gemv2_rope_kb::<vecdot::$pv, vecdot::$kv>(
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

ingot_abi::weight_types!(gemv2_rope_kb_kernels);
