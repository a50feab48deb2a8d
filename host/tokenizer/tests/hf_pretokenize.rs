//! (e) The pre-tokenizers llama.cpp ships no vocabulary test file for (deepseek-v3, glm4, kimi-k2),
//! against a second, independent reference: the HF `tokenizers` library (its Oniguruma engine, with
//! the look-ahead the `regex` crate lacks) running llama.cpp's own regex sequences, on llama.cpp's
//! tokenizer test texts and multilingual, code and whitespace lines (`scripts/pretok-reference.py`
//! wrote `testdata/golden/pretok/*.jsonl`). Every piece must be the same.

use ingot_tokenizer::{PreTokenizer, PreTokenizerKind};

/// The texts of `name`'s reference split differently by `kind`, and how many texts there are.
fn differences(name: &str, kind: PreTokenizerKind) -> (Vec<String>, usize) {
    let pre = PreTokenizer::new(kind);
    let path = ingot_testdata::golden(&format!("pretok/{name}.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut cases = 0;
    let mut wrong = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{name}.jsonl line {}: {e}", i + 1));
        let t = v["text"].as_str().expect("text");
        let want: Vec<&str> = v["pieces"]
            .as_array()
            .expect("pieces")
            .iter()
            .map(|p| p.as_str().expect("a piece is a string"))
            .collect();
        let got = pre.split(t);
        if got != want {
            wrong.push(format!("{t:?}\n  ingot: {got:?}\n  HF:    {want:?}"));
        }
        cases += 1;
    }
    assert!(
        cases >= 50,
        "{name}: only {cases} cases in {}",
        path.display()
    );
    (wrong, cases)
}

fn check(name: &str) {
    let kind = PreTokenizerKind::from_gguf_name(name).expect("an implemented pre-tokenizer");
    let (wrong, cases) = differences(name, kind);
    assert!(
        wrong.is_empty(),
        "{name}: {} of {cases} texts split differently from HF tokenizers:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn deepseek_v3_splits_as_hf_tokenizers_does() {
    check("deepseek-v3");
}

#[test]
fn glm4_splits_as_hf_tokenizers_does() {
    check("glm4");
}

#[test]
fn kimi_k2_splits_as_hf_tokenizers_does() {
    check("kimi-k2");
}

/// The references tell the pre-tokenizers apart: each file, split by another family's rules,
/// differs.
#[test]
fn another_pre_tokenizer_fails_each_reference() {
    for (name, other) in [
        ("deepseek-v3", PreTokenizerKind::Glm4),
        ("glm4", PreTokenizerKind::KimiK2),
        ("kimi-k2", PreTokenizerKind::DeepseekV3),
    ] {
        let (wrong, _) = differences(name, other);
        assert!(
            !wrong.is_empty(),
            "{name}: {other:?} splits every text alike"
        );
    }
}
