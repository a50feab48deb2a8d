//! `ingot slice` (the `slice` module) on the project's synthetic models: keeping every expert in
//! order is the identity on the file's bytes; a permutation of the experts is the same model (same
//! logits); a half slice is a model the CPU backend and the oracle agree on; bad keep lists and in
//! == out write nothing.

use std::path::{Path, PathBuf};

use ingot_gguf::GgufFile;
use ingot_model::slice::{slice, KeepList, SliceError};
use ingot_model::{CpuBackend, ModelConfig, Oracle};
use ingot_synth::{synthesize, Layout, Preset, QuantMix, SynthOptions};

const TOKENS: [u32; 5] = [300, 17, 104, 101, 32];

fn synth(dir: &Path, preset: Preset) -> PathBuf {
    let opts = SynthOptions {
        preset,
        layout: Layout::Mla,
        mix: QuantMix::Q4KM,
        seed: 5,
    };
    let path = dir.join(format!("{}.gguf", opts.model_name()));
    synthesize(&opts, &path, false).unwrap();
    path
}

fn config(path: &Path) -> ModelConfig {
    ModelConfig::from_gguf(GgufFile::open(path).unwrap().header()).unwrap()
}

/// A keep list giving every MoE layer the same ids.
fn every_layer(c: &ModelConfig, ids: &[usize]) -> KeepList {
    let layers: Vec<String> = (0..c.block_count())
        .filter(|&il| c.is_moe_layer(il))
        .map(|il| format!("\"{il}\": {ids:?}"))
        .collect();
    KeepList::from_json(&format!("{{{}}}", layers.join(", "))).unwrap()
}

/// The CPU backend's logits at every position of [`TOKENS`].
fn cpu_logits(path: &Path) -> Vec<Vec<f32>> {
    let file = GgufFile::open(path).unwrap();
    CpuBackend::load(&file, 16)
        .unwrap()
        .prefill(&TOKENS, 0)
        .unwrap()
}

fn max_abs_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    ingot_testdata::max_abs_diff(&a.concat(), &b.concat())
}

#[test]
fn keeping_every_expert_in_order_reproduces_the_file() {
    let dir = tempfile::tempdir().unwrap();
    for preset in [Preset::Tiny, Preset::TinyGlm] {
        let input = synth(dir.path(), preset);
        let out = dir.path().join("same.gguf");
        let report = slice(&input, &out, &KeepList::all(&config(&input))).unwrap();
        assert_eq!(report.experts_before, report.experts_after);
        assert!(report.tensors_sliced > 0, "{report:?}");
        assert!(
            std::fs::read(&input).unwrap() == std::fs::read(&out).unwrap(),
            "{preset:?}: the identity slice changed bytes"
        );
    }
}

/// Permuting experts (router rows, selection bias and every expert tensor together) is the same
/// model. The sum over chosen experts runs in selection order, which a consistent permutation
/// keeps, so the logits agree to f32 rounding; 1e-4 leaves room for a different order among exactly
/// tied scores, never for a mismatched router row (which changes logits at the 1e-1 level on these
/// models).
#[test]
fn a_permutation_of_the_experts_is_the_same_model() {
    let dir = tempfile::tempdir().unwrap();
    // tiny: softmax routing; tiny-v3: sigmoid with selection bias and 4 groups of 4 (each run of 4
    // new ids from one group); tiny-glm: its NextN/MTP block is a MoE block and is permuted too.
    let cases: [(Preset, Vec<usize>); 3] = [
        (Preset::Tiny, (0..16).rev().collect()),
        (
            Preset::TinyV3,
            [2, 3, 1, 0]
                .iter()
                .flat_map(|g| (0..4).rev().map(move |e| g * 4 + e))
                .collect(),
        ),
        (Preset::TinyGlm, (0..16).map(|e| (e * 5) % 16).collect()),
    ];
    for (preset, perm) in cases {
        let input = synth(dir.path(), preset);
        let c = config(&input);
        assert_eq!(c.n_expert, perm.len(), "{preset:?}");
        let out = dir.path().join("perm.gguf");
        slice(&input, &out, &every_layer(&c, &perm)).unwrap();
        assert_ne!(std::fs::read(&input).unwrap(), std::fs::read(&out).unwrap());
        let diff = max_abs_diff(&cpu_logits(&input), &cpu_logits(&out));
        assert!(
            diff <= 1e-4,
            "{preset:?}: permuted experts change logits by {diff}"
        );
    }
}

