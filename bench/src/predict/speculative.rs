//! A **prediction** of speculative decoding with the model's NextN/MTP block on a card (`ingot plan
//! --predict CARD --draft-mtp K`), from the decode step's and the MTP block's simulator counts and
//! the time model of [`super::model`]. Nothing here is measured.
//!
//! One greedy step with `k` drafts ([`ingot_model::speculative`]) costs
//! `verify(k + 1) + k · (block + head) + (E − 1) · block`: `k` chained MTP steps each with the
//! lm_head, the verify of `k + 1` positions, and one MTP step without the head per accepted draft
//! (the rows rewritten from verified hidden states), and hands out `E` tokens.
//!
//! Assumptions, each a choice of this model:
//! - **Acceptance** `a` per draft, independent of the others (the usual i.i.d. assumption), so a
//!   step hands out `E = Σ_{i=0..k} a^i = (1 − a^(k+1)) / (1 − a)` tokens
//!   ([`expected_tokens`]).
//! - **The verify step is a batched decode step**: each node of the decode plan runs once for
//!   the `k + 1` positions, reading every weight once, its warp instructions and re-read bytes
//!   (activation vectors) times `k + 1`, the latent cache read once (as the prefill attention
//!   reads each row once for a chunk) and its fixed node cost once. The routed experts are the
//!   exception: `k + 1` tokens route to more distinct experts, so each MoE node's routed bytes
//!   grow by `D(k + 1) / n_used`, `D(m)` the expected distinct experts per layer of `m` tokens
//!   that each pick `n_used` of `n_expert` **uniformly and independently**
//!   ([`expected_distinct_experts`]), or `D` **measured** on a routing trace of the real model
//!   ([`RoutingOverlap`]). ingot has such a kernel for the lm_head only: its verify graph
//!   ([`ingot_graph::build_verify_plan`], bit-identical to decoding) runs every other decode node
//!   once per position, priced as built ([`SpecRow::speedup_built`]: those nodes `k + 1` times,
//!   the head's weights once and its instructions `k + 1` times).
//! - **What a target needs** ([`SpecRow::needs`]): the most distinct experts per layer the verify
//!   may read for a given speed-up (bisection: the step's time rises with them), with the kernels
//!   as assumed and with bytes-only kernels; none where even fully shared experts miss it.
//! - **The MTP block** is the planner's MTP plan ([`ingot_graph::build_mtp_plan_for`]) counted like
//!   the decode plan: its nodes before the head, then the lm_head gemv.

use std::fmt;

use ingot_gguf::Gguf;
use ingot_model::ModelConfig;
use serde::Serialize;

use super::model::node_time;
pub use super::routing_overlap::{expected_distinct_experts, Routing, RoutingOverlap};
use super::table::{plan_options, plan_table, table_of, PlanTable, TableOptions};
use super::PredictError;

/// Expected tokens handed out by one step with `k` drafts, each accepted with probability `a`
/// (in `0..=1`) independently while every draft before it was: `Σ_{i=0..k} a^i`.
pub fn expected_tokens(k: usize, a: f64) -> f64 {
    (0..=k).map(|i| a.powi(i as i32)).sum()
}

/// Warp instructions each column past the first adds to a gemv that reads its weights once for
/// all columns, over the one-column gemv's: MEASURED in ptx-sim on `gemv_colsM_q4k`
/// (`cargo bench -p ingot-bench --bench kernels -- attn_output`, V2-Lite's `attn_output`, 2048 x
/// 2048 Q4_K: 692,820 warp instructions for the plain gemv, 1,042,296 / 1,382,220 / 1,735,136
/// for 2 / 3 / 4 columns, 0.50 of a column each; test
/// `shared_weight_column_cost_is_the_kernels`). The prediction applies it to every node of the
/// verify, which only that gemv has measured (DERIVED for the others).
pub const SHARED_WEIGHT_COLUMN_COST: f64 = 0.50;

/// Warp instructions each column past the first adds to the verify's fused head
/// (`gemv_argmax_colsM_q6k_q8_1`, each column a one-column kernel's row dots), over the
/// one-column head's: MEASURED in ptx-sim (the `output` bench cases, Q6_K 102400 x 2048 as the
/// simulator runs it: 0.884 / 0.861 / 0.848 for 2 / 3 / 4 columns; the staging, prefetch and tail
/// are the shared part; test `fused_head_columns_cost_what_the_prediction_says`).
pub const HEAD_COLUMN_COST: f64 = 0.86;

