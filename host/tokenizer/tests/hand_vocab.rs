//! (c) exact ids on a hand-made vocabulary whose BPE results are derived by hand, (g) special
//! tokens, and the construction errors.

use ingot_tokenizer::{Tokenizer, TokenizerError, VocabParts};

/// ids: 0 a, 1 b, 2 c, 3 Ġ (space), 4 ab, 5 bc, 6 abc, 7 Ġa, 8 <s> (control), 9 </s> (control),
/// 10 <u> (user-defined), 11 <, 12 >, 13 s, 14 /, 15 u, 16 aa.
const TOKENS: [&str; 17] = [
    "a", "b", "c", "Ġ", "ab", "bc", "abc", "Ġa", "<s>", "</s>", "<u>", "<", ">", "s", "/", "u",
    "aa",
];
const TYPES: [i32; 17] = [1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 4, 1, 1, 1, 1, 1, 1];
/// Rank = index. "c c" produces "cc", which is not a token.
const MERGES: [&str; 6] = ["b c", "a b", "a bc", "Ġ a", "c c", "a a"];

fn parts() -> VocabParts<'static> {
    VocabParts {
        tokens: TOKENS.to_vec(),
        merges: MERGES.to_vec(),
        token_types: Some(TYPES.to_vec()),
        model: "gpt2",
        pre: Some("deepseek-llm"),
        bos: Some(8),
        eos: Some(9),
        add_bos: Some(true),
        add_eos: None,
    }
}

fn tok() -> Tokenizer {
    Tokenizer::from_parts(parts()).expect("hand vocabulary builds")
}

#[test]
fn lower_rank_merges_first() {
    let t = tok();
    // a b c: "b c" (rank 0) beats "a b" (rank 1), then "a bc" (rank 2) gives "abc".
    assert_eq!(t.encode("abc", false, false), vec![6]);
    // a b a b: "b a" is no merge; the two "a b" pairs merge independently.
    assert_eq!(t.encode("abab", false, false), vec![4, 4]);
    // Ġ a b c: "b c" (0), then "a bc" (2) before "Ġ a" (3); "Ġ abc" is no merge.
    assert_eq!(t.encode(" abc", false, false), vec![3, 6]);
    // Pre-tokens " ab" and " c": Ġ a b -> "a b" (1) before "Ġ a" (3) -> [Ġ, ab]; " c" has no merge.
    assert_eq!(t.encode(" ab c", false, false), vec![3, 4, 3, 2]);
    // "a", " bca": Ġ b c a -> "b c" -> [Ġ, bc, a].
    assert_eq!(t.encode("a bca", false, false), vec![0, 3, 5, 0]);
}

#[test]
fn equal_ranks_merge_leftmost_first() {
    let t = tok();
    // a a a: both pairs are "a a" (same rank); the leftmost merges, the third "a" is left alone.
    assert_eq!(t.encode("aaa", false, false), vec![16, 0]);
    assert_eq!(t.encode("aaaaa", false, false), vec![16, 16, 0]);
    // a a b: "a b" (1) beats "a a" (5).
    assert_eq!(t.encode("aab", false, false), vec![0, 4]);
    assert_eq!(t.encode("abb", false, false), vec![4, 1]);
    // a b a b a b: three rank-1 pairs; each merge leaves the next pair intact.
    assert_eq!(t.encode("ababab", false, false), vec![4, 4, 4]);
}

#[test]
fn merge_result_outside_vocabulary_falls_back_to_bytes() {
    // "c c" merges to "cc", which is not a token: its bytes come out one by one.
    assert_eq!(tok().encode("cc", false, false), vec![2, 2]);
}

#[test]
fn bos_is_added_only_with_add_special() {
    let t = tok();
    assert_eq!(t.encode("abc", true, false), vec![8, 6]);
    assert_eq!(t.encode("", true, false), vec![8]);
    assert_eq!(t.encode("", false, false), Vec::<u32>::new());
    let mut p = parts();
    p.add_eos = Some(true);
    let t = Tokenizer::from_parts(p).unwrap();
    assert_eq!(t.encode("abc", true, false), vec![8, 6, 9]);
}

#[test]
fn control_tokens_are_matched_only_with_parse_special() {
    let t = tok();
    assert_eq!(t.encode("ab<s>c", false, true), vec![4, 8, 2]);
    // Without parse_special "<s>" is plain text: pre-tokens "ab", "<", "s", ">", "c".
    assert_eq!(t.encode("ab<s>c", false, false), vec![4, 11, 13, 12, 2]);
    assert_eq!(t.encode("</s></s>", false, true), vec![9, 9]);
}

#[test]
fn special_tokens_are_never_split_or_merged_with_neighbours() {
    let t = tok();
    // "abc" on both sides would merge across the token if it were text.
    assert_eq!(t.encode("abc<s>abc", false, true), vec![6, 8, 6]);
    // User-defined tokens are recognised even without parse_special.
    assert_eq!(t.encode("a<u>b", false, false), vec![0, 10, 1]);
    assert_eq!(t.encode("<u><u>", false, false), vec![10, 10]);
    // Decoding hides control tokens but shows user-defined ones.
    assert_eq!(t.decode(&[8, 6, 10, 9]), "abc<u>");
    assert_eq!(t.decode_with_special(&[8, 6, 10, 9]), "<s>abc<u></s>");
}

#[test]
fn eog_is_eos() {
    let t = tok();
    assert!(t.is_eog(9));
    assert!(!t.is_eog(8));
    assert!(!t.is_eog(1000));
}

#[test]
fn construction_errors_are_typed() {
    let err = |f: fn(&mut VocabParts<'static>)| {
        let mut p = parts();
        f(&mut p);
        Tokenizer::from_parts(p).unwrap_err()
    };
    assert_eq!(
        err(|p| p.model = "llama"),
        TokenizerError::UnsupportedModel("llama".into())
    );
    assert_eq!(
        err(|p| p.pre = Some("qwen2")),
        TokenizerError::UnsupportedPreTokenizer("qwen2".into())
    );
    assert_eq!(err(|p| p.pre = None), TokenizerError::MissingPreTokenizer);
    assert_eq!(
        err(|p| p.token_types = Some(vec![1; 3])),
        TokenizerError::TokenTypeCountMismatch {
            types: 3,
            tokens: 17
        }
    );
    assert_eq!(
        err(|p| p.eos = Some(17)),
        TokenizerError::SpecialIdOutOfRange {
            which: "EOS",
            id: 17,
            n_vocab: 17
        }
    );
    assert_eq!(
        err(|p| p.bos = None),
        TokenizerError::MissingSpecialId {
            flag: "add_bos_token",
            which: "BOS"
        }
    );
    assert_eq!(err(|p| p.tokens.clear()), TokenizerError::EmptyVocabulary);
    // Messages name the problem.
    let msg = err(|p| p.pre = Some("qwen2")).to_string();
    assert!(
        msg.contains("qwen2") && msg.contains("deepseek-llm"),
        "{msg}"
    );
}

#[test]
fn malformed_merges_and_empty_tokens_are_tolerated() {
    let mut p = parts();
    // No space after the first byte, an empty line, a leading-space line, a duplicate of rank 1.
    p.merges = vec!["b c", "abc", "", " a", "a b", "a bc", "b c"];
    p.tokens[15] = "";
    let t = Tokenizer::from_parts(p).unwrap();
    assert_eq!(t.encode("abc", false, false), vec![6]);
    assert_eq!(t.n_merges(), 3);
    // Without the "a a" merge, "aa" stays two tokens even though "aa" is in the vocabulary.
    assert_eq!(t.encode("aa", false, false), vec![0, 0]);
}
