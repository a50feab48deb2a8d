//! The bench inputs are not degenerate: for every weight type the benches use, the reference
//! quantizer's output from Gaussian data has non-zero scales, varied quants in every block and
//! no two-blocks-alike monotony; and the check itself rejects zero and constant data.

use ingot_bench::cases::{weight_types, Contents, Shape, CASES};
use ingot_bench::inputs::{self, Variety, MIN_DISTINCT_PER_BLOCK};
use ingot_bench::setup;
use ingot_gguf::GgmlType;

/// Rows of each checked tensor: 64 rows × 2048 columns is 512 Q4_K super-blocks, enough that
/// an input generator with a per-row or per-block flaw shows it.
const ROWS: usize = 64;
const COLS: usize = 2048;

#[test]
fn every_bench_weight_type_is_varied() {
    let types = weight_types();
    assert!(
        types.contains(&GgmlType::Q4K) && types.contains(&GgmlType::Q3K),
        "the table should bench Q4_K and Q3_K weights, has {types:?}"
    );
    for ty in types {
        let data = inputs::quantized_weights(ty, ROWS, COLS, 7).expect("quantize");
        let v = Variety::measure(ty, &data).expect("measure");
        eprintln!("{v:?}");
        assert_eq!(v.check(), Ok(()), "{v:?}");
        // Gaussian data never repeats a 256-value block bit for bit.
        assert_eq!(v.distinct_blocks, v.blocks, "{v:?}");
    }
}

#[test]
fn every_case_buffer_as_built_is_varied() {
    // The buffers exactly as the benches build them (seeded per case), at a few rows each.
    for case in CASES {
        let shape = Shape {
            rows: case.shape.rows.min(8),
            cols: case.shape.cols,
        };
        for (i, spec) in (case.buffers)(shape).iter().enumerate() {
            let ty = match spec.contents {
                Contents::Weights { ty, .. } => ty,
                Contents::ActQ8_1 { .. } => GgmlType::Q8_1,
                Contents::F32 { .. } => GgmlType::F32,
                Contents::Output { .. } | Contents::StepState { .. } => continue,
            };
            let data = setup::host_bytes(spec, setup::seed(case, i)).expect("build");
            let v = Variety::measure(ty, &data).expect("measure");
            assert_eq!(v.check(), Ok(()), "{} `{}`: {v:?}", case.id(), spec.param);
        }
    }
}

#[test]
fn different_tensors_get_different_data() {
    let a = &CASES.iter().find(|c| c.tensor == "attn_q").expect("attn_q");
    let b = &CASES
        .iter()
        .find(|c| c.tensor == "attn_output")
        .expect("attn_output");
    assert_ne!(setup::seed(a, 0), setup::seed(b, 0));
    assert_ne!(setup::seed(a, 0), setup::seed(a, 1));
}

#[test]
fn zero_weights_are_rejected() {
    for ty in [GgmlType::Q4K, GgmlType::Q3K, GgmlType::Q8_0] {
        let zeros = vec![0.0f32; ROWS * 256];
        let mut data = vec![0u8; inputs::weight_bytes(ty, ROWS, 256).unwrap()];
        ingot_quant::quantize_tensor(ty, &zeros, &mut data).unwrap();
        let v = Variety::measure(ty, &data).unwrap();
        assert_eq!(v.zero_scales, v.blocks, "{v:?}");
        assert_eq!(v.min_distinct_values, 1, "{v:?}");
        assert!(v.check().is_err(), "{v:?}");
    }
}

#[test]
fn constant_and_repeated_weights_are_rejected() {
    let ty = GgmlType::Q4K;
    // A constant row: scale non-zero but one value per block.
    let constant = vec![0.5f32; ROWS * 256];
    let mut data = vec![0u8; inputs::weight_bytes(ty, ROWS, 256).unwrap()];
    ingot_quant::quantize_tensor(ty, &constant, &mut data).unwrap();
    let v = Variety::measure(ty, &data).unwrap();
    assert!(v.min_distinct_values < MIN_DISTINCT_PER_BLOCK, "{v:?}");
    assert!(v.check().is_err());

    // One varied block repeated: every block alike.
    let one = inputs::quantized_weights(ty, 1, 256, 3).unwrap();
    let repeated = one.repeat(ROWS);
    let v = Variety::measure(ty, &repeated).unwrap();
    assert_eq!(v.distinct_blocks, 1);
    let err = v.check().unwrap_err();
    assert!(err.contains("identical"), "{err}");
}

#[test]
fn bad_shapes_are_errors_not_panics() {
    assert!(inputs::weight_bytes(GgmlType::Q4K, 4, 100).is_err());
    assert!(inputs::weight_bytes(GgmlType::Q4K, usize::MAX, 256).is_err());
    assert!(inputs::quantized_weights(GgmlType::Q4K, 0, 256, 1).is_err());
    assert!(inputs::q8_1_activation(33, 1).is_err());
    assert!(inputs::gaussian(1 << 40, 1.0, 1).is_err());
    assert!(Variety::measure(GgmlType::Q4K, &[0u8; 100]).is_err());
    assert!(Variety::measure(GgmlType::Q4K, &[]).is_err());
}
