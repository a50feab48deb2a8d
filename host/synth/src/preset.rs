//! Model shapes the synthesizer can make. `lite-4l` and `v2-lite` use DeepSeek-V2-Lite's real
//! dimensions (docs/deepseek2-model.md#v2-lite-configuration); `tiny` keeps every structural
//! feature at small sizes for tests. The rest of the deepseek2 family comes twice: at tiny dims
//! with each member's structure (`tiny-v3`, `tiny-moonlight`, `tiny-k2`, `tiny-glm`), and at the
//! released models' full dims (`v3`, `k2`, `glm-4.7-flash`) as headers only, for plan counts and
//! bytes per token (their weights would be hundreds of gigabytes).

use strum::{Display, EnumString, IntoStaticStr, VariantNames};

use crate::unknown_name;

/// Expert routing of a MoE layer (GGUF keys `expert_gating_func`, `exp_probs_b`, `expert_group_*`,
/// `expert_weights_*`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Routing {
    /// Sigmoid scores (V3 family, `expert_gating_func` 2); softmax otherwise (V2, 1).
    pub sigmoid: bool,
    /// Whether `expert_gating_func` is written. GLM-4.7-Flash files leave it out and get sigmoid
    /// from llama.cpp's fallback for 47/48 layers and a 154,880-token vocabulary.
    pub gating_key: bool,
    /// Per-layer selection bias `exp_probs_b.bias`.
    pub expert_bias: bool,
    /// Expert groups (`expert_group_count`, written when above 1) and how many are kept.
    pub n_group: u64,
    pub n_group_used: u64,
    /// Renormalise the chosen experts' weights (`expert_weights_norm`).
    pub weights_norm: bool,
    /// `expert_weights_scale` (`routed_scaling_factor`).
    pub weights_scale: f32,
}

impl Routing {
    /// DeepSeek-V2 / V2-Lite: softmax over all experts, no bias, no groups, weights as scored.
    pub const V2: Routing = Routing {
        sigmoid: false,
        gating_key: true,
        expert_bias: false,
        n_group: 1,
        n_group_used: 1,
        weights_norm: false,
        weights_scale: 1.0,
    };

    /// The V3 family's sigmoid routing with selection bias and normalised, scaled weights, no
    /// groups.
    pub const fn sigmoid(weights_scale: f32) -> Routing {
        Routing {
            sigmoid: true,
            gating_key: true,
            expert_bias: true,
            n_group: 1,
            n_group_used: 1,
            weights_norm: true,
            weights_scale,
        }
    }
}

/// Hyperparameters of a synthetic deepseek2 model (names follow the GGUF keys of
/// docs/deepseek2-model.md#gguf-keys).
#[derive(Clone, Debug, PartialEq)]
pub struct Dims {
    pub n_embd: u64,
    pub n_head: u64,
    pub kv_lora: u64,
    /// Width of the compressed query (`attn_q_a`, `attn_q_a_norm`, `attn_q_b`); 0 projects queries
    /// directly (`attn_q`, the Lite models and Moonlight).
    pub q_lora: u64,
    pub d_nope: u64,
    pub d_rope: u64,
    pub d_v: u64,
    /// Decoding layers.
    pub n_layer: u64,
    /// NextN/MTP blocks after the decoding layers (`nextn_predict_layers`); `block_count` is
    /// `n_layer + n_nextn`.
    pub n_nextn: u64,
    pub n_dense_lead: u64,
    pub n_expert: u64,
    pub n_expert_used: u64,
    pub n_shared: u64,
    pub ff_expert: u64,
    pub ff_dense: u64,
    pub routing: Routing,
    pub n_vocab: u64,
    /// Token ids of BOS and EOS (V2-Lite: 100000 / 100001); both at least 256 (after the byte
    /// tokens).
    pub bos: u64,
    pub eos: u64,
    pub context_length: u64,
    /// `tokenizer.ggml.pre`.
    pub pre: &'static str,
}

impl Dims {
    /// `block_count`: decoding layers plus NextN/MTP blocks.
    pub fn block_count(&self) -> u64 {
        self.n_layer + self.n_nextn
    }
}

