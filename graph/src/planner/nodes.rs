//! Node helpers every part of the step uses: the fused rms norms, weights checked for the gemv
//! and fused FFN kernels, a gemv, `x + W·y` on the residual as a `moe_down` launch whose tail
//! writes the next part's norm ([`NextNorm`]), and the routing arguments the decode and prefill
//! MoE launches share.
//!
//! The dense FFN and every "matrix times activation plus residual" (`attn_output`) run on the
//! MoE kernels with no routed slot (`n_used = 0`, the weight as the "shared expert"), which
//! fuses SwiGLU, the q8_1 quantization of the middle and the residual add into two launches.

use ingot_abi::launch::{
    moe_down_stage_blocks, DownArgs, GemvArgs, RmsnormArgs, RmsnormQ8_1F32Args, DOWN_NORM_Q8_1_F32,
    MOE_DOWN_STAGE_BLOCKS, RMSNORM_Q8_1, RMSNORM_Q8_1_F32,
};
use ingot_gguf::{GgmlType, TensorInfo};
use ingot_model::GatingFunc;

use super::builder::{buf, u32a, Builder};
use super::kernels as k;
use crate::buffer::BufId;
use crate::error::PlanError;
use crate::node::BufRef;

/// `blk.{il}.nextn.{s}.weight`: a tensor of NextN/MTP block `il`.
pub(crate) fn nextn_name(il: usize, s: &str) -> String {
    format!("blk.{il}.nextn.{s}.weight")
}

/// `norm_q8 = q8_1(rmsnorm(residual)·w)` in one launch (`rmsnorm_q8_1`), and with `need_f32`
/// the f32 `norm` too (`rmsnorm_q8_1_f32`; the router's input).
pub(crate) fn rmsnorm_q8(
    b: &mut Builder<'_>,
    w: BufId,
    label: String,
    layer: Option<usize>,
    need_f32: bool,
) -> Result<(), PlanError> {
    let (x, y, y_q8) = (b.acts.residual, b.acts.norm, b.acts.norm_q8);
    let (n, eps) = (b.c.n_embd, b.c.rms_eps);
    let (x, w, n) = (buf(x), buf(w), u32a(n));
    if need_f32 {
        let args = RmsnormQ8_1F32Args {
            x,
            w,
            y: buf(y_q8),
            y_f32: buf(y),
            n,
            eps,
        };
        return b.node(k::fixed(&RMSNORM_Q8_1_F32), label, layer, 1, args);
    }
    let args = RmsnormArgs {
        x,
        w,
        y: buf(y_q8),
        n,
        eps,
    };
    b.node(k::fixed(&RMSNORM_Q8_1), label, layer, 1, args)
}

/// The norm a residual-updating `moe_down` launch (or the embedding fetch) writes in its tail
/// (the next part's input), by its weights.
#[derive(Clone, Copy)]
pub(crate) struct NextNorm(BufId);

impl NextNorm {
    /// Layer `il`'s `ffn_norm`, written after its `attn_output`.
    pub fn ffn(b: &mut Builder<'_>, il: usize) -> Result<Self, PlanError> {
        let name = format!("blk.{il}.ffn_norm.weight");
        Ok(NextNorm(b.weight(&name, "rmsnorm", &is_f32)?.0))
    }

    /// Layer 0's `attn_norm`, written by the embedding fetch's tail.
    pub fn first_layer(b: &mut Builder<'_>) -> Result<Self, PlanError> {
        Ok(NextNorm(
            b.weight("blk.0.attn_norm.weight", "rmsnorm", &is_f32)?.0,
        ))
    }

    /// What follows layer `il`'s FFN: the next layer's `attn_norm`, `output_norm` after the
    /// last decoding layer, or a NextN/MTP block's `shared_head_norm` (blocks `n_layer..`).
    pub fn after_ffn(b: &mut Builder<'_>, il: usize) -> Result<Self, PlanError> {
        let name = if il >= b.c.n_layer {
            nextn_name(il, "shared_head_norm")
        } else if il + 1 < b.c.n_layer {
            format!("blk.{}.attn_norm.weight", il + 1)
        } else {
            ingot_model::tensors::OUTPUT_NORM.to_owned()
        };
        Ok(NextNorm(b.weight(&name, "rmsnorm", &is_f32)?.0))
    }

