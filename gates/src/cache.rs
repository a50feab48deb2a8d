//! What a narrower latent cache costs (`--cache-type q8_0`): the fast CPU backend with
//! the cache type under test, judged step by step against the same backend with the
//! full-precision cache, both fed the same tokens (the prompt, then the full-precision run's
//! greedy choices). The same weights and activation quantization on both sides, so every
//! difference is the cache's. A step out of the band where the two runs chose different experts
//! is a [`Verdict::RouteTie`] only when the full-precision run's router margin at the first MoE
//! layer that differs is a measured near-tie (below [`Band::route_margin`]): then that layer's
//! residual moved by a whole expert's share (as in the device gates, see [`crate::band`]). A
//! cache that is wrong moves routing where margins are clear, and fails there; the report counts
//! the excused steps, and [`crate::band::MAX_EXCUSED_FRACTION`] caps them.

use std::fmt;

use ingot_gguf::GgufFile;
use ingot_model::{CacheType, CpuBackend, Decoder};

use crate::band::Band;
use crate::compare::{judge_step, StepReport, Verdict};
use crate::run::GateError;

/// Every step of a cache-type run.
#[derive(Clone, Debug)]
pub struct CacheReport {
    pub cache_type: CacheType,
    /// `oracle_*` fields: the full-precision cache; `backend_*`: the cache under test.
    pub steps: Vec<StepReport>,
}

impl CacheReport {
    /// No step is a [`Verdict::Mismatch`], and routing near-ties excused at most
    /// [`crate::band::MAX_EXCUSED_FRACTION`] of the steps.
    pub fn passed(&self) -> bool {
        self.steps.iter().all(|s| s.verdict != Verdict::Mismatch)
            && crate::band::excuses_within_cap(self.count(Verdict::RouteTie), self.steps.len())
    }

    pub fn count(&self, v: Verdict) -> usize {
        self.steps.iter().filter(|s| s.verdict == v).count()
    }

    /// The largest `|Δlogit|` of any step.
    pub fn max_abs_diff(&self) -> f32 {
        self.steps
            .iter()
            .map(|s| s.max_abs_diff)
            .fold(0.0, f32::max)
    }

    /// The largest `|Δlogit|` of the steps not judged [`Verdict::RouteTie`].
    pub fn max_abs_diff_without_route_ties(&self) -> f32 {
        self.steps
            .iter()
            .filter(|s| s.verdict != Verdict::RouteTie)
            .map(|s| s.max_abs_diff)
            .fold(0.0, f32::max)
    }

    /// The largest `|Δlogit|` of any step over that step's logit band.
    pub fn max_band_fraction(&self) -> f32 {
        self.steps
            .iter()
            .map(|s| s.max_abs_diff / s.logit_band)
            .fold(0.0, f32::max)
    }
}

impl fmt::Display for CacheReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for s in &self.steps {
            writeln!(f, "{s}")?;
        }
        write!(
            f,
            "{} cache vs f16 cache (CPU backend): {} steps, {} match, {} near-tie, {} route-tie, \
             {} mismatch; max |Δlogit| {:.4} ({:.0}% of its step's band; {:.4} outside the \
             route-tie steps): {}",
            self.cache_type,
            self.steps.len(),
            self.count(Verdict::Match),
            self.count(Verdict::NearTie),
            self.count(Verdict::RouteTie),
            self.count(Verdict::Mismatch),
            self.max_abs_diff(),
            100.0 * self.max_band_fraction(),
            self.max_abs_diff_without_route_ties(),
            if self.passed() { "PASS" } else { "FAIL" }
        )
    }
}

/// Runs `prompt` (non-empty) and `steps` greedy tokens with a `cache_type` cache and with the
/// full-precision cache, judging each position with `band`.
pub fn run_cache_gate(
    file: &GgufFile,
    prompt: &[u32],
    steps: usize,
    band: &Band,
    cache_type: CacheType,
) -> Result<CacheReport, GateError> {
    run_cache_gate_on(file, prompt, steps, band, cache_type, |_| {})
}

/// [`run_cache_gate`] with `alter` applied to the narrow-cache backend before the run: how the
/// mutation tests inject a fault (e.g. [`CpuBackend::inject_cache_write_skew`]) the gate must
/// catch.
#[doc(hidden)]
pub fn run_cache_gate_on(
    file: &GgufFile,
    prompt: &[u32],
    steps: usize,
    band: &Band,
    cache_type: CacheType,
    alter: impl FnOnce(&mut CpuBackend<'_>),
) -> Result<CacheReport, GateError> {
    let Some(&first) = prompt.first() else {
        return Err(GateError::EmptyPrompt);
    };
    let ctx = prompt.len() + steps;
    let mut full = CpuBackend::load(file, ctx)?;
    let mut narrow = CpuBackend::load(file, ctx)?;
    narrow.set_cache_type(cache_type);
    alter(&mut narrow);
    let mut report = CacheReport {
        cache_type,
        steps: Vec::with_capacity(ctx),
    };
    let mut token = first;
    for pos in 0..ctx - 1 {
        let reference = full.decode(token, pos)?.to_vec();
        let mut step = judge_step(
            band,
            pos,
            token,
            &reference,
            narrow.decode(token, pos)?,
            None,
        );
        excuse_measured_route_tie(band, &mut step, &full, &narrow);
        token = prompt.get(pos + 1).copied().unwrap_or(step.oracle_top1);
        report.steps.push(step);
    }
    Ok(report)
}

/// Excuses a non-matching step as [`Verdict::RouteTie`] when the two runs chose different experts
/// and the full-precision run's router margin at the first MoE layer that differs is below
/// [`Band::route_margin`]: the cache moved a choice that was a measured near-tie. Any other
/// difference stays what it was.
fn excuse_measured_route_tie(
    band: &Band,
    step: &mut StepReport,
    full: &CpuBackend<'_>,
    narrow: &CpuBackend<'_>,
) {
    if step.verdict == Verdict::Match {
        return;
    }
    let Some(first) = experts(full)
        .iter()
        .zip(experts(narrow))
        .position(|(a, b)| *a != b)
    else {
        return;
    };
    let margin = full.route_margins().get(first).copied();
    if margin.is_some_and(|m| m < band.route_margin) {
        step.verdict = Verdict::RouteTie;
        step.route_margin = margin;
    }
}

/// The last step's experts, per MoE layer as sorted ids.
fn experts(d: &CpuBackend<'_>) -> Vec<Vec<u32>> {
    let n_used = d.config().n_expert_used.max(1);
    d.routing()
        .unwrap_or_default()
        .chunks(n_used)
        .map(|layer| {
            let mut ids: Vec<u32> = layer.iter().map(|&(e, _)| e).collect();
            ids.sort_unstable();
            ids
        })
        .collect()
}
