//! A synthetic byte-level BPE vocabulary in the layout of a real deepseek2 GGUF
//! (docs/deepseek2-model.md#tokenizer):
//! the 256 byte symbols first (ids 0..255, GPT-2 byte-to-unicode mapping), then merges learned from
//! a small embedded corpus, then `[PAD{i}]` fillers, with BOS/EOS at the preset's ids.
//!
//! The merges are learned over words split the way deepseek-llm's pre-tokenizer roughly splits
//! (letters with one leading space, digit runs, punctuation runs, newlines), so that encoding real
//! text exercises merges, not only byte fallbacks.

use std::collections::HashMap;

/// `tokenizer.ggml.token_type` values used here (llama.cpp `llama_token_type`).
pub const TOKEN_NORMAL: i32 = 1;
pub const TOKEN_CONTROL: i32 = 3;
pub const TOKEN_UNUSED: i32 = 5;

pub const BOS_TEXT: &str = "<｜begin▁of▁sentence｜>";
pub const EOS_TEXT: &str = "<｜end▁of▁sentence｜>";

const CORPUS: &str = include_str!("../corpus/corpus.txt");

pub struct Vocab {
    pub tokens: Vec<String>,
    pub token_types: Vec<i32>,
    pub merges: Vec<String>,
}

/// GPT-2's reversible byte -> printable unicode map.
pub fn byte_to_unicode() -> [char; 256] {
    let mut map = ['\0'; 256];
    let mut extra = 0u32;
    for b in 0..256u32 {
        let printable =
            (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        map[b as usize] = if printable {
            char::from_u32(b).expect("Latin-1 code points are valid chars")
        } else {
            extra += 1;
            char::from_u32(255 + extra).expect("code points 256..=324 are valid chars")
        };
    }
    map
}

#[derive(Clone, Copy, PartialEq)]
enum Class {
    Letter,
    Digit,
    Space,
    Newline,
    Other,
}

fn class(c: char) -> Class {
    if c == '\n' || c == '\r' {
        Class::Newline
    } else if c.is_whitespace() {
        Class::Space
    } else if c.is_alphabetic() {
        Class::Letter
    } else if c.is_numeric() {
        Class::Digit
    } else {
        Class::Other
    }
}

/// Words for merge learning: runs of one class, a single leading space joined to the next word.
fn words(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        let mut cls = class(c);
        let mut j = i + 1;
        if cls == Class::Space && c == ' ' && j < chars.len() {
            let next = class(chars[j].1);
            if next == Class::Letter || next == Class::Other {
                cls = next;
                j += 1;
            }
        }
        if cls != Class::Newline {
            while j < chars.len() && class(chars[j].1) == cls {
                j += 1;
            }
        }
        let end = chars.get(j).map_or(text.len(), |&(p, _)| p);
        start = start.max(pos);
        out.push(&text[start..end]);
        start = end;
        i = j;
    }
    out
}

/// Learns up to `max_merges` merges from the embedded corpus (until every corpus word is one
/// token); ties broken by the lexically smallest pair so the result is deterministic.
fn learn_merges(max_merges: usize, b2u: &[char; 256]) -> Vec<(String, String)> {
    let mut counts: HashMap<&str, u64> = HashMap::new();
    for w in words(CORPUS) {
        *counts.entry(w).or_default() += 1;
    }
    let mut entries: Vec<(&str, u64)> = counts.into_iter().collect();
    entries.sort_unstable();
    let mut seqs: Vec<(Vec<String>, u64)> = entries
        .into_iter()
        .map(|(w, n)| (w.bytes().map(|b| b2u[b as usize].to_string()).collect(), n))
        .collect();
    let mut merges = Vec::new();
    while merges.len() < max_merges {
        let mut pairs: HashMap<(&str, &str), u64> = HashMap::new();
        for (seq, n) in &seqs {
            for p in seq.windows(2) {
                *pairs.entry((p[0].as_str(), p[1].as_str())).or_default() += n;
            }
        }
        let best = pairs
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)));
        let Some(((a, b), _)) = best else { break };
        let (a, b) = (a.to_string(), b.to_string());
        let joined = format!("{a}{b}");
        for (seq, _) in &mut seqs {
            let mut k = 0;
            while k + 1 < seq.len() {
                if seq[k] == a && seq[k + 1] == b {
                    seq[k] = joined.clone();
                    seq.remove(k + 1);
                }
                k += 1;
            }
        }
        merges.push((a, b));
    }
    merges
}

