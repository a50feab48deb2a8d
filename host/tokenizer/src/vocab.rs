//! The vocabulary as read from GGUF metadata (`tokenizer.ggml.*`).

/// Borrowed view of the `tokenizer.ggml.*` metadata a [`crate::Tokenizer`] is built from.
#[derive(Debug, Clone, Default)]
pub struct VocabParts<'a> {
    /// `tokenizer.ggml.tokens`: token strings, index = token id (byte-level BPE "visible" encoding
    /// for normal tokens, plain text for control/user-defined tokens).
    pub tokens: Vec<&'a str>,
    /// `tokenizer.ggml.merges`: `"left right"` strings; rank = index (lower merges first).
    pub merges: Vec<&'a str>,
    /// `tokenizer.ggml.token_type`: 1 normal, 2 unknown, 3 control, 4 user_defined, 5 unused, 6
    /// byte. Absent means every token is normal.
    pub token_types: Option<Vec<i32>>,
    /// `tokenizer.ggml.model`; must be `"gpt2"`.
    pub model: &'a str,
    /// `tokenizer.ggml.pre`: the pre-tokenizer name (`"deepseek-llm"` for DeepSeek-V2).
    pub pre: Option<&'a str>,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos: Option<u32>,
    /// `tokenizer.ggml.add_bos_token`; absent means llama.cpp's default for the pre-tokenizer
    /// (false for `deepseek-llm` and `deepseek-v3`, true for `llama3`).
    pub add_bos: Option<bool>,
    /// `tokenizer.ggml.add_eos_token`; absent means false.
    pub add_eos: Option<bool>,
}

/// Token types of `tokenizer.ggml.token_type` (llama.cpp `llama_token_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenType {
    /// 0, or any value outside 0..=6 (llama.cpp treats unknown values the same way).
    Undefined,
    /// 1: an ordinary byte-level BPE token.
    Normal,
    /// 2: the unknown-token placeholder.
    Unknown,
    /// 3: a control token such as BOS/EOS; matched in text only when `parse_special` is set, not
    /// rendered by [`crate::Tokenizer::decode`].
    Control,
    /// 4: an added token; always matched in text as a whole, rendered as its plain text.
    UserDefined,
    /// 5: padding/reserved slot; never produced by encoding, not rendered by
    /// [`crate::Tokenizer::decode`].
    Unused,
    /// 6: a byte token (SentencePiece style; unusual in gpt2 vocabularies).
    Byte,
}

impl TokenType {
    /// Maps the GGUF integer to a token type.
    pub fn from_gguf(value: i32) -> Self {
        match value {
            1 => Self::Normal,
            2 => Self::Unknown,
            3 => Self::Control,
            4 => Self::UserDefined,
            5 => Self::Unused,
            6 => Self::Byte,
            _ => Self::Undefined,
        }
    }

    /// Tokens stored as plain text rather than in the byte-level visible encoding.
    pub(crate) fn is_plain_text(self) -> bool {
        matches!(self, Self::Control | Self::UserDefined | Self::Unknown)
    }

    /// Tokens that [`crate::Tokenizer::decode`] leaves out.
    pub(crate) fn is_hidden(self) -> bool {
        matches!(self, Self::Control | Self::Unused)
    }
}
