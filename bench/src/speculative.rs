//! `ingot bench --draft mtp`: greedy generation with and without NextN/MTP drafts
//! ([`ingot_model::speculative`]), tokens per second of each and the drafts' acceptance.
//!
//! Unlike the `tg` test, which feeds a fixed sequence, drafting needs the model's own choices:
//! every repetition resets the cache, prefills the same fixed prompt ([`crate::decode::token_at`])
//! untimed, then generates `n_gen` tokens greedily. The timed part starts after the prompt (and,
//! with drafts, after the MTP block's pass over it) and ends with the last token; tokens per second
//! counts the `n_gen − 1` tokens decoded after the one the prompt's logits gave, as `ingot run`
//! reports decode speed. A benchmark measures; nothing here asserts a time.

use std::fmt::Write as _;
use std::time::Instant;

use ingot_model::speculative::{greedy_drafted, greedy_plain, Drafts, SpecStats};
use ingot_model::{Decoder, ModelError};

use crate::decode::{mean_sd, token_at, Meta};

/// What one run measures.
#[derive(Clone, Debug)]
pub struct SpecBench {
    pub n_prompt: usize,
    /// Tokens generated per repetition (at least 2).
    pub n_gen: usize,
    pub reps: usize,
    /// The drafted runs' drafts (`k` in `1..=MAX_DRAFT`).
    pub drafts: Drafts,
    /// The decoder's context: prompt + generation fit in it.
    pub ctx: usize,
}

/// One mode's repetitions.
#[derive(Clone, Debug)]
pub struct SpecResult {
    /// Drafts per step, 0 without drafts.
    pub k: usize,
    /// Tokens per second of each repetition.
    pub samples: Vec<f64>,
    /// Summed over the repetitions (drafted runs only).
    pub stats: SpecStats,
}

impl SpecResult {
    pub fn test(&self, n_gen: usize) -> String {
        match self.k {
            0 => format!("tg{n_gen} greedy"),
            k => format!("tg{n_gen} greedy mtp k{k}"),
        }
    }
}

impl SpecBench {
    /// Plain greedy, then drafted greedy, alternating per repetition so both see the same machine
    /// state. Refuses a run whose drafted output differs from the plain one (it would not be
    /// greedy).
    pub fn run(
        &self,
        dec: &mut dyn Decoder,
        mut log: impl FnMut(&str),
    ) -> Result<Vec<SpecResult>, ModelError> {
        dec.mtp_ready()?;
        if self.n_gen < 2 || self.n_prompt == 0 || self.n_prompt + self.n_gen > self.ctx {
            return Err(ModelError::Unsupported(format!(
                "a drafted bench needs a prompt, at least 2 generated tokens and both within the context of {} (got -p {} -n {})",
                self.ctx, self.n_prompt, self.n_gen
            )));
        }
        let vocab = dec.config().vocab;
        let prompt: Vec<u32> = (0..self.n_prompt).map(|p| token_at(p, vocab)).collect();
        let mut plain = SpecResult {
            k: 0,
            samples: Vec::new(),
            stats: SpecStats::default(),
        };
        let mut drafted = SpecResult {
            k: self.drafts.k,
            ..plain.clone()
        };
        for rep in 0..self.reps {
            let (want, tps) = self.plain(dec, &prompt)?;
            plain.samples.push(tps);
            let (got, tps, stats) = self.drafted(dec, &prompt)?;
            if got != want {
                return Err(ModelError::Unsupported(
                    "drafted greedy output differs from plain greedy output".into(),
                ));
            }
            drafted.samples.push(tps);
            drafted.stats.steps += stats.steps;
            drafted.stats.drafted += stats.drafted;
            drafted.stats.accepted += stats.accepted;
            drafted.stats.emitted += stats.emitted;
            log(&format!(
                "rep {}/{}: plain {:.2} t/s, mtp k{} {tps:.2} t/s (acceptance {:.3}, {:.2} tokens/step)",
                rep + 1,
                self.reps,
                plain.samples[rep],
                self.drafts.k,
                stats.acceptance(),
                stats.tokens_per_step()
            ));
        }
        Ok(vec![plain, drafted])
    }

