//! Speculative decoding with the model's own NextN/MTP block as the drafter ([`crate::mtp`]).
//!
//! One step, with `n` verified positions and the chosen token `s_n` not yet decoded:
//! 1. draft `k` tokens: the MTP block at MTP position `n − 1` on `(h_{n−1}, s_n)` guesses `d_1`;
//!    each further draft chains the block on its own normed output and its last guess (DeepSeek-V3
//!    / vLLM);
//! 2. verify: the main model decodes `[s_n, d_1, …, d_k]` at `n..=n + k` in one
//!    [`Decoder::forward_rows`] (every position's logits, the decode step's values bit for bit);
//! 3. accept (greedy): the sampler picks from each position's logits in order; the drafts it agrees
//!    with are kept, and its first disagreement (or the pick after the last draft) is the bonus
//!    token; (sampling): the standard speculative-sampling rule ([`Speculative::step`]);
//! 4. catch up: the MTP rows of the accepted positions are rewritten from the verified hidden
//!    states. The main cache needs nothing: the next step decodes at the first unaccepted position,
//!    which rewinds it ([`Decoder::decode`]'s contract).
//!
//! Invariant: every token handed out is the sampler's pick from the logits the main model gives for
//! the accepted sequence at that position, in order, with the same history, so with a greedy
//! sampler (temperature 0, which draws no random numbers) the output is the plain loop's token for
//! token, whatever the drafts were. Drafts only decide how many positions one step verifies. With a
//! sampling sampler the drafts are drawn from the sampler's chain on the MTP logits and the
//! acceptance rule keeps each token's distribution the sampler's (`tests/speculative_sampling.rs`
//! checks it statistically); the random stream is consumed differently, so a seed does not
//! reproduce the plain loop's tokens.

use std::borrow::BorrowMut;

use crate::decoder::{argmax, Decoder, Forward, Rows};
use crate::error::{ModelError, Result};
use crate::sampling::{Sampler, SamplerConfig};

/// Most drafts per step (`--draft-max`): DeepSeek-V3 and GLM ship one MTP block, and chaining it
/// further than a few positions only guesses worse.
pub const MAX_DRAFT: usize = 3;

/// How a generation drafts: `k` drafts per step (`1..=`[`MAX_DRAFT`]), each chosen among the
/// token ids below `vocab` only (every id when `None`). A prefix of the vocabulary is what a
/// pruned draft head computes: the lm_head's first `vocab` rows (BPE vocabularies number their
/// tokens roughly by merge order, so the frequent ones come first). The verify still reads the
/// whole vocabulary, so greedy output does not change; only acceptance can.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Drafts {
    pub k: usize,
    pub vocab: Option<usize>,
}

impl Drafts {
    /// `k` drafts per step over the whole vocabulary.
    pub fn new(k: usize) -> Drafts {
        Drafts { k, vocab: None }
    }

    /// Refuses a draft vocabulary outside `1..=vocab` (the model's).
    pub fn check_vocab(&self, vocab: usize) -> Result<()> {
        match self.vocab {
            Some(n) if !(1..=vocab).contains(&n) => Err(ModelError::Unsupported(format!(
                "a draft vocabulary of {n} tokens: the model has {vocab}, drafts choose among the \
                 first 1 to {vocab}"
            ))),
            _ => Ok(()),
        }
    }
}

/// Counts over a generation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpecStats {
    /// Verify steps run (each one [`Decoder::forward_rows`] of up to `k + 1` positions).
    pub steps: usize,
    /// Draft tokens proposed, and how many of them were accepted.
    pub drafted: usize,
    pub accepted: usize,
    /// Tokens handed out by the steps (accepted drafts plus one bonus each).
    pub emitted: usize,
}

impl SpecStats {
    /// Accepted share of the drafted tokens (0 when none were drafted).
    pub fn acceptance(&self) -> f64 {
        if self.drafted == 0 {
            0.0
        } else {
            self.accepted as f64 / self.drafted as f64
        }
    }

    /// Tokens per verify step (0 before the first step).
    pub fn tokens_per_step(&self) -> f64 {
        if self.steps == 0 {
            0.0
        } else {
            self.emitted as f64 / self.steps as f64
        }
    }
}

