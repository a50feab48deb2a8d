//! The names of the deepseek2 GGUF layout's tensors (docs/deepseek2-model.md#tensors): what the
//! configuration, the shape check and every backend look tensors up by. Depends on nothing, so
//! both `config` and `tensors` can name tensors without depending on each other.

/// The token embedding table, `{n_embd, vocab}`.
pub const TOKEN_EMBD: &str = "token_embd.weight";
/// The final RMS norm's weight, `{n_embd}`.
pub const OUTPUT_NORM: &str = "output_norm.weight";
/// The output projection, `{n_embd, vocab}`; absent when tied to [`TOKEN_EMBD`].
pub const OUTPUT: &str = "output.weight";

/// Name of a per-layer tensor, e.g. `layer_name(3, "attn_q.weight")` = `blk.3.attn_q.weight`.
pub fn layer_name(il: usize, suffix: &str) -> String {
    format!("blk.{il}.{suffix}")
}
