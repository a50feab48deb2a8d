//! Errors raised while building a tokenizer from GGUF vocabulary metadata.

use thiserror::Error;

/// Why a vocabulary could not be turned into a [`crate::Tokenizer`].
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum TokenizerError {
    /// `tokenizer.ggml.model` is not `"gpt2"` (byte-level BPE is the only model implemented).
    #[error("unsupported tokenizer model {0:?}: only \"gpt2\" (byte-level BPE) is implemented")]
    UnsupportedModel(String),

    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not implement.
    #[error(
        "unsupported pre-tokenizer {0:?}: implemented are \"deepseek-llm\", \"deepseek-coder\", \"deepseek-v3\", \"llama3\", \"glm4\" and \"kimi-k2\""
    )]
    UnsupportedPreTokenizer(String),

    /// `tokenizer.ggml.pre` is absent; guessing the split rules would silently change token ids.
    #[error("tokenizer.ggml.pre is missing: the pre-tokenizer cannot be chosen")]
    MissingPreTokenizer,

    /// `tokenizer.ggml.tokens` is empty.
    #[error("the vocabulary has no tokens")]
    EmptyVocabulary,

    /// More tokens than a `u32` token id can address.
    #[error("the vocabulary has {0} tokens, more than u32 token ids can address")]
    VocabularyTooLarge(usize),

    /// `tokenizer.ggml.token_type` does not have one entry per token.
    #[error("token_type has {types} entries but there are {tokens} tokens")]
    TokenTypeCountMismatch { types: usize, tokens: usize },

    /// A special token id (BOS/EOS) is not a valid index into the vocabulary.
    #[error("{which} token id {id} is out of range for a vocabulary of {n_vocab} tokens")]
    SpecialIdOutOfRange {
        which: &'static str,
        id: u32,
        n_vocab: usize,
    },

    /// `add_bos`/`add_eos` is requested but the corresponding token id is absent.
    #[error("{flag} is true but the vocabulary has no {which} token id")]
    MissingSpecialId {
        flag: &'static str,
        which: &'static str,
    },

    /// A required metadata key is absent.
    #[error("GGUF metadata key {0:?} is missing")]
    MissingKey(&'static str),

    /// A metadata key holds a value of the wrong type.
    #[error("GGUF metadata key {key:?} should be {expected}")]
    MetadataType {
        key: &'static str,
        expected: &'static str,
    },

    /// A token id stored in metadata does not fit a `u32`.
    #[error("GGUF metadata key {key:?} holds {value}, which is not a valid token id")]
    BadTokenId { key: &'static str, value: i128 },
}
