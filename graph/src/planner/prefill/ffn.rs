//! Feed-forward parts of one layer for a chunk of `T` tokens (docs/decode-math.md#moe-ffn, the
//! decode plan's math per token): the dense FFN, and the MoE FFN with its router per token, the
//! pair list sorted by expert, the expert-grouped products, the shared experts and the weighted
//! combine.

use ingot_abi::launch::{
    mmq_moe_items, router_logits_rows_items, ExpertSelection, MmqMoeArgs, MoeCombineArgs,
    MoePairsArgs, MoeRouteRowsArgs, MoeSwigluArgs, RouterLogitsRowsArgs, GATE_UP_MERGED,
    GATE_UP_SEPARATE, MAX_EXPERTS_USED, MOE_COMBINE, MOE_PAIRS, MOE_ROUTER_LOGITS_ROWS,
    MOE_ROUTE_ROWS, MOE_SWIGLU_Q8_1, ROUTER_MAX_EXPERTS,
};
use ingot_abi::weight_types::GemvType;
use ingot_model::config::ExpertGateUp;

use super::{add_rows, mmq, mmq_weight, norm_rows, ChunkActs};
use crate::buffer::BufId;
use crate::error::PlanError;
use crate::planner::builder::{buf, u32a, Builder};
use crate::planner::nodes::{is_f32, model_routing, route_scalars};

/// A dense FFN over the chunk: `x += W_down·q8_1(silu(W_gate·h) ⊙ W_up·h)`.
pub(crate) fn dense(b: &mut Builder<'_>, acts: &ChunkActs, il: usize) -> Result<(), PlanError> {
    let name = |s: &str| format!("blk.{il}.{s}");
    let (ffn_norm, _) = b.weight(&name("ffn_norm.weight"), "rmsnorm", &is_f32)?;
    norm_rows(b, acts, ffn_norm, false, (format!("blk.{il} ffn_norm"), il))?;
    let out = swiglu_ffn(b, acts, il, ["ffn_gate", "ffn_up", "ffn_down"], "pf.ffn")?;
    add_rows(b, acts, out, (format!("blk.{il} ffn residual"), il))
}

/// `W_down·q8_1(silu(W_gate·h) ⊙ W_up·h)` for the chunk's rows from the three 2-D weights
/// `blk.{il}.{names}.weight`, into a `T × n_embd` buffer named `{act}.out` (returned).
fn swiglu_ffn(
    b: &mut Builder<'_>,
    acts: &ChunkActs,
    il: usize,
    [gate, up, down]: [&str; 3],
    act: &str,
) -> Result<BufId, PlanError> {
    let t = acts.t;
    let name = |s: &str| format!("blk.{il}.{s}.weight");
    let label = |s: &str| (format!("blk.{il} {s}"), il);
    let (wg, tg, ncols, ff) = mmq_weight(b, &name(gate), "prefill mmq")?;
    let (wu, tu, _, ff_up) = mmq_weight(b, &name(up), "prefill mmq")?;
    let (wd, td, down_cols, nrows) = mmq_weight(b, &name(down), "prefill mmq")?;
    if ff_up != ff || down_cols != ff || !ff.is_multiple_of(32) {
        return Err(PlanError::UnsupportedShape {
            name: name(gate),
            reason: format!(
                "{ff} gate rows, {ff_up} up rows, down rows of {down_cols}: the SwiGLU needs \
                 them equal and a multiple of 32"
            ),
        });
    }
    let g = b.f32_act(&format!("{act}.gate"), t * ff)?;
    let u = b.f32_act(&format!("{act}.up"), t * ff)?;
    mmq(b, (wg, tg), acts.h_q8, g, (ncols, ff, t), label(gate))?;
    mmq(b, (wu, tu), acts.h_q8, u, (ncols, ff, t), label(up))?;
    let mid = b.q8_act(&format!("{act}.mid_q8"), t * ff)?;
    swiglu(b, (g, u, mid), (t, ff, GATE_UP_SEPARATE), label("swiglu"))?;
    let out = b.f32_act(&format!("{act}.out"), t * nrows)?;
    mmq(b, (wd, td), mid, out, (ff, nrows, t), label(down))?;
    Ok(out)
}

