//! Model shapes the synthesizer can make. `lite-4l` and `v2-lite` use DeepSeek-V2-Lite's real
//! dimensions (spec §4.1); `tiny` keeps every structural feature at small sizes for tests.

use std::fmt;
use std::str::FromStr;

/// Hyperparameters of a synthetic deepseek2 model (names follow the GGUF keys of spec §4.2).
#[derive(Clone, Debug, PartialEq)]
pub struct Dims {
    pub n_embd: u64,
    pub n_head: u64,
    pub kv_lora: u64,
    pub d_nope: u64,
    pub d_rope: u64,
    pub d_v: u64,
    pub n_layer: u64,
    pub n_dense_lead: u64,
    pub n_expert: u64,
    pub n_expert_used: u64,
    pub n_shared: u64,
    pub ff_expert: u64,
    pub ff_dense: u64,
    pub n_vocab: u64,
    /// Token ids of BOS and EOS (V2-Lite: 100000 / 100001).
    pub bos: u64,
    pub eos: u64,
    pub context_length: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// 3 layers (1 dense lead), 16 experts top-6, 2 shared, MLA with small dims, 512 tokens.
    Tiny,
    /// DeepSeek-V2-Lite's real dimensions with 4 layers.
    Lite4l,
    /// DeepSeek-V2-Lite: 27 layers.
    V2Lite,
}

impl Preset {
    pub const ALL: [Preset; 3] = [Preset::Tiny, Preset::Lite4l, Preset::V2Lite];

    pub fn name(self) -> &'static str {
        match self {
            Preset::Tiny => "tiny",
            Preset::Lite4l => "lite-4l",
            Preset::V2Lite => "v2-lite",
        }
    }

    pub fn dims(self) -> Dims {
        match self {
            // Widths are chosen so that every quant-mix rule fires somewhere: rows of 256 take k-quants,
            // rows of 32/128 exercise the llama-quantize fallbacks (spec §4.4). Expert rows are a
            // multiple of 64, which the fused MoE kernels need.
            Preset::Tiny => Dims {
                n_embd: 256,
                n_head: 4,
                kv_lora: 128,
                d_nope: 32,
                d_rope: 16,
                d_v: 32,
                n_layer: 3,
                n_dense_lead: 1,
                n_expert: 16,
                n_expert_used: 6,
                n_shared: 2,
                ff_expert: 128,
                ff_dense: 512,
                n_vocab: 512,
                bos: 510,
                eos: 511,
                context_length: 163_840,
            },
            Preset::Lite4l | Preset::V2Lite => Dims {
                n_embd: 2048,
                n_head: 16,
                kv_lora: 512,
                d_nope: 128,
                d_rope: 64,
                d_v: 128,
                n_layer: if self == Preset::Lite4l { 4 } else { 27 },
                n_dense_lead: 1,
                n_expert: 64,
                n_expert_used: 6,
                n_shared: 2,
                ff_expert: 1408,
                ff_dense: 10944,
                n_vocab: 102_400,
                bos: 100_000,
                eos: 100_001,
                context_length: 163_840,
            },
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Preset {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!("unknown preset '{s}' (expected one of: tiny, lite-4l, v2-lite)")
            })
    }
}

/// Attention tensor layout: the MLA-era converter (`attn_k_b`/`attn_v_b`) or the legacy one (`attn_kv_b`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Mla,
    Legacy,
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::Mla => "mla",
            Layout::Legacy => "legacy",
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Layout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "mla" => Ok(Layout::Mla),
            "legacy" => Ok(Layout::Legacy),
            _ => Err(format!("unknown layout '{s}' (expected mla or legacy)")),
        }
    }
}