    fn plain(&self, dec: &mut dyn Decoder, prompt: &[u32]) -> Result<(Vec<u32>, f64), ModelError> {
        let mut start = Instant::now();
        let out = greedy_plain(dec, prompt, self.n_gen, || start = Instant::now())?;
        Ok((out, self.rate(start)))
    }

    fn drafted(
        &self,
        dec: &mut dyn Decoder,
        prompt: &[u32],
    ) -> Result<(Vec<u32>, f64, SpecStats), ModelError> {
        let mut start = Instant::now();
        let shape = (self.n_gen, self.drafts, self.ctx);
        let (out, stats) = greedy_drafted(dec, prompt, shape, || start = Instant::now())?;
        Ok((out, self.rate(start), stats))
    }

    /// Tokens per second of the `n_gen − 1` tokens after the first, from `start`.
    fn rate(&self, start: Instant) -> f64 {
        (self.n_gen - 1) as f64 / start.elapsed().as_secs_f64()
    }
}

/// The drafted run's speed over the plain run's, per repetition (the two alternate, so a
/// repetition's ratio sees one machine state even when the machine is shared): mean and sample
/// standard deviation.
pub fn speedup(plain: &SpecResult, drafted: &SpecResult) -> (f64, f64) {
    let ratios: Vec<f64> = drafted
        .samples
        .iter()
        .zip(&plain.samples)
        .map(|(d, p)| d / p)
        .collect();
    mean_sd(&ratios)
}

/// A llama-bench-like table with the drafts' acceptance, tokens per verify step and the
/// per-repetition speed ratio to the plain run.
pub fn table(m: &Meta, n_gen: usize, results: &[SpecResult]) -> String {
    let w = m.model.chars().count().max(24);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| {:<w$} | {:<8} | {:>7} | {:>22} | {:>17} | {:>10} | {:>11} | {:>13} |",
        "model", "backend", "threads", "test", "t/s", "acceptance", "tokens/step", "vs plain"
    );
    let _ = writeln!(
        s,
        "| {:-<w$} | {:-<8} | {:->6}: | {:->21}: | {:->16}: | {:->9}: | {:->10}: | {:->12}: |",
        "", "", "", "", "", "", "", ""
    );
    let plain = results.iter().find(|r| r.k == 0);
    for r in results {
        let (mean, sd) = mean_sd(&r.samples);
        let (acc, per_step, ratio) = match plain {
            Some(p) if r.k > 0 => {
                let (m, sd) = speedup(p, r);
                (
                    format!("{:.3}", r.stats.acceptance()),
                    format!("{:.2}", r.stats.tokens_per_step()),
                    format!("{m:.2}x ± {sd:.2}"),
                )
            }
            _ => ("-".into(), "1.00".into(), "-".into()),
        };
        let _ = writeln!(
            s,
            "| {:<w$} | {:<8} | {:>7} | {:>22} | {:>17} | {:>10} | {:>11} | {:>13} |",
            m.model,
            m.backend,
            m.threads,
            r.test(n_gen),
            format!("{mean:.2} ± {sd:.2}"),
            acc,
            per_step,
            ratio
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speedup_is_the_mean_of_per_repetition_ratios() {
        let r = |k, samples: Vec<f64>| SpecResult {
            k,
            samples,
            stats: SpecStats::default(),
        };
        let (m, sd) = speedup(&r(0, vec![100.0, 200.0]), &r(1, vec![150.0, 200.0]));
        assert!(
            (m - 1.25).abs() < 1e-12 && (sd - 0.125f64.sqrt()).abs() < 1e-12,
            "{m} {sd}"
        );
    }
}
