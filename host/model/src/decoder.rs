//! The interface every backend implements, and the argument checks they share.

use crate::config::ModelConfig;
use crate::error::{ModelError, Result};

/// A single-sequence autoregressive decoder with its own latent KV cache.
pub trait Decoder {
    fn config(&self) -> &ModelConfig;

    /// Runs `token` at `pos` and returns the logits (length `vocab`). `pos` may be at most the number of cached
    /// positions (appending) or smaller (rewinding: later positions are forgotten).
    fn decode(&mut self, token: u32, pos: usize) -> Result<&[f32]>;

    /// Forgets every cached position.
    fn reset(&mut self);

    /// Feeds `tokens` at `start_pos..` and returns the last position's logits (what generation needs). A
    /// backend with a batched prefill overrides this; the default feeds the tokens one by one.
    fn prefill_last(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>> {
        let Some((&last, rest)) = tokens.split_last() else {
            return Err(ModelError::EmptyPrompt);
        };
        for (i, &t) in rest.iter().enumerate() {
            self.decode(t, start_pos + i)?;
        }
        Ok(self.decode(last, start_pos + rest.len())?.to_vec())
    }

    /// The routing of the last [`Decoder::decode`]: for each MoE decoding layer in order (NextN/MTP blocks are
    /// not run), `n_expert_used` `(expert, weight)` pairs in routing order. `None` when this backend does not
    /// record it.
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
}

/// Elements of one layer's latent cache for `max_ctx` positions, rejecting sizes that cannot be meant.
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
