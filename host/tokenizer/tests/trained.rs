//! The trained demo model's vocabulary (`golden/trained-rust-std`): ingot's tokenizer must split
//! and merge exactly as the HF `tokenizers` BPE it was trained with (DeepSeek-V3's pre-tokenizer,
//! byte-level BPE). `tokenize.tsv` holds HF's ids for held-out Rust sources and edge cases (digits,
//! whitespace runs, CJK, emoji), written by `scripts/train/train.py`; any difference in the
//! pre-tokenizer regexes or the merge ranks shows up as a different id sequence.
#![cfg(feature = "gguf")]

use ingot_gguf::GgufFile;
use ingot_tokenizer::Tokenizer;

/// Undoes train.py's escaping (`\\`, `\n`, `\r`, `\t`).
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('\\') => out.push('\\'),
            other => panic!("bad escape \\{other:?} in {s:?}"),
        }
    }
    out
}

#[test]
fn trained_vocab_matches_hf_tokenizers() {
    let model = ingot_testdata::golden("trained-rust-std/model.gguf");
    let file = GgufFile::open(&model).unwrap_or_else(|e| panic!("{e}"));
    let tok = Tokenizer::from_gguf(file.header()).expect("trained vocabulary builds");
    assert_eq!(tok.n_vocab(), 1024);
    assert_eq!(tok.bos(), Some(1022));
    assert!(tok.is_eog(1023));
    let tsv = std::fs::read_to_string(ingot_testdata::golden("trained-rust-std/tokenize.tsv"))
        .expect("tokenize.tsv");
    let mut checked = 0;
    for line in tsv.lines().filter(|l| !l.is_empty()) {
        let (text, ids) = line.rsplit_once('\t').expect("text TAB ids");
        let text = unescape(text);
        let want: Vec<u32> = ids
            .trim_matches(|c| c == '[' || c == ']')
            .split(',')
            .map(|x| x.trim().parse().expect("id"))
            .collect();
        assert_eq!(tok.encode(&text, true, false), want, "text {text:?}");
        assert_eq!(tok.decode(&want), text);
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} lines checked");
}
