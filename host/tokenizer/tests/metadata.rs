//! Building `VocabParts` from GGUF-style metadata through a lookup closure: types and errors.

use std::collections::HashMap;

use ingot_tokenizer::{vocab_parts_from_metadata, MetaRef, Tokenizer, TokenizerError};

fn base() -> HashMap<&'static str, MetaRef<'static>> {
    HashMap::from([
        ("tokenizer.ggml.model", MetaRef::Str("gpt2")),
        ("tokenizer.ggml.pre", MetaRef::Str("deepseek-llm")),
        (
            "tokenizer.ggml.tokens",
            MetaRef::StrArray(vec!["a", "b", "ab", "<s>"]),
        ),
        ("tokenizer.ggml.merges", MetaRef::StrArray(vec!["a b"])),
        (
            "tokenizer.ggml.token_type",
            MetaRef::IntArray(vec![1, 1, 1, 3]),
        ),
        ("tokenizer.ggml.bos_token_id", MetaRef::Uint(3)),
        ("tokenizer.ggml.eos_token_id", MetaRef::Int(3)),
        ("tokenizer.ggml.add_bos_token", MetaRef::Bool(true)),
    ])
}

fn parse(
    meta: &HashMap<&'static str, MetaRef<'static>>,
) -> Result<ingot_tokenizer::VocabParts<'static>, TokenizerError> {
    vocab_parts_from_metadata(|k| meta.get(k).cloned())
}

#[test]
fn complete_metadata_builds_a_working_tokenizer() {
    let parts = parse(&base()).unwrap();
    assert_eq!(parts.bos, Some(3));
    assert_eq!(parts.add_eos, None);
    let tok = Tokenizer::from_parts(parts).unwrap();
    assert_eq!(tok.encode("ab", true, false), vec![3, 2]);
}

#[test]
fn missing_and_mistyped_keys_are_named() {
    let mut m = base();
    m.remove("tokenizer.ggml.tokens");
    assert_eq!(
        parse(&m).unwrap_err(),
        TokenizerError::MissingKey("tokenizer.ggml.tokens")
    );

    let mut m = base();
    m.insert("tokenizer.ggml.merges", MetaRef::IntArray(vec![1]));
    assert_eq!(
        parse(&m).unwrap_err(),
        TokenizerError::MetadataType {
            key: "tokenizer.ggml.merges",
            expected: "an array of strings"
        }
    );

    let mut m = base();
    m.insert("tokenizer.ggml.add_bos_token", MetaRef::Uint(1));
    assert!(matches!(
        parse(&m).unwrap_err(),
        TokenizerError::MetadataType {
            key: "tokenizer.ggml.add_bos_token",
            ..
        }
    ));

    let mut m = base();
    m.insert("tokenizer.ggml.eos_token_id", MetaRef::Int(-1));
    assert_eq!(
        parse(&m).unwrap_err(),
        TokenizerError::BadTokenId {
            key: "tokenizer.ggml.eos_token_id",
            value: -1
        }
    );
    let msg = parse(&m).unwrap_err().to_string();
    assert!(msg.contains("eos_token_id") && msg.contains("-1"), "{msg}");
}

#[test]
fn optional_keys_may_be_absent() {
    let mut m = base();
    for k in [
        "tokenizer.ggml.merges",
        "tokenizer.ggml.token_type",
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.add_bos_token",
    ] {
        m.remove(k);
    }
    let tok = Tokenizer::from_parts(parse(&m).unwrap()).unwrap();
    // No merges: "ab" stays two tokens; no BOS is added; "<s>" is an ordinary token without a type
    // array.
    assert_eq!(tok.encode("ab", true, false), vec![0, 1]);
    assert_eq!(tok.bos(), None);
}
