//! MoE expert selection (docs/decode-math.md#moe-ffn, llama.cpp `build_moe_ffn`): softmax or
//! sigmoid scores, an optional selection bias (V3 `exp_probs_b`), optional group limiting, top-k,
//! optional renormalisation and scaling.
//!
//! Group limiting scores a group by the model family's own rule ([`GroupScore`]): its best expert
//! for softmax models (HF DeepSeek-V2), the sum of its best two for sigmoid models (DeepSeek-V3).
//! llama.cpp uses the top-2 sum for both, so on a softmax model with groups (DeepSeek-V2/V2.5 236B)
//! its routing departs from the model's.
//!
//! Tie rule: among equal selection scores the lower expert index is chosen first (a stable
//! descending sort). ggml's CPU argsort does not promise any order for exact ties; with real-valued
//! router logits ties do not occur.

use crate::config::{GatingFunc, GroupScore, ModelConfig};

/// llama.cpp clamps the weight sum from below before renormalising (`ggml_clamp(sum,
/// 6.103515625e-5, inf)`).
const MIN_WEIGHT_SUM: f32 = 6.103_515_6e-5;

/// The routing hyper-parameters, copied out of [`ModelConfig`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RouterParams {
    pub gating: GatingFunc,
    pub n_expert: usize,
    pub n_used: usize,
    /// Groups are active only when `n_group > 1`.
    pub n_group: usize,
    pub n_group_used: usize,
    pub normalize: bool,
    pub scale: f32,
}

impl RouterParams {
    pub fn from_config(c: &ModelConfig) -> Self {
        RouterParams {
            gating: c.gating,
            n_expert: c.n_expert,
            n_used: c.n_expert_used,
            n_group: c.n_expert_group,
            n_group_used: c.n_expert_group_used,
            normalize: c.expert_weights_norm,
            scale: c.expert_weights_scale,
        }
    }
}

/// Preallocated buffers so that routing a token does not allocate.
#[derive(Debug, Clone)]
pub struct Router {
    params: RouterParams,
    probs: Vec<f32>,
    selection: Vec<f32>,
    taken: Vec<bool>,
    group_scores: Vec<f32>,
    group_taken: Vec<bool>,
    /// See [`Router::margin`].
    margin: f32,
}

impl Router {
    pub fn new(params: RouterParams) -> Self {
        Router {
            params,
            probs: vec![0.0; params.n_expert],
            selection: vec![0.0; params.n_expert],
            taken: vec![false; params.n_expert],
            group_scores: vec![0.0; params.n_group],
            group_taken: vec![false; params.n_group],
            margin: f32::INFINITY,
        }
    }

    /// Selects `n_used` experts for router `logits` (length `n_expert`); writes `(expert, weight)`
    /// pairs in selection order (best first) into `out` (length `n_used`).
    pub fn route(&mut self, logits: &[f32], bias: Option<&[f32]>, out: &mut [(usize, f32)]) {
        let p = self.params;
        debug_assert_eq!(logits.len(), p.n_expert);
        debug_assert_eq!(out.len(), p.n_used);
        match p.gating {
            GatingFunc::Softmax => {
                let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let sum: f64 = logits.iter().map(|&l| ((l - max) as f64).exp()).sum();
                for (pr, &l) in self.probs.iter_mut().zip(logits) {
                    *pr = (((l - max) as f64).exp() / sum) as f32;
                }
            }
            GatingFunc::Sigmoid => {
                for (pr, &l) in self.probs.iter_mut().zip(logits) {
                    *pr = (1.0 / (1.0 + (-(l as f64)).exp())) as f32;
                }
            }
        }
        self.margin = f32::INFINITY;
        // The bias only steers which experts are chosen; the weights come from the unbiased scores.
        for (e, s) in self.selection.iter_mut().enumerate() {
            *s = self.probs[e] + bias.map_or(0.0, |b| b[e]);
        }
        if p.n_group > 1 {
            self.limit_groups();
        }
        self.taken.fill(false);
        for slot in out.iter_mut() {
            let e = best_untaken(&self.selection, &self.taken);
            self.taken[e] = true;
            *slot = (e, self.probs[e]);
        }
        if let Some(&(last, _)) = out.last() {
            let rest = self
                .selection
                .iter()
                .zip(&self.taken)
                .filter(|&(_, &t)| !t)
                .fold(f32::NEG_INFINITY, |m, (&s, _)| m.max(s));
            let gap = self.logit_gap(self.selection[last], rest, bias.is_some());
            self.margin = self.margin.min(gap);
        }
        if p.normalize {
            let sum: f32 = out.iter().map(|&(_, w)| w).sum::<f32>().max(MIN_WEIGHT_SUM);
            out.iter_mut().for_each(|(_, w)| *w /= sum);
        }
        if p.scale != 1.0 {
            out.iter_mut().for_each(|(_, w)| *w *= p.scale);
        }
    }

