//! (d) Pre-tokenizer splits on tricky text, against splits derived by hand from llama.cpp's regex
//! sequences (the derivation of each case is in the comment above it).

use ingot_tokenizer::{PreTokenizer, PreTokenizerKind};

fn deepseek_llm(text: &str) -> Vec<&str> {
    PreTokenizer::new(PreTokenizerKind::DeepseekLlm).split(text)
}

#[test]
fn deepseek_llm_mixed_text() {
    // [\r\n] cuts out both newlines; letters take "Hello", " world", "abc"; punctuation takes ","
    // and "!"; the CJK rule takes "中文" out of " 123 中文"; \p{N}+ then splits " 123 " into " ",
    // "123", " ".
    assert_eq!(
        deepseek_llm("Hello, world! 123 中文\n\nabc"),
        vec!["Hello", ",", " world", "!", " ", "123", " ", "中文", "\n", "\n", "abc"]
    );
}

#[test]
fn deepseek_llm_digits_and_operators() {
    // Letters: "x", "e"; punctuation: "=", ".", ";" (digits are outside [!-/:-~]); \p{N}+: "1",
    // "5", "10".
    assert_eq!(
        deepseek_llm("x=1.5e10;"),
        vec!["x", "=", "1", ".", "5", "e", "10", ";"]
    );
    // A digit run stays whole (deepseek-llm has \p{N}+, not \p{N}{1,3}), including non-ASCII
    // digits.
    assert_eq!(deepseek_llm("1234567 ٣٤"), vec!["1234567", " ", "٣٤"]);
}

#[test]
fn deepseek_llm_spaces_tabs_and_crlf() {
    // "a", then " " is left over because "\s?" takes only one space before " b"; the trailing run
    // is "\s+$".
    assert_eq!(deepseek_llm("a  b  "), vec!["a", " ", " b", "  "]);
    assert_eq!(deepseek_llm("\tx"), vec!["\tx"]);
    assert_eq!(deepseek_llm("a\r\nb"), vec!["a", "\r", "\n", "b"]);
    assert_eq!(deepseek_llm(""), Vec::<&str>::new());
}

#[test]
fn deepseek_llm_accents_greek_emoji() {
    // The letter rule keeps "Café" whole, but the punctuation rule runs on that fragment next and
    // its class [:-~] contains A-Z and a-z: it takes "Caf" and leaves "é" as its own piece (as
    // llama.cpp does). " Ωμέγα" has no ASCII in it, so it survives whole.
    assert_eq!(deepseek_llm("Café Ωμέγα"), vec!["Caf", "é", " Ωμέγα"]);
    // The emoji is in no class: it stays glued to the space before it.
    assert_eq!(deepseek_llm("hi 😀!"), vec!["hi", " 😀", "!"]);
    // Full-width punctuation and CJK quotes belong to the punctuation rule.
    assert_eq!(
        deepseek_llm("你好，世界。"),
        vec!["你好", "，", "世界", "。"]
    );
}

#[test]
fn deepseek_llm_ideographic_space_is_whitespace_only() {
    // llama.cpp sees U+3000 as U+000B: it matches \s but neither the punctuation class nor the CJK
    // class.
    assert_eq!(deepseek_llm("中\u{3000}文"), vec!["中", "\u{3000}", "文"]);
    assert_eq!(
        deepseek_llm("\u{3000}\u{3000}!"),
        vec!["\u{3000}", "\u{3000}!"]
    );
}

#[test]
fn llama3_splits() {
    // The three-space run gives its last space to " test"; the lone space before digits stays
    // alone; digits go in groups of at most three; the newline run is one piece.
    let pre = PreTokenizer::new(PreTokenizerKind::Llama3);
    assert_eq!(
        pre.split("Hello world's   test 12345\n\n"),
        vec!["Hello", " world", "'s", "  ", " test", " ", "123", "45", "\n\n"]
    );
}

#[test]
fn deepseek_v3_splits() {
    // \p{N}{1,3} first ("123", "45"), then the CJK run, then the word regex on what is left.
    let pre = PreTokenizer::new(PreTokenizerKind::DeepseekV3);
    assert_eq!(
        pre.split("Hello, 世界! 12345 ab"),
        vec!["Hello", ",", " ", "世界", "!", " ", "123", "45", " ab"]
    );
}

#[test]
fn splits_always_cover_the_text() {
    let pre = PreTokenizer::new(PreTokenizerKind::DeepseekLlm);
    let text = "  x\r\n\r\n  ¿Qué?  «ok» — 3.14\u{00A0}km 😀😀 한국어 日本語  \t";
    assert_eq!(pre.split(text).concat(), text);
    assert!(pre.split(text).iter().all(|p| !p.is_empty()));
}
