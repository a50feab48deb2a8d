//! Building [`VocabParts`] from GGUF metadata through a lookup closure, independent of any GGUF
//! reader.
//!
//! The caller converts its own metadata value type into [`MetaRef`]; see `from_gguf` for the
//! `ingot-gguf` adapter.

use crate::error::TokenizerError;
use crate::vocab::VocabParts;

/// GGUF metadata keys read by [`vocab_parts_from_metadata`].
pub mod keys {
    pub const MODEL: &str = "tokenizer.ggml.model";
    pub const PRE: &str = "tokenizer.ggml.pre";
    pub const TOKENS: &str = "tokenizer.ggml.tokens";
    pub const TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
    pub const MERGES: &str = "tokenizer.ggml.merges";
    pub const BOS_ID: &str = "tokenizer.ggml.bos_token_id";
    pub const EOS_ID: &str = "tokenizer.ggml.eos_token_id";
    pub const ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
    pub const ADD_EOS: &str = "tokenizer.ggml.add_eos_token";
}

/// A borrowed metadata value, as far as the tokenizer cares about its type.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaRef<'a> {
    Str(&'a str),
    Bool(bool),
    /// Any unsigned integer type, widened.
    Uint(u64),
    /// Any signed integer type, widened.
    Int(i64),
    StrArray(Vec<&'a str>),
    /// An array of any integer type, widened.
    IntArray(Vec<i64>),
    /// Anything else (floats, other arrays); reported as a type error if a tokenizer key holds it.
    Other,
}

/// Reads the `tokenizer.ggml.*` keys through `lookup` (which returns `None` for an absent key).
///
/// Required: `tokenizer.ggml.model` and `tokenizer.ggml.tokens`. `merges` may be absent (empty
/// list). A key that is present with the wrong type is an error rather than being ignored.
pub fn vocab_parts_from_metadata<'a>(
    lookup: impl Fn(&str) -> Option<MetaRef<'a>>,
) -> Result<VocabParts<'a>, TokenizerError> {
    let model = match lookup(keys::MODEL) {
        Some(MetaRef::Str(s)) => s,
        Some(_) => return Err(type_error(keys::MODEL, "a string")),
        None => return Err(TokenizerError::MissingKey(keys::MODEL)),
    };
    let tokens = match lookup(keys::TOKENS) {
        Some(MetaRef::StrArray(v)) => v,
        Some(_) => return Err(type_error(keys::TOKENS, "an array of strings")),
        None => return Err(TokenizerError::MissingKey(keys::TOKENS)),
    };
    let merges = match lookup(keys::MERGES) {
        Some(MetaRef::StrArray(v)) => v,
        Some(_) => return Err(type_error(keys::MERGES, "an array of strings")),
        None => Vec::new(),
    };
    let pre = match lookup(keys::PRE) {
        Some(MetaRef::Str(s)) => Some(s),
        Some(_) => return Err(type_error(keys::PRE, "a string")),
        None => None,
    };
    let token_types = match lookup(keys::TOKEN_TYPE) {
        Some(MetaRef::IntArray(v)) => Some(
            v.into_iter()
                // Values outside i32 are not token types; map them to 0 (undefined) like any
                // unknown value.
                .map(|x| i32::try_from(x).unwrap_or(0))
                .collect(),
        ),
        Some(_) => return Err(type_error(keys::TOKEN_TYPE, "an array of integers")),
        None => None,
    };
    Ok(VocabParts {
        tokens,
        merges,
        token_types,
        model,
        pre,
        bos: token_id(&lookup, keys::BOS_ID)?,
        eos: token_id(&lookup, keys::EOS_ID)?,
        add_bos: flag(&lookup, keys::ADD_BOS)?,
        add_eos: flag(&lookup, keys::ADD_EOS)?,
    })
}

fn type_error(key: &'static str, expected: &'static str) -> TokenizerError {
    TokenizerError::MetadataType { key, expected }
}

fn token_id<'a>(
    lookup: &impl Fn(&str) -> Option<MetaRef<'a>>,
    key: &'static str,
) -> Result<Option<u32>, TokenizerError> {
    let value: i128 = match lookup(key) {
        None => return Ok(None),
        Some(MetaRef::Uint(v)) => v.into(),
        Some(MetaRef::Int(v)) => v.into(),
        Some(_) => return Err(type_error(key, "an integer")),
    };
    u32::try_from(value)
        .map(Some)
        .map_err(|_| TokenizerError::BadTokenId { key, value })
}

fn flag<'a>(
    lookup: &impl Fn(&str) -> Option<MetaRef<'a>>,
    key: &'static str,
) -> Result<Option<bool>, TokenizerError> {
    match lookup(key) {
        None => Ok(None),
        Some(MetaRef::Bool(b)) => Ok(Some(b)),
        Some(_) => Err(type_error(key, "a bool")),
    }
}
