//! `ModelConfig`: the deepseek2 hyper-parameters read from GGUF keys
//! (docs/deepseek2-model.md#gguf-keys) with llama.cpp's default rules, the derived attention/rope
//! constants (docs/decode-math.md#logit-scale), the attention layout, and a shape check of every
//! tensor.

use crate::error::{ModelError, Result};
use crate::rope::RopeParams;
use crate::tensor_names::{OUTPUT, TOKEN_EMBD};

mod load;

/// How the per-head up-projection of the latent KV is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttnLayout {
    /// MLA-era converters: `attn_k_b {d_nope, kv_lora, n_head}` and `attn_v_b {kv_lora, d_v,
    /// n_head}`.
    Mla,
    /// Older converters: one `attn_kv_b {kv_lora, n_head·(d_nope + d_v)}`; the absorbed matrices
    /// are derived.
    Legacy,
}

/// Router scoring function (`expert_gating_func`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatingFunc {
    /// DeepSeek-V2: softmax over all expert logits.
    Softmax,
    /// DeepSeek-V3: independent sigmoid per expert.
    Sigmoid,
}

impl GatingFunc {
    /// How a group of experts is scored when expert groups are active, by the model family's own
    /// rule: HF DeepSeek-V2 (softmax, `group_limited_greedy`) takes a group's best expert,
    /// DeepSeek-V3 (sigmoid, `noaux_tc`) the sum of its best two. llama.cpp applies the top-2 sum
    /// to both, so a softmax model with groups (DeepSeek-V2/V2.5 236B) routes differently there;
    /// this follows the model.
    pub fn group_score(self) -> GroupScore {
        match self {
            GatingFunc::Softmax => GroupScore::Best,
            GatingFunc::Sigmoid => GroupScore::TopTwoSum,
        }
    }
}

/// Score of an expert group in group-limited routing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupScore {
    /// The group's highest selection score (DeepSeek-V2).
    Best,
    /// The sum of the group's two highest selection scores (DeepSeek-V3); groups need at least 2
    /// experts.
    TopTwoSum,
}

/// How the routed experts' gate and up projections are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpertGateUp {
    /// `ffn_gate_exps` and `ffn_up_exps`, `{n_embd, ff_expert, n_expert}` each.
    Split,
    /// One `ffn_gate_up_exps {n_embd, 2·ff_expert, n_expert}`: per expert the `ff_expert` gate
    /// rows, then the `ff_expert` up rows (llama.cpp splits the product into those two halves).
    Merged,
}

/// Position-dependent query scaling of Mistral Large 3 (llama.cpp `llm_graph_input_attn_temp`): the
/// query of the token at `pos` is multiplied by `ln(floor((pos + offset) / length) + 1) · scale +
/// 1`, offset 0 for deepseek2.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttnTemperature {
    /// `attention.temperature_scale`.
    pub scale: f32,
    /// `attention.temperature_length`: positions per step of the floor.
    pub length: u32,
}

impl AttnTemperature {
    /// The query multiplier at `pos`, computed as llama.cpp does (f32 position, f64 log, f32
    /// result).
    pub fn factor(&self, pos: usize) -> f32 {
        let steps = ((pos as f32) / self.length as f32).floor() as f64;
        ((steps + 1.0).ln() * self.scale as f64 + 1.0) as f32
    }
}

