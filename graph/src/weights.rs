//! Weight bytes for the executors: the file's tensors as they are, and the absorbed attention
//! matrices of legacy-layout files derived from `attn_kv_b` at load.

use ingot_gguf::{GgmlType, GgufFile};

use crate::buffer::{BufferDecl, BufferKind};
use crate::error::ExecError;

/// Shape of a legacy `attn_kv_b {kv_lora, n_head·(d_nope + d_v)}`: row `h·(d_nope+d_v) + d`
/// holds `kv_lora` values; rows `d < d_nope` are head `h`'s key part, the rest its value part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvbGeometry {
    pub n_head: usize,
    pub d_nope: usize,
    pub d_v: usize,
    pub kv_lora: usize,
}

/// How a derived weight is computed from its source tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recipe {
    /// `attn_k_b {d_nope, kv_lora, n_head}`: `k_b[h][c][d] = kv_b[h·(d_nope+d_v) + d][c]`
    /// (a per-head transpose, so it is dequantized and requantized to the output type).
    KFromKvb(KvbGeometry),
    /// `attn_v_b {kv_lora, d_v, n_head}`: rows `h·(d_nope+d_v) + d_nope + j` of `kv_b`, copied
    /// byte for byte (same type).
    VFromKvb(KvbGeometry),
}

impl Recipe {
    /// Bytes of the derived tensor in type `ty`, `None` when rows do not split into blocks.
    pub fn output_bytes(&self, ty: GgmlType) -> Option<u64> {
        let (rows, row_len) = match *self {
            Recipe::KFromKvb(g) => (g.n_head * g.kv_lora, g.d_nope),
            Recipe::VFromKvb(g) => (g.n_head * g.d_v, g.kv_lora),
        };
        if !(row_len as u64).is_multiple_of(ty.block_size()) {
            return None;
        }
        ty.row_bytes(row_len as u64)?.checked_mul(rows as u64)
    }

    /// Computes the derived bytes from the source tensor's bytes `src` of type `src_ty`.
    pub fn derive(
        &self,
        src_ty: GgmlType,
        src: &[u8],
        out_ty: GgmlType,
    ) -> Result<Vec<u8>, String> {
        match *self {
            Recipe::VFromKvb(g) => {
                let row = src_ty
                    .row_bytes(g.kv_lora as u64)
                    .ok_or("kv_lora does not split into blocks")?
                    as usize;
                let per_head = g.d_nope + g.d_v;
                if src.len() != row * g.n_head * per_head || out_ty != src_ty {
                    return Err(format!(
                        "expected {} bytes of {}, found {} bytes",
                        row * g.n_head * per_head,
                        src_ty.name(),
                        src.len()
                    ));
                }
                let mut out = Vec::with_capacity(row * g.n_head * g.d_v);
                for h in 0..g.n_head {
                    let first = h * per_head + g.d_nope;
                    out.extend_from_slice(&src[first * row..(first + g.d_v) * row]);
                }
                Ok(out)
            }
            Recipe::KFromKvb(g) => {
                let per_head = g.d_nope + g.d_v;
                let n = g.n_head * per_head * g.kv_lora;
                let mut kvb = vec![0f32; n];
                ingot_quant::dequantize_tensor(src_ty, src, &mut kvb).map_err(|e| e.to_string())?;
                let mut kb = vec![0f32; g.n_head * g.kv_lora * g.d_nope];
                for h in 0..g.n_head {
                    for c in 0..g.kv_lora {
                        for d in 0..g.d_nope {
                            kb[(h * g.kv_lora + c) * g.d_nope + d] =
                                kvb[(h * per_head + d) * g.kv_lora + c];
                        }
                    }
                }
                let bytes = self
                    .output_bytes(out_ty)
                    .ok_or("rows do not split into blocks")?;
                let mut out = vec![0u8; bytes as usize];
                ingot_quant::quantize_tensor(out_ty, &kb, &mut out).map_err(|e| e.to_string())?;
                Ok(out)
            }
        }
    }
}

