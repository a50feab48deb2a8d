//! The attention's projections of the normed token with a last-block-done tail: the two-matrix
//! gemv with the rope (`gemv2_rope_*`: `attn_q` and `attn_kv_a_mqa`, or a low-rank query's
//! `attn_q_b` alone) and with the norm of its first output (`gemv2_norm_*`: `attn_q_a` and
//! `attn_kv_a_mqa`); and the chained launches of those with `attn_k_b` (`gemv2_rope_kb_*`) and of
//! all three (`gemv2_norm_rope_kb_*`). Their descriptors are built per weight type by
//! `crate::weight_types`.

use super::attention::ROPE_KV_THREADS;
use super::{signature, Kernel, WARP_SIZE};

signature! {
    /// The arguments of every `gemv2_rope_*` kernel (`gemv2_rope_kernel`): the two-matrix
    /// gemv's (`w0, w1, x, q, kv, ncols, nrows0, nrows1`), then [`super::ROPE_KV_Q8_1`]'s that
    /// the gemv does not already give, and the done counter of the tail.
    Gemv2RopeArgs {
        w0: ptr,
        w1: ptr,
        x: ptr,
        q: ptr,
        kv: ptr,
        ncols: u32,
        nrows0: u32,
        nrows1: u32,
        kv_norm: ptr,
        rope_freq: ptr,
        state: ptr,
        q_pe: ptr,
        q_nope_q8: ptr,
        cache: ptr,
        count: ptr,
        n_head: u32,
        d_nope: u32,
        kv_lora: u32,
        n_rope: u32,
        ctx: u32,
        eps: f32,
        mscale: f32,
        cache_type: u32,
    }
}

/// The descriptor of a `gemv2_rope_*` kernel (`crate::weight_types::GemvType::pair_rope`):
/// `(w0, w1, x, q, kv, ncols, nrows0, nrows1, kv_norm, rope_freq, state, q_pe, q_nope_q8, cache,
/// count, n_head, d_nope, kv_lora, n_rope, ctx, eps, mscale, cache_type)`, the two-matrix gemv
/// of the type (`q = attn_q·x`, `nrows0 = n_head·(d_nope + n_rope)` rows; `kv = attn_kv_a_mqa·x`,
/// `nrows1 = kv_lora + n_rope`) whose last block to finish runs [`super::ROPE_KV_Q8_1`] on `q`
/// and `kv` with the same arguments and requirements (a last-block-done tail; `count` a done
/// counter, see [`super::KernelDesc`]). Launch shape and items as the plain two-matrix gemv: an
/// item is a warp, `GEMV_BLOCK_WARPS` per block (the tail runs on `ROPE_KV_THREADS` threads, as
/// `rope_kv_q8_1`).
/// `nrows1` may be 0: a low-rank query's `attn_q_b` (`w0`, `q`) with the rope of `kv` as an
/// earlier launch wrote it (`w1` is then never read).
pub(crate) const fn gemv2_rope_kernel(name: &'static str) -> Kernel<Gemv2RopeArgs> {
    super::gemv::gemv_kernel(name)
}
const _: () = assert!(super::GEMV_BLOCK_WARPS * WARP_SIZE == ROPE_KV_THREADS);

signature! {
    /// The arguments of every `gemv2_norm_*` kernel (`gemv2_norm_kernel`): the two-matrix
    /// gemv's (`w0, w1, x, y0, y1, ncols, nrows0, nrows1`), then the norm of `y0` that its tail
    /// writes ([`super::RMSNORM_Q8_1`]'s `w`, `y`, `eps`; `n` is `nrows0`) and the tail's done
    /// counter.
    Gemv2NormArgs {
        w0: ptr,
        w1: ptr,
        x: ptr,
        y0: ptr,
        y1: ptr,
        ncols: u32,
        nrows0: u32,
        nrows1: u32,
        norm_w: ptr,
        y0_q8: ptr,
        count: ptr,
        eps: f32,
    }
}

