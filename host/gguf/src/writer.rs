//! Streaming, atomic GGUF writer.
//!
//! Tensor infos are declared first ([`GgufWriter::add_tensor`]); [`GgufWriter::begin_output`]
//! writes the header into an [`OutputFile`] (a temporary file next to the target); the data of each
//! tensor is then supplied in declaration order ([`TensorDataWriter::write_tensor`]), so a
//! multi-gigabyte model never has to sit in memory; [`TensorDataWriter::finish`] fsyncs and renames
//! the temporary file onto the target. The target is therefore either untouched or complete; an
//! unfinished temporary file is removed when the writer is dropped.
//!
//! Output is canonical: the header, zero padding up to the data section (only when there are
//! tensors, as `gguf.cpp` writes it), then each tensor followed by zero padding to the alignment
//! (the last one too), exactly what gguf-py and `gguf.cpp` produce.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use crate::error::{quoted, FormatError, GgufError};
use crate::ggml_type::GgmlType;
use crate::header::{Gguf, TensorInfo};
use crate::layout::{
    align_up, alignment_of, element_count, tensor_nbytes, ALIGNMENT_KEY, DEFAULT_ALIGNMENT,
    MAX_DIMS, MAX_NAME_BYTES,
};
use crate::meta::{MetaType, MetaValue};
use crate::output::{OutputFile, OutputPolicy};
use crate::parse::MAGIC;

/// Declares a file's metadata and tensor table. See the module documentation.
#[derive(Clone, Debug)]
pub struct GgufWriter {
    version: u32,
    kv: Vec<(String, MetaValue)>,
    tensors: Vec<Declared>,
    /// Names in `tensors`, for duplicate checks in O(1).
    names: HashSet<String>,
}

#[derive(Clone, Debug)]
struct Declared {
    name: String,
    ty: GgmlType,
    ne: Vec<u64>,
    nbytes: u64,
}

/// Largest alignment the writer accepts. The reader takes any power of two (`gguf.cpp` any that
/// fits its u32 key), but padding is written per tensor and materialized by `header_bytes`, so a
/// hostile value must not turn into gigabytes of zeros; real files use 32 or 64.
pub const MAX_WRITER_ALIGNMENT: u64 = 1 << 20;

/// The header as it will be written, with everything needed to stream the data after it.
struct Layout {
    /// Header bytes without the padding up to the data section.
    bytes: Vec<u8>,
    /// Where the data section starts: `bytes.len()` rounded up to `alignment` when there are
    /// tensors, else `bytes.len()`.
    data_offset: u64,
    alignment: u64,
}

impl GgufWriter {
    /// A writer for GGUF `version` (3 is current; 2 has the same layout). The version is
    /// validated when the header is produced.
    pub fn new(version: u32) -> Self {
        GgufWriter {
            version,
            kv: Vec::new(),
            tensors: Vec::new(),
            names: HashSet::new(),
        }
    }

    /// A writer that reproduces `header`: same version, metadata in the same order, same tensors.
    pub fn from_header(header: &Gguf) -> Result<Self, GgufError> {
        let mut w = GgufWriter::new(header.version);
        w.kv = header.kv.clone();
        for t in &header.tensors {
            w.add_tensor(&t.name, t.ty, &t.ne)?;
        }
        Ok(w)
    }

    /// Set `general.alignment` (as `uint32`, the type llama.cpp requires, when it fits).
    /// Validated (non-zero power of two) when the header is produced.
    pub fn set_alignment(&mut self, alignment: u64) {
        let value = match u32::try_from(alignment) {
            Ok(a) => MetaValue::U32(a),
            Err(_) => MetaValue::U64(alignment),
        };
        self.set_kv(ALIGNMENT_KEY, value);
    }

