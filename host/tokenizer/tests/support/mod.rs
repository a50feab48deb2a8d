//! Test helpers: where the golden data lives, and the golden vocabulary's tokenizer (read through ingot-gguf).

#![allow(dead_code)]

use std::path::PathBuf;

use ingot_gguf::GgufFile;
use ingot_tokenizer::Tokenizer;

/// `shared/golden`, looked up beside the checkout (`../shared`, as CI lays it out), inside it (`shared/`), then
/// at `/work/shared`; `INGOT_GOLDEN_DIR` overrides.
pub fn golden_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("INGOT_GOLDEN_DIR") {
        return PathBuf::from(dir);
    }
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let candidates = [
        manifest.join("../../../shared/golden"),
        manifest.join("../../shared/golden"),
        PathBuf::from("/work/shared/golden"),
    ];
    candidates
        .iter()
        .find(|p| p.join("tokenize.tsv").is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!("golden data not found (tried {candidates:?}); set INGOT_GOLDEN_DIR")
        })
}

/// The tokenizer of `golden/tiny-mla-f32/model.gguf`.
pub fn golden_tokenizer() -> Tokenizer {
    let path = golden_dir().join("tiny-mla-f32/model.gguf");
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
    Tokenizer::from_gguf(file.header()).expect("golden vocabulary builds")
}
