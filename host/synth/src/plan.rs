//! The tensor list of a synthetic model: names, shapes (ggml `ne`, innermost first), types and how
//! each tensor's values are drawn.

use ingot_gguf::GgmlType;

use crate::mix::{tensor_type, QuantMix};
use crate::preset::{Dims, Layout};

/// How a tensor's f32 values are produced before quantization.
#[derive(Clone, Debug, PartialEq)]
pub enum Init {
    /// Normal(0, std): std = 1/sqrt(fan_in) for projections so activations keep unit scale.
    Normal { std: f32 },
    /// Uniform in [0.8, 1.2]: norm weights near 1.
    NormWeight,
    /// Per-head `attn_k_b` {d_nope, kv_lora, n_head} sliced out of the layer's `attn_kv_b` values.
    KFromKvB,
    /// Per-head `attn_v_b` {kv_lora, d_v, n_head} sliced out of the layer's `attn_kv_b` values.
    VFromKvB,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TensorPlan {
    pub name: String,
    pub ne: Vec<u64>,
    pub ty: GgmlType,
    pub init: Init,
}

impl TensorPlan {
    pub fn n_elements(&self) -> u64 {
        self.ne.iter().product()
    }

    pub fn row_len(&self) -> u64 {
        self.ne[0]
    }

    pub fn n_rows(&self) -> u64 {
        self.ne[1..].iter().product()
    }

    pub fn nbytes(&self) -> u64 {
        self.ty
            .row_bytes(self.ne[0])
            .expect("plan rows are block-aligned by construction")
            * self.n_rows()
    }
}

/// Name of the `attn_kv_b` tensor of the layer a `attn_k_b`/`attn_v_b` name belongs to.
pub fn kv_b_name(name: &str) -> String {
    let layer = name.split('.').nth(1).unwrap_or("0");
    format!("blk.{layer}.attn_kv_b.weight")
}

/// Every tensor of the model, in file order.
pub fn tensor_plan(d: &Dims, layout: Layout, mix: QuantMix) -> Vec<TensorPlan> {
    let mut out = Vec::new();
    let mut push = |name: String, ne: Vec<u64>, init: Init| {
        let ty = tensor_type(mix, &name, ne[0], ne.len(), d.block_count());
        out.push(TensorPlan { name, ne, ty, init });
    };
    let proj = |fan_in: u64| Init::Normal {
        std: 1.0 / (fan_in as f32).sqrt(),
    };
    let e = d.n_embd;
    let d_qk = d.d_nope + d.d_rope;

    push(
        "token_embd.weight".into(),
        vec![e, d.n_vocab],
        Init::Normal { std: 1.0 },
    );
    // The NextN/MTP blocks (`l >= n_layer`) are whole MoE layers plus their `nextn.*` tensors.
    for l in 0..d.block_count() {
        let b = |t: &str| format!("blk.{l}.{t}.weight");
        push(b("attn_norm"), vec![e], Init::NormWeight);
        if d.q_lora == 0 {
            push(b("attn_q"), vec![e, d.n_head * d_qk], proj(e));
        } else {
            push(b("attn_q_a"), vec![e, d.q_lora], proj(e));
            push(b("attn_q_a_norm"), vec![d.q_lora], Init::NormWeight);
            push(
                b("attn_q_b"),
                vec![d.q_lora, d.n_head * d_qk],
                proj(d.q_lora),
            );
        }
        push(b("attn_kv_a_mqa"), vec![e, d.kv_lora + d.d_rope], proj(e));
        push(b("attn_kv_a_norm"), vec![d.kv_lora], Init::NormWeight);
        match layout {
            Layout::Legacy => push(
                b("attn_kv_b"),
                vec![d.kv_lora, d.n_head * (d.d_nope + d.d_v)],
                proj(d.kv_lora),
            ),
            Layout::Mla => {
                push(
                    b("attn_k_b"),
                    vec![d.d_nope, d.kv_lora, d.n_head],
                    Init::KFromKvB,
                );
                push(
                    b("attn_v_b"),
                    vec![d.kv_lora, d.d_v, d.n_head],
                    Init::VFromKvB,
                );
            }
        }
        push(
            b("attn_output"),
            vec![d.n_head * d.d_v, e],
            proj(d.n_head * d.d_v),
        );
        push(b("ffn_norm"), vec![e], Init::NormWeight);
        if l < d.n_dense_lead {
            push(b("ffn_gate"), vec![e, d.ff_dense], proj(e));
            push(b("ffn_up"), vec![e, d.ff_dense], proj(e));
            push(b("ffn_down"), vec![d.ff_dense, e], proj(d.ff_dense));
        } else {
            let ff_sh = d.ff_expert * d.n_shared;
            push(b("ffn_gate_inp"), vec![e, d.n_expert], proj(e));
            if d.routing.expert_bias {
                // V3's learned biases are small next to sigmoid scores in (0, 1) but move the
                // selection.
                push(
                    format!("blk.{l}.exp_probs_b.bias"),
                    vec![d.n_expert],
                    Init::Normal { std: 0.1 },
                );
            }
            push(
                b("ffn_gate_exps"),
                vec![e, d.ff_expert, d.n_expert],
                proj(e),
            );
            push(b("ffn_up_exps"), vec![e, d.ff_expert, d.n_expert], proj(e));
            push(
                b("ffn_down_exps"),
                vec![d.ff_expert, e, d.n_expert],
                proj(d.ff_expert),
            );
            push(b("ffn_gate_shexp"), vec![e, ff_sh], proj(e));
            push(b("ffn_up_shexp"), vec![e, ff_sh], proj(e));
            push(b("ffn_down_shexp"), vec![ff_sh, e], proj(ff_sh));
        }
        if l >= d.n_layer {
            push(b("nextn.eh_proj"), vec![2 * e, e], proj(2 * e));
            push(b("nextn.enorm"), vec![e], Init::NormWeight);
            push(b("nextn.hnorm"), vec![e], Init::NormWeight);
            push(b("nextn.shared_head_norm"), vec![e], Init::NormWeight);
        }
    }
    push("output_norm.weight".into(), vec![e], Init::NormWeight);
    push("output.weight".into(), vec![e, d.n_vocab], proj(e));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Preset;

    #[test]
    fn tensor_counts_match_llama_cpp_loader() {
        // docs/deepseek2-model.md#tensors: dense layer 10 (legacy) / 11 (mla) tensors, MoE
        // layer 14 / 15, plus 3 global.
        let d = Preset::V2Lite.dims();
        assert_eq!(
            tensor_plan(&d, Layout::Mla, QuantMix::Q4KM).len(),
            3 + 11 + 26 * 15
        );
        assert_eq!(
            tensor_plan(&d, Layout::Legacy, QuantMix::Q4KM).len(),
            3 + 10 + 26 * 14
        );
    }

    #[test]
    fn v2_lite_parameter_count_matches_spec() {
        // docs/deepseek2-model.md#v2-lite-configuration: 15,706,484,224 parameters (layout mla
        // and legacy hold the same count).
        let d = Preset::V2Lite.dims();
        let n: u64 = tensor_plan(&d, Layout::Mla, QuantMix::F32)
            .iter()
            .map(TensorPlan::n_elements)
            .sum();
        assert_eq!(n, 15_706_484_224);
    }
}
