//! The tokenizer: special-token partition, pre-tokenization, byte-level BPE, and decoding.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use crate::bpe::{Bpe, BpeScratch};
use crate::byte_level::ByteLevel;
use crate::error::TokenizerError;
use crate::known_texts;
use crate::pretokenize::{PreTokenizer, PreTokenizerKind};
use crate::special::{Fragment, SpecialTokens};
use crate::vocab::{TokenType, VocabParts};

/// A gpt2-type (byte-level BPE) tokenizer built from GGUF vocabulary metadata, matching llama.cpp's
/// output. Immutable after construction, so one instance can be shared by reference across threads.
#[derive(Clone)]
pub struct Tokenizer {
    pre: PreTokenizer,
    bpe: Bpe,
    byte_level: ByteLevel,
    specials: SpecialTokens,
    types: Vec<TokenType>,
    /// Bytes of every token (see [`Tokenizer::token_bytes`]), concatenated; token `i` is
    /// `pieces[spans[i]]`.
    pieces: Vec<u8>,
    spans: Vec<Range<usize>>,
    /// Visible-encoding text -> token id; kept only for pre-tokenizers that skip BPE on
    /// whole-vocabulary words.
    whole_words: Option<HashMap<Box<str>, u32>>,
    eog: HashSet<u32>,
    bos: Option<u32>,
    eos: Option<u32>,
    add_bos: bool,
    add_eos: bool,
}

// Compile-time check that the tokenizer can be shared between threads.
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<Tokenizer>();
};

impl std::fmt::Debug for Tokenizer {
    /// A summary; the vocabulary tables themselves are far too large to print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("pre", &self.pre.kind())
            .field("n_vocab", &self.n_vocab())
            .field("n_merges", &self.n_merges())
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .field("add_bos", &self.add_bos)
            .field("add_eos", &self.add_eos)
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// Builds a tokenizer; fails with a typed error on an unsupported model or pre-tokenizer,
    /// inconsistent lengths, or out-of-range special ids.
    pub fn from_parts(p: VocabParts<'_>) -> Result<Tokenizer, TokenizerError> {
        if p.model != "gpt2" {
            return Err(TokenizerError::UnsupportedModel(p.model.to_owned()));
        }
        let pre_name = p.pre.ok_or(TokenizerError::MissingPreTokenizer)?;
        let kind = PreTokenizerKind::from_gguf_name(pre_name)
            .ok_or_else(|| TokenizerError::UnsupportedPreTokenizer(pre_name.to_owned()))?;
        let n_vocab = p.tokens.len();
        if n_vocab == 0 {
            return Err(TokenizerError::EmptyVocabulary);
        }
        // Symbol ids above the vocabulary (merge-only strings) must also fit u32: keep a wide
        // margin.
        let n_vocab_u32 = u32::try_from(n_vocab)
            .ok()
            .filter(|&n| n < u32::MAX / 4)
            .ok_or(TokenizerError::VocabularyTooLarge(n_vocab))?;
        if p.merges.len() >= (u32::MAX / 4) as usize {
            return Err(TokenizerError::VocabularyTooLarge(p.merges.len()));
        }
        let mut types: Vec<TokenType> = match &p.token_types {
            Some(t) if t.len() != n_vocab => {
                return Err(TokenizerError::TokenTypeCountMismatch {
                    types: t.len(),
                    tokens: n_vocab,
                })
            }
            Some(t) => t.iter().map(|&v| TokenType::from_gguf(v)).collect(),
            None => vec![TokenType::Normal; n_vocab],
        };
        for (which, id) in [("BOS", p.bos), ("EOS", p.eos)] {
            if let Some(id) = id.filter(|&id| id as usize >= n_vocab) {
                return Err(TokenizerError::SpecialIdOutOfRange { which, id, n_vocab });
            }
        }
        let add_bos = p.add_bos.unwrap_or(kind.default_add_bos());
        let add_eos = p.add_eos.unwrap_or(false);
        if add_bos && p.bos.is_none() {
            return Err(TokenizerError::MissingSpecialId {
                flag: "add_bos_token",
                which: "BOS",
            });
        }
        if add_eos && p.eos.is_none() {
            return Err(TokenizerError::MissingSpecialId {
                flag: "add_eos_token",
                which: "EOS",
            });
        }

        // Last duplicate wins and empty strings are not entries, as in llama.cpp's `token_to_id`.
        let mut token_to_id: HashMap<&str, u32> = HashMap::with_capacity(n_vocab);
        for (id, text) in p.tokens.iter().enumerate() {
            if !text.is_empty() {
                token_to_id.insert(text, id as u32);
            }
        }
        for text in known_texts::forced_control() {
            if let Some(&id) = token_to_id.get(text) {
                types[id as usize] = TokenType::Control;
            }
        }
        let byte_level = ByteLevel::new();
        let bpe = Bpe::new(&token_to_id, n_vocab_u32, &p.merges, &byte_level);
        let specials = SpecialTokens::new(&p.tokens, &types);

        let mut pieces = Vec::with_capacity(p.tokens.iter().map(|t| t.len()).sum());
        let mut spans = Vec::with_capacity(n_vocab);
        for (text, ty) in p.tokens.iter().zip(&types) {
            let start = pieces.len();
            if ty.is_plain_text() {
                pieces.extend_from_slice(text.as_bytes());
            } else {
                byte_level.decode_into(text, &mut pieces);
            }
            spans.push(start..pieces.len());
        }

        let mut eog: HashSet<u32> = p.eos.into_iter().collect();
        eog.extend(
            known_texts::end_of_generation().filter_map(|text| token_to_id.get(text).copied()),
        );
        let whole_words = kind.ignores_merges().then(|| {
            token_to_id
                .iter()
                .map(|(text, &id)| (Box::<str>::from(*text), id))
                .collect()
        });

        Ok(Tokenizer {
            pre: PreTokenizer::new(kind),
            bpe,
            byte_level,
            specials,
            types,
            pieces,
            spans,
            whole_words,
            eog,
            bos: p.bos,
            eos: p.eos,
            add_bos,
            add_eos,
        })
    }