/// The vocabulary of `n_vocab` tokens with BOS and EOS at the given ids (both >= 256).
pub fn build(n_vocab: u64, bos: u64, eos: u64) -> Vocab {
    let n = n_vocab as usize;
    let b2u = byte_to_unicode();
    let specials = [bos as usize, eos as usize];
    // Merge tokens fill the ids after the bytes up to the first special or the end.
    let room = specials
        .iter()
        .copied()
        .min()
        .unwrap_or(n)
        .min(n)
        .saturating_sub(256);
    let merges = learn_merges(room, &b2u);
    let mut tokens: Vec<String> = b2u.iter().map(|c| c.to_string()).collect();
    let mut token_types = vec![TOKEN_NORMAL; 256];
    for (a, b) in &merges {
        tokens.push(format!("{a}{b}"));
        token_types.push(TOKEN_NORMAL);
    }
    while tokens.len() < n {
        let id = tokens.len();
        if id == bos as usize {
            tokens.push(BOS_TEXT.to_string());
            token_types.push(TOKEN_CONTROL);
        } else if id == eos as usize {
            tokens.push(EOS_TEXT.to_string());
            token_types.push(TOKEN_CONTROL);
        } else {
            tokens.push(format!("[PAD{id}]"));
            token_types.push(TOKEN_UNUSED);
        }
    }
    Vocab {
        tokens,
        token_types,
        merges: merges
            .into_iter()
            .map(|(a, b)| format!("{a} {b}"))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_is_a_bijection_and_matches_gpt2() {
        let m = byte_to_unicode();
        let mut seen: Vec<char> = m.to_vec();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 256);
        assert_eq!(m[b'A' as usize], 'A');
        // GPT-2 maps the space (0x20) to U+0120 'Ġ' and newline (0x0A) to U+010A 'Ċ'.
        assert_eq!(m[b' ' as usize], 'Ġ');
        assert_eq!(m[b'\n' as usize], 'Ċ');
    }

    #[test]
    fn tiny_vocab_has_the_golden_layout() {
        let v = build(512, 510, 511);
        assert_eq!(v.tokens.len(), 512);
        assert_eq!(v.token_types.len(), 512);
        assert_eq!(
            v.merges.len(),
            254,
            "the corpus must yield 254 merges for the tiny vocab"
        );
        assert_eq!(v.tokens[510], BOS_TEXT);
        assert_eq!(v.token_types[511], TOKEN_CONTROL);
        // Every merge result is a token, and every merge joins two earlier tokens.
        for (i, m) in v.merges.iter().enumerate() {
            let (a, b) = m.split_once(' ').unwrap();
            assert_eq!(v.tokens[256 + i], format!("{a}{b}"));
            assert!(v.tokens[..256 + i].iter().any(|t| t == a));
            assert!(v.tokens[..256 + i].iter().any(|t| t == b));
        }
        // The most frequent pair of the corpus is merged first: " t" + "he"-like pairs; at least
        // "Ġt".
        assert!(v.tokens[256..].iter().any(|t| t == "Ġthe"));
    }

    #[test]
    fn words_split_like_the_pre_tokenizer() {
        assert_eq!(
            words("Hello world, 123 ok\n"),
            vec!["Hello", " world", ",", " ", "123", " ok", "\n"]
        );
    }
}
