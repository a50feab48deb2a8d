//! Derived weights: the absorbed attention matrices of legacy-layout files, computed from
//! `attn_kv_b` at load. A buffer declares its recipe ([`crate::BufferKind::Derived`]); the
//! executors run it ([`crate::weights::initial_bytes`]).

use ingot_gguf::GgmlType;

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