/// The initial bytes of an initialized buffer: a slice of the memory map for weights, owned
/// bytes for derived weights and constants.
pub fn initial_bytes<'f>(
    file: &'f GgufFile,
    decl: &'f BufferDecl,
) -> Result<Option<std::borrow::Cow<'f, [u8]>>, ExecError> {
    let err = |reason: String| ExecError::Weight {
        name: decl.name.clone(),
        reason,
    };
    Ok(match &decl.kind {
        BufferKind::Weight { tensor, .. } => {
            let bytes = file.tensor_bytes(tensor).map_err(|e| err(e.to_string()))?;
            if bytes.len() as u64 != decl.bytes {
                return Err(err(format!(
                    "the file holds {} bytes, the plan expects {}",
                    bytes.len(),
                    decl.bytes
                )));
            }
            Some(std::borrow::Cow::Borrowed(bytes))
        }
        BufferKind::Derived { from, ty, recipe } => {
            let info = file
                .header()
                .tensor(from)
                .ok_or_else(|| err(format!("source tensor {from} is missing")))?;
            let src = file.tensor_bytes(from).map_err(|e| err(e.to_string()))?;
            let out = recipe.derive(info.ty, src, *ty).map_err(err)?;
            Some(std::borrow::Cow::Owned(out))
        }
        BufferKind::Constant { data } => Some(std::borrow::Cow::Borrowed(data.as_slice())),
        BufferKind::Activation
        | BufferKind::KvCache { .. }
        | BufferKind::StepState
        | BufferKind::ExpertSlots { .. }
        | BufferKind::ExpertTable { .. } => None,
    })
}

/// The embedding table kept on the host for plans whose embedding fetch runs on the host
/// ([`crate::Plan::host_embedding`]).
pub struct HostEmbedding {
    name: String,
    ty: GgmlType,
    row_bytes: usize,
    n_embd: usize,
    data: Vec<u8>,
}

impl HostEmbedding {
    /// Copies `token_embd` out of the file when the plan needs it.
    pub fn for_plan(file: &GgufFile, plan: &crate::Plan) -> Result<Option<Self>, ExecError> {
        if !plan.host_embedding {
            return Ok(None);
        }
        Self::of_tensor(file, ingot_model::tensors::TOKEN_EMBD, plan).map(Some)
    }

    /// Copies the embedding tensor `name` (`plan.vocab` rows of `plan.n_embd`) out of the file.
    pub fn of_tensor(file: &GgufFile, name: &str, plan: &crate::Plan) -> Result<Self, ExecError> {
        let err = |reason: String| ExecError::Weight {
            name: name.into(),
            reason,
        };
        let info = file
            .header()
            .tensor(name)
            .ok_or_else(|| err("missing".into()))?;
        let row_bytes =
            info.ty
                .row_bytes(plan.n_embd as u64)
                .ok_or_else(|| err("rows do not split into blocks".into()))? as usize;
        let data = file
            .tensor_bytes(name)
            .map_err(|e| err(e.to_string()))?
            .to_vec();
        if data.len() != row_bytes * plan.vocab {
            return Err(err(format!(
                "{} bytes, expected {} rows of {row_bytes}",
                data.len(),
                plan.vocab
            )));
        }
        Ok(HostEmbedding {
            name: name.to_owned(),
            ty: info.ty,
            row_bytes,
            n_embd: plan.n_embd,
            data,
        })
    }

    /// The dequantized row of `token` (checked against the vocabulary by the caller) as bytes
    /// of little-endian f32.
    pub fn row(&self, token: u32) -> Result<Vec<u8>, ExecError> {
        let start = token as usize * self.row_bytes;
        let mut out = vec![0f32; self.n_embd];
        ingot_quant::dequantize_row(self.ty, &self.data[start..start + self.row_bytes], &mut out)
            .map_err(|e| ExecError::Weight {
            name: self.name.clone(),
            reason: e.to_string(),
        })?;
        Ok(out.iter().flat_map(|v| v.to_le_bytes()).collect())
    }
}
