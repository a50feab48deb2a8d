//! The interface every backend implements, and the argument checks they share.

use crate::config::ModelConfig;
use crate::error::{ModelError, Result};

/// A single-sequence autoregressive decoder with its own latent KV cache.
pub trait Decoder {
    fn config(&self) -> &ModelConfig;

    /// Runs `token` at `pos` and returns the logits (length `vocab`). `pos` may be at most the
    /// number of cached positions (appending) or smaller (rewinding: later positions are
    /// forgotten).
    fn decode(&mut self, token: u32, pos: usize) -> Result<&[f32]>;

    /// Forgets every cached position.
    fn reset(&mut self);

    /// Feeds `tokens` at `start_pos..` and returns the last position's logits (what generation
    /// needs). A backend with a batched prefill overrides this; the default feeds the tokens one by
    /// one.
    fn prefill_last(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>> {
        let Some((&last, rest)) = tokens.split_last() else {
            return Err(ModelError::EmptyPrompt);
        };
        for (i, &t) in rest.iter().enumerate() {
            self.decode(t, start_pos + i)?;
        }
        Ok(self.decode(last, start_pos + rest.len())?.to_vec())
    }

    /// The routing of the last [`Decoder::decode`]: for each MoE decoding layer in order (NextN/MTP
    /// blocks are not included), `n_expert_used` `(expert, weight)` pairs in routing order. `None`
    /// when this backend does not record it.
    fn routing(&self) -> Option<&[(u32, f32)]> {
        None
    }

    /// Feeds `tokens` at `start_pos..` one by one and returns the logits of every position.
    fn prefill(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<Vec<f32>>> {
        tokens
            .iter()
            .enumerate()
            .map(|(i, &t)| self.decode(t, start_pos + i).map(<[f32]>::to_vec))
            .collect()
    }

    /// The final hidden state of the last [`Decoder::decode`] (`n_embd` values, after
    /// `output_norm`: the vector the lm_head multiplies, which the NextN/MTP block reads). `None`
    /// when this backend does not expose it.
    fn hidden(&self) -> Option<&[f32]> {
        None
    }

    /// Feeds `tokens` at `start_pos..` and returns every position's final hidden state with the
    /// logits of every position ([`Rows::All`]: the speculative verify step) or of the last
    /// ([`Rows::Last`]: a prompt). With [`Rows::All`] the values are [`Decoder::decode`]'s one by
    /// one, bit for bit; with [`Rows::Last`] they are [`Decoder::prefill_last`]'s (a backend that
    /// overrides one overrides both). The default decodes one by one.
    fn forward_rows(&mut self, tokens: &[u32], start_pos: usize, rows: Rows) -> Result<Forward> {
        forward_by_decode(self, tokens, start_pos, rows)
    }

    /// Whether [`Decoder::mtp_step`] can run: `Err` names why not (a model without a NextN/MTP
    /// block, a file stripped of its tensors, a backend that does not run it).
    fn mtp_ready(&self) -> Result<()> {
        Err(no_mtp_backend())
    }

    /// Runs the first NextN/MTP block at MTP position `pos` on the main model's final hidden state
    /// `hidden` at `pos` and the token at `pos + 1`, writing the block's own cache row `pos` (at
    /// most the number of MTP rows held; smaller rewinds, as [`Decoder::decode`]). Its logits (a
    /// guess at the token at `pos + 2`) come from [`Decoder::mtp_logits`]; its output, normed by
    /// `shared_head_norm`, from [`Decoder::mtp_hidden`].
    fn mtp_step(&mut self, hidden: &[f32], token: u32, pos: usize) -> Result<()> {
        let _ = (hidden, token, pos);
        Err(no_mtp_backend())
    }

    /// The lm_head (`shared_head_head`, or the model's output matrix) on the last
    /// [`Decoder::mtp_step`]'s output: `vocab` values, of which only the first
    /// [`Decoder::mtp_head_rows`] hold logits when the head is pruned.
    fn mtp_logits(&mut self) -> Result<&[f32]> {
        Err(no_mtp_backend())
    }

    /// `Some(n)` when the NextN/MTP head computes only the first `n < vocab` logits (a decoder
    /// loaded for drafts among the first `n` ids); `None`: all of them.
    fn mtp_head_rows(&self) -> Option<usize> {
        None
    }

    /// The last [`Decoder::mtp_step`]'s output after `shared_head_norm` (`n_embd` values): the
    /// hidden state a chained draft feeds back into the block.
    fn mtp_hidden(&self) -> Option<&[f32]> {
        None
    }
}

/// [`Decoder::forward_rows`] by [`Decoder::decode`], one position at a time: every position's
/// hidden state, and the logits of every position ([`Rows::All`]), of the last, or their argmax
/// ([`Rows::Argmax`]). The trait's default, and the verify of the executors that have no batched
/// one.
pub fn forward_by_decode<D: Decoder + ?Sized>(
    dec: &mut D,
    tokens: &[u32],
    start_pos: usize,
    rows: Rows,
) -> Result<Forward> {
    if tokens.is_empty() {
        return Err(ModelError::EmptyPrompt);
    }
    let (d, vocab) = (dec.config().n_embd, dec.config().vocab);
    let mut out = Forward {
        n: tokens.len(),
        hidden: Vec::with_capacity(tokens.len() * d),
        logits: Vec::with_capacity(vocab * if rows == Rows::All { tokens.len() } else { 1 }),
        argmax: Vec::new(),
    };
    for (i, &t) in tokens.iter().enumerate() {
        let logits = dec.decode(t, start_pos + i)?;
        match rows {
            Rows::All => out.logits.extend_from_slice(logits),
            Rows::Last if i + 1 == tokens.len() => out.logits.extend_from_slice(logits),
            Rows::Last => {}
            Rows::Argmax => out.argmax.push(argmax(logits)),
        }
        let h = dec.hidden().ok_or_else(|| {
            ModelError::Unsupported(
                "no final hidden state after a decode step: the backend keeps it only while it \
                 can run the NextN/MTP block"
                    .into(),
            )
        })?;
        out.hidden.extend_from_slice(h);
    }
    Ok(out)
}

/// Which positions' logits [`Decoder::forward_rows`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    All,
    Last,
    /// Every position's [`argmax`] instead of its logits (a greedy verify without penalties: a
    /// backend whose graph takes the argmax on the device copies back one token per position).
    Argmax,
}

/// What [`Decoder::forward_rows`] returns for `n` positions.
#[derive(Debug, Clone, PartialEq)]
pub struct Forward {
    pub n: usize,
    /// `n × n_embd`, position-major: each position's final hidden state (after `output_norm`).
    pub hidden: Vec<f32>,
    /// `n × vocab` ([`Rows::All`]), `vocab` ([`Rows::Last`]), empty ([`Rows::Argmax`]).
    pub logits: Vec<f32>,
    /// Each position's [`argmax`] with [`Rows::Argmax`], empty otherwise.
    pub argmax: Vec<u32>,
}

impl Forward {
    /// Position `i`'s hidden state.
    pub fn hidden_at(&self, i: usize) -> &[f32] {
        let d = self.hidden.len() / self.n;
        &self.hidden[i * d..(i + 1) * d]
    }

