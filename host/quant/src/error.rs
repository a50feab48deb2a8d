//! Typed errors of the quant layer. Every length problem names the type and both sizes, so a
//! caller can tell a truncated tensor from a wrong type id.

use ingot_gguf::GgmlType;

/// Why a (de)quantization or dot product was refused. Nothing in this crate panics on bad input;
/// it returns one of these before touching the data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantError {
    /// The operation exists in ggml but not here (e.g. quantizing IQ2_XXS or Q8_K).
    #[error("{op} is not supported for {ty}")]
    Unsupported { ty: GgmlType, op: &'static str },
    /// An element count that does not split into whole blocks of the type.
    #[error("{ty}: {elements} elements is not a whole number of {block_size}-element blocks")]
    PartialBlock {
        ty: GgmlType,
        elements: usize,
        block_size: usize,
    },
    /// A byte buffer whose length does not match the element count.
    #[error("{ty}: {elements} elements take {expected} bytes, but the buffer holds {actual}")]
    ByteLength {
        ty: GgmlType,
        elements: usize,
        expected: usize,
        actual: usize,
    },
    /// A quantized row whose byte length is not a whole number of blocks.
    #[error("{ty}: a row of {bytes} bytes is not a whole number of {type_size}-byte blocks")]
    RowBytes {
        ty: GgmlType,
        bytes: usize,
        type_size: usize,
    },
    /// Activation blocks that do not cover exactly the weight row.
    #[error("{ty} row of {elements} elements needs {expected} activation blocks, got {actual}")]
    ActivationLength {
        ty: GgmlType,
        elements: usize,
        expected: usize,
        actual: usize,
    },
}
