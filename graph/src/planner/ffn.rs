//! Feed-forward parts of a layer: the dense FFN of the lead layers (docs/decode-math.md#dense-ffn)
//! and the MoE FFN (docs/decode-math.md#moe-ffn).
//!
//! Both run on the MoE kernels, the dense one with no routed slot (`n_used = 0`, the weights as
//! the "shared expert"), which fuses SwiGLU, the q8_1 quantization of the middle and the
//! residual add into two launches.

use ingot_abi::launch::{
    gate_up_items, gate_up_router_items, moe_ffn_items, GateUpArgs, GateUpRouterArgs, MoeFfnArgs,
    MoeRouterArgs, RouterPart, CHAIN_CTL_WORDS, GATE_UP_MERGED, GATE_UP_ROUTER_MAX_EXPERTS,
    GATE_UP_SEPARATE, MOE_ROUTER_F32, ROUTE_CTL_WORDS,
};
use ingot_gguf::GgmlType;
use ingot_model::config::ExpertGateUp;

use super::builder::{buf, u32a, Builder, ChainedFfn};
use super::kernels as k;
use super::nodes::{
    ffn_weight, is_f32, model_routing, route_scalars, selection, DownFfn, NextNorm,
};
use crate::buffer::BufId;
use crate::error::PlanError;

/// Dense FFN of a lead layer: `residual += W_down·(silu(W_gate·h) ⊙ W_up·h)`, `h` the
/// `ffn_norm` output that `attn_output`'s tail wrote; the down launch's tail writes the next
/// norm ([`NextNorm::after_ffn`]).
pub(crate) fn dense(b: &mut Builder<'_>, il: usize) -> Result<(), PlanError> {
    let name = |s: &str| format!("blk.{il}.{s}");
    let label = |s: &str| format!("blk.{il} {s}");
    let (gate, gate_info, ncols, ff) = ffn_weight(b, &name("ffn_gate.weight"), "dense FFN")?;
    let (up, up_info, _, _) = ffn_weight(b, &name("ffn_up.weight"), "dense FFN")?;
    same_type(&name("ffn_gate/ffn_up.weight"), &[gate_info.ty, up_info.ty])?;
    let (down, down_info, down_cols, nrows) = ffn_weight(b, &name("ffn_down.weight"), "dense FFN")?;
    multiple_of_32(&name("ffn_gate.weight"), ff)?;
    let mid_q8 = b.q8_act("act.dense_mid_q8", ff)?;
    let (sel, norm_q8, residual) = (selection(b)?, b.acts.norm_q8, b.acts.residual);
    b.node(
        k::moe_gate_up(gate_info.ty),
        label("ffn_gate_up_swiglu"),
        Some(il),
        ff,
        GateUpArgs {
            x: buf(norm_q8),
            sel: buf(sel),
            gate: buf(gate),
            up: buf(up),
            gate_sh: buf(gate),
            up_sh: buf(up),
            act: buf(mid_q8),
            ncols: u32a(ncols),
            ff: u32a(ff),
            n_used: 0,
            ff_sh: u32a(ff),
            n_expert: 1,
            layout: GATE_UP_SEPARATE,
        },
    )?;
    let ffn = DownFfn {
        act: mid_q8,
        sel,
        down,
        down_sh: down,
        resid: residual,
        y: residual,
        nrows,
        ff: down_cols,
        n_used: 0,
        ff_sh: down_cols,
        n_expert: 1,
    };
    let args = NextNorm::after_ffn(b, il)?.down_args(b, ffn)?;
    b.node(
        k::moe_down(down_info.ty, down_info.ty),
        label("ffn_down"),
        Some(il),
        nrows,
        args,
    )
}

