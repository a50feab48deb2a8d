//! Feed-forward parts of a layer (spec §5.4) and the launch helpers every part uses.
//!
//! The dense FFN and every "matrix times activation plus residual" (`attn_output`) run on the
//! MoE kernels with no routed slot (`n_used = 0`, the weight as the "shared expert"), which
//! fuses SwiGLU, the q8_1 quantization of the middle and the residual add into two launches.

use ingot_abi::launch::{
    DOWN_NORM_Q8_1_F32, GATE_UP_MERGED, GATE_UP_SEPARATE, MOE_ROUTE, MOE_ROUTER_F32,
};
use ingot_gguf::{GgmlType, TensorInfo};
use ingot_model::config::ExpertGateUp;
use ingot_model::GatingFunc;

use super::kernels as k;
use super::{buf, u32a, Builder};
use crate::buffer::BufId;
use crate::error::PlanError;
use crate::node::NodeArg;

/// `norm_q8 = q8_1(rmsnorm(residual)·w)`, and the f32 `norm` too when `need_f32` (the
/// router's input): one fused launch (`rmsnorm_q8_1`, or `rmsnorm_q8_1_f32` with the f32 copy)
/// when the PTX has it, otherwise `rmsnorm_f32` then `quantize_q8_1`.
pub(crate) fn rmsnorm_q8(
    b: &mut Builder<'_>,
    w: BufId,
    label: String,
    layer: Option<usize>,
    need_f32: bool,
) -> Result<(), PlanError> {
    let (x, y, y_q8) = (b.acts.residual, b.acts.norm, b.acts.norm_q8);
    let (n, eps) = (b.c.n_embd, b.c.rms_eps);
    if need_f32 && k::available(k::RMSNORM_Q8_1_F32) {
        return b.node(
            k::RMSNORM_Q8_1_F32,
            label,
            layer,
            1,
            vec![
                buf(x),
                buf(w),
                buf(y_q8),
                buf(y),
                u32a(n),
                NodeArg::F32(eps),
            ],
        );
    }
    if !need_f32 && k::available(k::RMSNORM_Q8_1) {
        return b.node(
            k::RMSNORM_Q8_1,
            label,
            layer,
            1,
            vec![buf(x), buf(w), buf(y_q8), u32a(n), NodeArg::F32(eps)],
        );
    }
    b.node(
        k::RMSNORM_F32,
        label.clone(),
        layer,
        1,
        vec![buf(x), buf(w), buf(y), u32a(n), NodeArg::F32(eps)],
    )?;
    b.node(
        k::QUANTIZE_Q8_1,
        format!("{label} q8_1"),
        layer,
        n,
        vec![buf(y), buf(y_q8), u32a(n)],
    )
}

/// The norm a residual-updating `moe_down` launch writes in its tail (the next part's input),
/// by its weights.
#[derive(Clone, Copy)]
pub(crate) struct NextNorm(BufId);

impl NextNorm {
    /// Layer `il`'s `ffn_norm`, written after its `attn_output`.
    pub fn ffn(b: &mut Builder<'_>, il: usize) -> Result<Self, PlanError> {
        let name = format!("blk.{il}.ffn_norm.weight");
        Ok(NextNorm(b.weight(&name, "rmsnorm", &is_f32)?.0))
    }

    /// What follows layer `il`'s FFN: the next layer's `attn_norm`, `output_norm` after the
    /// last decoding layer, or a NextN/MTP block's `shared_head_norm` (blocks `n_layer..`).
    pub fn after_ffn(b: &mut Builder<'_>, il: usize) -> Result<Self, PlanError> {
        let name = if il >= b.c.n_layer {
            super::mtp::nextn_name(il, "shared_head_norm")
        } else if il + 1 < b.c.n_layer {
            format!("blk.{}.attn_norm.weight", il + 1)
        } else {
            ingot_model::tensors::OUTPUT_NORM.to_owned()
        };
        Ok(NextNorm(b.weight(&name, "rmsnorm", &is_f32)?.0))
    }