/// `act = q8_1(silu(gate) ⊙ up)` over `n` rows of `ff`.
fn swiglu(
    b: &mut Builder<'_>,
    (gate, up, act): (BufId, BufId, BufId),
    (n, ff, layout): (usize, usize, u32),
    (label, il): (String, usize),
) -> Result<(), PlanError> {
    b.node(
        super::k::fixed(&MOE_SWIGLU_Q8_1),
        label,
        Some(il),
        n * ff,
        MoeSwigluArgs {
            gate: buf(gate),
            up: buf(up),
            act: buf(act),
            n_pairs: u32a(n),
            ff: u32a(ff),
            layout,
        },
    )
}

/// The MoE FFN over the chunk: per-token router logits and routing, the expert-sorted pair
/// list, gate/up and down as expert-grouped products, the shared experts as dense products,
/// and `x += Σ_s w_s·down_s + shared` per token in the CPU backend's order.
pub(crate) fn moe(b: &mut Builder<'_>, acts: &ChunkActs, il: usize) -> Result<(), PlanError> {
    let c = b.c;
    let t = acts.t;
    let name = |s: &str| format!("blk.{il}.{s}");
    let label = |s: &str| (format!("blk.{il} {s}"), il);
    if c.n_expert_used > MAX_EXPERTS_USED
        || c.n_expert as u32 > ROUTER_MAX_EXPERTS
        || c.n_expert_shared == 0
        || !c.n_embd.is_multiple_of(4)
    {
        return Err(PlanError::UnsupportedModel(format!(
            "{} experts, {} used, {} shared, n_embd {} (the prefill MoE takes at most {} and \
             {}, shared experts, n_embd a multiple of 4)",
            c.n_expert,
            c.n_expert_used,
            c.n_expert_shared,
            c.n_embd,
            ROUTER_MAX_EXPERTS,
            MAX_EXPERTS_USED
        )));
    }
    let (ffn_norm, _) = b.weight(&name("ffn_norm.weight"), "rmsnorm", &is_f32)?;
    norm_rows(b, acts, ffn_norm, true, label("ffn_norm"))?;

    let (router, _) = b.weight(&name("ffn_gate_inp.weight"), "router gemv", &is_f32)?;
    let logits = b.f32_act("pf.router_logits", t * c.n_expert)?;
    let items = router_logits_rows_items(c.n_expert as u32, t as u32)
        .ok_or_else(|| PlanError::Overflow("router logits of a chunk".into()))?;
    let (lbl, _) = label("ffn_gate_inp");
    b.node(
        super::k::fixed(&MOE_ROUTER_LOGITS_ROWS),
        lbl,
        Some(il),
        items as usize,
        RouterLogitsRowsArgs {
            w: buf(router),
            x: buf(acts.h),
            rows: buf(acts.rows),
            logits: buf(logits),
            ncols: u32a(c.n_embd),
            n_expert: u32a(c.n_expert),
            ntok: u32a(t),
        },
    )?;
    let (flags, model_bias) = model_routing(b, il)?;
    // Without a selection bias the kernel never reads `bias`; the logits stand in.
    let bias = model_bias.unwrap_or(logits);
    let sel = b.act(
        "pf.expert_selection",
        (t * size_of::<ExpertSelection>()) as u64,
    )?;
    let (lbl, _) = label("moe_route");
    let r = route_scalars(c, flags);
    b.node(
        super::k::fixed(&MOE_ROUTE_ROWS),
        lbl,
        Some(il),
        t,
        MoeRouteRowsArgs {
            logits: buf(logits),
            bias: buf(bias),
            rows: buf(acts.rows),
            sel: buf(sel),
            n_expert: r.n_expert,
            n_used: r.n_used,
            n_group: r.n_group,
            n_group_used: r.n_group_used,
            flags: r.flags,
            scale: r.scale,
            ntok: u32a(t),
        },
    )?;

    let n_pairs = t * c.n_expert_used;
    let expert_start = b.act("pf.expert_start", 4 * (c.n_expert as u64 + 1))?;
    let pair_token = b.act("pf.pair_token", 4 * n_pairs as u64)?;
    let pair_of = b.act("pf.pair_of", 4 * n_pairs as u64)?;
    let pair_self = b.act("pf.pair_self", 4 * n_pairs as u64)?;
    let (lbl, _) = label("moe_pairs");
    b.node(
        super::k::fixed(&MOE_PAIRS),
        lbl,
        Some(il),
        1,
        MoePairsArgs {
            sel: buf(sel),
            expert_start: buf(expert_start),
            pair_token: buf(pair_token),
            pair_of: buf(pair_of),
            pair_self: buf(pair_self),
            ntok: u32a(t),
            n_used: u32a(c.n_expert_used),
            n_expert: u32a(c.n_expert),
        },
    )?;

    // Separate gate and up tensors, or one merged `[gate | up]` tensor (one product of 2·ff
    // rows per pair, which the SwiGLU reads with `GATE_UP_MERGED`).
    let ff = c.ff_expert;
    let routed = Routed {
        pair_token,
        expert_start,
        pair_row: pair_self,
        n_pairs,
        n_expert: c.n_expert,
    };
    let egate = b.f32_act("pf.moe.gate", n_pairs * 2 * ff)?;
    let (eup, layout) = match c.gate_up {
        ExpertGateUp::Split => {
            let eup = b.f32_act("pf.moe.up", n_pairs * ff)?;
            for (tensor, y) in [("ffn_gate_exps", egate), ("ffn_up_exps", eup)] {
                let w = mmq_weight(b, &name(&format!("{tensor}.weight")), "prefill mmq_moe")?;
                routed.product(b, w, acts.h_q8, y, t, label(tensor))?;
            }
            (eup, GATE_UP_SEPARATE)
        }
        ExpertGateUp::Merged => {
            let w = mmq_weight(b, &name("ffn_gate_up_exps.weight"), "prefill mmq_moe")?;
            routed.product(b, w, acts.h_q8, egate, t, label("ffn_gate_up_exps"))?;
            (egate, GATE_UP_MERGED)
        }
    };
    if !ff.is_multiple_of(32) {
        return Err(PlanError::UnsupportedShape {
            name: name("ffn_gate_exps.weight"),
            reason: format!("{ff} rows per expert do not split into q8_1 blocks of 32"),
        });
    }
    let emid = b.q8_act("pf.moe.mid_q8", n_pairs * ff)?;
    swiglu(
        b,
        (egate, eup, emid),
        (n_pairs, ff, layout),
        label("moe swiglu"),
    )?;
    let edown = b.f32_act("pf.moe.down", n_pairs * c.n_embd)?;
    let w = mmq_weight(b, &name("ffn_down_exps.weight"), "prefill mmq_moe")?;
    // The down product's input rows are per pair, already in sorted order.
    let down = Routed {
        pair_token: pair_self,
        ..routed
    };
    down.product(b, w, emid, edown, n_pairs, label("ffn_down_exps"))?;

    let shared = swiglu_ffn(
        b,
        acts,
        il,
        ["ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"],
        "pf.shexp",
    )?;
    let (lbl, _) = label("moe_combine");
    b.node(
        super::k::fixed(&MOE_COMBINE),
        lbl,
        Some(il),
        t * c.n_embd,
        MoeCombineArgs {
            sel: buf(sel),
            pair_of: buf(pair_of),
            down: buf(edown),
            shared: buf(shared),
            resid: buf(acts.x),
            y: buf(acts.x),
            n_embd: u32a(c.n_embd),
            ntok: u32a(t),
            n_used: u32a(c.n_expert_used),
        },
    )
}

