//! llama.cpp's own tokenizer test files (`tests/test-tokenizer-0` in llama.cpp) for the DeepSeek
//! vocabularies: every text must give llama.cpp's ids, token for token (no BOS, special tokens
//! not parsed, as that test tokenizes).

use ingot_gguf::GgufFile;
use ingot_tokenizer::Tokenizer;

fn check(name: &str) {
    let (path, cases) = ingot_testdata::llama_cpp_vocab_tests(name);
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let tok = Tokenizer::from_gguf(file.header()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut wrong = Vec::new();
    for (text, want) in &cases {
        let got = tok.encode(text, false, false);
        if &got != want {
            wrong.push(format!(
                "{text:?}\n    llama.cpp {want:?}\n    ingot     {got:?}"
            ));
        }
    }
    println!(
        "{name}: {} of {} cases match llama.cpp",
        cases.len() - wrong.len(),
        cases.len()
    );
    assert!(
        wrong.is_empty(),
        "{name}: {} of {} cases differ:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}

#[test]
fn deepseek_coder_matches_llama_cpp() {
    check("deepseek-coder");
}

#[test]
fn deepseek_llm_matches_llama_cpp() {
    check("deepseek-llm");
}
