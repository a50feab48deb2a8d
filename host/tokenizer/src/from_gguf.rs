//! Adapter from `ingot-gguf` metadata (feature `gguf`, on by default) to [`VocabParts`] and
//! [`Tokenizer`].

use ingot_gguf::{Gguf, MetaType, MetaValue};

use crate::error::TokenizerError;
use crate::metadata::{vocab_parts_from_metadata, MetaRef};
use crate::tokenizer::Tokenizer;
use crate::vocab::VocabParts;

/// Reads the `tokenizer.ggml.*` keys of a parsed GGUF header (see [`vocab_parts_from_metadata`]).
pub fn vocab_parts_from_gguf(header: &Gguf) -> Result<VocabParts<'_>, TokenizerError> {
    vocab_parts_from_metadata(|key| header.get(key).map(meta_ref))
}

impl Tokenizer {
    /// Builds the tokenizer stored in a GGUF header, e.g. `Tokenizer::from_gguf(file.header())`.
    pub fn from_gguf(header: &Gguf) -> Result<Tokenizer, TokenizerError> {
        Tokenizer::from_parts(vocab_parts_from_gguf(header)?)
    }
}

fn meta_ref(value: &MetaValue) -> MetaRef<'_> {
    match value {
        MetaValue::String(s) => MetaRef::Str(s),
        MetaValue::Bool(b) => MetaRef::Bool(*b),
        MetaValue::Array(array) => match array.elem {
            MetaType::String => array
                .items
                .iter()
                .map(MetaValue::as_str)
                .collect::<Option<Vec<&str>>>()
                .map_or(MetaRef::Other, MetaRef::StrArray),
            MetaType::F32 | MetaType::F64 | MetaType::Bool | MetaType::Array => MetaRef::Other,
            _ => array
                .items
                .iter()
                .map(MetaValue::as_i64)
                .collect::<Option<Vec<i64>>>()
                .map_or(MetaRef::Other, MetaRef::IntArray),
        },
        MetaValue::U8(_) | MetaValue::U16(_) | MetaValue::U32(_) | MetaValue::U64(_) => {
            value.as_u64().map_or(MetaRef::Other, MetaRef::Uint)
        }
        MetaValue::I8(_) | MetaValue::I16(_) | MetaValue::I32(_) | MetaValue::I64(_) => {
            value.as_i64().map_or(MetaRef::Other, MetaRef::Int)
        }
        MetaValue::F32(_) | MetaValue::F64(_) => MetaRef::Other,
    }
}
