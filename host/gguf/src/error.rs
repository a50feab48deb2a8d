//! Error types. A format error names the field (`kv[5] "tokenizer.ggml.tokens" array length`,
//! `tensor_infos[3] "blk.0.attn_q.weight".type`) and the byte offset in the file where it starts.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::ggml_type::GgmlType;
use crate::meta::MetaType;

/// What is wrong with one field of a GGUF byte stream (or with a header handed to the writer).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("bad magic {0:02x?}, expected \"GGUF\" (47 47 55 46)")]
    BadMagic([u8; 4]),
    #[error("needs {needed} bytes but only {available} remain")]
    Truncated { needed: u64, available: u64 },
    #[error("GGUF version 1 is no longer supported")]
    VersionOne,
    #[error("version {0:#010x} looks byte-swapped: big-endian files are not supported")]
    BigEndian(u32),
    #[error("unsupported GGUF version {0} (supported: 2 and 3)")]
    UnsupportedVersion(u32),
    #[error(
        "count {count} is impossible: each entry takes at least {min_entry_bytes} bytes \
         and only {available} remain"
    )]
    CountExceedsInput {
        count: u64,
        min_entry_bytes: u64,
        available: u64,
    },
    #[error("string of {len} bytes is not valid UTF-8")]
    InvalidUtf8 { len: u64 },
    #[error("unknown metadata value type {0}")]
    UnknownMetaType(u32),
    #[error("arrays of arrays are not supported")]
    NestedArray,
    #[error("array item {index} is {found}, but the array holds {elem}")]
    MixedArray {
        index: usize,
        elem: MetaType,
        found: MetaType,
    },
    #[error("bool byte {0} is neither 0 nor 1")]
    InvalidBool(u8),
    #[error("key is empty")]
    EmptyKey,
    #[error("duplicate key {0:?}")]
    DuplicateKey(String),
    #[error("general.alignment must be an integer, not {0}")]
    AlignmentType(MetaType),
    #[error("general.alignment {0} is not a non-zero power of two")]
    BadAlignment(i128),
    #[error("alignment {alignment} exceeds the writer's limit of {max}")]
    AlignmentTooLarge { alignment: u64, max: u64 },
    #[error("duplicate tensor name {0:?}")]
    DuplicateTensorName(String),
    #[error("tensor name of {len} bytes is too long (at most 63)")]
    NameTooLong { len: u64 },
    #[error("{0} dimensions, at most 4 are allowed")]
    TooManyDims(u64),
    #[error("dimension {0} exceeds i64::MAX")]
    DimTooLarge(u64),
    #[error("the element count overflows i64")]
    ElementCountOverflow,
    #[error("unknown ggml type {0}")]
    UnknownGgmlType(u32),
    #[error("ne[0] = {ne0} is not a multiple of the {ty} block size {block}")]
    RowNotBlockAligned { ne0: u64, ty: GgmlType, block: u64 },
    #[error("the byte size overflows u64")]
    SizeOverflow,
    #[error("offset {found} is not {expected}, the aligned end of the previous tensor")]
    OffsetMismatch { found: u64, expected: u64 },
    #[error(
        "{nbytes} bytes of data end at byte {end}, past the end of the file ({file_len} bytes)"
    )]
    DataOutOfBounds {
        nbytes: u64,
        end: u128,
        file_len: u64,
    },
}

/// A problem with one metadata key, found by the typed getters of [`crate::Gguf`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MetaProblem {
    #[error("missing")]
    Missing,
    #[error("is {found}, expected {expected}")]
    WrongType {
        expected: &'static str,
        found: MetaType,
    },
    #[error("value {value} does not fit {expected}")]
    OutOfRange {
        value: String,
        expected: &'static str,
    },
    #[error("item {index} is {found}, expected {expected}")]
    WrongItemType {
        index: usize,
        expected: &'static str,
        found: MetaType,
    },
}

/// Every failure of this crate.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The bytes of a file (or a header handed to the writer) break the format.
    #[error("gguf: {}{field} at byte {offset}: {kind}", PathPrefix(.path.as_deref()))]
    Format {
        /// The file, when the bytes came from one.
        path: Option<PathBuf>,
        /// Which field, e.g. `tensor_infos[3] "blk.0.attn_q.weight".type`.
        field: String,
        /// Byte offset of the field in the file (for the writer: in the header it would write).
        offset: u64,
        kind: FormatError,
    },
    #[error("gguf: {}: {op}: {source}", .path.display())]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("gguf: metadata key {key:?} {problem}")]
    Meta { key: String, problem: MetaProblem },
    #[error("gguf: no tensor named {name:?}")]
    TensorNotFound { name: String },
    /// A header the writer was asked to produce is invalid; `what` names the key or tensor.
    #[error("gguf writer: {what}: {kind}")]
    Invalid { what: String, kind: FormatError },
    #[error("gguf writer: tensor {name:?} has {expected} bytes, {got} were supplied")]
    TensorSize {
        name: String,
        expected: u64,
        got: u64,
    },
    #[error("gguf writer: data supplied for more than the {declared} declared tensors")]
    ExtraTensor { declared: usize },
    #[error("gguf writer: no data for tensor {name:?} ({written} of {declared} tensors written)")]
    MissingTensorData {
        name: String,
        written: usize,
        declared: usize,
    },
    #[error("gguf: {} is {kind}, not a regular file: name a GGUF model file", .path.display())]
    NotRegularFile { path: PathBuf, kind: &'static str },
    /// The output path was refused (exists, is not a regular file, is an input) or could not be
    /// written.
    #[error("gguf: {0}")]
    Output(#[from] crate::output::OutputError),
}

impl GgufError {
    /// The format problem, if this is a format error.
    pub fn format_kind(&self) -> Option<&FormatError> {
        match self {
            GgufError::Format { kind, .. } | GgufError::Invalid { kind, .. } => Some(kind),
            _ => None,
        }
    }

    /// Attach the file path to a format error (other errors already carry theirs or have none).
    pub(crate) fn in_file(mut self, file: &Path) -> Self {
        if let GgufError::Format { path, .. } = &mut self {
            *path = Some(file.to_path_buf());
        }
        self
    }

    pub(crate) fn io(path: &Path, op: &'static str, source: io::Error) -> Self {
        GgufError::Io {
            path: path.to_path_buf(),
            op,
            source,
        }
    }
}

struct PathPrefix<'a>(Option<&'a Path>);

impl fmt::Display for PathPrefix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(p) => write!(f, "{}: ", p.display()),
            None => Ok(()),
        }
    }
}

/// Quote a key or tensor name for a field path, cut to 80 bytes so a hostile multi-megabyte key
/// cannot blow up an error message.
pub(crate) fn quoted(name: &str) -> String {
    const MAX: usize = 80;
    if name.len() <= MAX {
        return format!("{name:?}");
    }
    let mut end = MAX;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}…", &name[..end])
}
