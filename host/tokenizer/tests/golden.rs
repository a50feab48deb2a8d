//! (a) llama.cpp's ids for `shared/golden/tokenize.tsv` with the vocabulary of
//! `tiny-mla-f32/model.gguf` (512 tokens, 254 merges, `deepseek-llm` pre-tokenizer, BOS 510 added),
//! reproduced exactly.
#![cfg(feature = "gguf")]

mod support;

use ingot_testdata::golden_dir;
use support::golden_tokenizer;

fn parse_ids(s: &str) -> Vec<u32> {
    s.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .map(|x| x.trim().parse().expect("id"))
        .collect()
}

#[test]
fn golden_tsv_matches_llama_cpp_exactly() {
    let tok = golden_tokenizer();
    assert_eq!(tok.n_vocab(), 512);
    assert_eq!(tok.bos(), Some(510));
    assert_eq!(tok.eos(), Some(511));
    let tsv = std::fs::read_to_string(golden_dir().join("tokenize.tsv")).expect("tokenize.tsv");
    let mut checked = 0;
    for line in tsv.lines().filter(|l| !l.is_empty()) {
        let (text, ids) = line.split_once('\t').expect("text TAB ids");
        let want = parse_ids(ids);
        // llama.cpp's tokenize tool: add_special = true (BOS per add_bos_token), parse_special =
        // false.
        assert_eq!(tok.encode(text, true, false), want, "text {text:?}");
        // Decoding drops BOS and gives the text back.
        assert_eq!(tok.decode(&want), text);
        checked += 1;
    }
    assert_eq!(checked, 5, "every golden line was checked");
}

#[test]
fn golden_vocab_flags() {
    let tok = golden_tokenizer();
    assert!(tok.add_bos());
    assert!(tok.is_eog(511));
    assert!(!tok.is_eog(510));
    assert_eq!(tok.n_merges(), 254);
    assert_eq!(tok.token_bytes(510), "<｜begin▁of▁sentence｜>".as_bytes());
    // Token 32 is the byte-level token of the space (visible form 'Ġ').
    assert_eq!(tok.token_bytes(32), b" ");
    assert_eq!(tok.token_bytes(512), b"");
}