/// The descriptor of a `gemv2_norm_*` kernel (`crate::weight_types::GemvType::pair_norm`):
/// `(w0, w1, x, y0, y1, ncols, nrows0, nrows1, norm_w, y0_q8, count, eps)`, the two-matrix gemv
/// of the type (a low-rank query's `y0 = attn_q_a·x`, `y1 = attn_kv_a_mqa·x`) whose last block
/// to finish runs [`super::RMSNORM_Q8_1`] on `y0` (`nrows0` a multiple of 32): `y0_q8 =
/// q8_1(rmsnorm(y0)·norm_w)`, the bits of that kernel (the tail has its block's thread count,
/// so the same Σx² order). `count` is a done counter (see [`super::KernelDesc`]). Launch shape and
/// items as the plain two-matrix gemv.
pub(crate) const fn gemv2_norm_kernel(name: &'static str) -> Kernel<Gemv2NormArgs> {
    super::gemv::gemv_kernel(name)
}
const _: () = assert!(super::GEMV_BLOCK_WARPS * WARP_SIZE == super::RMSNORM_Q8_1_THREADS);

signature! {
    /// The arguments of every `gemv2_rope_kb_*` kernel (`gemv2_rope_kb_kernel`):
    /// [`Gemv2RopeArgs`], then `attn_k_b`'s weight `w_kb` (`n_head·kv_lora` rows of `d_nope`
    /// weights, head `h`'s from row `h·kv_lora`), its output `q_abs` (`n_head·kv_lora` f32) and
    /// the chain's [`super::CHAIN_CTL_WORDS`] control words.
    Gemv2RopeKbArgs {
        w0: ptr,
        w1: ptr,
        x: ptr,
        q: ptr,
        kv: ptr,
        ncols: u32,
        nrows0: u32,
        nrows1: u32,
        kv_norm: ptr,
        rope_freq: ptr,
        state: ptr,
        q_pe: ptr,
        q_nope_q8: ptr,
        cache: ptr,
        count: ptr,
        n_head: u32,
        d_nope: u32,
        kv_lora: u32,
        n_rope: u32,
        ctx: u32,
        eps: f32,
        mscale: f32,
        cache_type: u32,
        w_kb: ptr,
        q_abs: ptr,
        chain_ctl: ptr,
    }
}

impl<P: Copy> Gemv2RopeKbArgs<P> {
    /// The chained launch's arguments from the `gemv2_rope_*` launch's, `attn_k_b`'s weight and
    /// output, and the chain's control words.
    pub fn new(r: Gemv2RopeArgs<P>, (w_kb, q_abs): (P, P), chain_ctl: P) -> Self {
        Gemv2RopeKbArgs {
            w0: r.w0,
            w1: r.w1,
            x: r.x,
            q: r.q,
            kv: r.kv,
            ncols: r.ncols,
            nrows0: r.nrows0,
            nrows1: r.nrows1,
            kv_norm: r.kv_norm,
            rope_freq: r.rope_freq,
            state: r.state,
            q_pe: r.q_pe,
            q_nope_q8: r.q_nope_q8,
            cache: r.cache,
            count: r.count,
            n_head: r.n_head,
            d_nope: r.d_nope,
            kv_lora: r.kv_lora,
            n_rope: r.n_rope,
            ctx: r.ctx,
            eps: r.eps,
            mscale: r.mscale,
            cache_type: r.cache_type,
            w_kb,
            q_abs,
            chain_ctl,
        }
    }
}