/// A file keeping part of the experts is a coherent model: it loads, and the CPU backend agrees
/// with the oracle on it as on any synthetic q4_k_m model (the synth_mixes band: 30% of the logits'
/// spread, checked here loosely as max |diff| below 1.0 on logits of spread ~1-2, which a
/// mismatched expert slab exceeds).
#[test]
fn a_half_slice_loads_and_decodes() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(Preset, Vec<usize>); 2] = [
        (Preset::Tiny, vec![1, 3, 4, 6, 9, 10, 12, 15]),
        // 4 groups of 3: two kept groups still hold the 6 experts a token uses.
        (
            Preset::TinyV3,
            vec![0, 1, 3, 4, 5, 6, 9, 10, 11, 12, 14, 15],
        ),
    ];
    for (preset, ids) in cases {
        let input = synth(dir.path(), preset);
        let c = config(&input);
        let out = dir.path().join("half.gguf");
        let report = slice(&input, &out, &every_layer(&c, &ids)).unwrap();
        assert_eq!(report.experts_after, ids.len());
        assert!(std::fs::metadata(&out).unwrap().len() < std::fs::metadata(&input).unwrap().len());
        let sliced = config(&out);
        assert_eq!(sliced.n_expert, ids.len());
        let file = GgufFile::open(&out).unwrap();
        let want = Oracle::load(&file, 16)
            .unwrap()
            .prefill(&TOKENS, 0)
            .unwrap();
        let got = cpu_logits(&out);
        assert!(got.concat().iter().all(|x| x.is_finite()));
        let diff = max_abs_diff(&want, &got);
        assert!(
            diff < 1.0,
            "{preset:?}: cpu vs oracle on the sliced model differ by {diff}"
        );
    }
}

#[test]
fn bad_keep_lists_and_in_equals_out_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = synth(dir.path(), Preset::Tiny);
    let v3 = synth(dir.path(), Preset::TinyV3);
    let out = dir.path().join("out.gguf");
    let cases: [(&Path, &str, &str); 9] = [
        (
            &tiny,
            r#"{"1": [0, 1, 2, 3, 4, 5]}"#,
            "MoE layer 2 is not named",
        ),
        (
            &tiny,
            r#"{"0": [0,1,2,3,4,5], "1": [0,1,2,3,4,5], "2": [0,1,2,3,4,5]}"#,
            "layer 0 is not a MoE layer",
        ),
        (
            &tiny,
            r#"{"1": [0, 1, 2, 3, 4, 5], "2": [0, 1, 2, 3, 4, 5, 6]}"#,
            "must keep the same number",
        ),
        (
            &tiny,
            r#"{"1": [0, 1, 2, 3, 4, 16], "2": [0, 1, 2, 3, 4, 5]}"#,
            "names expert 16",
        ),
        (
            &tiny,
            r#"{"1": [0, 1, 2, 3, 4, 4], "2": [0, 1, 2, 3, 4, 5]}"#,
            "names expert 4 twice",
        ),
        (
            &tiny,
            r#"{"1": [0, 1, 2], "2": [0, 1, 2]}"#,
            "fewer than the 6",
        ),
        (&tiny, r#"{"1": [0, 1, 2,"#, "not valid JSON"),
        (&tiny, r#"[[0, 1, 2]]"#, "expected a JSON object"),
        (
            &v3,
            r#"{"1": [0, 1, 4, 2, 5, 6, 8, 9, 10, 12, 13, 14], "2": [0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14]}"#,
            "mixes experts of different groups",
        ),
    ];
    for (input, json, want) in cases {
        let err = KeepList::from_json(json).and_then(|keep| slice(input, &out, &keep));
        let msg = err.expect_err(json).to_string();
        assert!(msg.contains(want), "{json}: {msg:?} does not say {want:?}");
        assert!(!out.exists(), "{json}: an output was written");
    }

    let before = std::fs::read(&tiny).unwrap();
    let err = slice(&tiny, &tiny, &KeepList::all(&config(&tiny))).unwrap_err();
    assert!(matches!(err, SliceError::Gguf(_)), "{err}");
    assert!(err.to_string().contains("is the input"), "{err}");
    assert_eq!(std::fs::read(&tiny).unwrap(), before, "the input changed");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp."))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}
