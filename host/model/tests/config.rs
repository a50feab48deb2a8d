//! `ModelConfig::from_gguf` on the golden headers and on deliberately broken copies of them.

mod common;

use ingot_gguf::{Gguf, GgufFile, MetaValue};
use ingot_model::{AttnLayout, GatingFunc, ModelConfig, ModelError, RopeScalingType};

fn header(model: &str) -> Gguf {
    let path = ingot_testdata::golden_model(model);
    GgufFile::open(&path)
        .expect("golden file opens")
        .header()
        .clone()
}

fn set_key(g: &mut Gguf, key: &str, value: MetaValue) {
    match g.kv.iter_mut().find(|(k, _)| k == key) {
        Some(entry) => entry.1 = value,
        None => g.kv.push((key.to_owned(), value)),
    }
}

fn remove_key(g: &mut Gguf, key: &str) {
    let before = g.kv.len();
    g.kv.retain(|(k, _)| k != key);
    assert_eq!(g.kv.len() + 1, before, "{key} was present");
}

#[test]
fn tiny_mla_header_gives_the_documented_dimensions() {
    let c = ModelConfig::from_gguf(&header("tiny-mla-f32")).unwrap();
    // golden/tiny-mla-f32/config.json
    assert_eq!(
        (c.n_embd, c.n_head, c.n_layer, c.n_dense_lead),
        (128, 4, 3, 1)
    );
    assert_eq!(
        (c.kv_lora, c.d_nope, c.d_rope, c.d_v, c.q_lora),
        (64, 32, 16, 32, None)
    );
    assert_eq!((c.n_expert, c.n_expert_used, c.n_expert_shared), (16, 6, 2));
    assert_eq!(
        (c.ff_dense, c.ff_expert, c.vocab, c.n_ctx_train),
        (256, 64, 512, 163840)
    );
    assert_eq!(
        (c.gating, c.expert_weights_norm, c.expert_weights_scale),
        (GatingFunc::Softmax, false, 1.0)
    );
    assert_eq!(c.n_expert_group, 1);
    assert!(!c.has_expert_bias);
    assert_eq!(c.layout, AttnLayout::Mla);
    assert_eq!(c.rope.scaling, RopeScalingType::Yarn);
    assert_eq!((c.rope.freq_scale, c.rope.n_ctx_orig), (1.0 / 40.0, 4096));
    // V2-Lite's YaRN keys with this model's d_qk = 48: kq_scale = (1 + 0.0707·ln 40)² / sqrt(48).
    let want = (1.0 + 0.0707f64 * 40f64.ln()).powi(2) / 48f64.sqrt();
    assert!(
        (c.kq_scale as f64 - want).abs() < 1e-6,
        "{} vs {want}",
        c.kq_scale
    );
}

#[test]
fn legacy_header_selects_the_legacy_layout_with_the_same_dims() {
    let mla = ModelConfig::from_gguf(&header("tiny-mla-f32")).unwrap();
    let legacy = ModelConfig::from_gguf(&header("tiny-legacy-f32")).unwrap();
    assert_eq!(legacy.layout, AttnLayout::Legacy);
    assert_eq!(
        (legacy.d_nope, legacy.d_rope, legacy.d_v),
        (mla.d_nope, mla.d_rope, mla.d_v)
    );
    assert_eq!(legacy.kq_scale, mla.kq_scale);
}

#[test]
fn bytes_per_token_counts_used_experts_and_one_embedding_row() {
    // f32 weights, counted by hand from config.json: per layer attention 67,904 params; dense FFN
    // 3·128·256; MoE router 128·16 + 6/16 of 3·128·64·16 experts + shared 3·128·128; head 128 +
    // 128·512; one 128 row.
    let attention = 128 + 128 * 192 + 128 * 80 + 64 + 32 * 64 * 4 + 64 * 32 * 4 + 128 * 128 + 128;
    let dense = 3 * 128 * 256;
    let moe = 128 * 16 + 3 * 128 * 64 * 6 + 3 * 128 * 128;
    let params = 128 + 128 + 128 * 512 + 3 * attention + dense + 2 * moe;
    for model in ["tiny-mla-f32", "tiny-legacy-f32"] {
        let c = ModelConfig::from_gguf(&header(model)).unwrap();
        assert_eq!(c.bytes_per_token(), 4 * params as u64, "{model}");
    }
    // The quantized file streams fewer bytes than its f32 parent.
    let q = ModelConfig::from_gguf(&header("tiny-mla-q4_k_m")).unwrap();
    assert!(
        q.bytes_per_token() < 4 * params as u64 / 3,
        "{}",
        q.bytes_per_token()
    );
}

