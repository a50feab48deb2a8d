//! Whole-tensor (de)quantization must give exactly the bytes and values of the row functions,
//! whatever the chunking.

use ingot_gguf::GgmlType;
use ingot_quant::{dequantize_row, dequantize_tensor, quantize_row, quantize_tensor, QuantError};

#[test]
fn tensor_functions_equal_row_functions() {
    // 3 full 64 Ki-element chunks plus one partial chunk of 3 super-blocks.
    let n = 3 * 65_536 + 3 * 256;
    let x: Vec<f32> = (0..n)
        .map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 97.0)
        .collect();
    for ty in [GgmlType::Q4K, GgmlType::Q5_0, GgmlType::Q6K, GgmlType::Bf16] {
        let bytes = n / ty.block_size() as usize * ty.type_size() as usize;
        let (mut a, mut b) = (vec![0u8; bytes], vec![0u8; bytes]);
        quantize_row(ty, &x, &mut a).unwrap();
        quantize_tensor(ty, &x, &mut b).unwrap();
        assert!(a == b, "{ty}: quantize_tensor differs from quantize_row");
        let (mut ya, mut yb) = (vec![0.0f32; n], vec![1.0f32; n]);
        dequantize_row(ty, &a, &mut ya).unwrap();
        dequantize_tensor(ty, &a, &mut yb).unwrap();
        assert!(
            ya == yb,
            "{ty}: dequantize_tensor differs from dequantize_row"
        );
    }
}

#[test]
fn tensor_functions_check_whole_lengths() {
    let x = vec![0.0f32; 70_000 * 32];
    let mut out = vec![0u8; 70_000 * 18 - 1];
    assert!(matches!(
        quantize_tensor(GgmlType::Q4_0, &x, &mut out),
        Err(QuantError::ByteLength { .. })
    ));
    let mut y = vec![0.0f32; 33];
    assert!(matches!(
        dequantize_tensor(GgmlType::Q4_0, &out[..36], &mut y),
        Err(QuantError::PartialBlock { .. })
    ));
}