    /// Encodes `text`. With `add_special`, BOS is prepended when the vocabulary asks for it
    /// (`add_bos`) and EOS appended when it asks for that (`add_eos`). With `parse_special`, text
    /// spelling a control token (e.g. `<｜end▁of▁sentence｜>`) becomes that token; user-defined
    /// tokens are always recognised.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.add_bos {
            out.extend(self.bos);
        }
        let mut scratch = BpeScratch::default();
        let mut visible = String::new();
        for fragment in self.specials.partition(text, parse_special) {
            match fragment {
                Fragment::Token(id) => out.push(id),
                Fragment::Text(t) => {
                    for range in self.pre.split_ranges(t) {
                        let word = &t.as_bytes()[range];
                        if let Some(id) = self.whole_word(word, &mut visible) {
                            out.push(id);
                        } else {
                            self.bpe.encode_word(word, &mut scratch, &mut out);
                        }
                    }
                }
            }
        }
        if add_special && self.add_eos {
            out.extend(self.eos);
        }
        out
    }

    /// For pre-tokenizers with llama.cpp's `ignore_merges`: the token spelling the whole word, if
    /// any.
    fn whole_word(&self, word: &[u8], visible: &mut String) -> Option<u32> {
        let map = self.whole_words.as_ref()?;
        visible.clear();
        visible.extend(word.iter().map(|&b| self.byte_level.char_of(b)));
        map.get(visible.as_str()).copied()
    }

    /// The pre-tokenizer in use.
    pub fn pre_tokenizer(&self) -> &PreTokenizer {
        &self.pre
    }

    /// Beginning-of-sequence token id.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// End-of-sequence token id.
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// Whether [`Tokenizer::encode`] with `add_special` prepends BOS.
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// The chat template's `bos_token` and `eos_token` texts: no BOS text when
    /// [`Tokenizer::encode`] adds BOS itself (else the prompt would start with two), and the
    /// vocabulary's EOS text (DeepSeek-V2's without one).
    pub fn chat_specials(&self) -> (&'static str, String) {
        let bos = if self.add_bos {
            ""
        } else {
            crate::DEEPSEEK2_BOS_TEXT
        };
        let eos = self
            .eos
            .map(|id| self.decode_with_special(&[id]))
            .unwrap_or_else(|| crate::DEEPSEEK2_EOS_TEXT.to_string());
        (bos, eos)
    }

    /// Whether generation should stop after `id` (EOS, or a known end-of-turn token of the
    /// vocabulary).
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.contains(&id)
    }

    /// Vocabulary size (number of token ids).
    pub fn n_vocab(&self) -> usize {
        self.types.len()
    }

    /// Number of merge rules in use (duplicates and malformed lines dropped).
    pub fn n_merges(&self) -> usize {
        self.bpe.n_merges()
    }

    /// The type of token `id`, or `None` when `id` is out of range.
    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.types.get(id as usize).copied()
    }

    /// The bytes token `id` stands for: byte-level decoded for ordinary tokens, the plain text for
    /// control, user-defined and unknown tokens. Empty for an out-of-range id. A single token may
    /// hold part of a UTF-8 character.
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.spans
            .get(id as usize)
            .map_or(&[], |span| &self.pieces[span.clone()])
    }

    /// Whether `decode` renders token `id` (control and unused tokens are hidden, out-of-range ids
    /// too).
    pub(crate) fn is_rendered(&self, id: u32) -> bool {
        self.token_type(id).is_some_and(|t| !t.is_hidden())
    }

    /// Decodes ids to text, leaving out control and unused tokens (so BOS/EOS do not appear).
    /// Invalid UTF-8 (e.g. a sequence cut in the middle of a character) becomes U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> String {
        self.decode_filtered(ids, |id| self.is_rendered(id))
    }

    /// Like [`Tokenizer::decode`] but also renders control and unused tokens (as their text).
    pub fn decode_with_special(&self, ids: &[u32]) -> String {
        self.decode_filtered(ids, |_| true)
    }

    fn decode_filtered(&self, ids: &[u32], keep: impl Fn(u32) -> bool) -> String {
        let mut bytes = Vec::with_capacity(ids.len() * 4);
        for &id in ids.iter().filter(|&&id| keep(id)) {
            bytes.extend_from_slice(self.token_bytes(id));
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}
