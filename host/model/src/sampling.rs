//! Token sampling with llama.cpp's semantics and its default chain order: repetition penalties →
//! top-k → top-p → min-p → temperature → draw. `temperature <= 0` means greedy (argmax after
//! penalties; lowest id wins ties). The draw uses a seeded ChaCha-based `StdRng`, so a seed
//! reproduces a run exactly (not llama.cpp's mt19937 stream).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Sampling parameters; `Default` gives llama.cpp's defaults (with a fixed seed of 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplerConfig {
    /// Divides the logits before the draw; `<= 0` selects greedy decoding.
    pub temperature: f32,
    /// Keep the `top_k` most likely tokens; 0 disables.
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches `top_p`; `>= 1`
    /// disables.
    pub top_p: f32,
    /// Drop tokens less likely than `min_p` times the most likely one; `<= 0` disables.
    pub min_p: f32,
    /// Divide positive (multiply negative) logits of recently seen tokens by this; 1 disables.
    pub repeat_penalty: f32,
    /// How many of the most recent history tokens the penalties look at; 0 disables the penalties.
    pub repeat_last_n: usize,
    /// Subtract `count · frequency_penalty` from a seen token's logit.
    pub frequency_penalty: f32,
    /// Subtract `presence_penalty` from a seen token's logit.
    pub presence_penalty: f32,
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            seed: 0,
        }
    }
}

/// A sampling parameter [`SamplerConfig::validate`] checks, by the names its two front ends give
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplingParam {
    Temperature,
    TopP,
    MinP,
    RepeatPenalty,
    FrequencyPenalty,
    PresencePenalty,
}

impl SamplingParam {
    /// The OpenAI / llama-server request field.
    pub fn api_name(self) -> &'static str {
        match self {
            SamplingParam::Temperature => "temperature",
            SamplingParam::TopP => "top_p",
            SamplingParam::MinP => "min_p",
            SamplingParam::RepeatPenalty => "repeat_penalty",
            SamplingParam::FrequencyPenalty => "frequency_penalty",
            SamplingParam::PresencePenalty => "presence_penalty",
        }
    }

    /// The `ingot run` flag.
    pub fn flag(self) -> &'static str {
        match self {
            SamplingParam::Temperature => "--temp",
            SamplingParam::TopP => "--top-p",
            SamplingParam::MinP => "--min-p",
            SamplingParam::RepeatPenalty => "--repeat-penalty",
            SamplingParam::FrequencyPenalty => "--frequency-penalty",
            SamplingParam::PresencePenalty => "--presence-penalty",
        }
    }
}

/// A sampling parameter outside its range (or not a finite number).
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("{} must be between {lo} and {hi}, got {value}", param.api_name())]
pub struct SamplingRangeError {
    pub param: SamplingParam,
    pub value: f32,
    pub lo: f32,
    pub hi: f32,
}

impl SamplingRangeError {
    /// The same message naming the value by `name` (a flag, or a quoted request field).
    pub fn message(&self, name: &str) -> String {
        format!(
            "{name} must be between {} and {}, got {}",
            self.lo, self.hi, self.value
        )
    }
}

impl SamplerConfig {
    /// The one range check of every front end (`ingot run`'s flags, the server's request fields):
    /// finite values within llama-server's accepted ranges. The sampler itself reads anything (a
    /// negative temperature as greedy, NaN as whatever its comparisons make of it), so a value it
    /// would silently reinterpret is refused here instead.
    pub fn validate(&self) -> Result<(), SamplingRangeError> {
        use SamplingParam::*;
        let ranges = [
            (Temperature, self.temperature, 0.0, 100.0),
            (TopP, self.top_p, 0.0, 1.0),
            (MinP, self.min_p, 0.0, 1.0),
            (RepeatPenalty, self.repeat_penalty, 0.0, 100.0),
            (FrequencyPenalty, self.frequency_penalty, -2.0, 2.0),
            (PresencePenalty, self.presence_penalty, -2.0, 2.0),
        ];
        for (param, value, lo, hi) in ranges {
            if !(value.is_finite() && (lo..=hi).contains(&value)) {
                return Err(SamplingRangeError {
                    param,
                    value,
                    lo,
                    hi,
                });
            }
        }
        Ok(())
    }