    /// The `moe_down_*` launch over `nrows` output rows with the tail arguments `(norm_w,
    /// norm_q8, norm_f32, count, norm, eps)` filled in: the outputs are the shared `act.norm_q8`
    /// and `act.norm` (the router's f32 input; written after every down launch, read by the MoE
    /// layers' router). One done counter serves every launch: activations are zeroed at
    /// allocation and each launch leaves it at 0. Refuses activations that exceed the kernel's
    /// shared stage (`ingot_abi::launch::moe_down_stage_fits`).
    pub(crate) fn down_args(
        self,
        b: &mut Builder<'_>,
        d: DownFfn,
    ) -> Result<DownArgs<BufRef>, PlanError> {
        let staged = match [d.n_used, d.ff, d.ff_sh].map(u32::try_from) {
            [Ok(n_used), Ok(ff), Ok(ff_sh)] => Some(moe_down_stage_blocks(n_used, ff, ff_sh)),
            _ => None,
        };
        if staged.is_none_or(|blocks| blocks > u64::from(MOE_DOWN_STAGE_BLOCKS)) {
            return Err(PlanError::UnsupportedModel(format!(
                "a moe_down launch of {} routed slots of {} and {} shared columns stages {} q8_1 \
                 blocks of activations; its shared stage holds {MOE_DOWN_STAGE_BLOCKS}",
                d.n_used,
                d.ff,
                d.ff_sh,
                staged.map_or_else(|| "over 2^32".to_string(), |b| b.to_string()),
            )));
        }
        let (norm_w, norm_q8, norm_f32, count, norm, eps) = self.tail(b)?;
        Ok(DownArgs {
            act: buf(d.act),
            sel: buf(d.sel),
            down: buf(d.down),
            down_sh: buf(d.down_sh),
            resid: buf(d.resid),
            y: buf(d.y),
            nrows: u32a(d.nrows),
            ff: u32a(d.ff),
            n_used: u32a(d.n_used),
            ff_sh: u32a(d.ff_sh),
            n_expert: u32a(d.n_expert),
            norm_w,
            norm_q8,
            norm_f32,
            count,
            norm,
            eps,
        })
    }

    /// A norm tail's arguments `(norm_w, norm_q8, norm_f32, count, norm, eps)`: the outputs are
    /// the shared `act.norm_q8` and `act.norm` (the router's f32 input). One done counter serves
    /// every launch: activations are zeroed at allocation and each launch leaves it at 0.
    pub(crate) fn tail(self, b: &mut Builder<'_>) -> Result<NormTailArgs, PlanError> {
        let count = b.act("act.norm_count", 4)?;
        Ok((
            buf(self.0),
            buf(b.acts.norm_q8),
            buf(b.acts.norm),
            buf(count),
            DOWN_NORM_Q8_1_F32,
            b.c.rms_eps,
        ))
    }
}

/// `(norm_w, norm_q8, norm_f32, count, norm, eps)` of a launch with a norm tail
/// ([`NextNorm::tail`]).
pub(crate) type NormTailArgs = (BufRef, BufRef, BufRef, BufRef, u32, f32);

/// The FFN part of a `moe_down_*` launch (all but its norm tail, [`NextNorm::down_args`]):
/// buffers and dimensions as the kernel names them.
pub(crate) struct DownFfn {
    pub act: BufId,
    pub sel: BufId,
    pub down: BufId,
    pub down_sh: BufId,
    pub resid: BufId,
    pub y: BufId,
    pub nrows: usize,
    pub ff: usize,
    pub n_used: usize,
    pub ff_sh: usize,
    pub n_expert: usize,
}

impl DownFfn {
    /// `y = resid + W·x` on the residual stream: the down kernel with no routed slots, `W`
    /// (`nrows × ncols`) as its shared part (`down` is never read with `n_used = 0`; the
    /// weight stands in as a valid pointer).
    pub(crate) fn dense(
        b: &mut Builder<'_>,
        x_q8: BufId,
        w: BufId,
        (ncols, nrows): (usize, usize),
    ) -> Result<Self, PlanError> {
        let (residual, sel) = (b.acts.residual, selection(b)?);
        Ok(DownFfn {
            act: x_q8,
            sel,
            down: w,
            down_sh: w,
            resid: residual,
            y: residual,
            nrows,
            ff: ncols,
            n_used: 0,
            ff_sh: ncols,
            n_expert: 1,
        })
    }
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
        GemvArgs {
            w: buf(w),
            x: buf(x_q8),
            y: buf(y),
            ncols: u32a(ncols),
            nrows: u32a(nrows),
        },
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
    let ffn = DownFfn::dense(b, x_q8, w, (ncols, nrows))?;
    let args = next.down_args(b, ffn)?;
    b.node(k::moe_down(info.ty, info.ty), label, Some(il), nrows, args)
}

/// The router's output buffer (also a valid, unread `sel` for launches without routed slots).
pub(crate) fn selection(b: &mut Builder<'_>) -> Result<BufId, PlanError> {
    b.act(
        "act.expert_selection",
        size_of::<ingot_abi::launch::ExpertSelection>() as u64,
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

/// The routing scalars of `moe_route` and its siblings, as the kernels name them.
pub(crate) struct RouteScalars {
    pub n_expert: u32,
    pub n_used: u32,
    pub n_group: u32,
    pub n_group_used: u32,
    pub flags: u32,
    pub scale: f32,
}

/// The model's [`RouteScalars`] with routing `flags`.
pub(crate) fn route_scalars(c: &ingot_model::ModelConfig, flags: u32) -> RouteScalars {
    RouteScalars {
        n_expert: u32a(c.n_expert),
        n_used: u32a(c.n_expert_used),
        n_group: u32a(c.n_expert_group),
        n_group_used: u32a(c.n_expert_group_used),
        flags,
        scale: c.expert_weights_scale,
    }
}

/// Norm weights and the router are f32.
pub(crate) fn is_f32(ty: GgmlType) -> bool {
    ty == GgmlType::F32
}