/// A model shape, named on the command line and in `general.name` (so a name is part of a file's
/// bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Display, EnumString, IntoStaticStr, VariantNames)]
#[strum(parse_err_ty = String, parse_err_fn = Preset::unknown)]
pub enum Preset {
    /// 3 layers (1 dense lead), 16 experts top-6, 2 shared, MLA with small dims, 512 tokens.
    #[strum(serialize = "tiny")]
    Tiny,
    /// DeepSeek-V2-Lite's real dimensions with 4 layers.
    #[strum(serialize = "lite-4l")]
    Lite4l,
    /// DeepSeek-V2-Lite: 27 layers.
    #[strum(serialize = "v2-lite")]
    V2Lite,
    /// DeepSeek-V3/R1's structure at tiny dims: low-rank query, sigmoid routing with bias, 4 groups
    /// keep 2.
    #[strum(serialize = "tiny-v3")]
    TinyV3,
    /// Moonlight's structure: direct query, sigmoid routing with bias, 2 shared experts, kimi-k2
    /// tokenizer.
    #[strum(serialize = "tiny-moonlight")]
    TinyMoonlight,
    /// Kimi-K2's structure: 32 heads, low-rank query, 32 experts top-8, kimi-k2 tokenizer.
    #[strum(serialize = "tiny-k2")]
    TinyK2,
    /// GLM-4.7-Flash's structure: 20 heads, low-rank query, experts top-4, glm4 tokenizer, one
    /// NextN/MTP block.
    #[strum(serialize = "tiny-glm")]
    TinyGlm,
    /// DeepSeek-V3 (671B) at full size; header only.
    #[strum(serialize = "v3")]
    V3,
    /// Kimi-K2 (1T) at full size; header only.
    #[strum(serialize = "k2")]
    K2,
    /// GLM-4.7-Flash at full size, with its MTP block and without a gating key; header only.
    #[strum(serialize = "glm-4.7-flash")]
    Glm47Flash,
}

impl Preset {
    pub const ALL: [Preset; 10] = [
        Preset::Tiny,
        Preset::Lite4l,
        Preset::V2Lite,
        Preset::TinyV3,
        Preset::TinyMoonlight,
        Preset::TinyK2,
        Preset::TinyGlm,
        Preset::V3,
        Preset::K2,
        Preset::Glm47Flash,
    ];

