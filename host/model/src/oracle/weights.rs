//! The oracle's weights: every tensor dequantized to f32 at load, arranged per head / per expert.

use ingot_gguf::GgufFile;

use crate::config::{AttnLayout, ExpertGateUp, ModelConfig};
use crate::dequant::tensor_f32;
use crate::error::Result;
use crate::tensors::{layer_name, OUTPUT_NORM, TOKEN_EMBD};

/// A row-major f32 matrix: `rows` outputs, each a contiguous row of `cols` inputs (ggml `ne =
/// [cols, rows]`).
#[derive(Debug, Clone)]
pub(crate) struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

impl Matrix {
    pub(super) fn from_vec(rows: usize, cols: usize, data: Vec<f32>) -> Self {
        debug_assert_eq!(data.len(), rows * cols);
        Matrix { rows, cols, data }
    }

    pub fn row(&self, r: usize) -> &[f32] {
        &self.data[r * self.cols..(r + 1) * self.cols]
    }

    /// `y = W·x`, each output accumulated in f64.
    pub fn matvec(&self, x: &[f32], y: &mut [f32]) {
        debug_assert!(x.len() == self.cols && y.len() == self.rows);
        for (r, out) in y.iter_mut().enumerate() {
            *out = crate::math::dot_f64(self.row(r), x) as f32;
        }
    }

    /// Splits a stacked `[cols, rows, n]` tensor into its `n` slabs.
    fn split(data: Vec<f32>, rows: usize, cols: usize, n: usize) -> Vec<Matrix> {
        data.chunks_exact(rows * cols)
            .take(n)
            .map(|slab| Matrix::from_vec(rows, cols, slab.to_vec()))
            .collect()
    }
}

/// Query projection: direct (Lite) or through the low-rank `q_a` / `q_b` pair.
pub(crate) enum QueryProj {
    Direct(Matrix),
    LowRank {
        a: Matrix,
        a_norm: Vec<f32>,
        b: Matrix,
    },
}

pub(crate) struct Attention {
    pub norm: Vec<f32>,
    pub q: QueryProj,
    /// `[c | k_pe]` projection (`attn_kv_a_mqa`).
    pub kv_a: Matrix,
    pub kv_a_norm: Vec<f32>,
    /// Per head: `W_UK` as `kv_lora` rows of `d_nope` (maps `q_nope` to the latent query `q_abs`).
    pub k_b: Vec<Matrix>,
    /// Per head: `W_UV` as `d_v` rows of `kv_lora` (maps the attended latent to the head output).
    pub v_b: Vec<Matrix>,
    pub out: Matrix,
}

pub(crate) struct DenseFfn {
    pub gate: Matrix,
    pub up: Matrix,
    pub down: Matrix,
}

pub(crate) struct MoeFfn {
    pub router: Matrix,
    pub bias: Option<Vec<f32>>,
    pub experts: Vec<DenseFfn>,
    pub shared: Option<DenseFfn>,
}

pub(crate) enum Ffn {
    Dense(DenseFfn),
    Moe(MoeFfn),
}

pub(crate) struct Layer {
    pub attn: Attention,
    pub ffn_norm: Vec<f32>,
    pub ffn: Ffn,
}

pub(crate) struct Weights {
    /// `vocab` rows of `n_embd`.
    pub token_embd: Matrix,
    pub layers: Vec<Layer>,
    pub output_norm: Vec<f32>,
    pub output: Matrix,
}

impl Weights {
    /// Dequantizes every tensor the decoding layers use (the NextN/MTP block, which only drafts, is
    /// `super::mtp`'s). Shapes were validated by [`ModelConfig::from_gguf`].
    pub fn load(file: &GgufFile, c: &ModelConfig) -> Result<Self> {
        let vector = |name: &str| tensor_f32(file, name);
        let matrix = |name: &str, rows: usize, cols: usize| {
            Ok(Matrix::from_vec(rows, cols, tensor_f32(file, name)?))
        };
        let layers = (0..c.n_layer)
            .map(|il| load_layer(file, c, il))
            .collect::<Result<Vec<_>>>()?;
        Ok(Weights {
            token_embd: matrix(TOKEN_EMBD, c.vocab, c.n_embd)?,
            layers,
            output_norm: vector(OUTPUT_NORM)?,
            output: matrix(c.output_tensor(), c.vocab, c.n_embd)?,
        })
    }
}

