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
//!   ([`expected_distinct_experts`]; real routing of neighbouring tokens overlaps more, which
//!   would make the verify cheaper). ingot has no such kernels yet: its executors verify by
//!   `k + 1` decode steps (bit-identical to decoding, which greedy equality needs), which the
//!   report also prices ([`SpecRow::speedup_one_by_one`]).
//! - **The MTP block** is the planner's MTP plan ([`ingot_graph::build_mtp_plan_for`]) counted like
//!   the decode plan: its nodes before the head, then the lm_head gemv.

use std::fmt;

use ingot_gguf::Gguf;
use ingot_model::ModelConfig;
use serde::Serialize;

use super::model::node_time;
use super::table::{plan_options, plan_table, table_of, PlanTable, TableOptions};
use super::PredictError;

/// Expected tokens handed out by one step with `k` drafts, each accepted with probability `a`
/// (in `0..=1`) independently while every draft before it was: `Σ_{i=0..k} a^i`.
pub fn expected_tokens(k: usize, a: f64) -> f64 {
    (0..=k).map(|i| a.powi(i as i32)).sum()
}

/// Expected distinct experts a layer reads for `m` tokens that each pick `n_used` of `n_expert`
/// uniformly and independently: `n_expert · (1 − (1 − n_used / n_expert)^m)` (an expert is
/// missed by one token with probability `1 − n_used / n_expert`).
pub fn expected_distinct_experts(n_expert: usize, n_used: usize, m: usize) -> f64 {
    if n_expert == 0 {
        return 0.0;
    }
    let miss = 1.0 - n_used as f64 / n_expert as f64;
    n_expert as f64 * (1.0 - miss.powi(m as i32))
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
    /// The same with the verify as `k + 1` decode steps (today's executors).
    pub speedup_one_by_one: f64,
    /// The bound of perfectly overlapping routing: the `k + 1` tokens read only `n_used` experts
    /// per layer between them (the batched verify otherwise as assumed).
    pub speedup_same_experts: f64,
    /// The bound of a verify whose warp instructions and re-read bytes do not grow with the
    /// positions (a batched kernel that shares every weight load and dequantization across
    /// them), routed experts as assumed.
    pub speedup_bytes_only: f64,
}

/// The prediction for `k = 1..=K` at one acceptance.
#[derive(Clone, Debug, Serialize)]
pub struct SpecPrediction {
    pub card: String,
    pub acceptance: f64,
    pub depth: usize,
    pub decode_s: f64,
    /// The MTP block's nodes before its head, and its head (the lm_head gemv).
    pub mtp_block_s: f64,
    pub mtp_head_s: f64,
    pub n_expert: usize,
    pub n_expert_used: usize,
    pub rows: Vec<SpecRow>,
}

/// Predicts speculative decoding with `1..=max_k` drafts at acceptance `a` for the model `gguf`
/// on `opts.card` (required), from its decode table (`decode`, as [`plan_table`] gives it for
/// `opts`).
pub fn predict_speculative(
    gguf: &Gguf,
    opts: TableOptions,
    decode: &PlanTable,
    max_k: usize,
    a: f64,
) -> Result<SpecPrediction, PredictError> {
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
    let mtp = ingot_graph::build_mtp_plan_for(&config, gguf, plan_options(&opts))?;
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
    let (n_expert, n_used) = (config.n_expert, config.n_expert_used.max(1));
    let rows = (1..=max_k)
        .map(|k| {
            let m = k + 1;
            let distinct = expected_distinct_experts(n_expert, n_used, m);
            let verify_s = verify_time(decode, card, opts, m, distinct / n_used as f64);
            let e = expected_tokens(k, a);
            let drafts_s = k as f64 * (mtp_block_s + mtp_head_s);
            let catch_up_s = (e - 1.0) * mtp_block_s;
            let step_s = verify_s + drafts_s + catch_up_s;
            let one_by_one = m as f64 * decode_s + drafts_s + catch_up_s;
            let same = verify_time(decode, card, opts, m, 1.0) + drafts_s + catch_up_s;
            let growth = distinct / n_used as f64;
            let bytes_only = verify_time(decode, card, opts, 1, growth) + drafts_s + catch_up_s;
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
                speedup_same_experts: e * decode_s / same,
                speedup_bytes_only: e * decode_s / bytes_only,
            }
        })
        .collect();
    Ok(SpecPrediction {
        card: card.display.to_string(),
        acceptance: a,
        depth: opts.depth,
        decode_s,
        mtp_block_s,
        mtp_head_s,
        n_expert,
        n_expert_used: n_used,
        rows,
    })
}