/// Share of `attn_merge_v_b_o_q4k`'s warp instructions each verify column past the first adds
/// in `attn_merge_v_b_o_colsM_q4k` (MEASURED in the simulator: bench test
/// `fused_merge_out_columns_cost_what_the_prediction_says`: 0.810 / 0.791 / 0.783 for 2 / 3 / 4
/// columns under one fixed interleaving of the blocks).
pub const MERGE_OUT_COLUMN_COST: f64 = 0.79;

/// What the verify's kernels do with the `m` positions' work.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum VerifyKernels {
    /// Each decode kernel's warp instructions and re-read bytes times `m` (the model's
    /// assumption).
    AsAssumed,
    /// Weights loaded and unpacked once for every position: instructions times
    /// `1 + SHARED_WEIGHT_COLUMN_COST·(m − 1)`, re-read bytes (the activations) times `m`.
    SharedWeights,
    /// Instructions and re-reads not growing at all (a bound).
    BytesOnly,
}

impl VerifyKernels {
    /// `(instruction growth, re-read growth)` for `m` positions.
    fn growth(self, m: usize) -> (f64, f64) {
        let m = m as f64;
        match self {
            VerifyKernels::AsAssumed => (m, m),
            VerifyKernels::SharedWeights => (1.0 + SHARED_WEIGHT_COLUMN_COST * (m - 1.0), m),
            VerifyKernels::BytesOnly => (1.0, 1.0),
        }
    }
}

/// One `k` of the prediction.
#[derive(Clone, Debug, Serialize)]
pub struct SpecRow {
    pub k: usize,
    /// `E`, tokens handed out per step.
    pub tokens_per_step: f64,
    /// Expected distinct routed experts per MoE layer in the verify (`D(k + 1)`).
    pub distinct_experts: f64,
    pub verify_s: f64,
    /// `k` MTP steps with the lm_head.
    pub drafts_s: f64,
    /// `E − 1` MTP steps without the head (rows of accepted drafts rewritten).
    pub catch_up_s: f64,
    pub step_s: f64,
    pub tok_s: f64,
    /// `tok_s` over plain decoding's.
    pub speedup: f64,
    /// The same with the verify as `k + 1` decode steps (an executor without a verify plan).
    pub speedup_one_by_one: f64,
    /// The same with the verify graph as built ([`ingot_graph::build_verify_plan`]): each decode
    /// node once per position, except the nodes with a multi-column kernel, which stream their
    /// weights once and repeat a measured share of their instructions per position.
    pub speedup_built: f64,
    /// Decode nodes that verify graph runs as one multi-column launch each.
    pub fused_nodes: usize,
    /// The bound of perfectly overlapping routing: the `k + 1` tokens read only `n_used` experts
    /// per layer between them (the batched verify otherwise as assumed).
    pub speedup_same_experts: f64,
    /// The bound of a verify whose warp instructions and re-read bytes do not grow with the
    /// positions (a batched kernel that shares every weight load and dequantization across
    /// them), routed experts as assumed.
    pub speedup_bytes_only: f64,
    /// With [`VerifyKernels::SharedWeights`], routed experts as assumed.
    pub speedup_shared_weights: f64,
    /// The most distinct experts per MoE layer the verify may read for the step to reach
    /// [`SpecPrediction::target`]: with the kernels as assumed, sharing weights (measured), and
    /// bytes-only; `None` where even `n_used` (the positions sharing every expert) misses it.
    pub needs: [Option<f64>; 3],
}

/// What a speculative prediction assumes beyond the decode table.
#[derive(Clone, Debug)]
pub struct SpecOptions {
    /// Drafts per step, `1..=max_k` predicted.
    pub max_k: usize,
    /// Acceptance per draft, in `0..=1`.
    pub acceptance: f64,
    /// Where the verify's distinct experts come from.
    pub routing: Routing,
    /// The speed-up [`SpecRow::needs`] solves for (issue 41 asks 1.5).
    pub target: f64,
    /// Drafts chosen among the first `n` token ids ([`ingot_model::speculative::Drafts`]): the
    /// MTP block's plan computes those rows of its head (`PlanOptions::mtp_head_rows`, as
    /// `--draft-vocab` loads it); `None`: the whole head.
    pub draft_vocab: Option<usize>,
}