pub(super) fn load_layer(file: &GgufFile, c: &ModelConfig, il: usize) -> Result<Layer> {
    let name = |suffix: &str| layer_name(il, suffix);
    let vector = |suffix: &str| tensor_f32(file, &name(suffix));
    let matrix = |suffix: &str, rows: usize, cols: usize| {
        Ok::<_, crate::error::ModelError>(Matrix::from_vec(
            rows,
            cols,
            tensor_f32(file, &name(suffix))?,
        ))
    };
    let q_rows = c.n_head * c.d_qk();
    let q = match c.q_lora {
        None => QueryProj::Direct(matrix("attn_q.weight", q_rows, c.n_embd)?),
        Some(r) => QueryProj::LowRank {
            a: matrix("attn_q_a.weight", r, c.n_embd)?,
            a_norm: vector("attn_q_a_norm.weight")?,
            b: matrix("attn_q_b.weight", q_rows, r)?,
        },
    };
    let (k_b, v_b) = match c.layout {
        AttnLayout::Mla => (
            Matrix::split(vector("attn_k_b.weight")?, c.kv_lora, c.d_nope, c.n_head),
            Matrix::split(vector("attn_v_b.weight")?, c.d_v, c.kv_lora, c.n_head),
        ),
        AttnLayout::Legacy => absorb_kv_b(&vector("attn_kv_b.weight")?, c),
    };
    let attn = Attention {
        norm: vector("attn_norm.weight")?,
        q,
        kv_a: matrix("attn_kv_a_mqa.weight", c.cache_row(), c.n_embd)?,
        kv_a_norm: vector("attn_kv_a_norm.weight")?,
        k_b,
        v_b,
        out: matrix("attn_output.weight", c.n_embd, c.n_head * c.d_v)?,
    };
    let ffn = if c.is_moe_layer(il) {
        let stacked = |suffix: &str, rows: usize, cols: usize| {
            Ok::<_, crate::error::ModelError>(Matrix::split(
                vector(suffix)?,
                rows,
                cols,
                c.n_expert,
            ))
        };
        let (gates, ups) = match c.gate_up {
            ExpertGateUp::Split => (
                stacked("ffn_gate_exps.weight", c.ff_expert, c.n_embd)?,
                stacked("ffn_up_exps.weight", c.ff_expert, c.n_embd)?,
            ),
            ExpertGateUp::Merged => {
                // Per expert: ff_expert gate rows, then ff_expert up rows.
                let half = c.ff_expert * c.n_embd;
                stacked("ffn_gate_up_exps.weight", 2 * c.ff_expert, c.n_embd)?
                    .into_iter()
                    .map(|m| {
                        let (gate, up) = m.data.split_at(half);
                        (
                            Matrix::from_vec(c.ff_expert, c.n_embd, gate.to_vec()),
                            Matrix::from_vec(c.ff_expert, c.n_embd, up.to_vec()),
                        )
                    })
                    .unzip()
            }
        };
        let downs = stacked("ffn_down_exps.weight", c.n_embd, c.ff_expert)?;
        let experts = gates
            .into_iter()
            .zip(ups)
            .zip(downs)
            .map(|((gate, up), down)| DenseFfn { gate, up, down })
            .collect();
        let shared = if c.n_expert_shared > 0 {
            let ff = c.ff_shared();
            Some(DenseFfn {
                gate: matrix("ffn_gate_shexp.weight", ff, c.n_embd)?,
                up: matrix("ffn_up_shexp.weight", ff, c.n_embd)?,
                down: matrix("ffn_down_shexp.weight", c.n_embd, ff)?,
            })
        } else {
            None
        };
        Ffn::Moe(MoeFfn {
            router: matrix("ffn_gate_inp.weight", c.n_expert, c.n_embd)?,
            bias: if c.has_expert_bias {
                Some(vector("exp_probs_b.bias")?)
            } else {
                None
            },
            experts,
            shared,
        })
    } else {
        Ffn::Dense(DenseFfn {
            gate: matrix("ffn_gate.weight", c.ff_dense, c.n_embd)?,
            up: matrix("ffn_up.weight", c.ff_dense, c.n_embd)?,
            down: matrix("ffn_down.weight", c.n_embd, c.ff_dense)?,
        })
    };
    Ok(Layer {
        attn,
        ffn_norm: vector("ffn_norm.weight")?,
        ffn,
    })
}

/// Derives the per-head absorbed matrices from a legacy `attn_kv_b` (rows `h·(d_nope+d_v) + d`,
/// each `kv_lora` wide), as ik_llama.cpp does at load: `W_UK[h][c][d] = kv_b[h·(d_nope+d_v) +
/// d][c]` (a transpose) and `W_UV[h][j][c] = kv_b[h·(d_nope+d_v) + d_nope + j][c]` (a row slice).
fn absorb_kv_b(kv_b: &[f32], c: &ModelConfig) -> (Vec<Matrix>, Vec<Matrix>) {
    let (lora, nope, dv) = (c.kv_lora, c.d_nope, c.d_v);
    let per_head = nope + dv;
    let row = |r: usize| &kv_b[r * lora..(r + 1) * lora];
    let mut k_b = Vec::with_capacity(c.n_head);
    let mut v_b = Vec::with_capacity(c.n_head);
    for h in 0..c.n_head {
        let mut uk = vec![0.0f32; lora * nope];
        for d in 0..nope {
            for (ci, &w) in row(h * per_head + d).iter().enumerate() {
                uk[ci * nope + d] = w;
            }
        }
        k_b.push(Matrix::from_vec(lora, nope, uk));
        let uv: Vec<f32> = (0..dv)
            .flat_map(|j| row(h * per_head + nope + j).iter().copied())
            .collect();
        v_b.push(Matrix::from_vec(dv, lora, uv));
    }
    (k_b, v_b)
}