/// The decode step's nodes as one batched verify (the module's assumptions): routed bytes times
/// `routed_growth`, other bytes once, instructions and re-reads times `m` (the positions; 1 for
/// the bound where they do not grow). The DRAM bytes a node's prefetch moved before it started in
/// the decode step (its weights handed ahead, or prefetched before its wait) are moved here too:
/// the same weights and kernels, and the launches before it run longer, so their idle windows
/// are no shorter; the node's time is then recomputed, so an issue-bound verify node gains nothing.
fn verify_time(
    decode: &PlanTable,
    card: &super::card::Card,
    opts: TableOptions,
    m: usize,
    routed_growth: f64,
) -> f64 {
    let m64 = m as u64;
    decode
        .rows
        .iter()
        .filter_map(|r| r.load.zip(r.time).map(|(l, t)| (r, l, t)))
        .map(|(r, mut l, t)| {
            // The node's DRAM time alone is what is left plus what was moved.
            let alone_dram_s = t.dram_s + t.prefetched_s;
            let moved = if alone_dram_s > 0.0 {
                (t.prefetched_s / alone_dram_s * l.dram_bytes as f64).round() as u64
            } else {
                0
            };
            let other = l.dram_bytes - r.routed_bytes;
            l.dram_bytes = (other + (r.routed_bytes as f64 * routed_growth).round() as u64)
                .saturating_sub(moved);
            l.reread_bytes *= m64;
            l.warp_instructions *= m64;
            l.tail_warp_instructions *= m64;
            node_time(card, &opts.constants, &l, r.index > 0).total_s
        })
        .sum()
}

impl fmt::Display for SpecPrediction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |s: f64| s * 1e6;
        writeln!(
            f,
            "PREDICTED speculative decoding with the NextN/MTP block (model, not a measurement) on {}, \
             depth {}: acceptance {:.2} per draft, ASSUMED independent; verify = one batched decode \
             step (weights once, instructions x positions; ingot has no such kernels yet); routed \
             experts ASSUMED uniformly and independently routed ({} of {} per token)",
            self.card, self.depth, self.acceptance, self.n_expert_used, self.n_expert
        )?;
        writeln!(
            f,
            "plain decode step {:.1} us ({:.1} tok/s); MTP block {:.1} us + its lm_head {:.1} us",
            us(self.decode_s),
            1.0 / self.decode_s,
            us(self.mtp_block_s),
            us(self.mtp_head_s)
        )?;
        writeln!(
            f,
            "{:>2} {:>11} {:>13} {:>9} {:>9} {:>11} {:>9} {:>7} {:>8} | {:>9} {:>8} {:>10}",
            "k",
            "tokens/step",
            "experts/layer",
            "verify us",
            "drafts us",
            "catch-up us",
            "step us",
            "tok/s",
            "vs plain",
            "k+1 steps",
            "overlap",
            "bytes only"
        )?;
        for r in &self.rows {
            writeln!(
                f,
                "{:>2} {:>11.3} {:>13.2} {:>9.1} {:>9.1} {:>11.1} {:>9.1} {:>7.1} {:>7.2}x | {:>8.2}x {:>7.2}x {:>9.2}x",
                r.k,
                r.tokens_per_step,
                r.distinct_experts,
                us(r.verify_s),
                us(r.drafts_s),
                us(r.catch_up_s),
                us(r.step_s),
                r.tok_s,
                r.speedup,
                r.speedup_one_by_one,
                r.speedup_same_experts,
                r.speedup_bytes_only
            )?;
        }
        write!(
            f,
            "vs plain with the verify as k+1 decode steps (what the sim executor runs today); as assumed \
             but the k+1 tokens sharing their routed experts (overlap); or with instructions and \
             re-reads not growing with the positions (bytes only)"
        )
    }
}