    pub fn name(self) -> &'static str {
        self.into()
    }

    fn unknown(s: &str) -> String {
        unknown_name::<Preset>("preset", s)
    }

    /// Full-size presets whose weights are not written (see [`crate::header`]).
    pub fn header_only(self) -> bool {
        matches!(self, Preset::V3 | Preset::K2 | Preset::Glm47Flash)
    }

    pub fn dims(self) -> Dims {
        // Widths are chosen so that every quant-mix rule fires somewhere: rows of 256 take
        // k-quants, rows of 32/128 exercise the llama-quantize fallbacks
        // (docs/deepseek2-model.md#quant-mixes). Expert rows are a multiple of 64, which the
        // fused MoE kernels need.
        let tiny = Dims {
            n_embd: 256,
            n_head: 4,
            kv_lora: 128,
            q_lora: 0,
            d_nope: 32,
            d_rope: 16,
            d_v: 32,
            n_layer: 3,
            n_nextn: 0,
            n_dense_lead: 1,
            n_expert: 16,
            n_expert_used: 6,
            n_shared: 2,
            ff_expert: 128,
            ff_dense: 512,
            routing: Routing::V2,
            n_vocab: 512,
            bos: 510,
            eos: 511,
            context_length: 163_840,
            pre: "deepseek-llm",
        };
        // The released V3-family models share these attention widths.
        let v3_attention = Dims {
            n_embd: 7168,
            kv_lora: 512,
            q_lora: 1536,
            d_nope: 128,
            d_rope: 64,
            d_v: 128,
            n_layer: 61,
            ff_expert: 2048,
            ff_dense: 18432,
            ..tiny.clone()
        };
        match self {
            Preset::Tiny => tiny,
            Preset::Lite4l | Preset::V2Lite => Dims {
                n_embd: 2048,
                n_head: 16,
                kv_lora: 512,
                d_nope: 128,
                d_rope: 64,
                d_v: 128,
                n_layer: if self == Preset::Lite4l { 4 } else { 27 },
                n_expert: 64,
                ff_expert: 1408,
                ff_dense: 10944,
                n_vocab: 102_400,
                bos: 100_000,
                eos: 100_001,
                ..tiny
            },
            Preset::TinyV3 => Dims {
                q_lora: 128,
                n_shared: 1,
                routing: Routing {
                    n_group: 4,
                    n_group_used: 2,
                    ..Routing::sigmoid(2.5)
                },
                pre: "deepseek-v3",
                ..tiny
            },
            Preset::TinyMoonlight => Dims {
                routing: Routing::sigmoid(2.446),
                pre: "kimi-k2",
                ..tiny
            },
            Preset::TinyK2 => Dims {
                n_head: 32,
                q_lora: 128,
                n_expert: 32,
                n_expert_used: 8,
                n_shared: 1,
                routing: Routing::sigmoid(2.827),
                pre: "kimi-k2",
                ..tiny
            },
            Preset::TinyGlm => Dims {
                n_head: 20,
                q_lora: 128,
                n_nextn: 1,
                n_expert_used: 4,
                n_shared: 1,
                routing: Routing::sigmoid(1.8),
                pre: "glm4",
                ..tiny
            },
            // BOS/EOS of the header-only presets sit where the released vocabularies put them when
            // those ids are at least 256 (Kimi-K2); otherwise at the top of the vocabulary (V3's
            // real ids 0/1 are byte tokens in this synthetic vocabulary). Nothing but the tokenizer
            // reads them.
            Preset::V3 => Dims {
                n_head: 128,
                n_dense_lead: 3,
                n_expert: 256,
                n_expert_used: 8,
                n_shared: 1,
                routing: Routing {
                    n_group: 8,
                    n_group_used: 4,
                    ..Routing::sigmoid(2.5)
                },
                n_vocab: 129_280,
                bos: 129_278,
                eos: 129_279,
                pre: "deepseek-v3",
                ..v3_attention
            },
            Preset::K2 => Dims {
                n_head: 64,
                n_expert: 384,
                n_expert_used: 8,
                n_shared: 1,
                routing: Routing::sigmoid(2.827),
                n_vocab: 163_840,
                bos: 163_584,
                eos: 163_585,
                context_length: 131_072,
                pre: "kimi-k2",
                ..v3_attention
            },
            Preset::Glm47Flash => Dims {
                n_embd: 2048,
                n_head: 20,
                kv_lora: 512,
                q_lora: 768,
                d_nope: 192,
                d_rope: 64,
                d_v: 256,
                n_layer: 47,
                n_nextn: 1,
                n_expert: 64,
                n_expert_used: 4,
                n_shared: 1,
                ff_expert: 1536,
                ff_dense: 10240,
                routing: Routing {
                    gating_key: false,
                    ..Routing::sigmoid(1.8)
                },
                n_vocab: 154_880,
                bos: 154_878,
                eos: 154_879,
                context_length: 202_752,
                pre: "glm4",
                ..tiny
            },
        }
    }
}

/// Attention tensor layout: the MLA-era converter (`attn_k_b`/`attn_v_b`) or the legacy one
/// (`attn_kv_b`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Display, EnumString, VariantNames)]
#[strum(serialize_all = "lowercase", parse_err_ty = String, parse_err_fn = Layout::unknown)]
pub enum Layout {
    Mla,
    Legacy,
}

impl Layout {
    fn unknown(s: &str) -> String {
        unknown_name::<Layout>("layout", s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names are part of every file's bytes (`general.name`) and of the command line: pinned.
    #[test]
    fn names_are_pinned_parse_back_and_a_bad_one_lists_the_valid() {
        let names: Vec<&str> = Preset::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(Preset::VARIANTS, names.as_slice());
        assert_eq!(
            names.join(" "),
            "tiny lite-4l v2-lite tiny-v3 tiny-moonlight tiny-k2 tiny-glm v3 k2 glm-4.7-flash"
        );
        for p in Preset::ALL {
            assert_eq!(p.to_string().parse::<Preset>(), Ok(p));
        }
        assert_eq!(
            "lite".parse::<Preset>().unwrap_err(),
            "unknown preset 'lite' (expected one of: tiny, lite-4l, v2-lite, tiny-v3, tiny-moonlight, \
             tiny-k2, tiny-glm, v3, k2, glm-4.7-flash)"
        );
        assert_eq!(
            (Layout::Mla.to_string(), Layout::Legacy.to_string()),
            ("mla".into(), "legacy".into())
        );
        assert_eq!("legacy".parse::<Layout>(), Ok(Layout::Legacy));
        assert_eq!(
            "MLA".parse::<Layout>().unwrap_err(),
            "unknown layout 'MLA' (expected one of: mla, legacy)"
        );
    }
}
