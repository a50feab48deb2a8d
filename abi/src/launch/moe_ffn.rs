//! `moe_ffn_*`: a MoE layer's FFN in one chained launch: the gate/up kernel with its router
//! (`moe_gate_up_router_*`, [`super::moe`]) and the down kernel (`moe_down_*`, with its residual
//! add and norm tail) share a grid. Every block draws its ticket from word
//! [`super::ROUTE_CTL_TICKET`] of `route_ctl`: the router's blocks, the shared experts' and the
//! routed slots' gate/up row blocks (as `moe_gate_up_router_*` orders them), then the down
//! kernel's row blocks. A gate/up row block counts itself in word [`super::CHAIN_CTL_DONE`] of
//! `chain_ctl` (a release add) once its q8_1 output is stored. A down block prefetches its
//! shared-expert rows, waits for the routing (counted with the routed gate/up blocks in word
//! [`super::ROUTE_CTL_PASSED`]), prefetches its routed experts' rows, then waits until every
//! gate/up row block is done (counted in word [`super::CHAIN_CTL_PASSED`]). A lower ticket was
//! drawn by a block that has started, so every wait ends. Invariant: the `route_ctl` and
//! `chain_ctl` words are 0 before the first launch and after every launch; launches sharing
//! them must not overlap.
//!
//! The output is the bits of the two launches it replaces: each part runs the code of its
//! unfused kernel on the block its ticket names. One kernel per registry `chain_ffn` row
//! (`crate::weight_types`): the gate/up types and the down types of a llama.cpp mix.

use super::moe::{
    gate_up_router_items, MOE_DOWN_BLOCK_ROWS, MOE_DOWN_WARPS, MOE_GATE_UP_ROWS, MOE_GATE_UP_WARPS,
};
use super::{signature, DownArgs, GateUpRouterArgs, Kernel};

signature! {
    /// The arguments of every `moe_ffn_*` kernel: [`GateUpRouterArgs`], then the down kernel's
    /// that differ from them ([`DownArgs`] without `act`, `sel`, `ff`, `n_used`, `ff_sh` and
    /// `n_expert`, which are the gate/up's), then the chain's control words.
    MoeFfnArgs {
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
    }
}

impl<P: Copy> MoeFfnArgs<P> {
    /// The chained launch's arguments from the two launches' (`d`'s `act`, `sel`, `ff`,
    /// `n_used`, `ff_sh` and `n_expert` are `g`'s) and the chain's control words.
    pub fn new(g: GateUpRouterArgs<P>, d: DownArgs<P>, chain_ctl: P) -> Self {
        MoeFfnArgs {
            x: g.x,
            sel: g.sel,
            gate: g.gate,
            up: g.up,
            gate_sh: g.gate_sh,
            up_sh: g.up_sh,
            act: g.act,
            ncols: g.ncols,
            ff: g.ff,
            n_used: g.n_used,
            ff_sh: g.ff_sh,
            n_expert: g.n_expert,
            layout: g.layout,
            rw: g.rw,
            rx: g.rx,
            logits: g.logits,
            bias: g.bias,
            route_ctl: g.route_ctl,
            n_group: g.n_group,
            n_group_used: g.n_group_used,
            route_flags: g.route_flags,
            scale: g.scale,
            down: d.down,
            down_sh: d.down_sh,
            resid: d.resid,
            y: d.y,
            nrows: d.nrows,
            norm_w: d.norm_w,
            norm_q8: d.norm_q8,
            norm_f32: d.norm_f32,
            count: d.count,
            norm: d.norm,
            eps: d.eps,
            chain_ctl,
        }
    }
}

/// Blocks of a `moe_ffn_*` launch: the gate/up launch's ([`gate_up_router_items`] / 32), then
/// the down launch's (`nrows` rows, [`MOE_DOWN_BLOCK_ROWS`] per block); `None` on overflow. An
/// item is a block.
pub const fn moe_ffn_items(
    (n_used, ff, ff_sh, n_expert): (u32, u32, u32, u32),
    nrows: u32,
) -> Option<u32> {
    match gate_up_router_items(n_used, ff, ff_sh, n_expert) {
        Some(rows) => (rows / MOE_GATE_UP_ROWS).checked_add(nrows.div_ceil(MOE_DOWN_BLOCK_ROWS)),
        None => None,
    }
}

/// The descriptor of a `moe_ffn_*` kernel (`crate::weight_types::GemvType::moe_ffn`). Requires
/// what both kernels require (`moe_gate_up_router_*`'s and `moe_down_*`'s). Grid:
/// [`moe_ffn_items`] blocks.
pub(crate) const fn moe_ffn_kernel(name: &'static str) -> Kernel<MoeFfnArgs> {
    Kernel::new(name, [MOE_GATE_UP_WARPS * super::WARP_SIZE, 1, 1], 1, 0)
}
const _: () = assert!(MOE_GATE_UP_WARPS == MOE_DOWN_WARPS);