    /// How close the last [`Router::route`] came to another choice, in router-logit units: the
    /// smallest gap between the last chosen expert and the best unchosen one and, with groups,
    /// between the last kept group and the best dropped one. Infinite when nothing was left out.
    /// A backend whose router logits differ from these by about half this much may
    /// legitimately choose differently.
    ///
    /// Under softmax without a bias the selection order is the logits' order and the gap is
    /// exact: `ln(p_a / p_b) = l_a − l_b`, whatever the number of experts (an absolute gap in
    /// probabilities would shrink with it: 64 experts put typical probabilities near 0.016).
    /// Otherwise (sigmoid, or a selection bias) the gap of the selection scores is divided by
    /// the gating function's steepest slope, 1/4: the least logit change that can close it.
    pub fn margin(&self) -> f32 {
        self.margin
    }

    /// The gap between selection scores `a > b` in router-logit units (see [`Router::margin`]).
    fn logit_gap(&self, a: f32, b: f32, biased: bool) -> f32 {
        if b == f32::NEG_INFINITY {
            return f32::INFINITY;
        }
        match self.params.gating {
            GatingFunc::Softmax if !biased && a > 0.0 && b > 0.0 => (a / b).ln(),
            _ => 4.0 * (a - b),
        }
    }

    /// Keeps the `n_group_used` groups with the highest [`GroupScore`]; masks the rest to -inf.
    fn limit_groups(&mut self) {
        let p = self.params;
        let per_group = p.n_expert / p.n_group;
        for (g, score) in self.group_scores.iter_mut().enumerate() {
            let members = &self.selection[g * per_group..(g + 1) * per_group];
            let (mut first, mut second) = (f32::NEG_INFINITY, f32::NEG_INFINITY);
            for &s in members {
                if s > first {
                    second = first;
                    first = s;
                } else if s > second {
                    second = s;
                }
            }
            *score = match p.gating.group_score() {
                GroupScore::Best => first,
                GroupScore::TopTwoSum => first + second,
            };
        }
        self.group_taken.fill(false);
        for _ in 0..p.n_group_used {
            let g = best_untaken(&self.group_scores, &self.group_taken);
            self.group_taken[g] = true;
        }
        let score = |keep: bool| {
            self.group_scores
                .iter()
                .zip(&self.group_taken)
                .filter(move |&(_, &k)| k == keep)
                .map(|(&s, _)| s)
        };
        let kept = score(true).fold(f32::INFINITY, f32::min);
        let dropped = score(false).fold(f32::NEG_INFINITY, f32::max);
        // A group's score is its best member's, or two members' sum (sigmoid only): either way
        // a selection score, converted as the experts' (bias never reaches softmax groups).
        let gap = if kept == f32::INFINITY {
            f32::INFINITY
        } else {
            self.logit_gap(kept, dropped, false)
        };
        self.margin = self.margin.min(gap);
        for (g, &keep) in self.group_taken.iter().enumerate() {
            if !keep {
                self.selection[g * per_group..(g + 1) * per_group].fill(f32::NEG_INFINITY);
            }
        }
    }
}

