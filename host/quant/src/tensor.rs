//! Whole-tensor (de)quantization, split into independent chunks of whole blocks and run on
//! all cores with the `rayon` feature (sequentially without it). Every quantizer here works
//! block by block with no state across blocks, so the bytes do not depend on the split.

use crate::dispatch::{check_dequantize, check_quantize, dequantize_row, quantize_row};
use crate::error::QuantError;
use ingot_gguf::GgmlType;

/// Elements per parallel work item: about 64 Ki values, rounded down to whole blocks (and at
/// least one block), large enough to amortise scheduling, small enough to balance 2..64 cores.
fn chunk_elements(ty: GgmlType) -> usize {
    let bs = ty.block_size() as usize;
    (65_536 / bs).max(1) * bs
}

fn chunk_bytes(ty: GgmlType) -> usize {
    chunk_elements(ty) / ty.block_size() as usize * ty.type_size() as usize
}

/// [`quantize_row`] over a whole tensor (any number of rows, laid out back to back), in
/// parallel. Lengths are checked up front exactly as `quantize_row` checks them.
pub fn quantize_tensor(ty: GgmlType, x: &[f32], out: &mut [u8]) -> Result<(), QuantError> {
    // Validate the whole request first so a bad length is reported for the tensor, not a chunk.
    check_quantize(ty, x.len(), out.len())?;
    let (ce, cb) = (chunk_elements(ty), chunk_bytes(ty));
    #[cfg(feature = "rayon")]
    {
        use rayon::prelude::*;
        x.par_chunks(ce)
            .zip(out.par_chunks_mut(cb))
            .try_for_each(|(xc, oc)| quantize_row(ty, xc, oc))
    }
    #[cfg(not(feature = "rayon"))]
    {
        x.chunks(ce)
            .zip(out.chunks_mut(cb))
            .try_for_each(|(xc, oc)| quantize_row(ty, xc, oc))
    }
}

/// [`dequantize_row`] over a whole tensor, in parallel.
pub fn dequantize_tensor(ty: GgmlType, data: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
    check_dequantize(ty, data.len(), out.len())?;
    let (ce, cb) = (chunk_elements(ty), chunk_bytes(ty));
    #[cfg(feature = "rayon")]
    {
        use rayon::prelude::*;
        data.par_chunks(cb)
            .zip(out.par_chunks_mut(ce))
            .try_for_each(|(dc, oc)| dequantize_row(ty, dc, oc))
    }
    #[cfg(not(feature = "rayon"))]
    {
        data.chunks(cb)
            .zip(out.chunks_mut(ce))
            .try_for_each(|(dc, oc)| dequantize_row(ty, dc, oc))
    }
}
