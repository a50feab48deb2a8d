//! Construction and encoding speed at DeepSeek-V2 scale: 102400 tokens, 100k merges, 100 KB
//! prompts.
//!
//! The bounds are loose on purpose (a loaded 2-core CI machine, `test` profile): they exist to
//! catch quadratic behaviour, which at these sizes costs minutes, not to benchmark. Measured
//! figures are printed (`--nocapture`).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use ingot_testdata::Lcg;
use ingot_tokenizer::{Tokenizer, VocabParts};

const N_VOCAB: usize = 102_400;
const N_MERGES: usize = 100_000;
/// BOS and EOS follow the 256 byte tokens and the 100k merge results.
const BOS: u32 = 256 + N_MERGES as u32;

/// GPT-2's byte -> visible char table: printable Latin-1 bytes map to themselves, the other 68 to
/// U+0100.. in increasing byte order.
fn visible(b: u8) -> char {
    let printable = |x: u8| matches!(x, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    if printable(b) {
        return b as char;
    }
    let rank = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(0x100 + rank).unwrap()
}

/// A synthetic byte-level vocabulary: the 256 byte tokens, 100k merges that each join two existing
/// letter tokens (optionally space-prefixed on the left, like "Ġthe"), then control and unused
/// tokens up to 102400.
fn synthetic_vocab() -> (Vec<String>, Vec<String>, Vec<i32>) {
    let mut rng = Lcg(42);
    let mut tokens: Vec<String> = (0..=255u8).map(|b| visible(b).to_string()).collect();
    let mut seen: HashSet<String> = tokens.iter().cloned().collect();
    let mut letters: Vec<String> = (b'a'..=b'z').map(|b| (b as char).to_string()).collect();
    let mut spaced: Vec<String> = vec![visible(b' ').to_string()];
    let mut merges = Vec::with_capacity(N_MERGES);
    while merges.len() < N_MERGES {
        // Indices skewed towards early (short) tokens, so that short pieces exist before long ones
        // build on them, as in a trained merge list; otherwise random text would hardly ever merge.
        let mut skewed = |n: usize| {
            let bound = rng.below(n) + 1;
            rng.below(bound)
        };
        let right = letters[skewed(letters.len())].clone();
        let left = if skewed(3) == 0 {
            spaced[skewed(spaced.len())].clone()
        } else {
            letters[skewed(letters.len())].clone()
        };
        let joined = format!("{left}{right}");
        if joined.chars().count() > 10 || !seen.insert(joined.clone()) {
            continue;
        }
        merges.push(format!("{left} {right}"));
        if left.starts_with('Ġ') {
            spaced.push(joined.clone());
        } else {
            letters.push(joined.clone());
        }
        tokens.push(joined);
    }
    let mut types = vec![1; tokens.len()];
    tokens.push("<｜begin▁of▁sentence｜>".into());
    tokens.push("<｜end▁of▁sentence｜>".into());
    types.extend([3, 3]);
    while tokens.len() < N_VOCAB {
        tokens.push(format!("[PAD{}]", tokens.len()));
        types.push(5);
    }
    (tokens, merges, types)
}

fn build(tokens: &[String], merges: &[String], types: &[i32]) -> Tokenizer {
    Tokenizer::from_parts(VocabParts {
        tokens: tokens.iter().map(String::as_str).collect(),
        merges: merges.iter().map(String::as_str).collect(),
        token_types: Some(types.to_vec()),
        model: "gpt2",
        pre: Some("deepseek-llm"),
        bos: Some(BOS),
        eos: Some(BOS + 1),
        add_bos: Some(true),
        add_eos: Some(false),
    })
    .expect("synthetic vocabulary builds")
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t0 = Instant::now();
    let out = f();
    (out, t0.elapsed())
}

#[test]
fn deepseek_scale_vocabulary_builds_and_encodes_fast() {
    let ((tokens, merges, types), t_gen) = timed(synthetic_vocab);
    println!("generating the synthetic vocabulary took {t_gen:?}");
    assert_eq!(tokens.len(), N_VOCAB);
    let (tok, t_build) = timed(|| build(&tokens, &merges, &types));
    assert_eq!(tok.n_merges(), N_MERGES);

    // 100 KB of lowercase words and punctuation, and 100 KB with no break at all (one 100k-byte
    // pre-token, the worst case for BPE).
    let mut rng = Lcg(1);
    let mut prose = String::new();
    while prose.len() < 100_000 {
        let len = 1 + rng.below(9);
        for _ in 0..len {
            prose.push((b'a' + rng.below(26) as u8) as char);
        }
        prose.push_str([" ", " ", " ", ", ", ".\n", " 42 "][rng.below(6)]);
    }
    let run: String = (0..100_000)
        .map(|_| (b'a' + rng.below(26) as u8) as char)
        .collect();

    let (ids_prose, t_prose) = timed(|| tok.encode(&prose, true, false));
    let (ids_run, t_run) = timed(|| tok.encode(&run, false, false));
    println!(
        "build {t_build:?} | encode 100 KB prose {t_prose:?} ({} tokens) | 100 KB single word {t_run:?} ({} tokens)",
        ids_prose.len(),
        ids_run.len()
    );
    assert_eq!(ids_prose[0], BOS);
    // (Not assert_eq: a failure would print 200 KB.)
    assert!(tok.decode(&ids_prose) == prose, "prose round trip");
    assert!(tok.decode(&ids_run) == run, "single-word round trip");
    // Merges must have applied: without them every byte would be a token (measured: about 0.8
    // tokens per byte with this random merge list).
    assert!(
        ids_run.len() < run.len() * 9 / 10,
        "{} tokens",
        ids_run.len()
    );
    assert!(
        ids_prose.len() < prose.len() * 9 / 10,
        "{} tokens",
        ids_prose.len()
    );

    // Inputs that stress the regex rules rather than BPE: one long whitespace run, one long CJK
    // run, one long digit run, and alternating single characters of different classes.
    for (name, text) in [
        ("spaces", " ".repeat(100_000)),
        ("cjk", "中文".repeat(16_667)),
        ("digits", "7".repeat(100_000)),
        ("mixed", "a1 ,\n中".repeat(12_500)),
    ] {
        let (ids, t) = timed(|| tok.encode(&text, false, false));
        println!("encode 100 KB {name}: {t:?} ({} tokens)", ids.len());
        assert!(tok.decode(&ids) == text, "{name} round trip");
        assert!(t < Duration::from_secs(5), "{name} took {t:?}");
    }

    let limit = Duration::from_secs(5);
    assert!(t_build < limit, "build took {t_build:?}");
    assert!(t_prose < limit, "encode took {t_prose:?}");
    assert!(t_run < limit, "encode took {t_run:?}");
}
