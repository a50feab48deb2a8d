//! Members of the deepseek2 family built from the golden models by editing their files: tied
//! output, merged gate/up experts, stripped or malformed NextN/MTP blocks, Mistral Large 3's
//! attention temperature. Each variant holds the same numbers as its source in another arrangement
//! (or differs by exactly one documented rule), so the logits of both backends must match the
//! source's bit for bit, or change exactly as the rule says.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use ingot_gguf::{GgufFile, MetaValue};
use ingot_model::{
    config::{AttnTemperature, ExpertGateUp},
    CpuBackend, ModelConfig, ModelError, Oracle,
};
use ingot_synth::variant::{merge_gate_up, tensors_of, write_variant, Tensor};

fn golden_file(model: &str) -> GgufFile {
    let path = ingot_testdata::golden_model(model);
    GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Writes `src`'s keys (with `set` applied) and `tensors` to `dir/name`.
fn write(
    dir: &Path,
    name: &str,
    src: &GgufFile,
    set: &[(&str, MetaValue)],
    tensors: &[Tensor],
) -> PathBuf {
    let path = dir.join(name);
    write_variant(&path, src, set, tensors).unwrap();
    path
}

/// Both backends' logits over the 16-token prompt.
fn logits(path: &Path) -> [Vec<Vec<f32>>; 2] {
    let file = GgufFile::open(path).unwrap();
    let oracle = Oracle::load(&file, 64)
        .unwrap()
        .prefill(&PROMPT16, 0)
        .unwrap();
    let cpu = CpuBackend::load(&file, 64)
        .unwrap()
        .prefill(&PROMPT16, 0)
        .unwrap();
    [oracle, cpu]
}

#[test]
fn tied_output_uses_token_embd() {
    let dir = tempfile::tempdir().unwrap();
    for model in ["tiny-v3-f32", "tiny-v3-q4_k_m"] {
        let src = golden_file(model);
        let mut tensors = tensors_of(&src);
        let embd = tensors
            .iter()
            .position(|t| t.name == "token_embd.weight")
            .unwrap();
        let out = tensors
            .iter()
            .position(|t| t.name == "output.weight")
            .unwrap();
        // Reference: an untied file whose output.weight holds token_embd's bytes.
        let (ty, data) = (tensors[embd].ty, tensors[embd].data.clone());
        tensors[out].ty = ty;
        tensors[out].data = data;
        let untied = write(dir.path(), "untied.gguf", &src, &[], &tensors);
        tensors.remove(out);
        let tied = write(dir.path(), "tied.gguf", &src, &[], &tensors);
        let c = ModelConfig::from_gguf(GgufFile::open(&tied).unwrap().header()).unwrap();
        assert!(c.tied_output);
        assert_eq!(c.output_tensor(), "token_embd.weight");
        assert_eq!(logits(&tied), logits(&untied), "{model}");
    }
}

#[test]
fn merged_gate_up_experts_give_the_same_logits() {
    let dir = tempfile::tempdir().unwrap();
    for model in ["tiny-v3-f32", "tiny-v3-q4_k_m", "tiny-glm-f32"] {
        let src = golden_file(model);
        let merged = merge_gate_up(&tensors_of(&src)).unwrap();
        let path = write(dir.path(), "merged.gguf", &src, &[], &merged);
        let c = ModelConfig::from_gguf(GgufFile::open(&path).unwrap().header()).unwrap();
        assert_eq!(c.gate_up, ExpertGateUp::Merged);
        let plain = ingot_testdata::golden_model(model);
        assert_eq!(logits(&path), logits(&plain), "{model}");
    }
}

#[test]
fn mtp_block_may_be_stripped_but_not_malformed() {
    let dir = tempfile::tempdir().unwrap();
    let src = golden_file("tiny-glm-f32");
    let all = tensors_of(&src);
    let full = ModelConfig::from_gguf(src.header()).unwrap();
    assert_eq!((full.n_layer, full.n_nextn), (3, 1));

    // llama.cpp loads trunk-only files (the MTP tensors dropped): same logits, same bytes per
    // token.
    let trunk: Vec<Tensor> = all
        .iter()
        .filter(|t| !t.name.starts_with("blk.3."))
        .cloned()
        .collect();
    let stripped = write(dir.path(), "stripped.gguf", &src, &[], &trunk);
    let c = ModelConfig::from_gguf(GgufFile::open(&stripped).unwrap().header()).unwrap();
    assert_eq!(c.bytes_per_token(), full.bytes_per_token());
    assert_eq!(
        logits(&stripped),
        logits(&ingot_testdata::golden_model("tiny-glm-f32"))
    );

    // A present MTP tensor is still checked.
    let mut bad = all.clone();
    let eh = bad
        .iter_mut()
        .find(|t| t.name == "blk.3.nextn.eh_proj.weight")
        .unwrap();
    eh.ne = vec![128, 256];
    let path = write(dir.path(), "bad.gguf", &src, &[], &bad);
    let err = ModelConfig::from_gguf(GgufFile::open(&path).unwrap().header()).unwrap_err();
    assert!(
        matches!(&err, ModelError::TensorShape { name, .. } if name == "blk.3.nextn.eh_proj.weight"),
        "{err}"
    );

    // Without nextn_predict_layers the MTP block would be a trunk layer: the count must leave a
    // trunk.
    let path = write(
        dir.path(),
        "all-mtp.gguf",
        &src,
        &[("deepseek2.nextn_predict_layers", MetaValue::U32(4))],
        &bad,
    );
    let err = ModelConfig::from_gguf(GgufFile::open(&path).unwrap().header()).unwrap_err();
    assert!(matches!(err, ModelError::InvalidValue { .. }), "{err}");
}

#[test]
fn attention_temperature_follows_llama_cpp() {
    // ln(floor(pos / length) + 1) · scale + 1 (llama.cpp, offset 0 for deepseek2).
    let t = AttnTemperature {
        scale: 0.5,
        length: 4,
    };
    for (pos, want) in [
        (0, 1.0),
        (3, 1.0),
        (4, 1.0 + 0.5 * 2f64.ln()),
        (11, 1.0 + 0.5 * 3f64.ln()),
    ] {
        assert!((t.factor(pos) as f64 - want).abs() < 1e-6, "pos {pos}");
    }

    let dir = tempfile::tempdir().unwrap();
    let src = golden_file("tiny-v3-f32");
    let tensors = tensors_of(&src);
    let with = |scale: f32, length: u32| {
        vec![
            (
                "deepseek2.attention.temperature_scale",
                MetaValue::F32(scale),
            ),
            (
                "deepseek2.attention.temperature_length",
                MetaValue::U32(length),
            ),
        ]
    };
    // A period longer than the prompt keeps the factor at 1: the logits are the plain model's.
    let long = write(dir.path(), "long.gguf", &src, &with(0.3, 1000), &tensors);
    let plain = logits(&ingot_testdata::golden_model("tiny-v3-f32"));
    assert_eq!(logits(&long), plain);
    // Period 4: positions 0-3 are unchanged, later ones are not; oracle and cpu agree on them.
    let short = write(dir.path(), "short.gguf", &src, &with(0.3, 4), &tensors);
    let [oracle, cpu] = logits(&short);
    assert_eq!(oracle[..4], plain[0][..4]);
    for pos in 4..PROMPT16.len() {
        let moved = max_abs_diff(&oracle[pos], &plain[0][pos]);
        assert!(moved > 1e-3, "position {pos} moved only {moved}");
        // f32 weights: the CPU backend differs from the oracle by rounding only (golden band 1e-4).
        let d = max_abs_diff(&oracle[pos], &cpu[pos]);
        assert!(d < 1e-4, "position {pos}: cpu vs oracle {d}");
    }
    // A scale without its period is refused.
    let path = write(
        dir.path(),
        "no-length.gguf",
        &src,
        &[("deepseek2.attention.temperature_scale", MetaValue::F32(0.3))],
        &tensors,
    );
    let err = ModelConfig::from_gguf(GgufFile::open(&path).unwrap().header()).unwrap_err();
    assert!(err.to_string().contains("temperature_length"), "{err}");
}
