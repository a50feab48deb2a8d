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
    // Every gemv weight type of the llama.cpp mixes V2-Lite ships in
    // (docs/deepseek2-model.md#quant-mixes).
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q5_0,
        GgmlType::Q8_0,
        GgmlType::Iq4Nl,
        GgmlType::Q3K,
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
    ] {
        assert!(
            types.contains(&ty),
            "the table does not bench {ty:?}: {types:?}"
        );
    }
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
    // The buffers exactly as the benches build them (seeded per case), at a few rows each:
    // one simulator row quantum, so that row-sized f32 vectors are whole 32-value chunks.
    for case in CASES {
        let shape = Shape {
            rows: case.shape.rows.min(ingot_bench::sim::SIM_ROW_QUANTUM),
            cols: case.shape.cols,
        };
        for (i, spec) in (case.buffers)(shape).iter().enumerate() {
            let ty = match spec.contents {
                Contents::Weights { ty, .. } => ty,
                Contents::ActQ8_1 { .. } => GgmlType::Q8_1,
                Contents::F32 { .. } => GgmlType::F32,
                Contents::F16 { .. } => GgmlType::F16,
                // Its own layout (quants, then scales), checked by its own test below.
                Contents::LatentQ8_0 { .. } => continue,
                // Structured inputs, checked by their own tests below.
                Contents::Selection { .. }
                | Contents::Selections { .. }
                | Contents::Routing { .. }
                | Contents::HeadPairs { .. }
                | Contents::RopeFreq { .. }
                | Contents::SoftmaxStats { .. } => continue,
                Contents::Output { .. } | Contents::StepState { .. } => continue,
                // Addresses, written at upload.
                Contents::ExpertTable { .. } => continue,
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
    for ty in [GgmlType::Q4K, GgmlType::Q3K, GgmlType::Q8_0, GgmlType::Q4_0] {
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

#[test]
fn expert_selections_are_distinct_spread_and_normalized() {
    use ingot_abi::launch::{ExpertSelection, MAX_EXPERTS_USED};
    for seed in 0..50u64 {
        let bytes = inputs::expert_selection(64, 6, seed).unwrap();
        let sel: ExpertSelection = bytemuck::pod_read_unaligned(&bytes);
        let mut ids = sel.ids[..6].to_vec();
        assert!(ids.iter().all(|&i| i < 64), "{sel:?}");
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 6, "{sel:?}");
        // Sum of six f32 in [0, 1]: a few ulps of rounding.
        let sum: f32 = sel.weights[..6].iter().sum();
        assert!((sum - 1.0).abs() < 1e-5, "{sel:?}");
        assert!(sel.weights[..6].iter().all(|&w| w > 0.0), "{sel:?}");
    }
    assert!(inputs::expert_selection(64, 0, 1).is_err());
    assert!(inputs::expert_selection(4, 6, 1).is_err());
    assert!(inputs::expert_selection(64, MAX_EXPERTS_USED + 1, 1).is_err());
}

#[test]
fn softmax_stats_and_rope_freqs_are_valid() {
    let stats = inputs::softmax_stats(1000, 5).unwrap();
    let v: Vec<f32> = stats
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let (m, l): (Vec<f32>, Vec<f32>) = v.chunks_exact(2).map(|p| (p[0], p[1])).unzip();
    assert!(
        l.iter().all(|&l| (1.0..=4.0).contains(&l)),
        "l out of [1, 4]"
    );
    let distinct: std::collections::HashSet<u32> = m.iter().map(|x| x.to_bits()).collect();
    assert!(
        distinct.len() > 900,
        "m is not varied: {} distinct",
        distinct.len()
    );

    let f: Vec<f64> = inputs::rope_freq(32)
        .unwrap()
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(f[0], 1.0);
    assert!(f.windows(2).all(|w| w[1] < w[0] && w[1] > 0.0), "{f:?}");
    assert!(inputs::rope_freq(0).is_err());
}

#[test]
fn q8_0_latent_rows_are_varied_and_in_the_split_layout() {
    // V2-Lite rows: 576 values = 18 blocks, 624 bytes (576 quants, 36 scale bytes, 12 of padding).
    let data = ingot_bench::inputs::latent_q8_0_rows(4, 576, 1.0, 7).expect("rows");
    assert_eq!(data.len(), 4 * 624);
    for row in data.chunks_exact(624) {
        let quants: std::collections::HashSet<u8> = row[..576].iter().copied().collect();
        assert!(
            quants.len() > 100,
            "quants take many values: {}",
            quants.len()
        );
        for b in 0..18 {
            let d = half::f16::from_le_bytes([row[576 + 2 * b], row[577 + 2 * b]]).to_f32();
            // Gaussian values of unit deviation: a block's maximum is well above 0.
            assert!(d > 0.005 && d < 0.1, "block {b}: d = {d}");
            // One value of each block reaches ±127 (d = amax/127).
            assert!(row[32 * b..32 * b + 32]
                .iter()
                .any(|&q| q as i8 == 127 || q as i8 == -127));
        }
        assert!(row[612..].iter().all(|&x| x == 0), "padding is zero");
    }
}
