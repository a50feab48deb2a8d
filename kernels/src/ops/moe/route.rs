//! Checked launches of the router kernels: the routing of logits (`moe_route`, and per token of
//! a prefill chunk), the f32 router logits of a chunk, and the router gemv fused with the routing.

use super::super::{bytes, launch, need, shape, to_u32};
use crate::backend::Accelerator;
use crate::Result;
use ingot_abi::launch::moe::*;
use ingot_abi::launch::{
    KernelDesc, MoeRouteArgs, MoeRouteRowsArgs, MoeRouterArgs, RouterLogitsRowsArgs,
};
use std::mem::size_of;

/// How router logits become gating scores (`expert_gating_func`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gating {
    /// `softmax` over all experts (DeepSeek-V2).
    Softmax,
    /// Element-wise `sigmoid` (DeepSeek-V3).
    Sigmoid,
}

/// Routing hyper-parameters of one MoE layer (keys: docs/deepseek2-model.md#gguf-keys, math:
/// docs/decode-math.md#moe-ffn).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RouteParams {
    pub gating: Gating,
    /// `expert_count`.
    pub n_expert: usize,
    /// `expert_used_count` (top-k).
    pub n_used: usize,
    /// `expert_group_count`; groups are active only when it is above 1.
    pub n_group: usize,
    /// `expert_group_used_count`.
    pub n_group_used: usize,
    /// `expert_weights_norm`: divide the chosen weights by their sum.
    pub normalize: bool,
    /// `expert_weights_scale` (routed scaling factor).
    pub scale: f32,
}

impl RouteParams {
    fn check(&self) -> Result<()> {
        let d = &MOE_ROUTE;
        let max_experts = ROUTER_MAX_EXPERTS as usize;
        if self.n_expert == 0 || self.n_expert > max_experts {
            return Err(shape(
                d,
                format!("n_expert = {} is not in 1..={max_experts}", self.n_expert),
            ));
        }
        let max_used = MAX_EXPERTS_USED.min(self.n_expert);
        if self.n_used == 0 || self.n_used > max_used {
            return Err(shape(
                d,
                format!("n_used = {} is not in 1..={max_used}", self.n_used),
            ));
        }
        if self.n_group > 1 {
            let max_groups = ROUTER_MAX_GROUPS as usize;
            if self.n_group > max_groups || !self.n_expert.is_multiple_of(self.n_group) {
                return Err(shape(
                    d,
                    format!(
                        "n_group = {} must be at most {max_groups} and divide n_expert = {}",
                        self.n_group, self.n_expert
                    ),
                ));
            }
            if self.n_group_used == 0 || self.n_group_used > self.n_group {
                return Err(shape(
                    d,
                    format!(
                        "n_group_used = {} is not in 1..={}",
                        self.n_group_used, self.n_group
                    ),
                ));
            }
        }
        if !self.scale.is_finite() {
            return Err(shape(d, format!("scale = {} is not finite", self.scale)));
        }
        Ok(())
    }
}

/// Chooses `p.n_used` experts from `logits` (`p.n_expert` floats) and writes their ids and
/// weights into `sel` (one [`ExpertSelection`]). `bias` (`p.n_expert` floats, V3
/// `exp_probs_b`) shifts the selection scores only.
pub fn moe_route<B: Accelerator>(
    b: &mut B,
    logits: &B::Buf,
    bias: Option<&B::Buf>,
    sel: &B::Buf,
    p: &RouteParams,
) -> Result<()> {
    let d = &MOE_ROUTE;
    p.check()?;
    need(b, d, "logits", logits, Some(p.n_expert * 4))?;
    if let Some(bias) = bias {
        need(b, d, "bias", bias, Some(p.n_expert * 4))?;
    }
    need(b, d, "sel", sel, Some(size_of::<ExpertSelection>()))?;
    let (flags, n_group, n_group_used) = route_flags(p, bias.is_some());
    // Without ROUTE_BIAS the kernel never reads `bias`; any valid buffer fills the slot.
    let bias = bias.unwrap_or(logits);
    launch(
        b,
        d,
        1,
        MoeRouteArgs {
            logits,
            bias,
            sel,
            n_expert: to_u32(d, "n_expert", p.n_expert)?,
            n_used: to_u32(d, "n_used", p.n_used)?,
            n_group: to_u32(d, "n_group", n_group)?,
            n_group_used: to_u32(d, "n_group_used", n_group_used)?,
            flags,
            scale: p.scale,
        },
    )
}