    /// The tail arguments of `moe_down_*` `(norm_w, norm_q8, norm_f32, count, norm, eps)`: the
    /// outputs are the shared `act.norm_q8` and `act.norm` (the router's f32 input; written
    /// after every down launch, read by the MoE layers' router). One done counter serves every
    /// launch: activations are zeroed at allocation and each launch leaves it at 0.
    fn args(self, b: &mut Builder<'_>) -> Result<Vec<NodeArg>, PlanError> {
        let count = b.act("act.norm_count", 4)?;
        Ok(vec![
            buf(self.0),
            buf(b.acts.norm_q8),
            buf(b.acts.norm),
            buf(count),
            NodeArg::U32(DOWN_NORM_Q8_1_F32),
            NodeArg::F32(b.c.rms_eps),
        ])
    }
}

/// `y = x` quantized to q8_1 (`n` a multiple of 32).
pub(crate) fn quantize(
    b: &mut Builder<'_>,
    x: NodeArg,
    y: NodeArg,
    n: usize,
    label: String,
    il: usize,
) -> Result<(), PlanError> {
    b.node(k::QUANTIZE_Q8_1, label, Some(il), n, vec![x, y, u32a(n)])
}

/// `(ncols, nrows)` of a weight whose rows are a positive multiple of `m` weights, which
/// `kernels` (named in the error) need.
pub(crate) fn weight_shape(
    name: &str,
    info: &TensorInfo,
    m: usize,
    kernels: &str,
) -> Result<(usize, usize), PlanError> {
    let ncols = info.ne.first().copied().unwrap_or(0) as usize;
    let nrows = info.ne.iter().skip(1).product::<u64>() as usize;
    if ncols == 0 || !ncols.is_multiple_of(m) {
        return Err(PlanError::UnsupportedShape {
            name: name.into(),
            reason: format!(
                "rows of {ncols} {} weights; {kernels} need a multiple of {m}",
                info.ty.name()
            ),
        });
    }
    Ok((ncols, nrows))
}

/// A weight read by the plain, grouped or paired q8_1 gemv (rows of whole quant blocks), with
/// its `(ncols, nrows)`.
pub(crate) fn gemv_weight<'a>(
    b: &mut Builder<'a>,
    name: &str,
    role: &'static str,
) -> Result<(BufId, &'a TensorInfo, usize, usize), PlanError> {
    let (id, info) = b.weight(name, role, &k::gemv_type)?;
    let m = k::gemv_row_multiple(info.ty);
    let (ncols, nrows) = weight_shape(name, info, m, "the gemv kernels")?;
    Ok((id, info, ncols, nrows))
}

/// A weight read by the fused FFN kernels (`moe_gate_up_*`, `moe_down_*`: rows of whole
/// 64- or 256-weight units), with its `(ncols, nrows)`.
pub(crate) fn ffn_weight<'a>(
    b: &mut Builder<'a>,
    name: &str,
    role: &'static str,
) -> Result<(BufId, &'a TensorInfo, usize, usize), PlanError> {
    let (id, info) = b.weight(name, role, &k::gemv_type)?;
    let m = k::row_multiple(info.ty);
    let (ncols, nrows) = weight_shape(name, info, m, "the fused FFN kernels")?;
    Ok((id, info, ncols, nrows))
}

/// `y = W·x` for the 2-D weight `name`, `x` q8_1.
pub(crate) fn gemv_into(
    b: &mut Builder<'_>,
    name: &str,
    x_q8: BufId,
    y: BufId,
    label: String,
    il: usize,
) -> Result<(), PlanError> {
    let (w, info, ncols, nrows) = gemv_weight(b, name, "gemv")?;
    b.node(
        k::gemv(info.ty),
        label,
        Some(il),
        k::gemv_items(info.ty, ncols, nrows),
        vec![buf(w), buf(x_q8), buf(y), u32a(ncols), u32a(nrows)],
    )
}