/// Generation with MTP drafts over one decoder; `S` is the sampler, borrowed or owned.
pub struct Speculative<'a, 'f, S = &'a mut Sampler> {
    dec: &'a mut (dyn Decoder + 'f),
    sampler: S,
    k: usize,
    max_ctx: usize,
    /// Verified main positions: `0..n` hold the accepted sequence.
    n: usize,
    /// The prompt and every token chosen so far; the last is `s_n`, chosen but not yet decoded.
    history: Vec<u32>,
    /// The main model's final hidden state at `n − 1`.
    h_last: Vec<f32>,
    /// MTP rows `0..mtp_valid` hold the block's latent for verified `(h_j, s_{j+1})`.
    mtp_valid: usize,
    /// Tokens chosen by the last call, in order.
    fresh: Vec<u32>,
    /// A greedy sampler (temperature 0): drafts are the MTP block's argmax and acceptance is
    /// equality.
    greedy: bool,
    /// Drafts are chosen among ids `0..draft_vocab` ([`Drafts::vocab`]).
    draft_vocab: usize,
    stats: SpecStats,
}

impl<'a, 'f, S: BorrowMut<Sampler>> Speculative<'a, 'f, S> {
    /// Checks that `dec` can draft, prefills `prompt` at `0..` and picks the first token
    /// ([`Speculative::fresh`]). `k` drafts per step, `1..=`[`MAX_DRAFT`]; positions stay below
    /// `max_ctx` (the decoder's context).
    pub fn start(
        dec: &'a mut (dyn Decoder + 'f),
        sampler: S,
        prompt: &[u32],
        k: usize,
        max_ctx: usize,
    ) -> Result<Self> {
        let vocab = dec.config().vocab;
        Self::start_among(dec, sampler, prompt, (k, vocab), max_ctx)
    }

    /// [`Speculative::start`] with drafts among the first `draft_vocab` ids, refused past the
    /// rows the decoder's MTP head computes ([`Decoder::mtp_head_rows`]).
    fn start_among(
        dec: &'a mut (dyn Decoder + 'f),
        mut sampler: S,
        prompt: &[u32],
        (k, draft_vocab): (usize, usize),
        max_ctx: usize,
    ) -> Result<Self> {
        if let Some(rows) = dec.mtp_head_rows().filter(|&r| draft_vocab > r) {
            return Err(ModelError::Unsupported(format!(
                "drafts among the first {draft_vocab} token ids, but this decoder's NextN/MTP head \
                 computes only the first {rows} (it was loaded for --draft-vocab {rows}); draft \
                 among at most {rows}"
            )));
        }
        if !(1..=MAX_DRAFT).contains(&k) {
            return Err(ModelError::Unsupported(format!(
                "{k} drafts per step: speculative decoding drafts 1 to {MAX_DRAFT}"
            )));
        }
        let t = sampler.borrow_mut().config().temperature;
        let greedy = t.is_nan() || t <= 0.0;
        dec.mtp_ready()?;
        let vocab = dec.config().vocab;
        let fwd = dec.forward_rows(prompt, 0, Rows::Last)?;
        let mut history = prompt.to_vec();
        let first = sampler
            .borrow_mut()
            .sample(fwd.last_logits(vocab), &history);
        history.push(first);
        let m = prompt.len();
        for j in 0..m - 1 {
            dec.mtp_step(fwd.hidden_at(j), prompt[j + 1], j)?;
        }
        Ok(Speculative {
            h_last: fwd.hidden_at(m - 1).to_vec(),
            dec,
            sampler,
            k,
            max_ctx,
            n: m,
            history,
            mtp_valid: m - 1,
            fresh: vec![first],
            greedy,
            draft_vocab,
            stats: SpecStats::default(),
        })
    }

    /// [`Speculative::start`] with [`Drafts`]: `drafts.vocab`, when given, must be in
    /// `1..=vocab`.
    pub fn start_with(
        dec: &'a mut (dyn Decoder + 'f),
        sampler: S,
        prompt: &[u32],
        drafts: Drafts,
        max_ctx: usize,
    ) -> Result<Self> {
        let vocab = dec.config().vocab;
        drafts.check_vocab(vocab)?;
        let among = drafts.vocab.unwrap_or(vocab);
        Self::start_among(dec, sampler, prompt, (drafts.k, among), max_ctx)
    }

    /// The tokens the last call chose, in order.
    pub fn fresh(&self) -> &[u32] {
        &self.fresh
    }

    pub fn stats(&self) -> SpecStats {
        self.stats
    }

    /// Positions decoded so far, plus the chosen token not yet decoded: the next step's first
    /// position is `next_pos()`.
    pub fn next_pos(&self) -> usize {
        self.n
    }

    /// One draft-and-verify step choosing 1 to `k + 1` tokens ([`Speculative::fresh`]). `want`, at
    /// least one, is how many more tokens the caller can use: a step drafts at most `want − 1`.
    /// Refused when the next position is outside the context.
    pub fn step(&mut self, want: usize) -> Result<&[u32]> {
        let n = self.n;
        if n >= self.max_ctx {
            return Err(ModelError::PositionOutOfRange {
                pos: n,
                max_ctx: self.max_ctx,
            });
        }
        let vocab = self.dec.config().vocab;
        let k = self.k.min(want.saturating_sub(1)).min(self.max_ctx - 1 - n);
        let next = *self.history.last().expect("start chose a token");
        let mut tokens = Vec::with_capacity(k + 1);
        tokens.push(next);
        // Sampling: each draft's distribution q_i (the sampler's chain on the MTP logits).
        let mut q: Vec<Vec<f64>> = Vec::new();
        if k > 0 {
            self.catch_up(&[], n - 1)?;
            let mut h = self.h_last.clone();
            for i in 0..k {
                self.dec.mtp_step(&h, tokens[i], n - 1 + i)?;
                let logits = self.dec.mtp_logits()?;
                let d = if self.greedy {
                    argmax(&logits[..self.draft_vocab])
                } else {
                    // The draft's context: the history, then the drafts before it.
                    let ctx: Vec<u32> = self.history.iter().chain(&tokens[1..]).copied().collect();
                    // Ids past the draft vocabulary get no mass (q stays vocabulary-long, so the
                    // residual `p − q` keeps their `p`).
                    let masked;
                    let logits = if self.draft_vocab < vocab {
                        let mut m = logits.to_vec();
                        m[self.draft_vocab..].fill(f32::NEG_INFINITY);
                        masked = m;
                        &masked[..]
                    } else {
                        logits
                    };
                    let mut qi = Vec::new();
                    self.sampler
                        .borrow_mut()
                        .distribution(logits, &ctx, &mut qi);
                    let d = self
                        .sampler
                        .borrow_mut()
                        .draw_weighted(&qi)
                        .ok_or_else(no_mass)?;
                    q.push(qi);
                    d
                };
                tokens.push(d);
                if i + 1 < k {
                    h.copy_from_slice(self.dec.mtp_hidden().ok_or_else(no_hidden)?);
                }
            }
            // Row n − 1 came from the verified h_{n−1}; the chained rows after it are rewritten
            // below.
            self.mtp_valid = n;
        }
        // A greedy verify without penalties needs only each position's argmax (a graph that takes
        // it on the device copies back one token per position, not the logits).
        let rows = if self.greedy && !self.sampler.borrow_mut().config().has_penalties() {
            Rows::Argmax
        } else {
            Rows::All
        };
        let fwd = self.dec.forward_rows(&tokens, n, rows)?;
        self.fresh.clear();
        let accepted = if self.greedy {
            self.accept_greedy(&tokens, &fwd)
        } else {
            self.accept_sampled(&tokens, &q, |j| fwd.logits_at(j, vocab))?
        };
        self.stats.steps += 1;
        self.stats.drafted += k;
        self.stats.accepted += accepted;
        self.stats.emitted += accepted + 1;
        // Positions n..=n + accepted now hold verified tokens; their hidden states feed the MTP
        // rows.
        let hidden: Vec<&[f32]> = (0..=accepted).map(|j| fwd.hidden_at(j)).collect();
        self.catch_up(&hidden[..accepted], n + accepted)?;
        self.h_last = hidden[accepted].to_vec();
        self.n = n + accepted + 1;
        Ok(&self.fresh)
    }

    /// Greedy acceptance: the pick at each position in order (the verify's argmax, or the
    /// sampler's on its logits), kept while it is the draft. Returns the accepted drafts; the
    /// picks are in `fresh` and `history`.
    fn accept_greedy(&mut self, tokens: &[u32], fwd: &Forward) -> usize {
        let (k, vocab) = (tokens.len() - 1, self.dec.config().vocab);
        let mut accepted = 0;
        for j in 0..=k {
            let y = match fwd.argmax.get(j) {
                Some(&y) => y,
                None => (self.sampler.borrow_mut()).sample(fwd.logits_at(j, vocab), &self.history),
            };
            self.history.push(y);
            self.fresh.push(y);
            if j < k && y == tokens[j + 1] {
                accepted += 1;
            } else {
                break;
            }
        }
        accepted
    }

    /// Speculative sampling (Leviathan et al. 2023; Chen et al. 2023): draft `d_j ~ q_j` is kept
    /// with probability `min(1, p_j(d_j) / q_j(d_j))`, where `p_j` is the sampler's distribution at
    /// the position; the first rejected one is replaced by a draw from `norm(max(0, p_j − q_j))`,
    /// and when every draft is kept a bonus token is drawn from `p_k`. Each token handed out is
    /// then distributed exactly as the sampler's draw from `p` would be.
    fn accept_sampled<'l>(
        &mut self,
        tokens: &[u32],
        q: &[Vec<f64>],
        logits: impl Fn(usize) -> &'l [f32],
    ) -> Result<usize> {
        let k = tokens.len() - 1;
        let mut p = Vec::new();
        for j in 0..=k {
            self.sampler
                .borrow_mut()
                .distribution(logits(j), &self.history, &mut p);
            let y = if j < k {
                let d = tokens[j + 1] as usize;
                // q_j(d) > 0: d was drawn from q_j.
                if self.sampler.borrow_mut().uniform() * q[j][d] < p[d] {
                    self.history.push(d as u32);
                    self.fresh.push(d as u32);
                    continue;
                }
                let residual: Vec<f64> =
                    p.iter().zip(&q[j]).map(|(a, b)| (a - b).max(0.0)).collect();
                // All zero only when p == q up to rounding, where a rejection has probability ~0: p
                // then.
                match self.sampler.borrow_mut().draw_weighted(&residual) {
                    Some(y) => y,
                    None => self
                        .sampler
                        .borrow_mut()
                        .draw_weighted(&p)
                        .ok_or_else(no_mass)?,
                }
            } else {
                self.sampler
                    .borrow_mut()
                    .draw_weighted(&p)
                    .ok_or_else(no_mass)?
            };
            self.history.push(y);
            self.fresh.push(y);
            return Ok(j);
        }
        unreachable!("the loop returns at j = k at the latest")
    }

    /// Rewrites MTP rows `mtp_valid..end` from verified hidden states: row `j` reads `h_j`
    /// (`h_last` for `n − 1`, `hidden[j − n]` after it) and the token at `j + 1`. Rows before `n −
    /// 1` are always valid already (each step leaves `mtp_valid >= n − 1`).
    fn catch_up(&mut self, hidden: &[&[f32]], end: usize) -> Result<()> {
        let n = self.n;
        debug_assert!(self.mtp_valid + 1 >= n);
        // `history[j]` is the token at position j (the prompt, then every choice in order).
        for j in self.mtp_valid..end {
            let h = if j + 1 == n {
                self.h_last.as_slice()
            } else {
                hidden[j - n]
            };
            self.dec.mtp_step(h, self.history[j + 1], j)?;
        }
        self.mtp_valid = self.mtp_valid.max(end);
        Ok(())
    }
}

