//! Incremental detokenization that never emits part of a UTF-8 character.
//!
//! Byte-level BPE tokens may end in the middle of a multi-byte character (an emoji is often 2-4
//! byte tokens). The decoder keeps such an incomplete tail (at most 3 bytes) until the next token
//! completes it. Bytes that can never become valid UTF-8 are emitted as U+FFFD right away, so the
//! concatenated output of all `push` calls plus `flush` equals [`crate::Tokenizer::decode`] of the
//! same ids.

use crate::tokenizer::Tokenizer;

/// Streaming decoder; create with [`Tokenizer::stream_decoder`].
#[derive(Debug, Clone)]
pub struct StreamDecoder<'t> {
    tokenizer: &'t Tokenizer,
    /// Bytes of an incomplete UTF-8 sequence, waiting for its continuation (always < 4 bytes
    /// between calls).
    pending: Vec<u8>,
}

impl<'t> StreamDecoder<'t> {
    /// A decoder with nothing pending.
    pub fn new(tokenizer: &'t Tokenizer) -> Self {
        StreamDecoder {
            tokenizer,
            pending: Vec::with_capacity(8),
        }
    }

    /// Adds token `id`; returns the text that became complete, or `None` if there is none yet.
    /// Tokens that [`Tokenizer::decode`] hides (control, unused, out of range) add nothing.
    pub fn push(&mut self, id: u32) -> Option<String> {
        if self.tokenizer.is_rendered(id) {
            self.pending
                .extend_from_slice(self.tokenizer.token_bytes(id));
        }
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(valid) => {
                    out.push_str(valid);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    // `valid_up_to` guarantees this prefix is UTF-8.
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[bad..];
                        }
                        None => {
                            // Incomplete character at the end: keep it for the next token.
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        let keep = rest.len();
        let drain_to = self.pending.len() - keep;
        self.pending.drain(..drain_to);
        (!out.is_empty()).then_some(out)
    }

    /// Returns whatever is still pending (an incomplete character becomes U+FFFD) and resets the
    /// decoder.
    pub fn flush(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }

    /// Number of bytes held back waiting for the rest of a character.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }
}

impl Tokenizer {
    /// An incremental decoder for streaming generated tokens.
    pub fn stream_decoder(&self) -> StreamDecoder<'_> {
        StreamDecoder::new(self)
    }
}
