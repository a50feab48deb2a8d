//! The chained launch of a MoE layer's FFN (`ingot_abi::launch::moe_ffn`).

use super::{
    down_args, gate_up_args, DownBufs, FfnShape, FusedRouterBufs, GateUpBufs, GateUpLaunch,
    RouteParams,
};
use crate::backend::Accelerator;
use crate::ops::gemv::GemvType;
use crate::ops::{bytes, launch, need, shape};
use crate::Result;
use ingot_abi::launch::{moe_ffn_items, MoeFfnArgs, CHAIN_CTL_WORDS};

/// [`super::moe_router_gate_up`] then [`super::moe_down`] in one chained launch: the bits of
/// those two launches. `gate_up` and `down` are the (routed, shared) weight types of each, a
/// row of the registry's `chain_ffn` (`GemvType::moe_ffn`); `down_bufs.act` must be
/// `gate_up_bufs.act` and `down_bufs.sel` its `sel` (the chained kernel reads the gate/up's).
/// `chain_ctl`: [`CHAIN_CTL_WORDS`] `u32`s holding 0 (the launch leaves them 0 again).
#[allow(clippy::too_many_arguments)]
pub fn moe_ffn<B: Accelerator>(
    b: &mut B,
    (gate_up, down): ((GemvType, GemvType), (GemvType, GemvType)),
    s: &FfnShape,
    gate_up_bufs: &GateUpBufs<'_, B::Buf>,
    router: (&FusedRouterBufs<'_, B::Buf>, &RouteParams),
    down_bufs: &DownBufs<'_, B::Buf>,
    chain_ctl: &B::Buf,
) -> Result<()> {
    let g = gate_up_args(b, gate_up, s, gate_up_bufs, Some(router))?;
    let GateUpLaunch::Router(gk, _, g) = g else {
        unreachable!("a launch with a router checks as one");
    };
    let Some(k) = GemvType::moe_ffn(gate_up, down) else {
        return Err(shape(
            gk,
            format!("no moe_ffn kernel for gate/up {gate_up:?} with down {down:?} weights"),
        ));
    };
    let (_, _, d) = down_args(b, down, s, down_bufs)?;
    let same = |x: &B::Buf, y: &B::Buf| b.address(x) == b.address(y);
    if !same(d.act, g.act) || !same(d.sel, g.sel) {
        return Err(shape(
            k,
            "the down launch must read the gate/up launch's act and sel".into(),
        ));
    }
    need(
        b,
        k,
        "chain_ctl",
        chain_ctl,
        bytes(CHAIN_CTL_WORDS as usize, 4, 1),
    )?;
    let overflow = || shape(k, "the launch's item count overflows u32".into());
    let items =
        moe_ffn_items((g.n_used, g.ff, g.ff_sh, g.n_expert), d.nrows).ok_or_else(overflow)?;
    launch(b, k, items, MoeFfnArgs::new(g, d, chain_ctl))
}
