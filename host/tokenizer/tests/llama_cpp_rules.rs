//! llama.cpp vocabulary rules beyond plain BPE: `ignore_merges` and default BOS of `llama3`, tokens
//! retyped as control by their text, end-of-generation detection; plus a randomized round trip for
//! every pre-tokenizer.

use ingot_testdata::Lcg;
use ingot_tokenizer::{PreTokenizerKind, TokenType, Tokenizer, VocabParts};

/// GPT-2's byte -> visible char table, written out independently of the crate: printable Latin-1
/// bytes map to themselves, the other 68 to U+0100.. in increasing byte order.
fn visible(b: u8) -> char {
    let printable = |x: u8| matches!(x, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    if printable(b) {
        return b as char;
    }
    let rank = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(0x100 + rank).unwrap()
}

fn vis(s: &str) -> String {
    s.bytes().map(visible).collect()
}

/// 256 byte tokens (id = byte), then `extra` tokens with their types, then BOS and EOS.
fn byte_vocab(extra: &[(&str, i32)]) -> (Vec<String>, Vec<i32>, u32) {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| visible(b).to_string()).collect();
    let mut types = vec![1; 256];
    for (t, ty) in extra {
        tokens.push(t.to_string());
        types.push(*ty);
    }
    let bos = tokens.len() as u32;
    tokens.push("<bos>".into());
    tokens.push("<eos>".into());
    types.extend([3, 3]);
    (tokens, types, bos)
}

fn build(
    tokens: &[String],
    types: &[i32],
    merges: &[String],
    pre: &str,
    bos: u32,
    add_bos: Option<bool>,
) -> Tokenizer {
    Tokenizer::from_parts(VocabParts {
        tokens: tokens.iter().map(String::as_str).collect(),
        merges: merges.iter().map(String::as_str).collect(),
        token_types: Some(types.to_vec()),
        model: "gpt2",
        pre: Some(pre),
        bos: Some(bos),
        eos: Some(bos + 1),
        add_bos,
        add_eos: None,
    })
    .unwrap()
}

#[test]
fn llama3_takes_whole_vocabulary_words_without_merges() {
    // "abc" and " abc" are tokens, but there is no merge that could build them.
    let (tokens, types, bos) = byte_vocab(&[("abc", 1), ("Ġabc", 1)]);
    let llama3 = build(&tokens, &types, &[], "llama3", bos, None);
    assert_eq!(llama3.encode("abc abc", false, false), vec![256, 257]);
    let deepseek = build(&tokens, &types, &[], "deepseek-llm", bos, None);
    assert_eq!(deepseek.encode("abc", false, false), vec![97, 98, 99]);
}

#[test]
fn default_bos_depends_on_the_pre_tokenizer_and_the_key_overrides() {
    let (tokens, types, bos) = byte_vocab(&[]);
    assert_eq!(
        build(&tokens, &types, &[], "llama3", bos, None).encode("a", true, false),
        vec![bos, 97]
    );
    assert_eq!(
        build(&tokens, &types, &[], "deepseek-llm", bos, None).encode("a", true, false),
        vec![97]
    );
    assert_eq!(
        build(&tokens, &types, &[], "deepseek-v3", bos, Some(true)).encode("a", true, false),
        vec![bos, 97]
    );
    assert_eq!(
        build(&tokens, &types, &[], "llama3", bos, Some(false)).encode("a", true, false),
        vec![97]
    );
}

#[test]
fn fim_and_end_tokens_are_retyped_as_control_by_text() {
    // Stored as user-defined / normal, as converters sometimes do; llama.cpp makes them control
    // tokens.
    let fim = "<｜fim▁hole｜>";
    let (tokens, types, bos) = byte_vocab(&[(fim, 4), ("<|endoftext|>", 1), ("<keep>", 4)]);
    let tok = build(&tokens, &types, &[], "deepseek-llm", bos, None);
    assert_eq!(tok.token_type(256), Some(TokenType::Control));
    assert_eq!(tok.token_type(257), Some(TokenType::Control));
    assert_eq!(tok.token_type(258), Some(TokenType::UserDefined));
    // Control now: matched only with parse_special, hidden by decode.
    assert_eq!(tok.encode(fim, false, true), vec![256]);
    let plain = tok.encode(fim, false, false);
    assert_eq!(plain.len(), fim.len(), "one byte token per byte: {plain:?}");
    assert_eq!(tok.decode(&[256, 97]), "a");
    // A user-defined token that is not on llama.cpp's lists stays user-defined.
    assert_eq!(tok.encode("x<keep>", false, false), vec![120, 258]);
    // End of generation: EOS and the known end-of-text token; not the FIM token.
    assert!(tok.is_eog(bos + 1));
    assert!(tok.is_eog(257));
    assert!(!tok.is_eog(256));
}

#[test]
fn random_unicode_round_trips_with_every_pre_tokenizer() {
    let pieces = [
        "a", "b", "ab", " ", "  ", "\t", "\n", "\r\n", "1", "23", ".", ",", "'s", "é", "中", "文",
        "😀", "\u{3000}", "\u{a0}", "Ω", "ß", "!", "<bos>", "\u{301}", "٣",
    ];
    // Merges over the byte tokens, so that BPE actually runs (their results are new tokens).
    let merged = ["ab", " a", "é", "中", "😀", "  "];
    let (mut tokens, mut types, _) = byte_vocab(&[]);
    tokens.truncate(256);
    types.truncate(256);
    let mut merges = Vec::new();
    for m in merged {
        let v = vis(m);
        let split = v.char_indices().nth(1).map(|(i, _)| i).unwrap();
        merges.push(format!("{} {}", &v[..split], &v[split..]));
        tokens.push(v);
        types.push(1);
    }
    let bos = tokens.len() as u32;
    tokens.extend(["<bos>".to_string(), "<eos>".to_string()]);
    types.extend([3, 3]);
    let mut rng = Lcg(99);
    for kind in [
        PreTokenizerKind::DeepseekLlm,
        PreTokenizerKind::DeepseekCoder,
        PreTokenizerKind::DeepseekV3,
        PreTokenizerKind::Llama3,
        PreTokenizerKind::Glm4,
        PreTokenizerKind::KimiK2,
    ] {
        let name = match kind {
            PreTokenizerKind::DeepseekLlm => "deepseek-llm",
            PreTokenizerKind::DeepseekCoder => "deepseek-coder",
            PreTokenizerKind::DeepseekV3 => "deepseek-v3",
            PreTokenizerKind::Llama3 => "llama3",
            PreTokenizerKind::Glm4 => "glm4",
            PreTokenizerKind::KimiK2 => "kimi-k2",
        };
        let tok = build(&tokens, &types, &merges, name, bos, None);
        for _ in 0..300 {
            let text: String = (0..rng.below(20))
                .map(|_| pieces[rng.below(pieces.len())])
                .collect();
            let ids = tok.encode(&text, false, false);
            assert_eq!(tok.decode(&ids), text, "{name}: {ids:?}");
            // With parse_special, "<bos>" becomes the (hidden) BOS token and drops out of the
            // decoded text.
            let ids = tok.encode(&text, false, true);
            assert_eq!(
                tok.decode(&ids),
                text.replace("<bos>", ""),
                "{name}: {ids:?}"
            );
        }
    }
}