/// The prediction for `k = 1..=K` at one acceptance.
#[derive(Clone, Debug, Serialize)]
pub struct SpecPrediction {
    pub card: String,
    pub acceptance: f64,
    pub depth: usize,
    pub decode_s: f64,
    /// Nodes of the decode plan.
    pub decode_nodes: usize,
    /// The MTP block's nodes before its head, and its head (the lm_head gemv).
    pub mtp_block_s: f64,
    pub mtp_head_s: f64,
    pub n_expert: usize,
    pub n_expert_used: usize,
    pub routing: Routing,
    pub target: f64,
    /// [`SpecOptions::draft_vocab`], and the model's vocabulary.
    pub draft_vocab: Option<usize>,
    pub vocab: usize,
    pub rows: Vec<SpecRow>,
}

/// Predicts speculative decoding as `spec` says for the model `gguf` on `opts.card` (required),
/// from its decode table (`decode`, as [`plan_table`] gives it for `opts`).
pub fn predict_speculative(
    gguf: &Gguf,
    opts: TableOptions,
    decode: &PlanTable,
    spec: &SpecOptions,
) -> Result<SpecPrediction, PredictError> {
    let (max_k, a) = (spec.max_k, spec.acceptance);
    let card = opts.card.ok_or(PredictError::Speculative(
        "the speculative prediction needs a card (--predict)".into(),
    ))?;
    if !(0.0..=1.0).contains(&a) {
        return Err(PredictError::Speculative(format!(
            "acceptance {a} is not in 0..=1"
        )));
    }
    if opts.expert_cache.is_some() || opts.prefill.is_some() {
        return Err(PredictError::Speculative(
            "the speculative prediction is of the all-in-VRAM decode step".into(),
        ));
    }
    let config = ModelConfig::from_gguf(gguf)?;
    check_draft_vocab(spec.draft_vocab, config.vocab)?;
    // The block's plan as `--draft-vocab` loads it: a pruned head is planned with its rows.
    let mut mtp_opts = plan_options(&opts);
    mtp_opts.mtp_head_rows = spec.draft_vocab;
    let mtp = ingot_graph::build_mtp_plan_for(&config, gguf, mtp_opts)?;
    let mtp_table = table_of(gguf, &config, &mtp.plan, opts, None)?;
    let node_s = |t: &PlanTable, r: std::ops::Range<usize>| -> f64 {
        t.rows[r]
            .iter()
            .filter_map(|r| r.time.map(|t| t.total_s))
            .sum()
    };
    let mtp_block_s = node_s(&mtp_table, 0..mtp.head_start);
    let mtp_head_s = node_s(&mtp_table, mtp.head_start..mtp_table.rows.len());
    let decode_s = node_s(decode, 0..decode.rows.len());
    let decode_plan = ingot_graph::planner::build_plan_for(&config, gguf, plan_options(&opts))?;
    let (n_expert, n_used) = (config.n_expert, config.n_expert_used.max(1));
    let rows = (1..=max_k)
        .map(|k| {
            let m = k + 1;
            let distinct = spec.routing.distinct(n_expert, n_used, m);
            let growth = distinct / n_used as f64;
            let verify = |kernels, routed| verify_time(decode, card, opts, (kernels, m), routed);
            let verify_s = verify(VerifyKernels::AsAssumed, growth);
            let e = expected_tokens(k, a);
            let drafts_s = k as f64 * (mtp_block_s + mtp_head_s);
            let catch_up_s = (e - 1.0) * mtp_block_s;
            let needs = [
                VerifyKernels::AsAssumed,
                VerifyKernels::SharedWeights,
                VerifyKernels::BytesOnly,
            ]
            .map(|kernels| {
                let speedup = |g: f64| e * decode_s / (verify(kernels, g) + drafts_s + catch_up_s);
                max_growth_for(speedup, spec.target, m as f64).map(|g| g * n_used as f64)
            });
            let step_s = verify_s + drafts_s + catch_up_s;
            let one_by_one = m as f64 * decode_s + drafts_s + catch_up_s;
            let fused = fused_nodes(&decode_plan, m);
            let built = built_verify_time(decode, card, opts, (m, &fused));
            let built = built + drafts_s + catch_up_s;
            let same = verify(VerifyKernels::AsAssumed, 1.0) + drafts_s + catch_up_s;
            let bytes_only = verify(VerifyKernels::BytesOnly, growth) + drafts_s + catch_up_s;
            let shared = verify(VerifyKernels::SharedWeights, growth) + drafts_s + catch_up_s;
            SpecRow {
                k,
                tokens_per_step: e,
                distinct_experts: distinct,
                verify_s,
                drafts_s,
                catch_up_s,
                step_s,
                tok_s: e / step_s,
                speedup: e * decode_s / step_s,
                speedup_one_by_one: e * decode_s / one_by_one,
                speedup_built: e * decode_s / built,
                fused_nodes: fused.len(),
                speedup_same_experts: e * decode_s / same,
                speedup_bytes_only: e * decode_s / bytes_only,
                speedup_shared_weights: e * decode_s / shared,
                needs,
            }
        })
        .collect();
    Ok(SpecPrediction {
        card: card.display.to_string(),
        acceptance: a,
        depth: opts.depth,
        decode_s,
        decode_nodes: decode_plan.nodes.len(),
        mtp_block_s,
        mtp_head_s,
        n_expert,
        n_expert_used: n_used,
        routing: spec.routing.clone(),
        target: spec.target,
        draft_vocab: spec.draft_vocab,
        vocab: config.vocab,
        rows,
    })
}

