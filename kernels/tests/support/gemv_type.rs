//! Facts about the gemv weight types that several tests need.

use ingot_gguf::GgmlType;
use ingot_kernels::ops::gemv::GemvType;

/// The GGUF type of a gemv weight type (its registry row's ggml id), for the CPU oracles in
/// `ingot_quant`.
pub fn ggml(ty: GemvType) -> GgmlType {
    GgmlType::from_u32(ty.ggml_id()).expect("every registry row names a ggml type")
}

/// q8_1 bytes one row dot's lanes request per 32 activations (the lane mappings of
/// `kernels/device/src/vecdot/`): pair types read both whole 36-byte blocks; Q4_K/Q5_K/Q6_K
/// lanes read `ds` (4 B) + 16 quant bytes of two blocks, 8 lanes per 8 blocks; Q3_K lanes read
/// `ds` + 8 quant bytes of all 8 blocks, 4 lanes.
pub fn act_bytes_per_block(ty: GemvType) -> u64 {
    match ty {
        GemvType::Q3K => 4 * (4 + 8),
        GemvType::Q4K | GemvType::Q5K | GemvType::Q6K => 2 * (4 + 16),
        _ => 36,
    }
}