/// Every hyper-parameter the forward pass needs, validated against the tensors of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// `general.name`, when present.
    pub name: Option<String>,
    pub n_embd: usize,
    /// Layers a decoded token runs through: `block_count` minus the NextN/MTP blocks.
    pub n_layer: usize,
    /// NextN/MTP blocks (`nextn_predict_layers`): the last blocks of `block_count`, numbered
    /// `n_layer..`. Their tensors are checked when present, run only to draft tokens
    /// (`crate::speculative`), never by a decode step.
    pub n_nextn: usize,
    /// Layers `0..n_dense_lead` use a dense FFN, the rest are MoE.
    pub n_dense_lead: usize,
    pub n_head: usize,
    /// `context_length`: the training context.
    pub n_ctx_train: usize,
    pub vocab: usize,
    /// Width of the compressed KV latent `c`.
    pub kv_lora: usize,
    /// Width of the compressed query (`attn_q_a`); `None` for Lite models that project queries
    /// directly.
    pub q_lora: Option<usize>,
    /// Per-head query/key width without position (`qk_nope_head_dim`).
    pub d_nope: usize,
    /// Per-head rotary width (`qk_rope_head_dim` = `rope.dimension_count`).
    pub d_rope: usize,
    /// Per-head value width.
    pub d_v: usize,
    /// Hidden width of the dense FFN layers.
    pub ff_dense: usize,
    /// Hidden width of one routed expert (shared experts are `n_expert_shared` of these side by
    /// side).
    pub ff_expert: usize,
    pub n_expert: usize,
    pub n_expert_used: usize,
    pub n_expert_shared: usize,
    /// Expert groups (V3); grouping is active only when this is greater than 1.
    pub n_expert_group: usize,
    pub n_expert_group_used: usize,
    pub gating: GatingFunc,
    /// Split or merged gate/up expert tensors (the same in every MoE layer).
    pub gate_up: ExpertGateUp,
    /// Renormalise the selected experts' weights to sum to 1.
    pub expert_weights_norm: bool,
    /// Multiplier of the routed experts' weights (`routed_scaling_factor`); 0 in the file means 1.
    pub expert_weights_scale: f32,
    /// MoE layers carry `exp_probs_b.bias` (V3 selection bias).
    pub has_expert_bias: bool,
    pub rms_eps: f32,
    pub layout: AttnLayout,
    /// No `output.weight`: the logits use `token_embd` (tied embeddings, as llama.cpp accepts).
    pub tied_output: bool,
    pub rope: RopeParams,
    /// Attention logit scale derived from `rope` (docs/decode-math.md#logit-scale).
    pub kq_scale: f32,
    /// Mistral Large 3's attention temperature, when the file sets `attention.temperature_scale`.
    pub attn_temperature: Option<AttnTemperature>,
    bytes_per_token: u64,
}

/// The context a run gets when `--ctx` is not given: llama.cpp's default, clamped to the model's
/// training context.
pub const DEFAULT_CTX: usize = 4096;

impl ModelConfig {
    /// The context size a run asks for, resolved as llama.cpp does: `None` is [`DEFAULT_CTX`] or
    /// the training context when that is smaller, `Some(0)` the training context, `Some(n)` n when
    /// it fits. A context above the training one is refused (the cache is sized by it and positions
    /// past it were never trained).
    pub fn context_size(&self, requested: Option<usize>) -> Result<usize> {
        match requested {
            None => Ok(DEFAULT_CTX.min(self.n_ctx_train)),
            Some(0) => Ok(self.n_ctx_train),
            Some(n) if n > self.n_ctx_train => Err(ModelError::ContextSize {
                max_ctx: n,
                reason: format!(
                    "above the model's training context {} (a context size of 0 takes it)",
                    self.n_ctx_train
                ),
            }),
            Some(n) => Ok(n),
        }
    }

    /// Per-head query/key width of the un-absorbed attention (`d_nope + d_rope`).
    pub fn d_qk(&self) -> usize {
        self.d_nope + self.d_rope
    }

    /// Width of one latent cache row `[c | k_pe]`.
    pub fn cache_row(&self) -> usize {
        self.kv_lora + self.d_rope
    }

    /// Attention logit scale of the query at `pos`: [`ModelConfig::kq_scale`] times the attention
    /// temperature when the model has one (multiplying the query or the scores is the same
    /// product).
    pub fn kq_scale_at(&self, pos: usize) -> f32 {
        match &self.attn_temperature {
            None => self.kq_scale,
            Some(t) => self.kq_scale * t.factor(pos),
        }
    }

    /// The tensor the logits are computed with: `output.weight`, or `token_embd.weight` when tied.
    pub fn output_tensor(&self) -> &'static str {
        if self.tied_output {
            TOKEN_EMBD
        } else {
            OUTPUT
        }
    }

    /// `block_count`: the decoding layers plus the NextN/MTP blocks.
    pub fn block_count(&self) -> usize {
        self.n_layer + self.n_nextn
    }

    /// MoE layers among the decoding layers (NextN/MTP blocks excluded).
    pub fn n_moe_layers(&self) -> usize {
        self.n_layer.saturating_sub(self.n_dense_lead)
    }

    /// Whether layer `il` is a MoE layer (as opposed to a dense lead layer).
    pub fn is_moe_layer(&self, il: usize) -> bool {
        il >= self.n_dense_lead
    }

    /// Width of the shared-expert FFN (all shared experts side by side).
    pub fn ff_shared(&self) -> usize {
        self.ff_expert * self.n_expert_shared
    }

    /// Weight bytes read to decode one token (docs/decode-math.md#per-token-cost): every
    /// non-expert tensor in full, the used fraction of each stacked expert tensor, and one row of
    /// `token_embd`. Computed from this file's tensor sizes and types.
    pub fn bytes_per_token(&self) -> u64 {
        self.bytes_per_token
    }
}