    /// Replace the value of an existing key in place, or append a new key (order is kept).
    pub fn set_kv(&mut self, key: &str, value: MetaValue) {
        match self.kv.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => self.kv.push((key.to_owned(), value)),
        }
    }

    /// Remove a key, returning its value.
    pub fn remove_kv(&mut self, key: &str) -> Option<MetaValue> {
        let i = self.kv.iter().position(|(k, _)| k == key)?;
        Some(self.kv.remove(i).1)
    }

    pub fn kv(&self) -> &[(String, MetaValue)] {
        &self.kv
    }

    /// Declare the next tensor. Fails on a duplicate or over-long name, more than 4 dimensions,
    /// an element count beyond `i64`, or `ne[0]` not a whole number of blocks of `ty`.
    pub fn add_tensor(&mut self, name: &str, ty: GgmlType, ne: &[u64]) -> Result<(), GgufError> {
        let invalid = |kind| GgufError::Invalid {
            what: format!("tensor {}", quoted(name)),
            kind,
        };
        if name.len() > MAX_NAME_BYTES {
            let len = name.len() as u64;
            return Err(invalid(FormatError::NameTooLong { len }));
        }
        if self.names.contains(name) {
            return Err(invalid(FormatError::DuplicateTensorName(name.to_owned())));
        }
        if ne.len() > MAX_DIMS {
            return Err(invalid(FormatError::TooManyDims(ne.len() as u64)));
        }
        element_count(ne).map_err(invalid)?;
        let nbytes = tensor_nbytes(ty, ne).map_err(invalid)?;
        self.names.insert(name.to_owned());
        self.tensors.push(Declared {
            name: name.to_owned(),
            ty,
            ne: ne.to_vec(),
            nbytes,
        });
        Ok(())
    }

    /// The tensor table as it will be written (offsets relative to the data section).
    pub fn tensor_infos(&self) -> Result<Vec<TensorInfo>, GgufError> {
        let alignment = self.alignment()?;
        let mut offset = 0u64;
        let mut out = Vec::with_capacity(self.tensors.len());
        for t in &self.tensors {
            out.push(TensorInfo {
                name: t.name.clone(),
                ne: t.ne.clone(),
                ty: t.ty,
                offset,
                nbytes: t.nbytes,
            });
            offset = align_up(t.nbytes, alignment)
                .and_then(|padded| offset.checked_add(padded))
                .ok_or_else(|| GgufError::Invalid {
                    what: format!("tensor {}", quoted(&t.name)),
                    kind: FormatError::SizeOverflow,
                })?;
        }
        Ok(out)
    }

    /// The header bytes, including the zero padding up to the data section when there are
    /// tensors. A file is these bytes followed by each tensor's data padded to the alignment.
    pub fn header_bytes(&self) -> Result<Vec<u8>, GgufError> {
        let mut layout = self.layout()?;
        // data_offset - len < alignment <= MAX_WRITER_ALIGNMENT, so this stays small.
        layout.bytes.resize(layout.data_offset as usize, 0);
        Ok(layout.bytes)
    }

    /// [`GgufWriter::begin_output`] at `path` under [`OutputPolicy::REPLACE`]: an existing regular
    /// file is replaced, anything else refused.
    pub fn begin(self, path: &Path) -> Result<TensorDataWriter, GgufError> {
        let layout = self.layout()?;
        self.begin_with(layout, OutputFile::create(path, &OutputPolicy::REPLACE)?)
    }

    /// Write the header into `out` and return the writer for the tensor data. The header is laid
    /// out (and any error in it reported) before `out` is touched.
    pub fn begin_output(self, out: OutputFile) -> Result<TensorDataWriter, GgufError> {
        let layout = self.layout()?;
        self.begin_with(layout, out)
    }

    fn begin_with(self, layout: Layout, out: OutputFile) -> Result<TensorDataWriter, GgufError> {
        let mut writer = TensorDataWriter {
            out: Some(out),
            tensors: self
                .tensors
                .into_iter()
                .map(|t| (t.name, t.nbytes))
                .collect(),
            next: 0,
            alignment: layout.alignment,
        };
        writer.write_all(&layout.bytes)?;
        writer.write_zeros(layout.data_offset - layout.bytes.len() as u64)?;
        Ok(writer)
    }

    fn alignment(&self) -> Result<u64, GgufError> {
        let invalid = |kind| GgufError::Invalid {
            what: format!("key {}", quoted(ALIGNMENT_KEY)),
            kind,
        };
        match self.kv.iter().find(|(k, _)| k == ALIGNMENT_KEY) {
            Some((_, v)) => match alignment_of(v).map_err(invalid)? {
                a if a > MAX_WRITER_ALIGNMENT => Err(invalid(FormatError::AlignmentTooLarge {
                    alignment: a,
                    max: MAX_WRITER_ALIGNMENT,
                })),
                a => Ok(a),
            },
            None => Ok(DEFAULT_ALIGNMENT),
        }
    }

    fn layout(&self) -> Result<Layout, GgufError> {
        let version_error = match self.version {
            2 | 3 => None,
            1 => Some(FormatError::VersionOne),
            v => Some(FormatError::UnsupportedVersion(v)),
        };
        if let Some(kind) = version_error {
            return Err(GgufError::Invalid {
                what: "version".into(),
                kind,
            });
        }
        for (key, value) in &self.kv {
            check_kv(key, value)?;
        }
        let alignment = self.alignment()?;
        let infos = self.tensor_infos()?;

        let mut out = Vec::with_capacity(4096);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.kv.len() as u64).to_le_bytes());
        for (key, value) in &self.kv {
            put_str(&mut out, key);
            out.extend_from_slice(&(value.meta_type() as u32).to_le_bytes());
            put_value(&mut out, value);
        }
        for t in &infos {
            put_str(&mut out, &t.name);
            out.extend_from_slice(&(t.ne.len() as u32).to_le_bytes());
            for d in &t.ne {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&t.ty.id().to_le_bytes());
            out.extend_from_slice(&t.offset.to_le_bytes());
        }
        let header_len = out.len() as u64;
        let data_offset = if infos.is_empty() {
            header_len
        } else {
            align_up(header_len, alignment).ok_or(GgufError::Invalid {
                what: "data section".into(),
                kind: FormatError::SizeOverflow,
            })?
        };
        Ok(Layout {
            bytes: out,
            data_offset,
            alignment,
        })
    }
}