#[test]
fn wrong_architecture_is_named() {
    let mut g = header("tiny-mla-f32");
    set_key(
        &mut g,
        "general.architecture",
        MetaValue::String("llama".into()),
    );
    assert_eq!(
        ModelConfig::from_gguf(&g),
        Err(ModelError::WrongArchitecture {
            found: "llama".into()
        })
    );
}

#[test]
fn missing_required_key_is_named() {
    let mut g = header("tiny-mla-f32");
    remove_key(&mut g, "deepseek2.attention.kv_lora_rank");
    assert_eq!(
        ModelConfig::from_gguf(&g),
        Err(ModelError::MissingKey {
            key: "deepseek2.attention.kv_lora_rank".into()
        })
    );
}

#[test]
fn q_lora_rank_may_only_be_omitted_by_lite_depths() {
    let mut g = header("tiny-mla-f32");
    remove_key(&mut g, "deepseek2.attention.q_lora_rank");
    assert_eq!(
        ModelConfig::from_gguf(&g),
        Err(ModelError::MissingKey {
            key: "deepseek2.attention.q_lora_rank".into()
        })
    );
}

#[test]
fn key_of_wrong_type_is_named() {
    let mut g = header("tiny-mla-f32");
    set_key(
        &mut g,
        "deepseek2.embedding_length",
        MetaValue::String("128".into()),
    );
    assert!(matches!(
        ModelConfig::from_gguf(&g),
        Err(ModelError::KeyType { key, .. }) if key == "deepseek2.embedding_length"
    ));
}

#[test]
fn more_used_experts_than_experts_is_rejected() {
    let mut g = header("tiny-mla-f32");
    set_key(&mut g, "deepseek2.expert_used_count", MetaValue::U32(17));
    assert!(matches!(
        ModelConfig::from_gguf(&g),
        Err(ModelError::InvalidValue { key, .. }) if key == "deepseek2.expert_used_count"
    ));
}

#[test]
fn unknown_gating_function_is_unsupported() {
    let mut g = header("tiny-mla-f32");
    set_key(&mut g, "deepseek2.expert_gating_func", MetaValue::U32(4));
    assert!(matches!(
        ModelConfig::from_gguf(&g),
        Err(ModelError::Unsupported(_))
    ));
}

#[test]
fn wrong_tensor_shape_names_tensor_expected_and_found() {
    let mut g = header("tiny-mla-f32");
    let t = g
        .tensors
        .iter_mut()
        .find(|t| t.name == "blk.1.attn_kv_a_mqa.weight")
        .unwrap();
    t.ne = vec![128, 81];
    assert_eq!(
        ModelConfig::from_gguf(&g),
        Err(ModelError::TensorShape {
            name: "blk.1.attn_kv_a_mqa.weight".into(),
            expected: vec![128, 80],
            found: vec![128, 81],
        })
    );
}

#[test]
fn hyper_parameter_disagreeing_with_tensors_is_a_shape_error() {
    // A header claiming 8 experts while the tensors hold 16 fails on the first expert-sized tensor.
    let mut g = header("tiny-mla-f32");
    set_key(&mut g, "deepseek2.expert_count", MetaValue::U32(8));
    assert!(matches!(
        ModelConfig::from_gguf(&g),
        Err(ModelError::TensorShape { name, .. }) if name == "blk.1.ffn_gate_inp.weight"
    ));
}

#[test]
fn missing_tensor_is_named() {
    let mut g = header("tiny-legacy-f32");
    g.tensors.retain(|t| t.name != "blk.2.ffn_down_exps.weight");
    assert_eq!(
        ModelConfig::from_gguf(&g),
        Err(ModelError::MissingTensor {
            name: "blk.2.ffn_down_exps.weight".into()
        })
    );
}

#[test]
fn file_without_any_attention_up_projection_is_rejected() {
    let mut g = header("tiny-mla-f32");
    g.tensors.retain(|t| !t.name.starts_with("blk.0.attn_k_b"));
    assert!(
        matches!(ModelConfig::from_gguf(&g), Err(ModelError::MissingTensor { name }) if name.contains("attn_kv_b"))
    );
}