/// Both tables at once: the decode table of [`plan_table`] and the prediction from it.
pub fn plan_and_predict_speculative(
    gguf: &Gguf,
    opts: TableOptions,
    max_k: usize,
    a: f64,
) -> Result<(PlanTable, SpecPrediction), PredictError> {
    // A model without a block is refused before the decode step's counts (minutes at full size).
    let config = ModelConfig::from_gguf(gguf)?;
    ingot_graph::build_mtp_plan_for(&config, gguf, plan_options(&opts))?;
    let decode = plan_table(gguf, opts)?;
    let spec = predict_speculative(gguf, opts, &decode, max_k, a)?;
    Ok((decode, spec))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        use ingot_synth::{Layout, Preset, QuantMix, SynthOptions};
        let gguf = ingot_synth::header(&SynthOptions {
            preset: Preset::TinyGlm,
            layout: Layout::Mla,
            mix: QuantMix::Q4KM,
            seed: 0,
        })
        .expect("header");
        let card = crate::predict::card_named("3090").expect("card");
        let opts = TableOptions {
            ctx: 64,
            depth: 8,
            card: Some(card),
            max_blocks: 8,
            constants: crate::predict::constants_for(Some(card)),
            expert_cache: None,
            cache_type: ingot_model::CacheType::F16,
            prefill: None,
        };
        let (decode, spec) = plan_and_predict_speculative(&gguf, opts, 3, 0.8).expect("predict");
        let one = verify_time(&decode, card, opts, 1, 1.0);
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
            assert!(r.speedup <= r.speedup_bytes_only);
        }
        let none = predict_speculative(&gguf, opts, &decode, 1, 0.0).expect("predict at 0");
        assert!(none.rows[0].speedup < 1.0);
        assert!(predict_speculative(&gguf, opts, &decode, 1, 1.5).is_err());
    }

    /// One token reads its `n_used` experts; many tokens tend to all of them; two tokens of
    /// GLM-4.7-Flash's 4 of 64 read 4 + 4·60/64 = 7.75 on average (the second token's experts
    /// each miss the first's with probability 60/64). Checked against a direct simulation of
    /// uniform routing.
    #[test]
    fn distinct_experts_under_uniform_routing() {
        assert!((expected_distinct_experts(64, 4, 1) - 4.0).abs() < 1e-12);
        assert!((expected_distinct_experts(64, 4, 2) - 7.75).abs() < 1e-12);
        assert!((expected_distinct_experts(64, 4, 1000) - 64.0).abs() < 1e-9);
        assert_eq!(expected_distinct_experts(0, 0, 3), 0.0);
        // Monte Carlo: m tokens each draw 4 distinct of 64 (a partial Fisher-Yates shuffle).
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for m in [2, 3, 4] {
            let trials = 20_000;
            let mut total = 0usize;
            for _ in 0..trials {
                let mut seen = [false; 64];
                for _ in 0..m {
                    let mut pool: Vec<usize> = (0..64).collect();
                    for i in 0..4 {
                        let j = i + next(64 - i);
                        pool.swap(i, j);
                        seen[pool[i]] = true;
                    }
                }
                total += seen.iter().filter(|&&s| s).count();
            }
            let mean = total as f64 / trials as f64;
            let want = expected_distinct_experts(64, 4, m);
            // The mean of 20,000 draws of a count with standard deviation < 2: within 0.05.
            assert!((mean - want).abs() < 0.05, "m {m}: {mean} vs {want}");
        }
    }
}
