//! The chained launch of a MoE layer's FFN (`ingot_abi::launch::moe_ffn`), and of that with
//! the next layer's projections (`ingot_abi::launch::ffn_rope_kb`).

use super::{
    down_args, gate_up_args, DownBufs, FfnShape, FusedRouterBufs, GateUpBufs, GateUpLaunch,
    RouteParams,
};
use crate::backend::Accelerator;
use crate::ops::attention::rope_kb::rope_kb_args;
use crate::ops::attention::{AttnShape, KbBufs, RopeKvBufs};
use crate::ops::gemv::GemvType;
use crate::ops::{bytes, launch, need, shape};
use crate::Result;
use ingot_abi::launch::{moe_ffn_items, Kernel, MoeFfnArgs, MoeFfnRopeKbArgs, CHAIN_CTL_WORDS};

/// [`super::moe_router_gate_up`] then [`super::moe_down`] in one chained launch: the bits of
/// those two launches. `gate_up` and `down` are the (routed, shared) weight types of each, a
/// row of the registry's `chain_ffn` (`GemvType::moe_ffn`); `down_bufs.act` must be
/// `gate_up_bufs.act` and `down_bufs.sel` its `sel` (the chained kernel reads the gate/up's).
/// `chain_ctl`: [`CHAIN_CTL_WORDS`] `u32`s holding 0 (the launch leaves them 0 again).
#[allow(clippy::too_many_arguments)]
pub fn moe_ffn<B: Accelerator>(
    b: &mut B,
    types: ((GemvType, GemvType), (GemvType, GemvType)),
    s: &FfnShape,
    gate_up_bufs: &GateUpBufs<'_, B::Buf>,
    router: (&FusedRouterBufs<'_, B::Buf>, &RouteParams),
    down_bufs: &DownBufs<'_, B::Buf>,
    chain_ctl: &B::Buf,
) -> Result<()> {
    let (k, args, items) = ffn_args(b, types, s, gate_up_bufs, router, down_bufs, chain_ctl)?;
    launch(b, k, items, args)
}

/// The projections after the FFN in [`moe_ffn_rope_kb`]: what
/// [`crate::ops::attention::gemv2_rope_kb_q8_1`] takes beyond its activation, which is the FFN's
/// norm tail's q8_1 output.
pub struct NextProjections<'a, T> {
    /// The pair's type and `attn_k_b`'s.
    pub types: (GemvType, GemvType),
    /// `attn_q` and `attn_kv_a_mqa` (or, with `None`, a low-rank query's `attn_q_b` alone).
    pub w: (&'a T, Option<&'a T>),
    pub shape: &'a AttnShape,
    pub bufs: &'a RopeKvBufs<'a, T>,
    /// `q_nope_q8` (checked, never written) and the rope tail's done counter.
    pub tail: (&'a T, &'a T),
    /// The latent norm's eps and the rope's `mscale`.
    pub scales: (f32, f32),
    pub kb: &'a KbBufs<'a, T>,
    /// The norm signal's [`CHAIN_CTL_WORDS`] `u32`s holding 0 (the launch leaves them 0 again).
    pub norm_ctl: &'a T,
}

/// [`moe_ffn`] and [`crate::ops::attention::gemv2_rope_kb_q8_1`] on the FFN's norm tail's q8_1
/// output (`down_bufs.norm`, which must be given) in one chained launch
/// (`ingot_abi::launch::ffn_rope_kb`): the bits of those two launches. The types must be a row
/// of the registry's `chain_ffn_rope_kb` (`GemvType::moe_ffn_rope_kb`); the projections read
/// `s.n_embd` columns.
#[allow(clippy::too_many_arguments)]
pub fn moe_ffn_rope_kb<B: Accelerator>(
    b: &mut B,
    types: ((GemvType, GemvType), (GemvType, GemvType)),
    s: &FfnShape,
    gate_up_bufs: &GateUpBufs<'_, B::Buf>,
    router: (&FusedRouterBufs<'_, B::Buf>, &RouteParams),
    down_bufs: &DownBufs<'_, B::Buf>,
    chain_ctl: &B::Buf,
    next: &NextProjections<'_, B::Buf>,
) -> Result<()> {
    let (fk, f, items) = ffn_args(b, types, s, gate_up_bufs, router, down_bufs, chain_ctl)?;
    let Some(k) = GemvType::moe_ffn_rope_kb(types.0, types.1, next.types) else {
        return Err(shape(
            fk,
            format!(
                "no moe_ffn_rope_kb kernel for FFN types {types:?} with projections {:?} \
                 (registry `chain_ffn_rope_kb`)",
                next.types
            ),
        ));
    };
    let Some(norm) = &down_bufs.norm else {
        return Err(shape(
            k,
            "the FFN's norm tail must write the projections' activation".into(),
        ));
    };
    let (r, (first, waiting)) = rope_kb_args(
        b,
        &k.desc,
        next.types,
        next.w,
        (norm.q8, s.n_embd),
        next.shape,
        next.bufs,
        next.tail,
        next.scales,
        next.kb,
    )?;
    need(
        b,
        k,
        "norm_ctl",
        next.norm_ctl,
        bytes(CHAIN_CTL_WORDS as usize, 4, 1),
    )?;
    let Some(items) = items
        .checked_add(first)
        .and_then(|i| i.checked_add(waiting))
    else {
        return Err(shape(k, format!("{items} + {first} + {waiting} blocks")));
    };
    launch(b, k, items, MoeFfnRopeKbArgs::new(f, r, next.norm_ctl))
}

/// A checked `moe_ffn_*` launch: its kernel, arguments and blocks.
type FfnLaunch<'a, B> = (
    &'static Kernel<MoeFfnArgs>,
    MoeFfnArgs<&'a <B as Accelerator>::Buf>,
    u32,
);

/// [`moe_ffn`]'s kernel, checked arguments and blocks.
#[allow(clippy::too_many_arguments)]
fn ffn_args<'a, B: Accelerator>(
    b: &B,
    (gate_up, down): ((GemvType, GemvType), (GemvType, GemvType)),
    s: &FfnShape,
    gate_up_bufs: &GateUpBufs<'a, B::Buf>,
    router: (&FusedRouterBufs<'a, B::Buf>, &RouteParams),
    down_bufs: &DownBufs<'a, B::Buf>,
    chain_ctl: &'a B::Buf,
) -> Result<FfnLaunch<'a, B>> {
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
    Ok((k, MoeFfnArgs::new(g, d, chain_ctl), items))
}
