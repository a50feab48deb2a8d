//! The three golden models of `shared/golden` (written by gguf-py; the q4_k_m one by
//! llama-quantize): they parse, carry the deepseek2 keys of their `config.json`, and are
//! canonical, so `rewrite` reproduces them byte for byte.

mod common;

use common::{golden_model, GOLDEN_MODELS};
use ingot_gguf::{rewrite, GgmlType, GgufFile};
use ingot_testdata::golden_dir;

/// A `"key": integer` value from the model's config.json (a flat JSON object of numbers).
fn config_int(model: &str, key: &str) -> u64 {
    let text = std::fs::read_to_string(golden_dir().join(model).join("config.json"))
        .expect("config.json readable");
    let pat = format!("\"{key}\":");
    let at = text
        .find(&pat)
        .unwrap_or_else(|| panic!("{key} in config.json"))
        + pat.len();
    let digits: String = text[at..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().expect("integer value")
}

#[test]
fn golden_models_parse_with_expected_metadata() {
    for model in GOLDEN_MODELS {
        let f = GgufFile::open(&golden_model(model)).expect(model);
        assert_eq!(f.get_str("general.architecture").unwrap(), "deepseek2");
        // README: 3 layers, hidden 128, 16 experts, vocab 512.
        assert_eq!(f.get_u64("deepseek2.block_count").unwrap(), 3, "{model}");
        assert_eq!(f.get_u64("deepseek2.embedding_length").unwrap(), 128);
        assert_eq!(f.get_u64("deepseek2.expert_count").unwrap(), 16);
        let tokens = f.get_str_array("tokenizer.ggml.tokens").unwrap();
        assert_eq!(tokens.len(), 512, "{model}");
        let embd = f.tensor("token_embd.weight").expect("token_embd.weight");
        assert_eq!(embd.ne, vec![128, 512]);
        assert_eq!(f.tensor_data(embd).len() as u64, embd.nbytes);
        println!(
            "{model}: v{} {} kv, {} tensors, data at {}, {} tensor bytes",
            f.version,
            f.kv.len(),
            f.tensors.len(),
            f.data_offset,
            f.total_tensor_bytes()
        );
    }
}

#[test]
fn golden_config_matches_metadata() {
    for model in ["tiny-mla-f32", "tiny-legacy-f32"] {
        let f = GgufFile::open(&golden_model(model)).unwrap();
        let pairs = [
            ("deepseek2.block_count", "n_layer"),
            ("deepseek2.embedding_length", "n_embd"),
            ("deepseek2.attention.head_count", "n_head"),
            ("deepseek2.attention.kv_lora_rank", "kv_lora"),
            ("deepseek2.expert_count", "n_expert"),
            ("deepseek2.expert_used_count", "n_expert_used"),
            ("deepseek2.expert_shared_count", "n_shared"),
            ("deepseek2.leading_dense_block_count", "n_dense_lead"),
            ("tokenizer.ggml.bos_token_id", "bos_id"),
            ("tokenizer.ggml.eos_token_id", "eos_id"),
        ];
        for (key, config_key) in pairs {
            assert_eq!(
                f.get_u64(key).unwrap(),
                config_int(model, config_key),
                "{model}: {key}"
            );
        }
        let merges = f.get_str_array("tokenizer.ggml.merges").unwrap();
        assert_eq!(merges.len() as u64, config_int(model, "n_merges"));
    }
}

#[test]
fn golden_tensor_counts_and_types() {
    // Per layer, from docs/deepseek2-model.md#tensors for this config (1 dense lead layer, 2 MoE
    // layers, q_lora absent):
    // shared: token_embd, output_norm, output = 3.
    // every layer: attn_norm, attn_q, attn_kv_a_mqa, attn_kv_a_norm, attn_output, ffn_norm = 6,
    //   plus attn_kv_b (legacy) or attn_k_b + attn_v_b (MLA split).
    // dense layer: ffn_gate, ffn_up, ffn_down = 3.
    // MoE layer: ffn_gate_inp, ffn_{gate,up,down}_exps, ffn_{gate,up,down}_shexp = 7
    //   (these models have no exp_probs_b gating bias).
    let f32_mla = GgufFile::open(&golden_model("tiny-mla-f32")).unwrap();
    let legacy = GgufFile::open(&golden_model("tiny-legacy-f32")).unwrap();
    let q4 = GgufFile::open(&golden_model("tiny-mla-q4_k_m")).unwrap();
    assert!(f32_mla.tensor("blk.0.attn_k_b.weight").is_some());
    assert!(legacy.tensor("blk.0.attn_kv_b.weight").is_some());
    assert!(legacy.tensor("blk.0.attn_k_b.weight").is_none());
    // The split layout has exactly one more tensor per layer than the fused one.
    assert_eq!(f32_mla.tensors.len(), legacy.tensors.len() + 3);
    assert_eq!(q4.tensors.len(), f32_mla.tensors.len());
    assert_eq!(legacy.tensors.len(), 3 + 3 * (6 + 1) + 3 + 2 * 7);
    assert!(f32_mla
        .tensors
        .iter()
        .all(|t| t.ty == GgmlType::F32 || t.ty == GgmlType::F16));
    assert!(q4.tensors.iter().any(|t| t.ty == GgmlType::Q4K));
    for t in &q4.tensors {
        assert_eq!(q4.tensor_data(t).len() as u64, t.nbytes, "{}", t.name);
    }
}

#[test]
fn golden_models_are_canonical() {
    let dir = tempfile::tempdir().unwrap();
    for model in GOLDEN_MODELS {
        let input = golden_model(model);
        let out = dir.path().join(format!("{model}.gguf"));
        rewrite(&input, &out).unwrap();
        let a = std::fs::read(&input).unwrap();
        let b = std::fs::read(&out).unwrap();
        assert_eq!(a.len(), b.len(), "{model}: length");
        let first_diff = a.iter().zip(&b).position(|(x, y)| x != y);
        assert_eq!(first_diff, None, "{model}: first differing byte");
    }
}