/// Refuses a draft vocabulary outside the model's `1..=vocab`, in the drafter's words.
fn check_draft_vocab(n: Option<usize>, vocab: usize) -> Result<(), PredictError> {
    let drafts = ingot_model::speculative::Drafts { k: 1, vocab: n };
    drafts
        .check_vocab(vocab)
        .map_err(|e| PredictError::Speculative(e.to_string()))
}

/// The summed time of `rows` (those with a load and a time) after `edit(row, load, moved)`
/// changes each load; `moved` is the DRAM bytes the node's prefetch moved before it started in
/// the table (its share `prefetched_s` of the node's DRAM time alone, `dram_s + prefetched_s`).
fn retimed(
    rows: &[super::table::NodeRow],
    card: &super::card::Card,
    opts: TableOptions,
    edit: impl Fn(&super::table::NodeRow, &mut super::model::NodeLoad, u64),
) -> f64 {
    rows.iter()
        .filter_map(|r| r.load.zip(r.time).map(|(l, t)| (r, l, t)))
        .map(|(r, mut l, t)| {
            let alone_dram_s = t.dram_s + t.prefetched_s;
            let moved = if alone_dram_s > 0.0 {
                (t.prefetched_s / alone_dram_s * l.dram_bytes as f64).round() as u64
            } else {
                0
            };
            edit(r, &mut l, moved);
            node_time(card, &opts.constants, &l, r.index > 0).total_s
        })
        .sum()
}

/// The largest routed growth `g` in `1..=max` (distinct experts over `n_used`) at which
/// `speedup(g)`, non-increasing in `g`, still reaches `target`; `None` where `speedup(1)` misses
/// it. Bisection to a millionth of the range.
fn max_growth_for(speedup: impl Fn(f64) -> f64, target: f64, max: f64) -> Option<f64> {
    if speedup(1.0) < target {
        return None;
    }
    if speedup(max) >= target {
        return Some(max);
    }
    let (mut ok, mut miss) = (1.0, max);
    while miss - ok > 1e-6 * max {
        let mid = 0.5 * (ok + miss);
        if speedup(mid) >= target {
            ok = mid;
        } else {
            miss = mid;
        }
    }
    Some(ok)
}

/// The decode nodes (indices) the verify plan of `m` positions runs as one multi-column launch
/// each, with the share of their instructions each column past the first adds: the fused head
/// [`HEAD_COLUMN_COST`], the chained merge and `attn_output` [`MERGE_OUT_COLUMN_COST`] (both
/// measured); a family without a measured share is priced as whole columns (1.0).
fn fused_nodes(decode: &ingot_graph::Plan, m: usize) -> Vec<(usize, f64)> {
    let Ok(verify) = ingot_graph::build_verify_plan(decode, m) else {
        return Vec::new();
    };
    let cost = |kernel: &str| {
        if kernel.starts_with("gemv_argmax") {
            HEAD_COLUMN_COST
        } else if kernel.starts_with("attn_merge_v_b_o") {
            MERGE_OUT_COLUMN_COST
        } else {
            1.0
        }
    };
    (verify.fused.iter())
        .map(|&k| (k, cost(&decode.nodes[k].kernel)))
        .collect()
}

