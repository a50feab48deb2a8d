//! The one error type of this crate: every rejection names the key, tensor or value at fault.

use thiserror::Error;

/// Why a model could not be configured, loaded or run.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ModelError {
    #[error("general.architecture is {found:?}, expected \"deepseek2\"")]
    WrongArchitecture { found: String },
    #[error("required GGUF key {key} is missing")]
    MissingKey { key: String },
    #[error("GGUF key {key} has the wrong type: expected {expected}")]
    KeyType { key: String, expected: &'static str },
    #[error("GGUF key {key} has an invalid value: {reason}")]
    InvalidValue { key: String, reason: String },
    #[error("tensor {name} is missing")]
    MissingTensor { name: String },
    #[error(
        "tensor {name} has shape {found:?}, expected {expected:?} (ggml order, innermost first)"
    )]
    TensorShape {
        name: String,
        expected: Vec<u64>,
        found: Vec<u64>,
    },
    #[error("tensor {name} has type {ty}, which this backend cannot use: {reason}")]
    TensorType {
        name: String,
        ty: String,
        reason: String,
    },
    #[error("unsupported model feature: {0}")]
    Unsupported(String),
    #[error("token id {token} is outside the vocabulary of {vocab} entries")]
    TokenOutOfRange { token: u32, vocab: usize },
    #[error("position {pos} is outside the context of {max_ctx} positions")]
    PositionOutOfRange { pos: usize, max_ctx: usize },
    #[error("position {pos} skips positions: the cache holds {filled} positions, so the next one must be <= {filled}")]
    PositionGap { pos: usize, filled: usize },
    #[error("invalid context size {max_ctx}: {reason}")]
    ContextSize { max_ctx: usize, reason: String },
    #[error("the prompt is empty: there are no logits to return")]
    EmptyPrompt,
    #[error("dequantizing or multiplying tensor {name} failed: {reason}")]
    Quant { name: String, reason: String },
}

pub type Result<T, E = ModelError> = std::result::Result<T, E>;