/// Highest score among entries not yet taken; lowest index on ties; NaN never beats a number.
fn best_untaken(scores: &[f32], taken: &[bool]) -> usize {
    let mut best: Option<usize> = None;
    for (i, &s) in scores.iter().enumerate() {
        if taken[i] {
            continue;
        }
        match best {
            None => best = Some(i),
            Some(b) if s > scores[b] || (scores[b].is_nan() && !s.is_nan()) => best = Some(i),
            Some(_) => {}
        }
    }
    best.expect("callers select at most as many entries as there are")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(gating: GatingFunc, n_used: usize) -> RouterParams {
        RouterParams {
            gating,
            n_expert: 8,
            n_used,
            n_group: 1,
            n_group_used: 1,
            normalize: false,
            scale: 1.0,
        }
    }

    fn route(p: RouterParams, logits: &[f32], bias: Option<&[f32]>) -> Vec<(usize, f32)> {
        let mut out = vec![(0, 0.0); p.n_used];
        Router::new(p).route(logits, bias, &mut out);
        out
    }

    #[test]
    fn softmax_top_k_without_renorm() {
        let logits = [0.0, 3.0, 1.0, 2.0, -1.0, 0.5, 2.0, 0.0];
        let out = route(params(GatingFunc::Softmax, 3), &logits, None);
        // 3.0 first, then the tie at 2.0 resolved to the lower index (3 before 6).
        assert_eq!(out.iter().map(|&(e, _)| e).collect::<Vec<_>>(), [1, 3, 6]);
        let z: f64 = logits.iter().map(|&l| (l as f64).exp()).sum();
        for &(e, w) in &out {
            assert!((w as f64 - (logits[e] as f64).exp() / z).abs() < 1e-7);
        }
    }

    #[test]
    fn bias_selects_but_does_not_weigh() {
        let logits = [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, -2.0];
        let bias = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0];
        let p = RouterParams {
            normalize: true,
            scale: 2.5,
            ..params(GatingFunc::Sigmoid, 2)
        };
        let out = route(p, &logits, Some(&bias));
        assert_eq!(out[0].0, 7);
        assert_eq!(out[1].0, 1);
        let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
        let sum = sig(-2.0) + sig(1.0);
        assert!((out[0].1 as f64 - 2.5 * sig(-2.0) / sum).abs() < 1e-6);
        assert!((out[1].1 as f64 - 2.5 * sig(1.0) / sum).abs() < 1e-6);
    }

    /// Group 0 = experts 0..4 holds the single best expert, group 1 = 4..8 has the best pair sum.
    const GROUP_LOGITS: [f32; 8] = [4.0, -5.0, -5.0, -5.0, 3.0, 3.0, -5.0, -5.0];

    #[test]
    fn sigmoid_groups_score_by_top_two_sum() {
        let p = RouterParams {
            n_group: 2,
            n_group_used: 1,
            ..params(GatingFunc::Sigmoid, 2)
        };
        assert_eq!(p.gating.group_score(), GroupScore::TopTwoSum);
        let out = route(p, &GROUP_LOGITS, None);
        assert_eq!(out.iter().map(|&(e, _)| e).collect::<Vec<_>>(), [4, 5]);
    }

    #[test]
    fn softmax_groups_score_by_best_expert() {
        // DeepSeek-V2's group_limited_greedy keeps group 0 (best single expert 4.0), where V3's
        // rule keeps group 1.
        let p = RouterParams {
            n_group: 2,
            n_group_used: 1,
            ..params(GatingFunc::Softmax, 2)
        };
        assert_eq!(p.gating.group_score(), GroupScore::Best);
        let out = route(p, &GROUP_LOGITS, None);
        assert_eq!(out.iter().map(|&(e, _)| e).collect::<Vec<_>>(), [0, 1]);
    }

    #[test]
    fn margin_is_the_closest_decision() {
        let sig = |l: f64| (1.0 / (1.0 + (-l).exp())) as f32;
        let mut r = Router::new(params(GatingFunc::Sigmoid, 2));
        let mut out = vec![(0, 0.0); 2];
        r.route(
            &[3.0, 2.0, 1.9, 0.0, -1.0, -2.0, -3.0, -4.0],
            None,
            &mut out,
        );
        assert_eq!(r.margin(), 4.0 * (sig(2.0) - sig(1.9)));
        // Groups of two, two kept: group 1 (experts 2, 3) beats group 2 (4, 5) by 0.01 in
        // logits, far less than the experts' own boundary.
        let grouped = RouterParams {
            n_group: 4,
            n_group_used: 2,
            ..params(GatingFunc::Sigmoid, 2)
        };
        let mut r = Router::new(grouped);
        let logits = [4.0, 3.0, 0.51, 0.5, 0.5, 0.5, -3.0, -4.0];
        r.route(&logits, None, &mut out);
        let g1 = sig(0.51) + sig(0.5);
        let g2 = sig(0.5) + sig(0.5);
        assert_eq!(r.margin(), 4.0 * (g1 - g2));
        // Softmax: the logit gap itself, the same for 8 experts or 160.
        for n in [8usize, 160] {
            let mut logits = vec![-1.0f32; n];
            logits[..3].copy_from_slice(&[2.0, 1.5, 1.45]);
            let mut r = Router::new(RouterParams {
                n_expert: n,
                ..params(GatingFunc::Softmax, 2)
            });
            r.route(&logits, None, &mut out);
            assert!(
                (r.margin() - 0.05).abs() < 1e-5,
                "{n} experts: {}",
                r.margin()
            );
        }
        // Nothing left out: no decision, infinite margin.
        let mut r = Router::new(params(GatingFunc::Softmax, 8));
        let mut all = vec![(0, 0.0); 8];
        r.route(&[0.0; 8], None, &mut all);
        assert_eq!(r.margin(), f32::INFINITY);
    }
}
