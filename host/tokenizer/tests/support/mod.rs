//! Test helpers: the golden vocabulary's tokenizer (read through ingot-gguf).

#![allow(dead_code)]

use ingot_gguf::GgufFile;
use ingot_tokenizer::Tokenizer;

/// The tokenizer of `golden/tiny-mla-f32/model.gguf`.
pub fn golden_tokenizer() -> Tokenizer {
    let path = ingot_testdata::golden_model("tiny-mla-f32");
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
    Tokenizer::from_gguf(file.header()).expect("golden vocabulary builds")
}