/// `residual += W·x` for the 2-D weight `name` (`x` q8_1), as a `moe_down` launch with no
/// routed slot, whose tail writes `next`.
pub(crate) fn gemv_add_residual(
    b: &mut Builder<'_>,
    name: &str,
    x_q8: BufId,
    (label, il): (String, usize),
    next: NextNorm,
) -> Result<(), PlanError> {
    let (w, info, ncols, nrows) = ffn_weight(b, name, "gemv")?;
    let (residual, sel) = (b.acts.residual, selection(b)?);
    // `down` is never read with n_used = 0; the weight stands in as a valid pointer.
    let mut args = vec![
        buf(x_q8),
        buf(sel),
        buf(w),
        buf(w),
        buf(residual),
        buf(residual),
        u32a(nrows),
        u32a(ncols),
        u32a(0),
        u32a(ncols),
        u32a(1),
    ];
    args.extend(next.args(b)?);
    b.node(k::moe_down(info.ty, info.ty), label, Some(il), nrows, args)
}

/// The router's output buffer (also a valid, unread `sel` for launches without routed slots).
fn selection(b: &mut Builder<'_>) -> Result<BufId, PlanError> {
    b.act(
        "act.expert_selection",
        size_of::<ingot_abi::launch::ExpertSelection>() as u64,
    )
}

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
        vec![
            buf(norm_q8),
            buf(sel),
            buf(gate),
            buf(up),
            buf(gate),
            buf(up),
            buf(mid_q8),
            u32a(ncols),
            u32a(ff),
            u32a(0),
            u32a(ff),
            u32a(1),
            NodeArg::U32(GATE_UP_SEPARATE),
        ],
    )?;
    let mut args = vec![
        buf(mid_q8),
        buf(sel),
        buf(down),
        buf(down),
        buf(residual),
        buf(residual),
        u32a(nrows),
        u32a(down_cols),
        u32a(0),
        u32a(down_cols),
        u32a(1),
    ];
    args.extend(NextNorm::after_ffn(b, il)?.args(b)?);
    b.node(
        k::moe_down(down_info.ty, down_info.ty),
        label("ffn_down"),
        Some(il),
        nrows,
        args,
    )
}

