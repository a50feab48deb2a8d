//! The embedding table kept on the host for plans whose embedding fetch runs on the host
//! ([`crate::Plan::host_embedding`]): both executors read token rows from it.

use ingot_gguf::{GgmlType, GgufFile};

use crate::error::ExecError;

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