/// The verify graph of `m` positions as [`ingot_graph::build_verify_plan`] builds it: every node
/// of the decode table `m` times, except the `fused` ones (node index, instruction share per
/// extra column: [`fused_nodes`]), whose weights stream from DRAM once, each column past the
/// first re-reading them (from L1 or L2) and adding that share of its instructions (what the
/// multi-column kernels do: each column a one-column kernel's dots).
fn built_verify_time(
    decode: &PlanTable,
    card: &super::card::Card,
    opts: TableOptions,
    (m, fused): (usize, &[(usize, f64)]),
) -> f64 {
    let extra = (m - 1) as f64;
    let share = |r: &super::table::NodeRow| fused.iter().find(|f| f.0 == r.index).map(|f| f.1);
    let (one, rest): (Vec<_>, Vec<_>) =
        (decode.rows.iter().cloned()).partition(|r| share(r).is_some());
    let rest_s: f64 = rest.iter().filter_map(|r| r.time.map(|t| t.total_s)).sum();
    let one_s = retimed(&one, card, opts, |r, l, _| {
        let by = 1.0 + share(r).unwrap_or(1.0) * extra;
        let grow = |v: u64| (v as f64 * by).round() as u64;
        l.reread_bytes += (l.dram_bytes as f64 * extra).round() as u64;
        l.warp_instructions = grow(l.warp_instructions);
        l.tail_warp_instructions = grow(l.tail_warp_instructions);
    });
    m as f64 * rest_s + one_s
}

/// The decode step's nodes as one batched verify of `m` positions (the module's assumptions):
/// routed bytes times `routed_growth`, other bytes once, instructions and re-reads grown as
/// `kernels` says ([`VerifyKernels::growth`]). The DRAM bytes a node's prefetch moved before it
/// started in the decode step (its weights handed ahead, or prefetched before its wait) are moved
/// here too:
/// the same weights and kernels, and the launches before it run longer, so their idle windows
/// are no shorter; the node's time is then recomputed, so an issue-bound verify node gains nothing.
fn verify_time(
    decode: &PlanTable,
    card: &super::card::Card,
    opts: TableOptions,
    (kernels, m): (VerifyKernels, usize),
    routed_growth: f64,
) -> f64 {
    let (instr, reread) = kernels.growth(m);
    let grow = |v: u64, by: f64| (v as f64 * by).round() as u64;
    retimed(&decode.rows, card, opts, |r, l, moved| {
        let other = l.dram_bytes - r.routed_bytes;
        l.dram_bytes =
            (other + (r.routed_bytes as f64 * routed_growth).round() as u64).saturating_sub(moved);
        l.reread_bytes = grow(l.reread_bytes, reread);
        l.warp_instructions = grow(l.warp_instructions, instr);
        l.tail_warp_instructions = grow(l.tail_warp_instructions, instr);
    })
}