/// MoE FFN on the `ffn_norm` output that `attn_output`'s tail wrote: router, top-k, fused
/// gate/up/SwiGLU over the selected and shared experts, and the weighted down projection
/// added to the residual, whose tail writes the next norm ([`NextNorm::after_ffn`]).
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
    let mut route_args = vec![buf(bias), buf(sel)];
    route_args.extend(route_scalars(c, flags));
    if k::available(MOE_ROUTER_F32.name) {
        // Router gemv and routing in one launch. Its warp counter must be 0 before every
        // launch: activations are zeroed at allocation and each launch resets it, so one
        // counter serves every layer and every replay.
        let count = b.act("act.moe_router_count", 4)?;
        let mut args = vec![buf(router), buf(norm), buf(router_logits)];
        args.extend(route_args[..2].iter().cloned());
        args.push(buf(count));
        args.push(u32a(c.n_embd));
        args.extend(route_args[2..].iter().cloned());
        b.node(
            MOE_ROUTER_F32.name,
            label("ffn_gate_inp+moe_route"),
            Some(il),
            c.n_expert,
            args,
        )?;
    } else {
        b.node(
            k::GEMV_F32,
            label("ffn_gate_inp"),
            Some(il),
            c.n_expert,
            vec![
                buf(router),
                buf(norm),
                buf(router_logits),
                u32a(c.n_embd),
                u32a(c.n_expert),
            ],
        )?;
        let mut args = vec![buf(router_logits)];
        args.extend(route_args.iter().cloned());
        b.node(MOE_ROUTE.name, label("moe_route"), Some(il), 1, args)?;
    }

    // Separate gate and up tensors, or one merged `[gate | up]` tensor read through `gate`
    // (the kernel never reads `up` then; the merged buffer stands in for it).
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
    // With an expert cache the kernels read the routed tensors through slot tables.
    let routed = |b: &mut Builder<'_>, id: BufId| -> Result<BufId, PlanError> {
        match cache {
            Some(o) => b.expert_table(il, id, o.slots, c.n_expert),
            None => Ok(id),
        }
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
    type Name = fn(GgmlType, GgmlType) -> String;
    let (gate_up_kernel, down_kernel): (Name, Name) = match cache {
        Some(_) => (k::moe_gate_up_mixed_slots, k::moe_down_slots),
        None => (k::moe_gate_up_mixed, k::moe_down),
    };
    b.node(
        gate_up_kernel(gate_ty, gs.ty),
        label("moe_gate_up_swiglu"),
        Some(il),
        c.n_expert_used * ff + ffs,
        vec![
            buf(norm_q8),
            buf(sel),
            buf(gate_e),
            buf(up_e),
            buf(gate_s),
            buf(up_s),
            buf(mid_q8),
            u32a(ncols),
            u32a(ff),
            u32a(c.n_expert_used),
            u32a(ffs),
            u32a(c.n_expert),
            NodeArg::U32(layout),
        ],
    )?;
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
    let mut args = vec![
        buf(mid_q8),
        buf(sel),
        buf(down_e),
        buf(down_s),
        buf(residual),
        buf(residual),
        u32a(c.n_embd),
        u32a(ff),
        u32a(c.n_expert_used),
        u32a(ffs),
        u32a(c.n_expert),
    ];
    args.extend(NextNorm::after_ffn(b, il)?.args(b)?);
    b.node(
        down_kernel(down_ty, ds.ty),
        label("moe_down"),
        Some(il),
        c.n_embd,
        args,
    )
}

/// The routing flags of layer `il` as the model defines them (`ROUTE_SIGMOID`,
/// `ROUTE_NORMALIZE`, and `ROUTE_BIAS` with the `exp_probs_b` selection bias it returns).
pub(crate) fn model_routing(
    b: &mut Builder<'_>,
    il: usize,
) -> Result<(u32, Option<BufId>), PlanError> {
    let c = b.c;
    let mut flags = 0;
    if c.gating == GatingFunc::Sigmoid {
        flags |= ingot_abi::launch::ROUTE_SIGMOID;
    }
    if c.expert_weights_norm {
        flags |= ingot_abi::launch::ROUTE_NORMALIZE;
    }
    if !c.has_expert_bias {
        return Ok((flags, None));
    }
    let name = format!("blk.{il}.exp_probs_b.bias");
    let bias = b.weight(&name, "router bias", &is_f32)?.0;
    Ok((flags | ingot_abi::launch::ROUTE_BIAS, Some(bias)))
}

/// The routing scalars `(n_expert, n_used, n_group, n_group_used, flags, scale)` of
/// `moe_route` and its siblings.
pub(crate) fn route_scalars(c: &ingot_model::ModelConfig, flags: u32) -> [NodeArg; 6] {
    [
        u32a(c.n_expert),
        u32a(c.n_expert_used),
        u32a(c.n_expert_group),
        u32a(c.n_expert_group_used),
        NodeArg::U32(flags),
        NodeArg::F32(c.expert_weights_scale),
    ]
}

/// A stacked expert tensor `{ncols, rows, n_expert}`: buffer, type, `ncols`, rows per expert.
fn expert(b: &mut Builder<'_>, name: &str) -> Result<(BufId, GgmlType, usize, usize), PlanError> {
    let (id, info, ncols, _) = ffn_weight(b, name, "MoE expert")?;
    let rows = info.ne.get(1).copied().unwrap_or(1) as usize;
    Ok((id, info.ty, ncols, rows))
}

fn is_f32(ty: GgmlType) -> bool {
    ty == GgmlType::F32
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
