//! (b) decode(encode(s)) == s on tricky text, and (e) the stream decoder never emits half a UTF-8
//! character. Uses the golden vocabulary, which has a token for every byte, so every string can be
//! encoded.
#![cfg(feature = "gguf")]

mod support;

use ingot_testdata::Lcg;
use support::golden_tokenizer;

const TRICKY: &[&str] = &[
    "",
    " ",
    "Hello world",
    "  two  spaces   and a tab\there\t",
    "line one\nline two\r\nline three\r\n\r\n\n",
    "12345 3.14159 1,000,000 0x7fff ٣٤٥ ½ Ⅻ",
    "中文 日本語 한국어 中\u{3000}文",
    "emoji 😀👍🏽👨‍👩‍👧 and flags 🇫🇷",
    "café naïve façade Ωμέγα Привет Ångström",
    "punctuation!?;:'\"()[]{}<>@#$%^&*-_=+\\|/~`…—–«»“”",
    "<｜begin▁of▁sentence｜>looks special but is plain text",
    "\u{0}\u{1}\u{7f}\u{85}\u{a0}\u{2028}\u{feff}",
];

#[test]
fn decode_of_encode_is_identity() {
    let tok = golden_tokenizer();
    for text in TRICKY {
        for add_special in [false, true] {
            let ids = tok.encode(text, add_special, false);
            assert_eq!(&tok.decode(&ids), text, "ids {ids:?}");
            // The token bytes concatenate to the UTF-8 of the text (BOS is the only extra token).
            let bytes: Vec<u8> = ids
                .iter()
                .filter(|&&id| Some(id) != tok.bos())
                .flat_map(|&id| tok.token_bytes(id).iter().copied())
                .collect();
            assert_eq!(bytes, text.as_bytes());
        }
    }
}

#[test]
fn parse_special_turns_the_bos_text_into_the_bos_token() {
    let tok = golden_tokenizer();
    let ids = tok.encode("<｜begin▁of▁sentence｜>hi", false, true);
    assert_eq!(ids[0], 510);
    assert_eq!(tok.decode_with_special(&ids), "<｜begin▁of▁sentence｜>hi");
    assert_eq!(tok.decode(&ids), "hi");
}

#[test]
fn emoji_split_over_byte_tokens_is_emitted_whole() {
    let tok = golden_tokenizer();
    // llama.cpp encodes 😀 (F0 9F 98 80) as four byte tokens with this vocabulary (see
    // tokenize.tsv).
    let ids = [240u32, 159, 152, 128];
    let mut dec = tok.stream_decoder();
    assert_eq!(dec.push(ids[0]), None);
    assert_eq!(dec.push(ids[1]), None);
    assert_eq!(dec.push(ids[2]), None);
    assert_eq!(dec.pending_len(), 3);
    assert_eq!(dec.push(ids[3]).as_deref(), Some("😀"));
    assert_eq!(dec.flush(), "");
    // Control tokens add nothing.
    assert_eq!(dec.push(510), None);
}

#[test]
fn invalid_bytes_become_replacement_chars_without_stalling() {
    let tok = golden_tokenizer();
    let mut dec = tok.stream_decoder();
    // A lead byte followed by a space can never complete: U+FFFD then the space, immediately.
    assert_eq!(dec.push(240), None);
    assert_eq!(dec.push(32).as_deref(), Some("\u{FFFD} "));
    // A dangling lead byte at the end comes out of flush as U+FFFD.
    assert_eq!(dec.push(228), None);
    assert_eq!(dec.flush(), "\u{FFFD}");
    assert_eq!(dec.pending_len(), 0);
}

#[test]
fn stream_output_equals_decode_and_is_always_whole_chars() {
    let tok = golden_tokenizer();
    let mut rng = Lcg(7);
    for _ in 0..200 {
        // Random ids over the whole vocabulary, biased towards the byte tokens 128..=255 that build
        // multi-byte characters (and often break them).
        let ids: Vec<u32> = (0..rng.next_u32() % 40)
            .map(|_| match rng.next_u32() % 3 {
                0 => 128 + rng.next_u32() % 128,
                _ => rng.next_u32() % 512,
            })
            .collect();
        let mut dec = tok.stream_decoder();
        let mut streamed = String::new();
        for &id in &ids {
            if let Some(piece) = dec.push(id) {
                assert!(!piece.is_empty());
                streamed.push_str(&piece);
            }
            assert!(
                dec.pending_len() < 4,
                "never holds more than an incomplete character"
            );
        }
        streamed.push_str(&dec.flush());
        assert_eq!(streamed, tok.decode(&ids), "ids {ids:?}");
    }
    // Streaming real text token by token reproduces it exactly.
    for text in TRICKY {
        let ids = tok.encode(text, true, false);
        let mut dec = tok.stream_decoder();
        let mut streamed: String = ids.iter().filter_map(|&id| dec.push(id)).collect();
        streamed.push_str(&dec.flush());
        assert_eq!(&streamed, text);
    }
}