/// [`moe_route`] for a prefill chunk: token `t < min(n, ntok)` (`n` the `u32` in `rows`)
/// routes row `t` of `logits` (`ntok × p.n_expert` floats, token-major) into `sel[t]`
/// (`ntok` [`ExpertSelection`]s); see `ingot_abi::launch::MOE_ROUTE_ROWS`. `ntok ≥ 1`.
pub fn moe_route_rows<B: Accelerator>(
    b: &mut B,
    logits: &B::Buf,
    bias: Option<&B::Buf>,
    (rows, ntok): (&B::Buf, usize),
    sel: &B::Buf,
    p: &RouteParams,
) -> Result<()> {
    let d = &MOE_ROUTE_ROWS;
    p.check()?;
    need(b, d, "logits", logits, bytes(ntok, p.n_expert, 4))?;
    if let Some(bias) = bias {
        need(b, d, "bias", bias, Some(p.n_expert * 4))?;
    }
    need(b, d, "rows", rows, Some(4))?;
    need(
        b,
        d,
        "sel",
        sel,
        bytes(ntok, size_of::<ExpertSelection>(), 1),
    )?;
    let ntok32 = to_u32(d, "ntok", ntok)?;
    let (flags, n_group, n_group_used) = route_flags(p, bias.is_some());
    // Without ROUTE_BIAS the kernel never reads `bias`; any valid buffer fills the slot.
    let bias = bias.unwrap_or(logits);
    launch(
        b,
        d,
        ntok32,
        MoeRouteRowsArgs {
            logits,
            bias,
            rows,
            sel,
            n_expert: to_u32(d, "n_expert", p.n_expert)?,
            n_used: to_u32(d, "n_used", p.n_used)?,
            n_group: to_u32(d, "n_group", n_group)?,
            n_group_used: to_u32(d, "n_group_used", n_group_used)?,
            flags,
            scale: p.scale,
            ntok: ntok32,
        },
    )
}

/// The f32 router logits of a prefill chunk, `logits[t] = W·x[t]` for `t < min(n, ntok)` (`n`
/// the `u32` in `rows`): `W` is `n_expert × ncols` floats, `x` and `logits` hold `ntok` rows
/// of `ncols` and `n_expert` floats, `ncols` a positive multiple of 4. Each logit is the bits
/// of [`moe_router_f32`]'s gemv for that token; see `ingot_abi::launch::MOE_ROUTER_LOGITS_ROWS`.
pub fn moe_router_logits_rows<B: Accelerator>(
    b: &mut B,
    (w, x, logits): (&B::Buf, &B::Buf, &B::Buf),
    (rows, ntok): (&B::Buf, usize),
    ncols: usize,
    n_expert: usize,
) -> Result<()> {
    let d = &MOE_ROUTER_LOGITS_ROWS;
    if ncols == 0 || !ncols.is_multiple_of(4) {
        return Err(shape(
            d,
            format!("ncols = {ncols} is not a positive multiple of 4"),
        ));
    }
    if n_expert == 0 || n_expert > ROUTER_MAX_EXPERTS as usize {
        return Err(shape(
            d,
            format!("n_expert = {n_expert} is not in 1..={ROUTER_MAX_EXPERTS}"),
        ));
    }
    need(b, d, "w", w, bytes(n_expert, ncols, 4))?;
    need(b, d, "x", x, bytes(ntok, ncols, 4))?;
    need(b, d, "rows", rows, Some(4))?;
    need(b, d, "logits", logits, bytes(ntok, n_expert, 4))?;
    let ntok32 = to_u32(d, "ntok", ntok)?;
    let ne = to_u32(d, "n_expert", n_expert)?;
    let items = router_logits_rows_items(ne, ntok32)
        .ok_or_else(|| shape(d, format!("ntok = {ntok} gives too many warps")))?;
    launch(
        b,
        d,
        items,
        RouterLogitsRowsArgs {
            w,
            x,
            rows,
            logits,
            ncols: to_u32(d, "ncols", ncols)?,
            n_expert: ne,
            ntok: ntok32,
        },
    )
}

