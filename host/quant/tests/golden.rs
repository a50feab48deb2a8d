//! Byte-for-byte agreement with llama.cpp's `llama-quantize` (Q4_K_M, no importance matrix).
//!
//! `golden/tiny-mla-q4_k_m/model.gguf` was produced from `golden/tiny-mla-f32/model.gguf`;
//! re-quantizing each f32 tensor to the type llama.cpp chose must reproduce its bytes exactly
//! if the reference quantizers are faithful.
//! The golden folder is `testdata/golden` (see `ingot-testdata`).

use ingot_gguf::{GgmlType, GgufFile};
use ingot_quant::{can_quantize, dequantize_row, quantize_row};
use std::collections::BTreeMap;

use ingot_testdata::golden_dir;

#[test]
fn requantized_f32_tensors_match_llama_quantize_bytes() {
    let dir = golden_dir();
    let src =
        GgufFile::open(&ingot_testdata::golden_model("tiny-mla-f32")).expect("open f32 model");
    let dst = GgufFile::open(&dir.join("tiny-mla-q4_k_m/model.gguf")).expect("open q4_k_m model");

    // Per type: (tensors compared, tensors identical, bytes compared, bytes differing).
    let mut stats: BTreeMap<String, (usize, usize, usize, usize)> = BTreeMap::new();
    let mut mismatches = Vec::new();
    for t in &dst.header().tensors {
        if t.ty == GgmlType::F32 {
            continue;
        }
        assert!(can_quantize(t.ty), "{}: no quantizer for {}", t.name, t.ty);
        let s = src
            .header()
            .tensor(&t.name)
            .unwrap_or_else(|| panic!("{} missing from the f32 model", t.name));
        assert_eq!(s.ty, GgmlType::F32);
        assert_eq!(s.ne, t.ne, "{}", t.name);
        let n = s.n_elements() as usize;
        let mut x = vec![0.0f32; n];
        dequantize_row(GgmlType::F32, src.tensor_data(s), &mut x).expect("read f32");
        let expect = dst.tensor_data(t);
        let mut got = vec![0u8; expect.len()];
        quantize_row(t.ty, &x, &mut got).expect("quantize");
        let differing = got.iter().zip(expect).filter(|(a, b)| a != b).count();
        let e = stats.entry(t.ty.to_string()).or_default();
        e.0 += 1;
        e.1 += usize::from(differing == 0);
        e.2 += got.len();
        e.3 += differing;
        if differing != 0 {
            let first = got
                .iter()
                .zip(expect)
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            mismatches.push(format!(
                "{} ({}): {differing} of {} bytes differ, first at byte {first} (block {})",
                t.name,
                t.ty,
                got.len(),
                first / t.ty.type_size() as usize
            ));
        }
    }
    for (ty, (n, same, bytes, diff)) in &stats {
        eprintln!("{ty}: {same}/{n} tensors byte-identical, {diff} of {bytes} bytes differ");
    }
    assert!(!stats.is_empty(), "no quantized tensors compared");
    assert!(
        mismatches.is_empty(),
        "mismatches:\n{}",
        mismatches.join("\n")
    );
}