/// The pair list an expert-grouped product reads.
#[derive(Clone, Copy)]
pub(crate) struct Routed {
    pub pair_token: BufId,
    pub expert_start: BufId,
    pub pair_row: BufId,
    pub n_pairs: usize,
    pub n_expert: usize,
}

impl Routed {
    /// `y[pair_row[p]] = W_e·x[pair_token[p]]` over the stacked expert tensor `w` (`x` has
    /// `ntok` rows).
    pub fn product(
        &self,
        b: &mut Builder<'_>,
        (w, ty, ncols, nrows): (BufId, GemvType, usize, usize),
        x: BufId,
        y: BufId,
        ntok: usize,
        (label, il): (String, usize),
    ) -> Result<(), PlanError> {
        let rows = nrows / self.n_expert.max(1);
        let items = mmq_moe_items(rows as u32, self.n_pairs as u32, self.n_expert as u32)
            .ok_or_else(|| PlanError::Overflow(format!("{label}: mmq_moe tiles")))?;
        b.node(
            super::k::mmq_moe(ty),
            label,
            Some(il),
            items as usize,
            MmqMoeArgs {
                w: buf(w),
                x: buf(x),
                pair_token: buf(self.pair_token),
                expert_start: buf(self.expert_start),
                pair_row: buf(self.pair_row),
                y: buf(y),
                ncols: u32a(ncols),
                rows: u32a(rows),
                ntok: u32a(ntok),
                n_pairs: u32a(self.n_pairs),
                n_expert: u32a(self.n_expert),
            },
        )
    }
}