impl fmt::Display for SpecPrediction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |s: f64| s * 1e6;
        let routing = match &self.routing {
            Routing::Uniform => "ASSUMED uniformly and independently routed",
            Routing::Measured(_) => "MEASURED on a routing trace (below)",
        };
        writeln!(
            f,
            "PREDICTED speculative decoding with the NextN/MTP block (model, not a measurement) on {}, \
             depth {}: acceptance {:.2} per draft, ASSUMED independent; verify = one batched decode \
             step (weights once, instructions x positions; ingot's verify graph does this for the nodes \
             with a multi-column kernel only, the \"built\" column); routed \
             experts {routing} ({} of {} per token)",
            self.card, self.depth, self.acceptance, self.n_expert_used, self.n_expert
        )?;
        if let Routing::Measured(o) = &self.routing {
            let same = if o.same_model {
                "this model"
            } else {
                "another model of the same expert shape"
            };
            write!(
                f,
                "routing trace {} (recorded on {:?}, {same}): distinct experts per MoE layer over \
                 m consecutive generated tokens, measured (uniform):",
                o.trace, o.model
            )?;
            for (i, d) in o.distinct.iter().enumerate().skip(1) {
                write!(
                    f,
                    " m={} {d:.2} ({:.2}, {} windows)",
                    i + 1,
                    o.uniform[i],
                    o.windows[i]
                )?;
            }
            writeln!(f)?;
        }
        let pruned = self.draft_vocab.map_or(String::new(), |n| {
            format!(
                " (drafts among the first {n} of {} ids: the head planned with those rows, as --draft-vocab loads it)",
                self.vocab
            )
        });
        writeln!(
            f,
            "plain decode step {:.1} us ({:.1} tok/s); MTP block {:.1} us + its lm_head {:.1} us{pruned}",
            us(self.decode_s),
            1.0 / self.decode_s,
            us(self.mtp_block_s),
            us(self.mtp_head_s)
        )?;
        let target = format!("{:.2}x needs", self.target);
        writeln!(
            f,
            "{:>2} {:>11} {:>13} {:>9} {:>9} {:>11} {:>9} {:>7} {:>8} | {:>9} {:>8} {:>8} {:>10} | {:>26}",
            "k",
            "tokens/step",
            "experts/layer",
            "verify us",
            "drafts us",
            "catch-up us",
            "step us",
            "tok/s",
            "vs plain",
            "built",
            "overlap",
            "shared w",
            "bytes only",
            target
        )?;
        let need = |n: Option<f64>| n.map_or("none".to_string(), |d| format!("{d:.2}"));
        let fused = (self.rows.iter())
            .map(|r| r.fused_nodes.to_string())
            .collect::<Vec<_>>()
            .join("/");
        for r in &self.rows {
            writeln!(
                f,
                "{:>2} {:>11.3} {:>13.2} {:>9.1} {:>9.1} {:>11.1} {:>9.1} {:>7.1} {:>7.2}x | {:>8.2}x {:>7.2}x {:>7.2}x {:>9.2}x | {:>8} {:>8} {:>8}",
                r.k,
                r.tokens_per_step,
                r.distinct_experts,
                us(r.verify_s),
                us(r.drafts_s),
                us(r.catch_up_s),
                us(r.step_s),
                r.tok_s,
                r.speedup,
                r.speedup_built,
                r.speedup_same_experts,
                r.speedup_shared_weights,
                r.speedup_bytes_only,
                need(r.needs[0]),
                need(r.needs[1]),
                need(r.needs[2])
            )?;
        }
        write!(
            f,
            "vs plain with the verify graph as built (each decode node once per position, a node with \
             a multi-column kernel one launch streaming its weights once: the lm_head and the \
             attention's merge and output, {fused} of {} nodes here for k = 1, 2, ...); as assumed \
             but the k+1 tokens sharing their routed experts (overlap); with kernels reading each \
             weight once for every position, each position past the first {:.2} of a decode \
             kernel's instructions (shared w: MEASURED on the Q4_K gemv, DERIVED for the other \
             nodes); or with instructions and re-reads not growing with the positions (bytes only). \
             {target}: the most distinct experts per MoE layer the verify may read for {:.2}x, with \
             the kernels as assumed / shared w / bytes only (none: not even with every expert shared)",
            self.decode_nodes,
            SHARED_WEIGHT_COLUMN_COST,
            self.target
        )
    }
}

