//! `moe_ffn_rope_kb_*`: a MoE layer's FFN (`moe_ffn_*`, [`super::moe_ffn`]) and the next layer's
//! projections (`gemv2_rope_kb_*`, [`super::projections`]) in one chained launch. The FFN's down
//! tail writes the next layer's normed token (its `norm_q8`), which is the projections'
//! activation: the projections' row blocks wait for that tail inside the launch instead of for
//! the launch's end, and stream their weight rows while the FFN's last blocks run. A node less
//! per MoE layer that a MoE layer follows.
//!
//! Every block draws its ticket from word [`super::ROUTE_CTL_TICKET`] of `route_ctl`: the FFN's
//! blocks in `moe_ffn_*`'s order ([`super::moe_ffn_items`]), then `gemv2_rope_kb_*`'s
//! ([`super::gemv2_rope_kb_blocks`]: the two-matrix gemv's row blocks, then `attn_k_b`'s). The
//! FFN's blocks behave as in `moe_ffn_*` on `route_ctl` and `chain_ctl`; the down block that
//! runs the norm tail then counts itself in word [`super::CHAIN_CTL_DONE`] of `norm_ctl` (a
//! release add). A projection row block prefetches its weight rows, waits (an acquire spin)
//! for that count, counts itself in word [`super::CHAIN_CTL_PASSED`] of `norm_ctl` (the last to
//! pass sets both back to 0), reads `norm_q8` with coherent loads, and from there the blocks
//! behave as in `gemv2_rope_kb_*` on `kb_ctl`. A lower ticket was drawn by a block that has
//! started, so every wait ends.
//!
//! Invariant: the `route_ctl`, `chain_ctl`, `norm_ctl` and `kb_ctl` words are 0 before the
//! first launch and after every launch; launches sharing them must not overlap. Requirements:
//! both launches', the FFN's norm tail on (`norm` not `DOWN_NORM_NONE`), and the projections'
//! `ncols` the FFN's `nrows` (the normed token is their activation). The outputs are the bits of
//! the two launches. One kernel per registry `chain_ffn_rope_kb` row
//! (`crate::weight_types`): a `chain_ffn` row and a `chain_rope_kb` row of one llama.cpp mix.

use super::moe::{MOE_DOWN_WARPS, MOE_GATE_UP_WARPS};
use super::{signature, Gemv2RopeKbArgs, Kernel, MoeFfnArgs, GEMV_BLOCK_WARPS};

signature! {
    /// The arguments of every `moe_ffn_rope_kb_*` kernel: [`MoeFfnArgs`], then
    /// [`Gemv2RopeKbArgs`] without `x` (the FFN's `norm_q8`), with `ncols`, `count`, `eps` and
    /// `chain_ctl` renamed `kb_ncols`, `rope_count`, `rope_eps` and `kb_ctl`, then the norm
    /// signal's control words `norm_ctl`.
    MoeFfnRopeKbArgs {
        x: ptr,
        sel: ptr,
        gate: ptr,
        up: ptr,
        gate_sh: ptr,
        up_sh: ptr,
        act: ptr,
        ncols: u32,
        ff: u32,
        n_used: u32,
        ff_sh: u32,
        n_expert: u32,
        layout: u32,
        rw: ptr,
        rx: ptr,
        logits: ptr,
        bias: ptr,
        route_ctl: ptr,
        n_group: u32,
        n_group_used: u32,
        route_flags: u32,
        scale: f32,
        down: ptr,
        down_sh: ptr,
        resid: ptr,
        y: ptr,
        nrows: u32,
        norm_w: ptr,
        norm_q8: ptr,
        norm_f32: ptr,
        count: ptr,
        norm: u32,
        eps: f32,
        chain_ctl: ptr,
        w0: ptr,
        w1: ptr,
        q: ptr,
        kv: ptr,
        kb_ncols: u32,
        nrows0: u32,
        nrows1: u32,
        kv_norm: ptr,
        rope_freq: ptr,
        state: ptr,
        q_pe: ptr,
        q_nope_q8: ptr,
        cache: ptr,
        rope_count: ptr,
        n_head: u32,
        d_nope: u32,
        kv_lora: u32,
        n_rope: u32,
        ctx: u32,
        rope_eps: f32,
        mscale: f32,
        cache_type: u32,
        w_kb: ptr,
        q_abs: ptr,
        kb_ctl: ptr,
        norm_ctl: ptr,
    }
}

impl<P: Copy> MoeFfnRopeKbArgs<P> {
    /// The chained launch's arguments from the `moe_ffn_*` launch's and the `gemv2_rope_kb_*`
    /// launch's (whose `x` must be `f.norm_q8`: the kernel takes it once, from `f`) and the norm
    /// signal's control words.
    pub fn new(f: MoeFfnArgs<P>, r: Gemv2RopeKbArgs<P>, norm_ctl: P) -> Self {
        MoeFfnRopeKbArgs {
            x: f.x,
            sel: f.sel,
            gate: f.gate,
            up: f.up,
            gate_sh: f.gate_sh,
            up_sh: f.up_sh,
            act: f.act,
            ncols: f.ncols,
            ff: f.ff,
            n_used: f.n_used,
            ff_sh: f.ff_sh,
            n_expert: f.n_expert,
            layout: f.layout,
            rw: f.rw,
            rx: f.rx,
            logits: f.logits,
            bias: f.bias,
            route_ctl: f.route_ctl,
            n_group: f.n_group,
            n_group_used: f.n_group_used,
            route_flags: f.route_flags,
            scale: f.scale,
            down: f.down,
            down_sh: f.down_sh,
            resid: f.resid,
            y: f.y,
            nrows: f.nrows,
            norm_w: f.norm_w,
            norm_q8: f.norm_q8,
            norm_f32: f.norm_f32,
            count: f.count,
            norm: f.norm,
            eps: f.eps,
            chain_ctl: f.chain_ctl,
            w0: r.w0,
            w1: r.w1,
            q: r.q,
            kv: r.kv,
            kb_ncols: r.ncols,
            nrows0: r.nrows0,
            nrows1: r.nrows1,
            kv_norm: r.kv_norm,
            rope_freq: r.rope_freq,
            state: r.state,
            q_pe: r.q_pe,
            q_nope_q8: r.q_nope_q8,
            cache: r.cache,
            rope_count: r.count,
            n_head: r.n_head,
            d_nope: r.d_nope,
            kv_lora: r.kv_lora,
            n_rope: r.n_rope,
            ctx: r.ctx,
            rope_eps: r.eps,
            mscale: r.mscale,
            cache_type: r.cache_type,
            w_kb: r.w_kb,
            q_abs: r.q_abs,
            kb_ctl: r.chain_ctl,
            norm_ctl,
        }
    }
}

/// The descriptor of a `moe_ffn_rope_kb_*` kernel
/// (`crate::weight_types::GemvType::moe_ffn_rope_kb`; see the module docs). Grid: the FFN's
/// [`super::moe_ffn_items`] blocks plus the projections' two [`super::gemv2_rope_kb_blocks`]
/// parts; an item is a block.
pub(crate) const fn moe_ffn_rope_kb_kernel(name: &'static str) -> Kernel<MoeFfnRopeKbArgs> {
    Kernel::new(name, [MOE_GATE_UP_WARPS * super::WARP_SIZE, 1, 1], 1, 0)
}
// One block size serves every part.
const _: () = assert!(MOE_GATE_UP_WARPS == MOE_DOWN_WARPS && MOE_DOWN_WARPS == GEMV_BLOCK_WARPS);