    /// Position `i`'s logits of a [`Rows::All`] forward.
    pub fn logits_at(&self, i: usize, vocab: usize) -> &[f32] {
        &self.logits[i * vocab..(i + 1) * vocab]
    }

    /// The last position's logits (either kind).
    pub fn last_logits(&self, vocab: usize) -> &[f32] {
        &self.logits[self.logits.len() - vocab..]
    }

    /// A [`Rows::All`] forward as [`Rows::Argmax`] returns it: each position's [`argmax`] on the
    /// host, the logits dropped.
    pub fn into_argmax(mut self, vocab: usize) -> Forward {
        self.argmax = self.logits.chunks_exact(vocab).map(argmax).collect();
        self.logits = Vec::new();
        self
    }
}

/// Highest logit, lowest id among ties, NaN never winning: the greedy sampler's pick without
/// penalties, and the device argmax kernel's (`kernels/device/src/argmax.rs`) except in a row
/// with no number above −inf (the sampler then keeps id 0, the kernel ranks NaN below −inf).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = (0u32, f32::NEG_INFINITY);
    for (i, &l) in logits.iter().enumerate() {
        if l > best.1 {
            best = (i as u32, l);
        }
    }
    best.0
}

fn no_mtp_backend() -> ModelError {
    ModelError::Unsupported(
        "this backend does not run the NextN/MTP block (the cpu, oracle, sim and cuda backends do)"
            .into(),
    )
}

/// Elements of one layer's latent cache for `max_ctx` positions, rejecting sizes that cannot be
/// meant.
pub(crate) fn cache_len(c: &ModelConfig, max_ctx: usize) -> Result<usize> {
    let err = |reason: String| ModelError::ContextSize { max_ctx, reason };
    if max_ctx == 0 {
        return Err(err("must be at least 1".into()));
    }
    if max_ctx > c.n_ctx_train {
        return Err(err(format!(
            "exceeds the training context {}",
            c.n_ctx_train
        )));
    }
    max_ctx
        .checked_mul(c.cache_row())
        .ok_or_else(|| err("cache size overflows".into()))
}

/// [`check_step`] for `tokens` fed at `start_pos..` in one call (a prompt chunk, a verify): token
/// `i > 0` follows token `i − 1`, so only the first may rewind. Nothing is run by the caller
/// before every position passed.
pub fn check_span(
    c: &ModelConfig,
    max_ctx: usize,
    filled: usize,
    tokens: &[u32],
    start_pos: usize,
) -> Result<()> {
    for (i, &t) in tokens.iter().enumerate() {
        let filled = if i == 0 { filled } else { start_pos + i };
        check_step(c, max_ctx, filled, t, start_pos + i)?;
    }
    Ok(())
}

/// Rejects a token outside the vocabulary or a position outside the context or past the cache:
/// the argument checks every [`Decoder`] makes before a step (`max_ctx` positions fit the cache,
/// `filled` of them hold rows; `pos == filled` appends, `pos < filled` rewinds).
pub fn check_step(
    c: &ModelConfig,
    max_ctx: usize,
    filled: usize,
    token: u32,
    pos: usize,
) -> Result<()> {
    if token as usize >= c.vocab {
        return Err(ModelError::TokenOutOfRange {
            token,
            vocab: c.vocab,
        });
    }
    if pos >= max_ctx {
        return Err(ModelError::PositionOutOfRange { pos, max_ctx });
    }
    if pos > filled {
        return Err(ModelError::PositionGap { pos, filled });
    }
    Ok(())
}