/// The two parts of a `gemv2_rope_kb_*` launch, in blocks: the two-matrix gemv's (`nrows`
/// rows of `units` units of `pair`, as `gemv2_rope_*` runs them) and `attn_k_b`'s (`kb_rows`
/// rows of `kb_units` units of `kb`, as the grouped gemv runs them).
#[inline]
pub const fn gemv2_rope_kb_blocks(
    (pair, units, nrows): (super::GemvUnit, u32, u32),
    (kb, kb_units, kb_rows): (super::GemvUnit, u32, u32),
) -> (u32, u32) {
    let pair_rows = super::GEMV_BLOCK_WARPS * super::gemv_pair_rows_per_warp(units, pair);
    (
        nrows.div_ceil(pair_rows),
        kb_rows.div_ceil(super::gemv_block_rows(kb_units, kb)),
    )
}

/// The descriptor of a `gemv2_rope_kb_*` kernel (`crate::weight_types::GemvType::pair_rope_kb`,
/// one per registry `chain_rope_kb` row: the pair's type and `attn_k_b`'s):
/// `gemv2_rope_*` and `attn_k_b`'s grouped gemv (`q_abs[h] = W_kb[h]·q8_1(q_nope[h])`, groups of
/// `kv_lora` rows) in one chained launch. Every block draws a ticket (word `CHAIN_CTL_TICKET`):
/// the gemv2's row blocks first, then the grouped gemv's. A gemv2 row block counts itself in
/// word `CHAIN_CTL_DONE` (a release add) once its rows are stored, and the last of them
/// (`count`) runs the rope tail without writing `q_nope_q8` (an argument it never touches); a
/// grouped-gemv block prefetches its weight rows, waits (an acquire spin) until every gemv2 row
/// block has counted, quantizes its heads' `q_nope` from `q` into its stage (the bits
/// `rope_kv_q8_1` writes to `q_nope_q8`) and counts itself in word `CHAIN_CTL_PASSED`; the last
/// to pass sets both back to 0. Requirements: both launches'. Invariant: the control words are
/// 0 before the first launch and after every launch; launches sharing them must not overlap.
/// Grid: the sum of [`gemv2_rope_kb_blocks`]; an item is a block. The outputs are the bits of
/// the two launches.
pub(crate) const fn gemv2_rope_kb_kernel(name: &'static str) -> Kernel<Gemv2RopeKbArgs> {
    Kernel::new(name, [super::GEMV_BLOCK_WARPS * WARP_SIZE, 1, 1], 1, 0)
}

signature! {
    /// The arguments of every `gemv2_norm_rope_kb_*` kernel (`gemv2_norm_rope_kb_kernel`):
    /// [`Gemv2RopeKbArgs`] for `attn_q_b` (`w0 = w1`, `nrows1 = 0`), whose activation `x` is the
    /// norm's q8_1 output and whose `kv` the first products write; then the first products'
    /// weights `wa0` (`attn_q_a`, `nrows_a0` rows) and `wa1` (`attn_kv_a_mqa`, `nrows_a1` rows)
    /// of `ncols_a` columns, their activation `xa`, `attn_q_a`'s output `q_a`, the norm's weight
    /// `norm_w`, its done counter `norm_count` and the norm's [`super::CHAIN_CTL_WORDS`] control
    /// words `norm_ctl`. The norm's eps is `eps` (the rope's `kv_norm` eps: both the model's).
    Gemv2NormRopeKbArgs {
        w0: ptr,
        w1: ptr,
        x: ptr,
        q: ptr,
        kv: ptr,
        ncols: u32,
        nrows0: u32,
        nrows1: u32,
        kv_norm: ptr,
        rope_freq: ptr,
        state: ptr,
        q_pe: ptr,
        q_nope_q8: ptr,
        cache: ptr,
        count: ptr,
        n_head: u32,
        d_nope: u32,
        kv_lora: u32,
        n_rope: u32,
        ctx: u32,
        eps: f32,
        mscale: f32,
        cache_type: u32,
        w_kb: ptr,
        q_abs: ptr,
        chain_ctl: ptr,
        wa0: ptr,
        wa1: ptr,
        xa: ptr,
        q_a: ptr,
        ncols_a: u32,
        nrows_a0: u32,
        nrows_a1: u32,
        norm_w: ptr,
        norm_count: ptr,
        norm_ctl: ptr,
    }
}