/// MoE FFN on the `ffn_norm` output that `attn_output`'s tail wrote: the router and top-k
/// (fused into the next launch up to `GATE_UP_ROUTER_MAX_EXPERTS` experts), gate/up/SwiGLU
/// over the selected and shared experts, and the weighted down projection added to the
/// residual, whose tail writes the next norm ([`NextNorm::after_ffn`]). With the router fused
/// and no expert cache, gate/up and down are one chained launch (`moe_ffn_*`) where the
/// registry has the four weight types' row.
pub(crate) fn moe(b: &mut Builder<'_>, il: usize) -> Result<(), PlanError> {
    let c = b.c;
    let name = |s: &str| format!("blk.{il}.{s}");
    let label = |s: &str| format!("blk.{il} {s}");
    if c.n_expert_used > ingot_abi::launch::MAX_EXPERTS_USED
        || c.n_expert as u32 > ingot_abi::launch::ROUTER_MAX_EXPERTS
    {
        return Err(PlanError::UnsupportedModel(format!(
            "{} experts, {} used (the router supports at most {} and {})",
            c.n_expert,
            c.n_expert_used,
            ingot_abi::launch::ROUTER_MAX_EXPERTS,
            ingot_abi::launch::MAX_EXPERTS_USED
        )));
    }
    if c.n_expert_shared == 0 {
        return Err(PlanError::UnsupportedModel(
            "MoE layers without shared experts are not planned".into(),
        ));
    }
    let router_logits = b.f32_act("act.router_logits", c.n_expert)?;
    let (router, _) = b.weight(&name("ffn_gate_inp.weight"), "router gemv", &is_f32)?;
    if !c.n_embd.is_multiple_of(4) {
        return Err(PlanError::UnsupportedModel(format!(
            "n_embd = {} is not a multiple of 4 (f32 router gemv)",
            c.n_embd
        )));
    }
    let norm = b.acts.norm;
    let cache = b.opts.expert_cache;
    if let Some(o) = cache {
        if o.slots < c.n_expert_used || o.slots > c.n_expert {
            return Err(PlanError::UnsupportedModel(format!(
                "{} expert slots per layer: the cache needs at least the {} experts a token uses \
                 and at most the {} there are",
                o.slots, c.n_expert_used, c.n_expert
            )));
        }
    }
    // With an expert cache each layer keeps its own selection, which the host reads after the
    // step; otherwise one buffer serves every layer.
    let sel = match cache {
        Some(_) => b.act(
            &format!("act.expert_selection.{il}"),
            size_of::<ingot_abi::launch::ExpertSelection>() as u64,
        )?,
        None => selection(b)?,
    };
    let (mut flags, model_bias) = model_routing(b, il)?;
    // Cache-aware routing: the layer's own selection bias, the model's bias plus the bonus of
    // the experts in VRAM, rewritten by the executor after each step.
    let cache_bias = match cache {
        Some(o) if o.route_bonus != 0.0 => {
            flags |= ingot_abi::launch::ROUTE_BIAS;
            Some(b.f32_act(&format!("act.route_bias.{il}"), c.n_expert)?)
        }
        _ => None,
    };
    // Without a selection bias the kernels never read `bias`; the logits stand in as a valid
    // pointer.
    let bias = cache_bias.or(model_bias).unwrap_or(router_logits);
    let r = route_scalars(c, flags);
    // Up to `GATE_UP_ROUTER_MAX_EXPERTS` experts the router runs in the gate/up launch
    // (`moe_gate_up_router_*`); more (V3, Kimi-K2) in a launch of its own, the router gemv and
    // the routing together, before the plain `moe_gate_up_*`, which holds no router code (the
    // registers of their routing would cost every gate/up block occupancy). Either way the
    // router's control words must be 0 before every launch: activations are zeroed at
    // allocation and each launch leaves them 0, so one buffer serves every layer and every
    // replay.
    let fused = r.n_expert <= GATE_UP_ROUTER_MAX_EXPERTS;
    if !fused {
        let count = b.act("act.moe_router_count", 4)?;
        let args = MoeRouterArgs {
            w: buf(router),
            x: buf(norm),
            logits: buf(router_logits),
            bias: buf(bias),
            sel: buf(sel),
            count: buf(count),
            ncols: u32a(c.n_embd),
            n_expert: r.n_expert,
            n_used: r.n_used,
            n_group: r.n_group,
            n_group_used: r.n_group_used,
            flags: r.flags,
            scale: r.scale,
        };
        b.node(
            k::fixed(&MOE_ROUTER_F32),
            label("ffn_gate_inp+moe_route"),
            Some(il),
            c.n_expert,
            args,
        )?;
    }
    // Separate gate and up tensors, or one merged `[gate | up]` tensor read through `gate`
    // (the kernel then loads `up`'s table entry unused; the merged tensor's table stands in).
    let (gate_e, up_e, gate_ty, up_ty, ncols, layout) = match c.gate_up {
        ExpertGateUp::Split => {
            let (gate_e, gate_ty, ncols, _) = expert(b, &name("ffn_gate_exps.weight"))?;
            let (up_e, up_ty, _, _) = expert(b, &name("ffn_up_exps.weight"))?;
            (gate_e, up_e, gate_ty, up_ty, ncols, GATE_UP_SEPARATE)
        }
        ExpertGateUp::Merged => {
            let (e, ty, ncols, _) = expert(b, &name("ffn_gate_up_exps.weight"))?;
            (e, e, ty, ty, ncols, GATE_UP_MERGED)
        }
    };
    // The kernels read each routed tensor through an expert table: the identity table over
    // the tensor in VRAM, or with an expert cache the table over its slots and host copy.
    let routed = |b: &mut Builder<'_>, id: BufId| -> Result<BufId, PlanError> {
        b.expert_table(il, id, cache.map(|o| o.slots), c.n_expert)
    };
    let gate_e = routed(b, gate_e)?;
    let up_e = if layout == GATE_UP_MERGED {
        gate_e
    } else {
        routed(b, up_e)?
    };
    let (gate_s, gs, _, ffs) = ffn_weight(b, &name("ffn_gate_shexp.weight"), "shared expert")?;
    let (up_s, us, _, _) = ffn_weight(b, &name("ffn_up_shexp.weight"), "shared expert")?;
    // Gate and up share a type on each side; the routed and shared sides may differ where the
    // registry has the pair (`mixed_gate_up`: a kernel name no PTX exports otherwise, which
    // `Plan::check` reports).
    same_type(&name("ffn_{gate,up}_exps.weight"), &[gate_ty, up_ty])?;
    same_type(&name("ffn_{gate,up}_shexp.weight"), &[gs.ty, us.ty])?;
    let ff = c.ff_expert;
    multiple_of_32(&name("ffn_gate_exps.weight"), ff)?;
    multiple_of_32(&name("ffn_gate_shexp.weight"), ffs)?;
    let mid_q8 = b.q8_act("act.moe_mid_q8", c.n_expert_used * ff + ffs)?;
    let norm_q8 = b.acts.norm_q8;
    let (n_used, ff32, ffs32) = (u32a(c.n_expert_used), u32a(ff), u32a(ffs));
    let args = GateUpArgs {
        x: buf(norm_q8),
        sel: buf(sel),
        gate: buf(gate_e),
        up: buf(up_e),
        gate_sh: buf(gate_s),
        up_sh: buf(up_s),
        act: buf(mid_q8),
        ncols: u32a(ncols),
        ff: ff32,
        n_used,
        ff_sh: ffs32,
        n_expert: u32a(c.n_expert),
        layout,
    };
    let (down_e, down_ty, _, _) = expert(b, &name("ffn_down_exps.weight"))?;
    let down_e = routed(b, down_e)?;
    if cache.is_some() {
        let mut tables = vec![gate_e];
        if up_e != gate_e {
            tables.push(up_e);
        }
        tables.push(down_e);
        b.expert_layer(
            il,
            sel,
            tables,
            cache_bias.map(|buf| crate::plan::RouteBias {
                buf,
                base: model_bias,
            }),
        );
    }
    let (down_s, ds, _, _) = ffn_weight(b, &name("ffn_down_shexp.weight"), "shared expert")?;
    let residual = b.acts.residual;
    let ffn = DownFfn {
        act: mid_q8,
        sel,
        down: down_e,
        down_sh: down_s,
        resid: residual,
        y: residual,
        nrows: c.n_embd,
        ff,
        n_used: c.n_expert_used,
        ff_sh: ffs,
        n_expert: c.n_expert,
    };
    let down = NextNorm::after_ffn(b, il)?.down_args(b, ffn)?;
    let overflow = || PlanError::Overflow(label("moe_gate_up items"));
    if fused {
        let ctl = b.act("act.moe_route_ctl", u64::from(ROUTE_CTL_WORDS) * 4)?;
        let router = RouterPart {
            rw: buf(router),
            rx: buf(norm),
            logits: buf(router_logits),
            bias: buf(bias),
            route_ctl: buf(ctl),
            n_group: r.n_group,
            n_group_used: r.n_group_used,
            route_flags: r.flags,
            scale: r.scale,
        };
        let gate_up = GateUpRouterArgs::new(args, router);
        // Without an expert cache, the FFN is one chained launch where the registry has the
        // types' kernel (its down blocks prefetch their routed rows, which are then in VRAM).
        let chain = k::moe_ffn((gate_ty, gs.ty), (down_ty, ds.ty)).filter(|_| cache.is_none());
        if let Some(kernel) = chain {
            let chain_ctl = b.act("act.chain_ctl", u64::from(CHAIN_CTL_WORDS) * 4)?;
            let items = moe_ffn_items((n_used, ff32, ffs32, r.n_expert), u32a(c.n_embd));
            let args = MoeFfnArgs::new(gate_up, down, buf(chain_ctl));
            b.node(
                kernel,
                label("ffn_gate_inp+moe_gate_up_swiglu+moe_down"),
                Some(il),
                items.ok_or_else(overflow)? as usize,
                args,
            )?;
            b.last_ffn = Some(ChainedFfn {
                types: ((gate_ty, gs.ty), (down_ty, ds.ty)),
                args,
                node: b.nodes.len() - 1,
            });
            return Ok(());
        }
        let items = gate_up_router_items(n_used, ff32, ffs32, r.n_expert).ok_or_else(overflow)?;
        b.node(
            k::moe_gate_up_router_mixed(gate_ty, gs.ty),
            label("ffn_gate_inp+moe_gate_up_swiglu"),
            Some(il),
            items as usize,
            gate_up,
        )?;
    } else {
        let items = gate_up_items(n_used, ff32, ffs32).ok_or_else(overflow)?;
        b.node(
            k::moe_gate_up_mixed(gate_ty, gs.ty),
            label("moe_gate_up_swiglu"),
            Some(il),
            items as usize,
            args,
        )?;
    }
    b.node(
        k::moe_down(down_ty, ds.ty),
        label("moe_down"),
        Some(il),
        c.n_embd,
        down,
    )
}

/// A stacked expert tensor `{ncols, rows, n_expert}`: buffer, type, `ncols`, rows per expert.
fn expert(b: &mut Builder<'_>, name: &str) -> Result<(BufId, GgmlType, usize, usize), PlanError> {
    let (id, info, ncols, _) = ffn_weight(b, name, "MoE expert")?;
    let rows = info.ne.get(1).copied().unwrap_or(1) as usize;
    Ok((id, info.ty, ncols, rows))
}

fn multiple_of_32(name: &str, n: usize) -> Result<(), PlanError> {
    if n.is_multiple_of(32) {
        return Ok(());
    }
    Err(PlanError::UnsupportedShape {
        name: name.into(),
        reason: format!("{n} output rows do not split into q8_1 blocks of 32"),
    })
}

/// The fused gate/up kernel reads gate and up with one dot routine.
fn same_type(what: &str, types: &[GgmlType]) -> Result<(), PlanError> {
    if types.windows(2).all(|w| w[0] == w[1]) {
        return Ok(());
    }
    let names: Vec<&str> = types.iter().map(|t| t.name()).collect();
    Err(PlanError::UnsupportedShape {
        name: what.into(),
        reason: format!("mixed types {names:?}; the fused gate/up kernel reads one type"),
    })
}