/// Greedy decoding without drafts as `ingot run` decodes, from a reset decoder: the prompt
/// prefilled ([`Decoder::prefill_last`]), then one decode step a token; the first `n` tokens
/// after `prompt`. `first` is called once the first token is chosen (a bench starts its clock
/// there, past the prefill).
pub fn greedy_plain(
    dec: &mut dyn Decoder,
    prompt: &[u32],
    n: usize,
    mut first: impl FnMut(),
) -> Result<Vec<u32>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    dec.reset();
    let mut sampler = Sampler::new(SamplerConfig::greedy());
    let mut history = prompt.to_vec();
    let last = dec.prefill_last(prompt, 0)?;
    history.push(sampler.sample(&last, &history));
    first();
    while history.len() < prompt.len() + n {
        let pos = history.len() - 1;
        let logits = dec.decode(history[pos], pos)?;
        let next = sampler.sample(logits, &history);
        history.push(next);
    }
    Ok(history[prompt.len()..].to_vec())
}

/// [`greedy_plain`] with `drafts` ([`Speculative`], a context of `ctx` positions): the same
/// tokens (exactly `n`: a step hands out at most what is asked), and the drafts' counts. `first`
/// as for [`greedy_plain`].
pub fn greedy_drafted(
    dec: &mut dyn Decoder,
    prompt: &[u32],
    (n, drafts, ctx): (usize, Drafts, usize),
    mut first: impl FnMut(),
) -> Result<(Vec<u32>, SpecStats)> {
    if n == 0 {
        return Ok((Vec::new(), SpecStats::default()));
    }
    dec.reset();
    let mut sampler = Sampler::new(SamplerConfig::greedy());
    let mut spec = Speculative::start_with(dec, &mut sampler, prompt, drafts, ctx)?;
    let mut out = spec.fresh().to_vec();
    first();
    while out.len() < n {
        let fresh = spec.step(n - out.len())?;
        out.extend_from_slice(fresh);
    }
    Ok((out, spec.stats()))
}

fn no_mass() -> ModelError {
    ModelError::Unsupported(
        "the sampler's distribution has no mass (every logit is NaN or -inf)".into(),
    )
}

fn no_hidden() -> ModelError {
    ModelError::Unsupported("the backend ran the MTP block but gave no hidden state".into())
}
