//! The NextN/MTP block (DeepSeek-V3's multi-token prediction, GLM-4.5/4.7's NextN) as a drafter:
//! what every backend's implementation shares.
//!
//! The block is the first of the file's `nextn_predict_layers` blocks, numbered `n_layer` (block
//! `blk.{n_layer}`). At MTP position `i` it reads the main model's final hidden state `h_i` (after
//! `output_norm`: the vector the lm_head multiplies, as `scripts/train/train.py` trains it and
//! vLLM's `deepseek_mtp` feeds it) and the token `t_{i+1}`, and guesses `t_{i+2}`:
//!
//! ```text
//! x  = eh_proj · [enorm(embed(t_{i+1})) ; hnorm(h_i)]      (concatenation: embedding half first)
//! x  = a full decoder layer on x at rope position i, attending over the block's own latent cache
//! g  = shared_head_norm(x)
//! logits = head · g
//! ```
//!
//! `embed` is `nextn.embed_tokens` and `head` is `nextn.shared_head_head` when the file has them,
//! else the model's own `token_embd` and output matrix (DeepSeek-V3's converters and train.py share
//! them). A chained draft (the second and later of one step) feeds `g` back as the next position's
//! hidden state: the block was trained on `output_norm`-normed inputs, and `g` is its own head's
//! normed input.
//!
//! Invariant: MTP cache row `i` holds the block's latent for `(h_i, t_{i+1})`; a row written from a
//! draft hidden state (a chained draft) is rewritten from the verified one before any later row
//! reads it ([`crate::speculative`]).

use ingot_gguf::GgufFile;

use crate::config::ModelConfig;
use crate::error::{ModelError, Result};
use crate::tensors::layer_name;

/// Names of the NextN-only tensors of block `il`.
pub(crate) struct NextNNames {
    pub eh_proj: String,
    pub enorm: String,
    pub hnorm: String,
    pub shared_head_norm: String,
    pub embed_tokens: String,
    pub shared_head_head: String,
}

impl NextNNames {
    pub fn new(il: usize) -> Self {
        let n = |s: &str| layer_name(il, &format!("nextn.{s}.weight"));
        NextNNames {
            eh_proj: n("eh_proj"),
            enorm: n("enorm"),
            hnorm: n("hnorm"),
            shared_head_norm: n("shared_head_norm"),
            embed_tokens: n("embed_tokens"),
            shared_head_head: n("shared_head_head"),
        }
    }
}

/// The block the drafter runs (`n_layer`), or why the file has none to run: no NextN block
/// declared, or its tensors stripped (llama.cpp loads such files; shapes of present ones were
/// checked at config).
pub(crate) fn drafter_block(file: &GgufFile, c: &ModelConfig) -> Result<usize> {
    if c.n_nextn == 0 {
        return Err(ModelError::Unsupported(
            "the model has no NextN/MTP block (nextn_predict_layers is 0), so it cannot draft"
                .into(),
        ));
    }
    let il = c.n_layer;
    let names = NextNNames::new(il);
    for name in [
        &names.eh_proj,
        &names.enorm,
        &names.hnorm,
        &names.shared_head_norm,
        &layer_name(il, "attn_norm.weight"),
        &layer_name(il, "ffn_norm.weight"),
    ] {
        if file.header().tensor(name).is_none() {
            return Err(ModelError::Unsupported(format!(
                "the model declares {} NextN/MTP block(s) but the file lacks {name}: it was stripped, so it cannot draft",
                c.n_nextn
            )));
        }
    }
    Ok(il)
}

/// Whether the file has tensor `name` (an optional NextN tensor).
pub(crate) fn has(file: &GgufFile, name: &str) -> bool {
    file.header().tensor(name).is_some()
}
