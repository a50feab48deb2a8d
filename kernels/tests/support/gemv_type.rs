//! Facts about the gemv weight types that several tests need.

use ingot_gguf::GgmlType;
use ingot_kernels::ops::gemv::GemvType;

/// The GGUF type of a gemv weight type (its registry row's ggml id), for the CPU oracles in
/// `ingot_quant`.
pub fn ggml(ty: GemvType) -> GgmlType {
    GgmlType::from_u32(ty.ggml_id()).expect("every registry row names a ggml type")
}

/// The CPU oracle of one row's dot product with q8_1 activations: ggml's CUDA formula
/// (`ingot_quant::vec_dot_q8_1`) for the types it has; for the float types (which ggml
/// multiplies in float) and the code-book types (IQ1_S, IQ2_*, IQ3_*) `Σ w·(d8·q)` of the
/// dequantized weights (equal to ggml's bit for bit), accumulated in f64.
pub fn oracle_dot(ty: GemvType, row: &[u8], act: &[ingot_abi::blocks::BlockQ8_1]) -> f32 {
    if ingot_quant::can_vec_dot_q8_1(ggml(ty)) {
        return ingot_quant::vec_dot_q8_1(ggml(ty), row, act).expect("oracle vec_dot");
    }
    let mut w = vec![0f32; act.len() * 32];
    ingot_quant::dequantize_row(ggml(ty), row, &mut w).expect("dequantize");
    let mut sum = 0.0f64;
    for (b, ws) in act.iter().zip(w.chunks_exact(32)) {
        let d = f64::from(half::f16::from_bits(b.d).to_f32());
        for (&q, &x) in b.qs.iter().zip(ws) {
            sum += f64::from(x) * d * f64::from(q);
        }
    }
    sum as f32
}

/// q8_1 bytes one row dot's lanes request per 32 activations (the lane mappings of
/// `kernels/device/src/vecdot/`): pair types read both whole 36-byte blocks; Q4_K/Q5_K/Q6_K
/// lanes read `ds` (4 B) + 16 quant bytes of two blocks, 8 lanes per 8 blocks; Q3_K lanes read
/// `ds` + 8 quant bytes of all 8 blocks, 4 lanes.
pub fn act_bytes_per_block(ty: GemvType) -> u64 {
    match ty {
        // Q2_K and Q3_K lanes, and the float types' (4 lanes per 32 weights, 8 activations each).
        GemvType::Q2K | GemvType::Q3K | GemvType::F32 | GemvType::F16 | GemvType::Bf16 => {
            4 * (4 + 8)
        }
        GemvType::Q4K | GemvType::Q5K | GemvType::Q6K => 2 * (4 + 16),
        _ => 36,
    }
}
