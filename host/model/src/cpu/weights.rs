//! The CPU backend's weights: quantized matrices viewed in place in the memory map; only the small
//! vectors (norm gains, the V3 selection bias) are converted to f32.

use ingot_gguf::GgufFile;

use ingot_quant::cpu_dot::Isa;

use super::matmul::QMatrix;
use crate::config::{AttnLayout, ExpertGateUp, ModelConfig};
use crate::dequant::tensor_f32;
use crate::error::Result;
use crate::tensors::{layer_name, OUTPUT_NORM, TOKEN_EMBD};

pub(super) enum QueryProj<'f> {
    Direct(QMatrix<'f>),
    LowRank {
        a: QMatrix<'f>,
        a_norm: Vec<f32>,
        b: QMatrix<'f>,
    },
}

/// How the latent query `q_abs = W_UK · q_nope` is formed.
pub(super) enum KeyUp<'f> {
    /// `attn_k_b`: per head `kv_lora` rows of `d_nope`: an ordinary product.
    PerHead(Vec<QMatrix<'f>>),
    /// Legacy `attn_kv_b` (rows `h·(d_nope+d_v) + d` of `kv_lora`): `W_UK` is the transpose of its
    /// key rows, applied as a sum of dequantized rows weighted by `q_nope`.
    Legacy(QMatrix<'f>),
}

#[derive(Clone, Copy)]
pub(super) struct DenseFfn<'f> {
    pub gate: QMatrix<'f>,
    pub up: QMatrix<'f>,
    pub down: QMatrix<'f>,
}

pub(super) struct MoeFfn<'f> {
    pub router: QMatrix<'f>,
    pub bias: Option<Vec<f32>>,
    /// Stacked experts; expert `e` is slab `e` of `n_expert`.
    pub gate_up_exps: GateUpExps<'f>,
    pub down_exps: QMatrix<'f>,
    pub shared: Option<DenseFfn<'f>>,
}

/// The routed experts' gate and up projections, split or merged (see [`ExpertGateUp`]).
pub(super) enum GateUpExps<'f> {
    Split { gate: QMatrix<'f>, up: QMatrix<'f> },
    Merged(QMatrix<'f>),
}

impl<'f> GateUpExps<'f> {
    /// Expert `e` of `n`: its gate and up matrices (views, no copy).
    pub fn expert(&self, e: usize, n: usize) -> (QMatrix<'f>, QMatrix<'f>) {
        match self {
            GateUpExps::Split { gate, up } => (gate.slab(e, n), up.slab(e, n)),
            GateUpExps::Merged(m) => {
                let both = m.slab(e, n);
                let ff = both.rows() / 2;
                (both.row_range(0, ff), both.row_range(ff, ff))
            }
        }
    }
}

pub(super) enum Ffn<'f> {
    Dense(Box<DenseFfn<'f>>),
    Moe(Box<MoeFfn<'f>>),
}

pub(super) struct Layer<'f> {
    pub attn_norm: Vec<f32>,
    pub q: QueryProj<'f>,
    pub kv_a: QMatrix<'f>,
    pub kv_a_norm: Vec<f32>,
    pub k_up: KeyUp<'f>,
    /// Per head `W_UV`: `d_v` rows of `kv_lora`.
    pub v_b: Vec<QMatrix<'f>>,
    pub out: QMatrix<'f>,
    pub ffn_norm: Vec<f32>,
    pub ffn: Ffn<'f>,
}

pub(super) struct CpuWeights<'f> {
    pub token_embd: QMatrix<'f>,
    pub layers: Vec<Layer<'f>>,
    pub output_norm: Vec<f32>,
    pub output: QMatrix<'f>,
}

impl<'f> CpuWeights<'f> {
    /// Maps every tensor of the decoding layers (the NextN/MTP block, which only drafts, is
    /// `super::mtp`'s) of a file whose shapes [`ModelConfig::from_gguf`] has validated. Dot
    /// products run on `isa`.
    pub fn map(file: &'f GgufFile, c: &ModelConfig, isa: Isa) -> Result<Self> {
        Ok(CpuWeights {
            token_embd: QMatrix::from_tensor_in_place(file, TOKEN_EMBD, isa)?,
            layers: (0..c.n_layer)
                .map(|il| map_layer(file, c, il, isa))
                .collect::<Result<_>>()?,
            output_norm: tensor_f32(file, OUTPUT_NORM)?,
            output: QMatrix::from_tensor(file, c.output_tensor(), isa)?,
        })
    }
}

pub(super) fn map_layer<'f>(
    file: &'f GgufFile,
    c: &ModelConfig,
    il: usize,
    isa: Isa,
) -> Result<Layer<'f>> {
    let name = |suffix: &str| layer_name(il, suffix);
    let matrix = |suffix: &str| QMatrix::from_tensor(file, &name(suffix), isa);
    let vector = |suffix: &str| tensor_f32(file, &name(suffix));
    let per_head = |m: QMatrix<'f>| {
        (0..c.n_head)
            .map(|h| m.slab(h, c.n_head))
            .collect::<Vec<_>>()
    };
    let q = match c.q_lora {
        None => QueryProj::Direct(matrix("attn_q.weight")?),
        Some(_) => QueryProj::LowRank {
            a: matrix("attn_q_a.weight")?,
            a_norm: vector("attn_q_a_norm.weight")?,
            b: matrix("attn_q_b.weight")?,
        },
    };
    let (k_up, v_b) = match c.layout {
        AttnLayout::Mla => (
            KeyUp::PerHead(per_head(matrix("attn_k_b.weight")?)),
            per_head(matrix("attn_v_b.weight")?),
        ),
        AttnLayout::Legacy => {
            let kv_b = matrix("attn_kv_b.weight")?;
            let stride = c.d_nope + c.d_v;
            let v_b = (0..c.n_head)
                .map(|h| kv_b.row_range(h * stride + c.d_nope, c.d_v))
                .collect();
            (KeyUp::Legacy(kv_b), v_b)
        }
    };
    let ffn = if c.is_moe_layer(il) {
        let shared = if c.n_expert_shared > 0 {
            Some(DenseFfn {
                gate: matrix("ffn_gate_shexp.weight")?,
                up: matrix("ffn_up_shexp.weight")?,
                down: matrix("ffn_down_shexp.weight")?,
            })
        } else {
            None
        };
        Ffn::Moe(Box::new(MoeFfn {
            router: matrix("ffn_gate_inp.weight")?,
            bias: if c.has_expert_bias {
                Some(vector("exp_probs_b.bias")?)
            } else {
                None
            },
            gate_up_exps: match c.gate_up {
                ExpertGateUp::Split => GateUpExps::Split {
                    gate: matrix("ffn_gate_exps.weight")?,
                    up: matrix("ffn_up_exps.weight")?,
                },
                ExpertGateUp::Merged => GateUpExps::Merged(matrix("ffn_gate_up_exps.weight")?),
            },
            down_exps: matrix("ffn_down_exps.weight")?,
            shared,
        }))
    } else {
        Ffn::Dense(Box::new(DenseFfn {
            gate: matrix("ffn_gate.weight")?,
            up: matrix("ffn_up.weight")?,
            down: matrix("ffn_down.weight")?,
        }))
    };
    Ok(Layer {
        attn_norm: vector("attn_norm.weight")?,
        q,
        kv_a: matrix("attn_kv_a_mqa.weight")?,
        kv_a_norm: vector("attn_kv_a_norm.weight")?,
        k_up,
        v_b,
        out: matrix("attn_output.weight")?,
        ffn_norm: vector("ffn_norm.weight")?,
        ffn,
    })
}