/// The full-size family headers of `ingot synth` (no weights) configure as the released models do.
#[test]
fn full_size_family_headers_configure() {
    use ingot_synth::{header, Layout, Preset, QuantMix, SynthOptions};
    let config = |preset| {
        let opts = SynthOptions {
            preset,
            layout: Layout::Mla,
            mix: QuantMix::Q4KM,
            seed: 1,
        };
        ModelConfig::from_gguf(&header(&opts).unwrap()).unwrap()
    };
    let v3 = config(Preset::V3);
    assert_eq!((v3.n_layer, v3.n_dense_lead, v3.n_head), (61, 3, 128));
    assert_eq!(
        (v3.q_lora, v3.n_expert, v3.n_expert_used),
        (Some(1536), 256, 8)
    );
    assert_eq!((v3.n_expert_group, v3.n_expert_group_used), (8, 4));
    assert_eq!((v3.gating, v3.has_expert_bias), (GatingFunc::Sigmoid, true));
    let k2 = config(Preset::K2);
    assert_eq!((k2.n_head, k2.n_expert, k2.n_expert_used), (64, 384, 8));
    // GLM-4.7-Flash: 47 decoding layers plus the MTP block, no gating key: llama.cpp's fallback
    // picks sigmoid.
    let glm = config(Preset::Glm47Flash);
    assert_eq!((glm.n_layer, glm.n_nextn, glm.n_head), (47, 1, 20));
    assert_eq!((glm.q_lora, glm.d_nope, glm.d_v), (Some(768), 192, 256));
    assert_eq!(glm.gating, GatingFunc::Sigmoid);
    for (name, c) in [("v3", &v3), ("k2", &k2), ("glm-4.7-flash", &glm)] {
        println!(
            "{name}: {:.2} GB of weights per token (q4_k_m)",
            c.bytes_per_token() as f64 / 1e9
        );
    }
    // The fallback needs both the layer count and the vocabulary: the same header with another
    // vocabulary size routes by softmax (the DeepSeek-V2/V2.5 rule).
    let opts = SynthOptions {
        preset: Preset::Glm47Flash,
        layout: Layout::Mla,
        mix: QuantMix::Q4KM,
        seed: 1,
    };
    let mut g = header(&opts).unwrap();
    set_key(&mut g, "deepseek2.vocab_size", MetaValue::U32(154_881));
    for t in g.tensors.iter_mut() {
        if t.name == "token_embd.weight" || t.name == "output.weight" {
            t.ne[1] = 154_881;
        }
    }
    assert_eq!(
        ModelConfig::from_gguf(&g).unwrap().gating,
        GatingFunc::Softmax
    );
}

/// `block_count` values no file of this size can hold. Each must be refused by the structural
/// check, which names the key and runs before any list is sized from the count: a check that ran
/// after the per-block tensor lists were built would report a missing `blk.N` tensor instead (after
/// gigabytes at 10^7, an abort at 2^31).
#[test]
fn block_count_beyond_the_tensor_table_is_refused_before_any_list_is_built() {
    use ingot_synth::variant::{tensors_of, write_variant};
    let src = GgufFile::open(&ingot_testdata::golden_model("tiny-mla-f32")).unwrap();
    let tensors = tensors_of(&src);
    let dir = tempfile::tempdir().unwrap();
    for (i, count) in [1_000_000u32, 10_000_000, 1 << 31, u32::MAX]
        .into_iter()
        .enumerate()
    {
        let path = dir.path().join(format!("blocks-{i}.gguf"));
        let set = [("deepseek2.block_count", MetaValue::U32(count))];
        write_variant(&path, &src, &set, &tensors).unwrap();
        let file = GgufFile::open(&path).unwrap();
        let err = ModelConfig::from_gguf(file.header()).unwrap_err();
        match &err {
            ModelError::InvalidValue { key, reason } => {
                assert_eq!(key, "deepseek2.block_count", "{err}");
                assert!(reason.starts_with(&count.to_string()), "{err}");
            }
            other => panic!("block_count {count}: {other}"),
        }
    }
}

/// NextN/MTP blocks are optional (not counted against the tensor table), so their count is bounded
/// by the decoding layers instead: otherwise a file with three real layers could still claim 10^6
/// optional blocks.
#[test]
fn nextn_blocks_beyond_the_decoding_layers_are_refused() {
    let mut g = header("tiny-mla-f32");
    set_key(&mut g, "deepseek2.block_count", MetaValue::U32(1_000_003));
    set_key(
        &mut g,
        "deepseek2.nextn_predict_layers",
        MetaValue::U32(1_000_000),
    );
    let err = ModelConfig::from_gguf(&g).unwrap_err();
    assert!(
        matches!(&err, ModelError::InvalidValue { key, reason }
            if key == "deepseek2.nextn_predict_layers" && reason.starts_with("1000000 ")),
        "{err}"
    );
}