/// The f32 router gemv `logits = W·x` (`W`: `p.n_expert × ncols` floats, `x`: `ncols` floats,
/// `ncols` a positive multiple of 4) and [`moe_route`] on its result, in one launch
/// ([`MOE_ROUTER_F32`]): the last warp to finish its row routes. `count` is a 4-byte counter
/// that must hold 0 before the launch; the launch leaves it 0 again, so one zeroed counter
/// serves any number of launches in sequence (not concurrent ones).
pub fn moe_router_f32<B: Accelerator>(
    b: &mut B,
    (w, x, logits): (&B::Buf, &B::Buf, &B::Buf),
    bias: Option<&B::Buf>,
    sel: &B::Buf,
    count: &B::Buf,
    ncols: usize,
    p: &RouteParams,
) -> Result<()> {
    let d = &MOE_ROUTER_F32;
    let (flags, n_group, n_group_used) =
        check_router(b, d, ["w", "x"], (w, x, logits), bias, ncols, p)?;
    need(b, d, "sel", sel, Some(size_of::<ExpertSelection>()))?;
    need(b, d, "count", count, Some(4))?;
    // Without ROUTE_BIAS the kernel never reads `bias`; any valid buffer fills the slot.
    let bias = bias.unwrap_or(logits);
    let n_expert = to_u32(d, "n_expert", p.n_expert)?;
    launch(
        b,
        d,
        n_expert,
        MoeRouterArgs {
            w,
            x,
            logits,
            bias,
            sel,
            count,
            ncols: to_u32(d, "ncols", ncols)?,
            n_expert,
            n_used: to_u32(d, "n_used", p.n_used)?,
            n_group,
            n_group_used,
            flags,
            scale: p.scale,
        },
    )
}

/// The checks of the f32 router gemv with its routing, in `moe_router_f32` or fused into a
/// gate/up launch (`d`, whose weight and input parameters are named `names`): the routing
/// parameters, `ncols` a positive multiple of 4, the buffers' lengths. Returns the kernels'
/// `flags`, `n_group` and `n_group_used`.
pub(super) fn check_router<B: Accelerator>(
    b: &B,
    d: &KernelDesc,
    names: [&'static str; 2],
    (w, x, logits): (&B::Buf, &B::Buf, &B::Buf),
    bias: Option<&B::Buf>,
    ncols: usize,
    p: &RouteParams,
) -> Result<(u32, u32, u32)> {
    p.check()?;
    if ncols == 0 || !ncols.is_multiple_of(4) {
        return Err(shape(
            d,
            format!("ncols = {ncols} is not a positive multiple of 4"),
        ));
    }
    need(b, d, names[0], w, bytes(p.n_expert, ncols, 4))?;
    need(b, d, names[1], x, bytes(ncols, 4, 1))?;
    need(b, d, "logits", logits, Some(p.n_expert * 4))?;
    if let Some(bias) = bias {
        need(b, d, "bias", bias, Some(p.n_expert * 4))?;
    }
    let (flags, n_group, n_group_used) = route_flags(p, bias.is_some());
    Ok((
        flags,
        to_u32(d, "n_group", n_group)?,
        to_u32(d, "n_group_used", n_group_used)?,
    ))
}

/// The kernels' `flags` and `(n_group, n_group_used)` (groups off: `(1, 1)`).
fn route_flags(p: &RouteParams, bias: bool) -> (u32, usize, usize) {
    let mut flags = 0;
    if p.gating == Gating::Sigmoid {
        flags |= ROUTE_SIGMOID;
    }
    if bias {
        flags |= ROUTE_BIAS;
    }
    if p.normalize {
        flags |= ROUTE_NORMALIZE;
    }
    let (n_group, n_group_used) = if p.n_group > 1 {
        (p.n_group, p.n_group_used)
    } else {
        (1, 1)
    };
    (flags, n_group, n_group_used)
}
