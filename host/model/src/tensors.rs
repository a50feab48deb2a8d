//! Tensor names of the deepseek2 GGUF layout (docs/deepseek2-model.md#tensors), their expected
//! shapes for a configuration, and the per-token weight traffic derived from the file's actual
//! tensor sizes.

use ingot_gguf::{Gguf, GgufFile, TensorInfo};

use crate::config::{AttnLayout, ExpertGateUp, ModelConfig};
use crate::error::{ModelError, Result};

pub use crate::tensor_names::{layer_name, OUTPUT, OUTPUT_NORM, TOKEN_EMBD};

/// How much of a tensor one decoded token reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Traffic {
    /// The whole tensor.
    Full,
    /// One row (the embedding lookup).
    OneRow,
    /// The used fraction of a stacked expert tensor.
    UsedExperts,
    /// Nothing: the NextN/MTP blocks, which a decode step does not run (only drafting does).
    NotRun,
}

/// One tensor the configuration requires, with its shape in ggml order (innermost first).
struct Expected {
    name: String,
    shape: Vec<u64>,
    /// An equivalent flattened shape some converters write (ik_llama's 2-D `attn_k_b`/`attn_v_b`).
    alt_shape: Option<Vec<u64>>,
    traffic: Traffic,
    /// A missing tensor is an error; the NextN/MTP blocks are optional (llama.cpp loads files
    /// stripped of them).
    required: bool,
}

/// The named tensor's header entry, or [`ModelError::MissingTensor`].
pub(crate) fn tensor_info<'f>(file: &'f GgufFile, name: &str) -> Result<&'f TensorInfo> {
    file.header()
        .tensor(name)
        .ok_or_else(|| ModelError::MissingTensor {
            name: name.to_owned(),
        })
}

/// Decides between the MLA (`attn_k_b`/`attn_v_b`) and legacy (`attn_kv_b`) layouts from layer 0's
/// tensors. A file with both (ik_llama.cpp's converter) uses the MLA tensors.
pub(crate) fn detect_layout(gguf: &Gguf) -> Result<AttnLayout> {
    let has = |suffix: &str| gguf.tensor(&layer_name(0, suffix)).is_some();
    if has("attn_k_b.weight") && has("attn_v_b.weight") {
        Ok(AttnLayout::Mla)
    } else if has("attn_kv_b.weight") {
        Ok(AttnLayout::Legacy)
    } else {
        Err(ModelError::MissingTensor {
            name: "blk.0.attn_k_b.weight + blk.0.attn_v_b.weight (or the legacy blk.0.attn_kv_b.weight)".into(),
        })
    }
}

fn expected_tensors(c: &ModelConfig) -> Vec<Expected> {
    let d = |v: usize| v as u64;
    let (embd, vocab) = (d(c.n_embd), d(c.vocab));
    let mut out = vec![
        Expected::new(TOKEN_EMBD.into(), vec![embd, vocab], Traffic::OneRow),
        Expected::new(OUTPUT_NORM.into(), vec![embd], Traffic::Full),
    ];
    // Tied output: lm_head reads all of token_embd on top of the embedding row.
    out.push(Expected::new(
        c.output_tensor().into(),
        vec![embd, vocab],
        Traffic::Full,
    ));
    for il in 0..c.block_count() {
        let layer = layer_tensors(c, il);
        if il < c.n_layer {
            out.extend(layer);
            continue;
        }
        out.extend(layer.into_iter().map(Expected::mtp));
        let n = |suffix: &str| layer_name(il, suffix);
        out.extend(
            [
                Expected::new(
                    n("nextn.eh_proj.weight"),
                    vec![2 * embd, embd],
                    Traffic::NotRun,
                ),
                Expected::new(n("nextn.enorm.weight"), vec![embd], Traffic::NotRun),
                Expected::new(n("nextn.hnorm.weight"), vec![embd], Traffic::NotRun),
                Expected::new(
                    n("nextn.shared_head_norm.weight"),
                    vec![embd],
                    Traffic::NotRun,
                ),
                Expected::new(
                    n("nextn.embed_tokens.weight"),
                    vec![embd, vocab],
                    Traffic::NotRun,
                ),
                Expected::new(
                    n("nextn.shared_head_head.weight"),
                    vec![embd, vocab],
                    Traffic::NotRun,
                ),
            ]
            .map(Expected::mtp),
        );
    }
    out
}

impl Expected {
    fn new(name: String, shape: Vec<u64>, traffic: Traffic) -> Self {
        Expected {
            name,
            shape,
            alt_shape: None,
            traffic,
            required: true,
        }
    }

    /// The same tensor in a NextN/MTP block: optional, and not read by a decode step.
    fn mtp(self) -> Self {
        Expected {
            traffic: Traffic::NotRun,
            required: false,
            ..self
        }
    }
}

