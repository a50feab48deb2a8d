//! ingot-tokenizer: the gpt2-type (byte-level BPE) tokenizer of deepseek2 GGUF files, producing the
//! same ids as llama.cpp (`llama-vocab.cpp`, `unicode.cpp`).
//!
//! [`Tokenizer::encode`]: (1) special-token partition (`special.rs`): text spelling a
//! control/user-defined token becomes that token; (2) pre-tokenization ([`pretokenize`]):
//! llama.cpp's regex sequence for the file's `tokenizer.ggml.pre` (`deepseek-llm`,
//! `deepseek-coder`, `deepseek-v3`, `llama3`, `glm4`, `kimi-k2`); (3) byte-level BPE (`bpe.rs`) on
//! each pre-token, merges ranked by their index in `tokenizer.ggml.merges`. Chat prompts come from
//! the file's Jinja `tokenizer.chat_template` ([`ChatTemplate`], `minijinja`), with DeepSeek-V2's
//! format as the fallback. Decoding maps tokens back through GPT-2's byte<->unicode table
//! (`byte_level.rs`); [`StreamDecoder`] never emits half a UTF-8 character.
//!
//! Why not the `tokenizers` crate: llama.cpp is not what it implements. llama.cpp's regex engine
//! rewrites non-ASCII whitespace to U+000B before matching (U+2003 matches `\s` but not an explicit
//! range; Oniguruma matches neither), `$` binds to the end of each fragment of the regex sequence,
//! the special-token partition tries tokens longest-first over the whole text, known FIM and
//! end-of-turn texts become control tokens, and `llama3` skips BPE for whole-vocabulary words:
//! each a workaround on top of `tokenizers`, whose build (76 crates, 98 s against `regex`'s 21 s
//! on the 2-core build machine) costs more than the ~150 lines of BPE here.
//!
//! Exactness: `tests/golden.rs` reproduces llama.cpp's ids of `testdata/golden/tokenize.tsv`; a
//! one-off differential run against Python `tokenizers` 0.23 with the same regex sequences split
//! and encoded 20 000 random mixed-script strings per pre-tokenizer identically, except the
//! non-ASCII whitespace above, where this crate follows llama.cpp. Speed: `tests/speed.rs`.
//!
//! Deliberate differences from llama.cpp, on malformed vocabularies only: a final BPE symbol that
//! is no vocabulary entry falls back to its single-byte tokens (llama.cpp drops its non-ASCII
//! bytes), and a vocabulary character outside the byte mapping decodes to its own UTF-8 (llama.cpp
//! writes `[UNK_BYTE_0x..]`).

mod bpe;
mod byte_level;
pub mod chat;
pub mod chat_template;
mod error;
#[cfg(feature = "gguf")]
mod from_gguf;
mod known_texts;
pub mod metadata;
pub mod pretokenize;
mod special;
mod stream;
mod tokenizer;
mod vocab;

pub use chat::{apply_chat_template_deepseek2, Role, DEEPSEEK2_BOS_TEXT, DEEPSEEK2_EOS_TEXT};
pub use chat_template::{ChatRequest, ChatTemplate, ChatTemplateError, CHAT_TEMPLATE_KEY};
pub use error::TokenizerError;
#[cfg(feature = "gguf")]
pub use from_gguf::vocab_parts_from_gguf;
pub use metadata::{vocab_parts_from_metadata, MetaRef};
pub use pretokenize::{PreTokenizer, PreTokenizerKind};
pub use stream::StreamDecoder;
pub use tokenizer::Tokenizer;
pub use vocab::{TokenType, VocabParts};
