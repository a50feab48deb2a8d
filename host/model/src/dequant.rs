//! Tensor bytes to f32 through `ingot-quant` (float and quantized types alike).

use ingot_gguf::{GgufFile, TensorInfo};

use crate::error::{ModelError, Result};

/// Dequantizes the named tensor (shape already validated) into a new f32 vector.
pub(crate) fn tensor_f32(file: &GgufFile, name: &str) -> Result<Vec<f32>> {
    let info = crate::tensors::tensor_info(file, name)?;
    let mut out = vec![0.0f32; info.n_elements() as usize];
    dequantize_into(info, file.tensor_data(info), &mut out)?;
    Ok(out)
}

/// Dequantizes `out.len()` elements (whole rows) of `info`'s type from `bytes`.
pub(crate) fn dequantize_into(info: &TensorInfo, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    ingot_quant::dequantize_row(info.ty, bytes, out).map_err(|e| ModelError::Quant {
        name: info.name.clone(),
        reason: e.to_string(),
    })
}