impl<P: Copy> Gemv2NormRopeKbArgs<P> {
    /// The chained launch's arguments from the `gemv2_norm_*` launch's and the
    /// `gemv2_rope_kb_*` launch's and the norm's control words. The norm's `y0_q8` is the rope
    /// part's `x`, its `y1` the rope part's `kv` and its eps the rope part's: the chained kernel
    /// takes each once, from `r`.
    pub fn new(n: Gemv2NormArgs<P>, r: Gemv2RopeKbArgs<P>, norm_ctl: P) -> Self {
        Gemv2NormRopeKbArgs {
            w0: r.w0,
            w1: r.w1,
            x: r.x,
            q: r.q,
            kv: r.kv,
            ncols: r.ncols,
            nrows0: r.nrows0,
            nrows1: r.nrows1,
            kv_norm: r.kv_norm,
            rope_freq: r.rope_freq,
            state: r.state,
            q_pe: r.q_pe,
            q_nope_q8: r.q_nope_q8,
            cache: r.cache,
            count: r.count,
            n_head: r.n_head,
            d_nope: r.d_nope,
            kv_lora: r.kv_lora,
            n_rope: r.n_rope,
            ctx: r.ctx,
            eps: r.eps,
            mscale: r.mscale,
            cache_type: r.cache_type,
            w_kb: r.w_kb,
            q_abs: r.q_abs,
            chain_ctl: r.chain_ctl,
            wa0: n.w0,
            wa1: n.w1,
            xa: n.x,
            q_a: n.y0,
            ncols_a: n.ncols,
            nrows_a0: n.nrows0,
            nrows_a1: n.nrows1,
            norm_w: n.norm_w,
            norm_count: n.count,
            norm_ctl,
        }
    }
}

/// The first products' row blocks of a `gemv2_norm_rope_kb_*` launch: `nrows` rows of `units`
/// units of `pair`, as `gemv2_norm_*` runs them.
#[inline]
pub const fn gemv2_norm_blocks(pair: super::GemvUnit, units: u32, nrows: u32) -> u32 {
    nrows.div_ceil(super::GEMV_BLOCK_WARPS * super::gemv_pair_rows_per_warp(units, pair))
}

/// The descriptor of a `gemv2_norm_rope_kb_*` kernel
/// (`crate::weight_types::GemvType::pair_norm_rope_kb`, one per registry `chain_rope_kb` row:
/// the type of all three products before `attn_k_b`, and `attn_k_b`'s): `gemv2_norm_*` and
/// `gemv2_rope_kb_*` in one chained launch. Every block draws a ticket (word `CHAIN_CTL_TICKET`
/// of `chain_ctl`): the first products' [`gemv2_norm_blocks`] row blocks first, then the blocks
/// of `gemv2_rope_kb_*` ([`gemv2_rope_kb_blocks`]) in its order. The first products' last block
/// to finish (`norm_count`) runs the norm tail, then counts itself in word `CHAIN_CTL_DONE` of
/// `norm_ctl` (a release add); an `attn_q_b` row block prefetches its weight rows, waits (an
/// acquire spin) for that count, counts itself in word `CHAIN_CTL_PASSED` of `norm_ctl` (the
/// last to pass sets both back to 0) and reads `x` with coherent loads; then the blocks behave as
/// in `gemv2_rope_kb_*` on `chain_ctl`. Requirements: both launches'. Invariant: both control
/// words' sets are 0 before the first launch and after every launch; launches sharing them must
/// not overlap. Grid: the sum of the parts; an item is a block. The outputs are the bits of the
/// two launches.
pub(crate) const fn gemv2_norm_rope_kb_kernel(name: &'static str) -> Kernel<Gemv2NormRopeKbArgs> {
    Kernel::new(name, [super::GEMV_BLOCK_WARPS * WARP_SIZE, 1, 1], 1, 0)
}