/// Both tables at once: the decode table of [`plan_table`] and the prediction from it.
pub fn plan_and_predict_speculative(
    gguf: &Gguf,
    opts: TableOptions,
    spec: &SpecOptions,
) -> Result<(PlanTable, SpecPrediction), PredictError> {
    // A model without a block is refused before the decode step's counts (minutes at full size).
    let config = ModelConfig::from_gguf(gguf)?;
    ingot_graph::build_mtp_plan_for(&config, gguf, plan_options(&opts))?;
    check_draft_vocab(spec.draft_vocab, config.vocab)?;
    let decode = plan_table(gguf, opts)?;
    let spec = predict_speculative(gguf, opts, &decode, spec)?;
    Ok((decode, spec))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `preset`'s Q4_K_M header and the table options of a 3090 at `(ctx, depth, max_blocks)`.
    fn header_on_3090(
        preset: ingot_synth::Preset,
        (ctx, depth, max_blocks): (usize, usize, u64),
    ) -> (Gguf, TableOptions) {
        use ingot_synth::{Layout, QuantMix, SynthOptions};
        let gguf = ingot_synth::header(&SynthOptions {
            preset,
            layout: Layout::Mla,
            mix: QuantMix::Q4KM,
            seed: 0,
        })
        .expect("header");
        let card = crate::predict::card_named("3090").expect("card");
        let opts = TableOptions {
            ctx,
            depth,
            card: Some(card),
            max_blocks,
            constants: crate::predict::constants_for(Some(card)),
            expert_cache: None,
            cache_type: ingot_model::CacheType::F16,
            prefill: None,
        };
        (gguf, opts)
    }

    /// The closed form `(1 − a^(k+1)) / (1 − a)`, its limits, and the figures at a = 0.8.
    #[test]
    fn expected_tokens_is_the_geometric_sum() {
        for k in 0..=5 {
            for a in [0.0, 0.3, 0.55, 0.8, 0.99] {
                let closed = (1.0 - f64::powi(a, k as i32 + 1)) / (1.0 - a);
                assert!(
                    (expected_tokens(k, a) - closed).abs() < 1e-12,
                    "k {k} a {a}"
                );
            }
            assert_eq!(expected_tokens(k, 1.0), (k + 1) as f64);
            assert_eq!(expected_tokens(k, 0.0), 1.0);
        }
        assert!((expected_tokens(1, 0.8) - 1.8).abs() < 1e-12);
        assert!((expected_tokens(2, 0.8) - 2.44).abs() < 1e-12);
        assert!((expected_tokens(3, 0.8) - 2.952).abs() < 1e-12);
    }

    /// The whole prediction on tiny-glm's header (20 heads, an MoE MTP block): a verify of one
    /// position with no routed growth is the decode step node for node; each row's step is its
    /// parts and its speed-up `E · decode / step`; the bounds bracket the assumed verify; with
    /// acceptance 0 drafting only costs.
    #[test]
    fn prediction_on_tiny_glm_is_consistent() {
        let (gguf, opts) = header_on_3090(ingot_synth::Preset::TinyGlm, (64, 8, 8));
        let card = opts.card.expect("card");
        let spec_opts = |max_k, acceptance, routing| SpecOptions {
            max_k,
            acceptance,
            routing,
            target: 1.5,
            draft_vocab: None,
        };
        let (decode, spec) =
            plan_and_predict_speculative(&gguf, opts, &spec_opts(3, 0.8, Routing::Uniform))
                .expect("predict");
        let one = verify_time(&decode, card, opts, (VerifyKernels::AsAssumed, 1), 1.0);
        assert!((one - spec.decode_s).abs() < 1e-12 * spec.decode_s.max(1.0));
        assert!(spec.mtp_block_s > 0.0 && spec.mtp_head_s > 0.0);
        for r in &spec.rows {
            let drafts = r.k as f64 * (spec.mtp_block_s + spec.mtp_head_s);
            assert!((r.drafts_s - drafts).abs() < 1e-12);
            assert!((r.step_s - (r.verify_s + r.drafts_s + r.catch_up_s)).abs() < 1e-12);
            assert!((r.speedup - r.tokens_per_step * spec.decode_s / r.step_s).abs() < 1e-9);
            assert!(
                r.verify_s > spec.decode_s,
                "k {}: a verify costs more than a step",
                r.k
            );
            assert!(r.speedup_one_by_one < r.speedup && r.speedup <= r.speedup_same_experts);
            // The built graph saves the head's repeated weight stream, no more: between k + 1
            // steps and the batched verify.
            assert!(
                r.fused_nodes >= 1,
                "k {}: the synthetic model's head has a column kernel",
                r.k
            );
            assert!(r.speedup_one_by_one < r.speedup_built && r.speedup_built < r.speedup);
            assert!(r.speedup <= r.speedup_shared_weights);
            assert!(r.speedup_shared_weights <= r.speedup_bytes_only);
        }
        let at =
            |k, a, routing| predict_speculative(&gguf, opts, &decode, &spec_opts(k, a, routing));
        let none = at(1, 0.0, Routing::Uniform).expect("predict at 0");
        assert!(none.rows[0].speedup < 1.0);
        assert!(
            none.rows[0].needs == [None, None, None],
            "acceptance 0 never pays"
        );
        assert!(at(1, 1.5, Routing::Uniform).is_err());
        // What the target needs: where the bisection found a bound inside the range, the step
        // at exactly that routing reaches the target and a little more routing misses it.
        let n_used = spec.n_expert_used as f64;
        for r in &spec.rows {
            let m = r.k + 1;
            let e = r.tokens_per_step;
            let kernels = [
                VerifyKernels::AsAssumed,
                VerifyKernels::SharedWeights,
                VerifyKernels::BytesOnly,
            ];
            for (d, kernels) in r.needs.iter().zip(kernels) {
                let Some(d) = *d else { continue };
                assert!((n_used..=m as f64 * n_used).contains(&d), "k {}: {d}", r.k);
                let speedup = |g: f64| {
                    let v = verify_time(&decode, card, opts, (kernels, m), g);
                    e * spec.decode_s / (v + r.drafts_s + r.catch_up_s)
                };
                let g = d / n_used;
                assert!(speedup(g) >= spec.target - 1e-12, "k {}", r.k);
                if g < m as f64 {
                    assert!(
                        speedup(g + 1e-3) < spec.target,
                        "k {}: not the largest",
                        r.k
                    );
                }
            }
        }
        // A measured overlap equal to the uniform expectation predicts the same rows.
        let uniform: Vec<f64> = (1..=4)
            .map(|m| expected_distinct_experts(spec.n_expert, spec.n_expert_used, m))
            .collect();
        let measured = Routing::Measured(RoutingOverlap {
            trace: "t".into(),
            model: "m".into(),
            same_model: true,
            n_expert: spec.n_expert,
            n_expert_used: spec.n_expert_used,
            distinct: uniform.clone(),
            windows: vec![1; 4],
            uniform,
        });
        let again = at(3, 0.8, measured).expect("predict measured");
        for (a, b) in spec.rows.iter().zip(&again.rows) {
            assert_eq!(a.step_s, b.step_s);
        }
        // A pruned head: the whole vocabulary is the table's head; a quarter of it costs no more
        // (tiny-glm's 512-row head is all fixed cost), nor does any step; none or more than the
        // vocabulary is refused.
        let pruned = |n| {
            let o = SpecOptions {
                draft_vocab: Some(n),
                ..spec_opts(3, 0.8, Routing::Uniform)
            };
            predict_speculative(&gguf, opts, &decode, &o)
        };
        let whole = pruned(spec.vocab).expect("whole");
        assert!((whole.mtp_head_s - spec.mtp_head_s).abs() < 1e-9 * spec.mtp_head_s);
        let quarter = pruned(spec.vocab / 4).expect("a quarter");
        assert!(quarter.mtp_head_s <= spec.mtp_head_s);
        for (a, b) in spec.rows.iter().zip(&quarter.rows) {
            assert!(b.step_s <= a.step_s && b.speedup >= a.speedup, "k {}", a.k);
        }
        assert!(pruned(0).is_err() && pruned(spec.vocab + 1).is_err());
    }

    /// A gemv over fewer rows than its tensor (a pruned draft head) is charged those rows' bytes
    /// from DRAM, not the tensor's: GLM-4.7-Flash's Q6_K head (2,048 wide) planned at 32,768 of
    /// its 154,880 rows reads 32,768 rows, against every row unpruned.
    #[test]
    fn a_pruned_head_is_charged_its_rows_only() {
        let (gguf, opts) = header_on_3090(ingot_synth::Preset::Glm47Flash, (128, 0, 64));
        let config = ModelConfig::from_gguf(&gguf).expect("config");
        let head_dram = |rows: Option<usize>| {
            let mut po = plan_options(&opts);
            po.mtp_head_rows = rows;
            let mtp = ingot_graph::build_mtp_plan_for(&config, &gguf, po).expect("mtp plan");
            let t = table_of(&gguf, &config, &mtp.plan, opts, None).expect("table");
            let head = &t.rows[mtp.head_start..];
            assert_eq!(head.len(), 1, "one head node");
            assert!(head[0].kernel.starts_with("gemv_q6k"), "{}", head[0].kernel);
            head[0].dram_bytes
        };
        let row = ingot_gguf::GgmlType::Q6K.row_bytes(2048).expect("row");
        // Beside the rows: the logits written (128 KiB) and the activation, the step state and
        // the counters, well under 2 MB.
        let pruned = head_dram(Some(32_768));
        assert!(
            (32_768 * row..=32_768 * row + (2 << 20)).contains(&pruned),
            "{pruned} bytes for 32,768 rows of {row}"
        );
        assert!(head_dram(None) >= 154_880 * row);
    }

    /// The bisection finds the crossing of a known decreasing speed-up, and says when the whole
    /// range reaches the target or none of it does.
    #[test]
    fn max_growth_for_finds_the_crossing() {
        // 2 / g reaches 1.5 up to g = 4/3.
        let g = max_growth_for(|g| 2.0 / g, 1.5, 4.0).expect("reachable");
        assert!((g - 4.0 / 3.0).abs() < 1e-5, "{g}");
        assert_eq!(max_growth_for(|g| 10.0 / g, 1.5, 4.0), Some(4.0));
        assert_eq!(max_growth_for(|g| 1.2 / g, 1.5, 4.0), None);
    }
}