/// Keys must be non-empty; arrays must be homogeneous and hold no arrays.
fn check_kv(key: &str, value: &MetaValue) -> Result<(), GgufError> {
    let invalid = |kind| GgufError::Invalid {
        what: format!("key {}", quoted(key)),
        kind,
    };
    if key.is_empty() {
        return Err(invalid(FormatError::EmptyKey));
    }
    if let MetaValue::Array(arr) = value {
        if arr.elem == MetaType::Array {
            return Err(invalid(FormatError::NestedArray));
        }
        if let Some((index, item)) = arr
            .items
            .iter()
            .enumerate()
            .find(|(_, v)| v.meta_type() != arr.elem)
        {
            return Err(invalid(FormatError::MixedArray {
                index,
                elem: arr.elem,
                found: item.meta_type(),
            }));
        }
    }
    Ok(())
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// A value without its type tag (array items carry none).
fn put_value(out: &mut Vec<u8>, value: &MetaValue) {
    match value {
        MetaValue::U8(v) => out.push(*v),
        MetaValue::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::Bool(v) => out.push(u8::from(*v)),
        MetaValue::String(s) => put_str(out, s),
        MetaValue::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
        MetaValue::Array(arr) => {
            out.extend_from_slice(&(arr.elem as u32).to_le_bytes());
            out.extend_from_slice(&(arr.items.len() as u64).to_le_bytes());
            for item in &arr.items {
                put_value(out, item);
            }
        }
    }
}

/// Receives the tensor data after the header; see the module documentation.
pub struct TensorDataWriter {
    /// `None` only after `finish` handed the file over; dropping it uncommitted removes the
    /// temporary file.
    out: Option<OutputFile>,
    /// Declared `(name, nbytes)` in order.
    tensors: Vec<(String, u64)>,
    /// Index of the next tensor to write.
    next: usize,
    alignment: u64,
}

impl TensorDataWriter {
    /// Append the data of the next declared tensor; its length must equal the tensor's size.
    pub fn write_tensor(&mut self, data: &[u8]) -> Result<(), GgufError> {
        self.write_tensor_parts([data])
    }

    /// Append the data of the next declared tensor in parts (e.g. one expert's slab at a time, so a
    /// tensor larger than memory is never held whole); the parts must add up to the tensor's size.
    /// A part that would overrun it is refused before any of it is written.
    pub fn write_tensor_parts<'a>(
        &mut self,
        parts: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<(), GgufError> {
        let (name, nbytes) =
            self.tensors
                .get(self.next)
                .cloned()
                .ok_or(GgufError::ExtraTensor {
                    declared: self.tensors.len(),
                })?;
        let mut written = 0u64;
        for part in parts {
            // A short last part is only known at the end; an overrun is caught before its bytes go
            // out.
            let after = written + part.len() as u64;
            if after > nbytes {
                return Err(GgufError::TensorSize {
                    name,
                    expected: nbytes,
                    got: after,
                });
            }
            self.write_all(part)?;
            written = after;
        }
        if written != nbytes {
            return Err(GgufError::TensorSize {
                name,
                expected: nbytes,
                got: written,
            });
        }
        let pad = align_up(nbytes, self.alignment).unwrap_or(nbytes) - nbytes;
        self.write_zeros(pad)?;
        self.next += 1;
        Ok(())
    }

    /// Name and size of the tensor whose data is expected next, if any.
    pub fn next_tensor(&self) -> Option<(&str, u64)> {
        self.tensors.get(self.next).map(|(n, b)| (n.as_str(), *b))
    }

    /// Check every tensor was written, flush, fsync, and rename the temporary file onto the target.
    pub fn finish(mut self) -> Result<(), GgufError> {
        if let Some((name, _)) = self.tensors.get(self.next) {
            return Err(GgufError::MissingTensorData {
                name: name.clone(),
                written: self.next,
                declared: self.tensors.len(),
            });
        }
        match self.out.take() {
            Some(out) => Ok(out.commit()?),
            None => Ok(()),
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> Result<(), GgufError> {
        let Some(out) = self.out.as_mut() else {
            return Ok(());
        };
        out.write_all(bytes)
            .map_err(|e| GgufError::io(out.tmp(), "write", e))
    }

    fn write_zeros(&mut self, mut n: u64) -> Result<(), GgufError> {
        const ZEROS: [u8; 4096] = [0; 4096];
        while n > 0 {
            let chunk = n.min(ZEROS.len() as u64) as usize;
            self.write_all(&ZEROS[..chunk])?;
            n -= chunk as u64;
        }
        Ok(())
    }
}