/// The tensors of block `il` (a decoding layer, or the trunk part of an MTP block).
fn layer_tensors(c: &ModelConfig, il: usize) -> Vec<Expected> {
    let d = |v: usize| v as u64;
    let (embd, heads) = (d(c.n_embd), d(c.n_head));
    let full = |name: String, shape: Vec<u64>| Expected::new(name, shape, Traffic::Full);
    let n = |suffix: &str| layer_name(il, suffix);
    let q_rows = heads * d(c.d_qk());
    let mut out = vec![full(n("attn_norm.weight"), vec![embd])];
    match c.q_lora {
        None => out.push(full(n("attn_q.weight"), vec![embd, q_rows])),
        Some(r) => {
            out.push(full(n("attn_q_a.weight"), vec![embd, d(r)]));
            out.push(full(n("attn_q_a_norm.weight"), vec![d(r)]));
            out.push(full(n("attn_q_b.weight"), vec![d(r), q_rows]));
        }
    }
    out.push(full(
        n("attn_kv_a_mqa.weight"),
        vec![embd, d(c.cache_row())],
    ));
    out.push(full(n("attn_kv_a_norm.weight"), vec![d(c.kv_lora)]));
    match c.layout {
        AttnLayout::Mla => {
            let (lora, nope, v) = (d(c.kv_lora), d(c.d_nope), d(c.d_v));
            out.push(Expected {
                alt_shape: Some(vec![nope, lora * heads]),
                ..full(n("attn_k_b.weight"), vec![nope, lora, heads])
            });
            out.push(Expected {
                alt_shape: Some(vec![lora, v * heads]),
                ..full(n("attn_v_b.weight"), vec![lora, v, heads])
            });
        }
        AttnLayout::Legacy => out.push(full(
            n("attn_kv_b.weight"),
            vec![d(c.kv_lora), heads * d(c.d_nope + c.d_v)],
        )),
    }
    out.push(full(n("attn_output.weight"), vec![heads * d(c.d_v), embd]));
    out.push(full(n("ffn_norm.weight"), vec![embd]));
    if !c.is_moe_layer(il) {
        let ff = d(c.ff_dense);
        out.push(full(n("ffn_gate.weight"), vec![embd, ff]));
        out.push(full(n("ffn_up.weight"), vec![embd, ff]));
        out.push(full(n("ffn_down.weight"), vec![ff, embd]));
        return out;
    }
    let (ff, experts) = (d(c.ff_expert), d(c.n_expert));
    out.push(full(n("ffn_gate_inp.weight"), vec![embd, experts]));
    if c.has_expert_bias {
        out.push(full(n("exp_probs_b.bias"), vec![experts]));
    }
    let gate_up: &[(&str, u64)] = match c.gate_up {
        ExpertGateUp::Split => &[("ffn_gate_exps.weight", ff), ("ffn_up_exps.weight", ff)],
        ExpertGateUp::Merged => &[("ffn_gate_up_exps.weight", 2 * ff)],
    };
    for &(suffix, rows) in gate_up {
        out.push(Expected::new(
            n(suffix),
            vec![embd, rows, experts],
            Traffic::UsedExperts,
        ));
    }
    out.push(Expected::new(
        n("ffn_down_exps.weight"),
        vec![ff, embd, experts],
        Traffic::UsedExperts,
    ));
    if c.n_expert_shared > 0 {
        let ffs = d(c.ff_shared());
        out.push(full(n("ffn_gate_shexp.weight"), vec![embd, ffs]));
        out.push(full(n("ffn_up_shexp.weight"), vec![embd, ffs]));
        out.push(full(n("ffn_down_shexp.weight"), vec![ffs, embd]));
    }
    out
}

/// Names of every tensor the configuration describes (required or optional), for tools that must
/// tell a known tensor from one this crate does not model.
pub(crate) fn expected_names(c: &ModelConfig) -> std::collections::HashSet<String> {
    expected_tensors(c).into_iter().map(|e| e.name).collect()
}

/// Drops trailing 1s so that `{n}` and `{n, 1}` compare equal.
fn trimmed(shape: &[u64]) -> &[u64] {
    let keep = shape.iter().rposition(|&x| x != 1).map_or(0, |i| i + 1);
    &shape[..keep]
}

/// Checks that every required tensor exists with its expected shape; returns the weight bytes one
/// decoded token reads (see [`ModelConfig::bytes_per_token`]).
pub(crate) fn validate_shapes(gguf: &Gguf, config: &ModelConfig) -> Result<u64> {
    let mut bytes = 0u64;
    for want in expected_tensors(config) {
        let Some(info) = gguf.tensor(&want.name) else {
            if !want.required {
                continue;
            }
            return Err(ModelError::MissingTensor { name: want.name });
        };
        let found = trimmed(&info.ne);
        let matches = found == trimmed(&want.shape)
            || want
                .alt_shape
                .as_deref()
                .is_some_and(|a| found == trimmed(a));
        if !matches {
            return Err(ModelError::TensorShape {
                name: want.name,
                expected: want.shape,
                found: info.ne.clone(),
            });
        }
        bytes += match want.traffic {
            Traffic::Full => info.nbytes,
            Traffic::OneRow => info.nbytes / config.vocab as u64,
            Traffic::UsedExperts => {
                info.nbytes / config.n_expert as u64 * config.n_expert_used as u64
            }
            Traffic::NotRun => 0,
        };
    }
    Ok(bytes)
}
