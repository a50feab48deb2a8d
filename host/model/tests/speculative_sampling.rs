//! Speculative sampling keeps the sampler's output distribution: a statistical test on a small
//! vocabulary.
//!
//! The decoder is a mock Markov chain (5 tokens: the logits of the next token depend on the current
//! one only) and its "MTP block" a different chain over the token after next, so drafts are often
//! but not always accepted. Sequences of 4 tokens after a one-token prompt are drawn 20,000 times
//! with drafts (k = 1, 2, 3) and compared with the chain's exact distribution by a chi-square test;
//! the seeds are fixed, so the test is deterministic.

use ingot_gguf::GgufFile;
use ingot_model::speculative::{Drafts, Speculative};
use ingot_model::{Decoder, ModelConfig, ModelError, Sampler, SamplerConfig};

const V: usize = 5;
const LEN: usize = 4;
const RUNS: u64 = 20_000;

/// Next-token logits after token `t` (the target chain).
const TARGET: [[f32; V]; V] = [
    [1.0, 0.2, -0.5, 0.0, 0.7],
    [0.0, 1.5, 0.3, -1.0, 0.2],
    [0.4, 0.4, 0.4, 0.9, -0.3],
    [-0.2, 0.1, 1.2, 0.5, 0.0],
    [0.8, -0.6, 0.0, 0.3, 1.1],
];
/// The drafter's logits for the token after `t` (deliberately not the target's).
const DRAFT: [[f32; V]; V] = [
    [0.5, 0.5, 0.0, 0.2, 0.9],
    [0.1, 1.0, 0.8, -0.5, 0.0],
    [0.0, 0.9, 0.2, 0.6, 0.1],
    [0.3, -0.3, 0.8, 1.0, -0.2],
    [1.2, 0.0, 0.4, 0.0, 0.6],
];

struct Chain {
    config: ModelConfig,
    filled: usize,
    mtp_filled: usize,
    hidden: [f32; 1],
    mtp_token: usize,
}

impl Decoder for Chain {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn decode(&mut self, token: u32, pos: usize) -> Result<&[f32], ModelError> {
        assert!(pos <= self.filled, "position {pos} past {}", self.filled);
        self.filled = pos + 1;
        self.hidden = [token as f32];
        Ok(&TARGET[token as usize])
    }

    fn reset(&mut self) {
        self.filled = 0;
        self.mtp_filled = 0;
    }

    fn hidden(&self) -> Option<&[f32]> {
        Some(&self.hidden)
    }

    fn mtp_ready(&self) -> Result<(), ModelError> {
        Ok(())
    }

    fn mtp_step(&mut self, _: &[f32], token: u32, pos: usize) -> Result<(), ModelError> {
        assert!(
            pos <= self.mtp_filled,
            "MTP position {pos} past {}",
            self.mtp_filled
        );
        self.mtp_filled = pos + 1;
        self.mtp_token = token as usize;
        Ok(())
    }

    fn mtp_logits(&mut self) -> Result<&[f32], ModelError> {
        Ok(&DRAFT[self.mtp_token])
    }

    fn mtp_hidden(&self) -> Option<&[f32]> {
        Some(&self.hidden)
    }
}

fn chain() -> Chain {
    // Any real config; only vocab and n_embd are read through the trait.
    let file = GgufFile::open(&ingot_testdata::golden_model("tiny-glm-f32")).unwrap();
    let mut config = ModelConfig::from_gguf(file.header()).unwrap();
    config.vocab = V;
    config.n_embd = 1;
    Chain {
        config,
        filled: 0,
        mtp_filled: 0,
        hidden: [0.0],
        mtp_token: 0,
    }
}

fn softmax(l: &[f32; V]) -> [f64; V] {
    let max = l.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
    let e: Vec<f64> = l.iter().map(|&v| (v as f64 - max).exp()).collect();
    let s: f64 = e.iter().sum();
    std::array::from_fn(|i| e[i] / s)
}

/// Index of a sequence of LEN tokens.
fn cell(seq: &[u32]) -> usize {
    seq.iter().fold(0, |a, &t| a * V + t as usize)
}

/// Upper `p = 1e-4` point of chi-square with `df` degrees of freedom (Wilson–Hilferty, z = 3.719).
fn chi2_critical(df: f64) -> f64 {
    let z = 3.719;
    df * (1.0 - 2.0 / (9.0 * df) + z * (2.0 / (9.0 * df)).sqrt()).powi(3)
}

#[test]
fn drafted_sampling_keeps_the_output_distribution() {
    let prompt = [0u32];
    // Exact probability of each sequence.
    let n_cells = V.pow(LEN as u32);
    let mut exact = vec![0.0; n_cells];
    for (c, e) in exact.iter_mut().enumerate() {
        let mut prev = prompt[0] as usize;
        let mut p = 1.0;
        for i in (0..LEN).rev() {
            let t = c / V.pow(i as u32) % V;
            p *= softmax(&TARGET[prev])[t];
            prev = t;
        }
        *e = p;
    }
    let config = SamplerConfig {
        temperature: 1.0,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        repeat_penalty: 1.0,
        ..SamplerConfig::default()
    };
    let mut dec = chain();
    // The last case drafts among the first V − 1 ids only: the last id is never drafted and
    // reaches the output only through the residual of a rejection (or the bonus draw).
    for (k, vocab) in [(1, None), (2, None), (3, None), (2, Some(V - 1))] {
        let mut counts = vec![0u64; n_cells];
        let (mut drafted, mut accepted) = (0, 0);
        for run in 0..RUNS {
            dec.reset();
            let mut sampler = Sampler::new(SamplerConfig {
                seed: run + 1_000_000 * k as u64,
                ..config
            });
            let drafts = Drafts { k, vocab };
            let mut spec =
                Speculative::start_with(&mut dec, &mut sampler, &prompt, drafts, 64).unwrap();
            let mut out = spec.fresh().to_vec();
            while out.len() < LEN {
                let fresh = spec.step(LEN - out.len()).unwrap();
                out.extend_from_slice(fresh);
            }
            assert_eq!(out.len(), LEN);
            counts[cell(&out)] += 1;
            drafted += spec.stats().drafted;
            accepted += spec.stats().accepted;
        }
        // Cells expected at least 5 times each, the rest pooled into one.
        let (mut chi2, mut cells, mut pooled_e, mut pooled_o) = (0.0, 0, 0.0, 0.0);
        for (&o, &p) in counts.iter().zip(&exact) {
            let e = p * RUNS as f64;
            if e >= 5.0 {
                chi2 += (o as f64 - e).powi(2) / e;
                cells += 1;
            } else {
                pooled_e += e;
                pooled_o += o as f64;
            }
        }
        if pooled_e > 0.0 {
            chi2 += (pooled_o - pooled_e).powi(2) / pooled_e;
            cells += 1;
        }
        let critical = chi2_critical((cells - 1) as f64);
        eprintln!(
            "k={k} vocab {vocab:?}: chi2 {chi2:.1} over {cells} cells (critical {critical:.1} at p = 1e-4), acceptance {:.3}",
            accepted as f64 / drafted as f64
        );
        // Both branches ran: drafts kept and drafts replaced from the residual.
        assert!(
            accepted > 0 && accepted < drafted,
            "k={k}: {accepted} of {drafted}"
        );
        assert!(
            chi2 < critical,
            "k={k}: drafted sampling's sequences differ from the chain's distribution (chi2 {chi2:.1} > {critical:.1})"
        );
    }
}
