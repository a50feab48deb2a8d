//! GGUF container support for ingot: a validating, zero-copy reader and a streaming, atomic
//! writer (the format and ggml's loader rules: docs/gguf-format.md).
//!
//! * [`parse_header`] decodes a whole file held in memory and checks everything `gguf.cpp` checks,
//!   including that every tensor's data lies inside the bytes. Hostile input ends in a
//!   [`GgufError::Format`] naming the field and its byte offset. Every count is checked against the
//!   bytes that remain before anything is reserved, so memory stays proportional to the header: at
//!   most one 32-byte [`MetaValue`] per encoded array item (the worst case, a `uint8` array, is 32
//!   bytes of memory per byte of input).
//! * [`GgufFile`] maps a file and hands out tensor data without copying.
//! * [`GgufWriter`] / [`TensorDataWriter`] write a file tensor by tensor into a temporary file and
//!   rename it into place; [`rewrite`] copies a file through reader and writer.
//! * [`OutputFile`] is how every file a user names is written: refused when it exists (without
//!   `force`), is not a regular file, or is one of the command's inputs; written beside and
//!   renamed.

mod cursor;
mod error;
mod file;
mod ggml_type;
mod header;
mod layout;
mod meta;
pub mod output;
mod parse;
mod rewrite;
mod writer;

pub use error::{FormatError, GgufError, MetaProblem};
pub use file::GgufFile;
pub use ggml_type::GgmlType;
pub use header::{Gguf, TensorInfo};
pub use layout::{align_up, ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAX_DIMS, MAX_NAME_BYTES};
pub use meta::{MetaArray, MetaType, MetaValue};
pub use output::{OutputError, OutputFile, OutputPolicy};
pub use parse::{parse_header, MAGIC};
pub use rewrite::rewrite;
pub use writer::{GgufWriter, TensorDataWriter, MAX_WRITER_ALIGNMENT};