    /// Whether the penalties change any logit (a repeat, frequency or presence penalty over a
    /// window of at least one token).
    pub fn has_penalties(&self) -> bool {
        let any = self.repeat_penalty != 1.0
            || self.frequency_penalty != 0.0
            || self.presence_penalty != 0.0;
        any && self.repeat_last_n > 0
    }

    /// Argmax decoding without penalties.
    pub fn greedy() -> Self {
        SamplerConfig {
            temperature: 0.0,
            ..SamplerConfig::default()
        }
    }
}

/// A seeded sampler with reusable scratch buffers.
pub struct Sampler {
    config: SamplerConfig,
    rng: StdRng,
    /// `(token, logit)` candidates of the current step.
    candidates: Vec<(u32, f32)>,
    /// Occurrences per token in the penalty window; all zero between calls.
    counts: Vec<u32>,
    probs: Vec<f64>,
}

impl Sampler {
    pub fn new(config: SamplerConfig) -> Self {
        Sampler {
            rng: StdRng::seed_from_u64(config.seed),
            config,
            candidates: Vec::new(),
            counts: Vec::new(),
            probs: Vec::new(),
        }
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// Picks the next token from `logits` given the tokens generated or fed so far (`history`,
    /// oldest first; ids outside the vocabulary are ignored). NaN logits count as impossible.
    /// Returns 0 for empty `logits`.
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> u32 {
        if logits.is_empty() {
            return 0;
        }
        if let Some(greedy) = self.prepare(logits, history) {
            return greedy;
        }
        let mut u = self.rng.random::<f64>();
        for (i, &p) in self.probs.iter().enumerate() {
            if u < p {
                return self.candidates[i].0;
            }
            u -= p;
        }
        // Rounding left `u` just above the total: the last candidate is the one the draw landed on.
        self.candidates.last().map_or(0, |c| c.0)
    }

    /// The distribution [`Sampler::sample`] draws from (after penalties, top-k, top-p, min-p and
    /// temperature), written densely into `out` (`logits.len()` probabilities summing to 1; a
    /// greedy sampler's is one-hot). Draws no random number.
    pub fn distribution(&mut self, logits: &[f32], history: &[u32], out: &mut Vec<f64>) {
        out.clear();
        out.resize(logits.len(), 0.0);
        if logits.is_empty() {
            return;
        }
        if let Some(greedy) = self.prepare(logits, history) {
            out[greedy as usize] = 1.0;
            return;
        }
        for (c, &p) in self.candidates.iter().zip(&self.probs) {
            out[c.0 as usize] = p;
        }
    }

    /// A uniform draw in [0, 1) from the sampler's seeded stream.
    pub fn uniform(&mut self) -> f64 {
        self.rng.random::<f64>()
    }

    /// A token drawn from the dense weights `w` (not necessarily normalized, none negative) with
    /// the sampler's stream; `None` when they sum to zero.
    pub fn draw_weighted(&mut self, w: &[f64]) -> Option<u32> {
        let total: f64 = w.iter().sum();
        if !(total > 0.0 && total.is_finite()) {
            return None;
        }
        let mut u = self.rng.random::<f64>() * total;
        let mut last = None;
        for (i, &p) in w.iter().enumerate() {
            if p <= 0.0 {
                continue;
            }
            if u < p {
                return Some(i as u32);
            }
            u -= p;
            last = Some(i as u32);
        }
        last
    }

    /// Runs the chain up to the draw: `Some(token)` for a greedy sampler, else leaves the surviving
    /// candidates (most likely first) and their probabilities in `candidates` / `probs`.
    fn prepare(&mut self, logits: &[f32], history: &[u32]) -> Option<u32> {
        self.candidates.clear();
        self.candidates.extend(
            logits
                .iter()
                .enumerate()
                .map(|(i, &l)| (i as u32, if l.is_nan() { f32::NEG_INFINITY } else { l })),
        );
        self.apply_penalties(history);
        let cfg = self.config;
        if cfg.temperature.is_nan() || cfg.temperature <= 0.0 {
            return Some(greedy(&self.candidates));
        }
        // Most likely first, lower id first among equal logits: makes every cut below
        // deterministic.
        let by_rank = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if cfg.top_k > 0 && cfg.top_k < self.candidates.len() {
            self.candidates
                .select_nth_unstable_by(cfg.top_k - 1, by_rank);
            self.candidates.truncate(cfg.top_k);
        }
        self.candidates.sort_unstable_by(by_rank);
        if cfg.top_p < 1.0 {
            self.softmax(1.0);
            let mut cum = 0.0;
            let mut keep = self.candidates.len();
            for (i, &p) in self.probs.iter().enumerate() {
                cum += p;
                if cum >= cfg.top_p as f64 {
                    keep = i + 1;
                    break;
                }
            }
            self.candidates.truncate(keep.max(1));
        }
        if cfg.min_p > 0.0 {
            // p_i >= min_p · p_max  <=>  logit_i >= logit_max + ln(min_p)
            let threshold = self.candidates[0].1 + cfg.min_p.ln();
            let keep = self
                .candidates
                .iter()
                .take_while(|c| c.1 >= threshold)
                .count();
            self.candidates.truncate(keep.max(1));
        }
        self.softmax(cfg.temperature);
        None
    }

    /// llama.cpp `penalties`: for each token seen in the last `repeat_last_n` history entries,
    /// divide a positive logit (multiply a non-positive one) by `repeat_penalty`, then subtract
    /// `count·frequency + presence`.
    fn apply_penalties(&mut self, history: &[u32]) {
        let cfg = &self.config;
        if !cfg.has_penalties() || history.is_empty() {
            return;
        }
        let n = self.candidates.len();
        if self.counts.len() < n {
            self.counts.resize(n, 0);
        }
        let window = &history[history.len().saturating_sub(cfg.repeat_last_n)..];
        for &t in window.iter().filter(|&&t| (t as usize) < n) {
            self.counts[t as usize] += 1;
        }
        for &t in window.iter().filter(|&&t| (t as usize) < n) {
            let count = std::mem::take(&mut self.counts[t as usize]);
            if count == 0 {
                continue; // already penalised (a repeated id)
            }
            let logit = &mut self.candidates[t as usize].1;
            if *logit <= 0.0 {
                *logit *= cfg.repeat_penalty;
            } else {
                *logit /= cfg.repeat_penalty;
            }
            *logit -= count as f32 * cfg.frequency_penalty + cfg.presence_penalty;
        }
    }

    /// `probs = softmax(logit / temperature)` over the current candidates.
    fn softmax(&mut self, temperature: f32) {
        let t = temperature as f64;
        let max = self
            .candidates
            .iter()
            .map(|c| c.1)
            .fold(f32::NEG_INFINITY, f32::max) as f64;
        self.probs.clear();
        self.probs.extend(
            self.candidates
                .iter()
                .map(|c| ((c.1 as f64 - max) / t).exp()),
        );
        let sum: f64 = self.probs.iter().sum();
        if sum > 0.0 && sum.is_finite() {
            self.probs.iter_mut().for_each(|p| *p /= sum);
        } else {
            // Every candidate is -inf: fall back to a uniform choice among them.
            let uniform = 1.0 / self.probs.len() as f64;
            self.probs.iter_mut().for_each(|p| *p = uniform);
        }
    }
}

/// Highest logit, lowest id among ties.
fn greedy(candidates: &[(u32, f32)]) -> u32 {
    let mut best = candidates[0];
    for &c in &candidates[1..] {
        if c.1 > best.1 {
            best = c;
        }
    }
    best.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Defaults with every filter switched off, so each test enables just the one it checks.
    fn unfiltered() -> SamplerConfig {
        SamplerConfig {
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..SamplerConfig::default()
        }
    }

    /// llama.cpp's arithmetic: a seen token loses `count · frequency + presence`, an unseen one
    /// nothing; ids past the window (`repeat_last_n`) are not seen. Greedy choices pin each value
    /// to a threshold.
    #[test]
    fn frequency_and_presence_penalties_subtract_count_times_frequency_plus_presence() {
        let logits = [1.0f32, 0.9, 0.0, -1.0];
        let greedy_with = |frequency_penalty: f32, presence_penalty: f32, history: &[u32]| {
            let mut s = Sampler::new(SamplerConfig {
                frequency_penalty,
                presence_penalty,
                repeat_penalty: 1.0,
                ..SamplerConfig::greedy()
            });
            s.sample(&logits, history)
        };
        // Token 0 seen twice: 1.0 − 2·0.04 = 0.92 still wins; 1.0 − 2·0.06 = 0.88 loses to 0.9.
        assert_eq!(greedy_with(0.04, 0.0, &[0, 0]), 0);
        assert_eq!(greedy_with(0.06, 0.0, &[0, 0]), 1);
        // Presence counts once whatever the count: 1.0 − 0.08 = 0.92 wins, 1.0 − 0.12 loses.
        assert_eq!(greedy_with(0.0, 0.08, &[0, 0, 0]), 0);
        assert_eq!(greedy_with(0.0, 0.12, &[0]), 1);
        // Both: 1.0 − (3·0.02 + 0.03) = 0.91 wins; with presence 0.05 it is 0.89 and loses.
        assert_eq!(greedy_with(0.02, 0.03, &[0, 0, 0]), 0);
        assert_eq!(greedy_with(0.02, 0.05, &[0, 0, 0]), 1);
        // A negative penalty rewards: token 1 (0.9) + 0.2 beats token 0.
        assert_eq!(greedy_with(0.0, -0.2, &[1]), 1);
        // Unseen tokens are untouched, and so are ids past the vocabulary.
        assert_eq!(greedy_with(2.0, 2.0, &[2, 3, 99]), 0);
    }

    #[test]
    fn validate_accepts_the_defaults_and_the_range_ends_and_names_what_is_out() {
        SamplerConfig::default().validate().unwrap();
        SamplerConfig::greedy().validate().unwrap();
        let ends = SamplerConfig {
            temperature: 100.0,
            top_p: 0.0,
            min_p: 1.0,
            repeat_penalty: 0.0,
            frequency_penalty: -2.0,
            presence_penalty: 2.0,
            ..SamplerConfig::default()
        };
        ends.validate().unwrap();
        let d = SamplerConfig::default;
        for (config, param) in [
            (
                SamplerConfig {
                    temperature: -1.0,
                    ..d()
                },
                SamplingParam::Temperature,
            ),
            (
                SamplerConfig {
                    temperature: f32::NAN,
                    ..d()
                },
                SamplingParam::Temperature,
            ),
            (
                SamplerConfig {
                    temperature: f32::INFINITY,
                    ..d()
                },
                SamplingParam::Temperature,
            ),
            (SamplerConfig { top_p: 2.0, ..d() }, SamplingParam::TopP),
            (SamplerConfig { min_p: 5.0, ..d() }, SamplingParam::MinP),
            (
                SamplerConfig {
                    repeat_penalty: -3.0,
                    ..d()
                },
                SamplingParam::RepeatPenalty,
            ),
            (
                SamplerConfig {
                    repeat_penalty: f32::NAN,
                    ..d()
                },
                SamplingParam::RepeatPenalty,
            ),
            (
                SamplerConfig {
                    presence_penalty: 3.0,
                    ..d()
                },
                SamplingParam::PresencePenalty,
            ),
        ] {
            let e = config.validate().unwrap_err();
            assert_eq!(e.param, param, "{e}");
            assert!(e.message(e.param.flag()).starts_with(e.param.flag()), "{e}");
        }
    }

    /// Empirical distribution of `n` draws.
    fn histogram(config: SamplerConfig, logits: &[f32], n: usize) -> Vec<usize> {
        let mut s = Sampler::new(config);
        let mut h = vec![0; logits.len()];
        for _ in 0..n {
            h[s.sample(logits, &[]) as usize] += 1;
        }
        h
    }

    #[test]
    fn greedy_takes_argmax_lowest_index_on_ties() {
        let mut s = Sampler::new(SamplerConfig::greedy());
        assert_eq!(s.sample(&[0.5, 2.0, -1.0, 2.0], &[]), 1);
        assert_eq!(s.sample(&[f32::NAN, -3.0, -3.0], &[]), 1);
    }

    #[test]
    fn same_seed_same_tokens_other_seed_differs() {
        let logits: Vec<f32> = (0..64).map(|i| ((i * 37) % 11) as f32 * 0.3).collect();
        let run = |seed| {
            let mut s = Sampler::new(SamplerConfig {
                seed,
                temperature: 1.5,
                ..unfiltered()
            });
            (0..200).map(|_| s.sample(&logits, &[])).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn top_k_keeps_only_k_best() {
        let logits = [0.0, 1.0, 2.0, 3.0, 2.9];
        let h = histogram(
            SamplerConfig {
                top_k: 2,
                temperature: 1.0,
                ..unfiltered()
            },
            &logits,
            2000,
        );
        assert_eq!(h[0] + h[1] + h[2], 0, "{h:?}");
        assert!(h[3] > 0 && h[4] > 0);
    }

    #[test]
    fn top_p_keeps_smallest_prefix_reaching_p() {
        // Probabilities 0.5, 0.25, 0.125, 0.125: p = 0.7 needs the first two (0.75 >= 0.7).
        let logits = [4f32.ln(), 2f32.ln(), 0.0, 0.0];
        let h = histogram(
            SamplerConfig {
                top_p: 0.7,
                temperature: 1.0,
                ..unfiltered()
            },
            &logits,
            3000,
        );
        assert_eq!(h[2] + h[3], 0, "{h:?}");
        // Renormalised 2:1 between the two survivors; 3000 draws put the share within ±0.05 at > 5
        // sigma.
        let share = h[0] as f64 / 3000.0;
        assert!((share - 2.0 / 3.0).abs() < 0.05, "{share}");
    }

    #[test]
    fn min_p_drops_tokens_below_fraction_of_best() {
        // Relative probabilities 1, 0.5, 0.04: min_p 0.1 drops only the last.
        let logits = [0.0, 0.5f32.ln(), 0.04f32.ln()];
        let h = histogram(
            SamplerConfig {
                min_p: 0.1,
                temperature: 1.0,
                ..unfiltered()
            },
            &logits,
            2000,
        );
        assert_eq!(h[2], 0, "{h:?}");
        assert!(h[1] > 0);
    }

    #[test]
    fn repetition_penalty_follows_llama_cpp_sign_rule() {
        let cfg = SamplerConfig {
            repeat_penalty: 2.0,
            ..SamplerConfig::greedy()
        };
        let mut s = Sampler::new(cfg);
        // Token 0 (3.0) seen: 3.0 / 2 = 1.5 < 2.0, so token 1 wins.
        assert_eq!(s.sample(&[3.0, 2.0, -1.0], &[0]), 1);
        // Negative logits get multiplied: -0.5 * 2 = -1.0 < -0.8.
        assert_eq!(s.sample(&[-0.5, -0.8], &[0, 0]), 1);
        // Outside the window (last 1 token) the penalty does not apply.
        let mut s = Sampler::new(SamplerConfig {
            repeat_last_n: 1,
            ..cfg
        });
        assert_eq!(s.sample(&[3.0, 2.0], &[0, 1]), 0);
    }

    #[test]
    fn temperature_sharpens() {
        let logits = [1.0, 0.0];
        let cold = histogram(
            SamplerConfig {
                temperature: 0.25,
                ..unfiltered()
            },
            &logits,
            2000,
        );
        let hot = histogram(
            SamplerConfig {
                temperature: 4.0,
                ..unfiltered()
            },
            &logits,
            2000,
        );
        // Expected shares of token 0: 1/(1+e^-4) = 0.982 and 1/(1+e^-0.25) = 0.562.
        assert!(
            cold[0] > 1900 && (1000..1250).contains(&hot[0]),
            "{cold:?} {hot:?}"
        );
    }
}
