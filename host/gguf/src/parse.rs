//! `parse_header`: decode and validate a whole GGUF file's header against the bytes of the file.
//!
//! Validation follows `gguf.cpp: gguf_init_from_reader` (docs/gguf-format.md), plus: every
//! allocation is bounded by the bytes left in the input, so a hostile count fails before
//! anything is reserved.

use std::collections::HashSet;

use crate::cursor::{Cursor, Fault, Locate};
use crate::error::{quoted, FormatError, GgufError};
use crate::ggml_type::GgmlType;
use crate::header::{Gguf, TensorInfo};
use crate::layout::{
    align_up, alignment_of, element_count, tensor_nbytes, ALIGNMENT_KEY, DEFAULT_ALIGNMENT,
    MAX_DIMS, MAX_NAME_BYTES,
};
use crate::meta::{MetaArray, MetaType, MetaValue};

/// "GGUF" as it appears in the file.
pub const MAGIC: [u8; 4] = *b"GGUF";

/// Fewest bytes a key/value pair can take: key length (8) + a 1-byte key + type tag (4) + a
/// 1-byte value.
const MIN_KV_BYTES: u64 = 8 + 1 + 4 + 1;
/// Fewest bytes a tensor info can take: name length (8) + n_dims (4) + type (4) + offset (8).
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 4 + 8;

/// Parse and validate the header of a complete GGUF file held in `bytes`, including that every
/// tensor's data lies inside `bytes`.
pub fn parse_header(bytes: &[u8]) -> Result<Gguf, GgufError> {
    let mut cur = Cursor::new(bytes);

    let magic = cur.array::<4>().field(|| "magic".into())?;
    if magic != MAGIC {
        return Err(Fault::new(0, FormatError::BadMagic(magic))).field(|| "magic".into());
    }
    let version = read_version(&mut cur)?;

    let at = cur.pos();
    let tensor_count = cur.u64().field(|| "header.tensor_count".into())?;
    let kv_at = cur.pos();
    let kv_count = cur.u64().field(|| "header.kv_count".into())?;
    cur.check_count(at, tensor_count, MIN_TENSOR_INFO_BYTES)
        .field(|| "header.tensor_count".into())?;
    cur.check_count(kv_at, kv_count, MIN_KV_BYTES)
        .field(|| "header.kv_count".into())?;

    let (kv, alignment) = read_kvs(&mut cur, kv_count)?;
    let tensors = read_tensor_infos(&mut cur, tensor_count, alignment)?;

    let data_offset = align_up(cur.pos(), alignment)
        .ok_or(Fault::new(cur.pos(), FormatError::SizeOverflow))
        .field(|| "data section".into())?;
    let file_len = bytes.len() as u64;
    let header = Gguf {
        version,
        alignment,
        kv,
        tensors,
        data_offset,
    };
    check_data_in_file(&header, file_len)?;
    Ok(header)
}

fn read_version(cur: &mut Cursor<'_>) -> Result<u32, GgufError> {
    let at = cur.pos();
    let version = cur.u32().field(|| "header.version".into())?;
    let kind = match version {
        2 | 3 => return Ok(version),
        1 => FormatError::VersionOne,
        // A big-endian file's small version number reads back with only the high bytes set.
        v if v & 0xFFFF == 0 => FormatError::BigEndian(v),
        v => FormatError::UnsupportedVersion(v),
    };
    Err(Fault::new(at, kind)).field(|| "header.version".into())
}

/// The key/value pairs, and the alignment `general.alignment` declares (validated at its value).
fn read_kvs(
    cur: &mut Cursor<'_>,
    count: u64,
) -> Result<(Vec<(String, MetaValue)>, u64), GgufError> {
    // `count` was checked against the input, so this reservation is bounded by its size.
    let mut kv = Vec::with_capacity(count as usize);
    let mut seen: HashSet<&str> = HashSet::with_capacity(count as usize);
    let mut alignment = DEFAULT_ALIGNMENT;
    for i in 0..count {
        let key_at = cur.pos();
        let key = cur.str().field(|| format!("kv[{i}] key"))?;
        if key.is_empty() {
            return Err(Fault::new(key_at, FormatError::EmptyKey)).field(|| format!("kv[{i}] key"));
        }
        if !seen.insert(key) {
            return Err(Fault::new(
                key_at,
                FormatError::DuplicateKey(key.to_owned()),
            ))
            .field(|| format!("kv[{i}] key"));
        }
        let name = || format!("kv[{i}] {}", quoted(key));
        let ty = read_meta_type(cur).field(|| format!("{} type", name()))?;
        let value_at = cur.pos();
        let value = read_value(cur, ty, &name)?;
        if key == ALIGNMENT_KEY {
            alignment = alignment_of(&value)
                .map_err(|kind| Fault::new(value_at, kind))
                .field(name)?;
        }
        kv.push((key.to_owned(), value));
    }
    Ok((kv, alignment))
}

fn read_meta_type(cur: &mut Cursor<'_>) -> Result<MetaType, Fault> {
    let at = cur.pos();
    let tag = cur.u32()?;
    MetaType::from_u32(tag).ok_or(Fault::new(at, FormatError::UnknownMetaType(tag)))
}

/// One value of type `ty`; `name` renders the field path (`kv[5] "key"`) on the error path only.
fn read_value(
    cur: &mut Cursor<'_>,
    ty: MetaType,
    name: &dyn Fn() -> String,
) -> Result<MetaValue, GgufError> {
    if ty == MetaType::Array {
        return read_array(cur, name).map(MetaValue::Array);
    }
    read_scalar(cur, ty).field(name)
}

fn read_scalar(cur: &mut Cursor<'_>, ty: MetaType) -> Result<MetaValue, Fault> {
    Ok(match ty {
        MetaType::U8 => MetaValue::U8(cur.u8()?),
        MetaType::I8 => MetaValue::I8(i8::from_le_bytes(cur.array()?)),
        MetaType::U16 => MetaValue::U16(u16::from_le_bytes(cur.array()?)),
        MetaType::I16 => MetaValue::I16(i16::from_le_bytes(cur.array()?)),
        MetaType::U32 => MetaValue::U32(cur.u32()?),
        MetaType::I32 => MetaValue::I32(i32::from_le_bytes(cur.array()?)),
        MetaType::F32 => MetaValue::F32(f32::from_le_bytes(cur.array()?)),
        MetaType::U64 => MetaValue::U64(cur.u64()?),
        MetaType::I64 => MetaValue::I64(i64::from_le_bytes(cur.array()?)),
        MetaType::F64 => MetaValue::F64(f64::from_le_bytes(cur.array()?)),
        MetaType::Bool => {
            let at = cur.pos();
            match cur.u8()? {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                b => return Err(Fault::new(at, FormatError::InvalidBool(b))),
            }
        }
        MetaType::String => MetaValue::String(cur.str()?.to_owned()),
        // Arrays are dispatched by `read_value`; reaching here means an array inside an array.
        MetaType::Array => return Err(Fault::new(cur.pos(), FormatError::NestedArray)),
    })
}

fn read_array(cur: &mut Cursor<'_>, name: &dyn Fn() -> String) -> Result<MetaArray, GgufError> {
    let elem_at = cur.pos();
    let elem = read_meta_type(cur).field(|| format!("{} array type", name()))?;
    if elem == MetaType::Array {
        return Err(Fault::new(elem_at, FormatError::NestedArray))
            .field(|| format!("{} array type", name()));
    }
    let len_at = cur.pos();
    let len = cur.u64().field(|| format!("{} array length", name()))?;
    // An array of n values needs at least n · (fixed size, or 8 for a string's length prefix).
    cur.check_count(len_at, len, elem.min_encoded_size())
        .field(|| format!("{} array length", name()))?;
    // `len` fits in the remaining input, so the reservation is bounded by the input's size.
    let mut items = Vec::with_capacity(len as usize);
    for index in 0..len {
        let item = read_scalar(cur, elem).field(|| format!("{} array[{index}]", name()))?;
        items.push(item);
    }
    Ok(MetaArray { elem, items })
}

fn read_tensor_infos(
    cur: &mut Cursor<'_>,
    count: u64,
    alignment: u64,
) -> Result<Vec<TensorInfo>, GgufError> {
    let at = cur.pos();
    // Re-checked here because the key/value section consumed part of the input.
    cur.check_count(at, count, MIN_TENSOR_INFO_BYTES)
        .field(|| "header.tensor_count".into())?;
    let mut tensors = Vec::with_capacity(count as usize);
    let mut seen: HashSet<&str> = HashSet::with_capacity(count as usize);
    let mut expected_offset = 0u64;
    for i in 0..count {
        let name_at = cur.pos();
        let field = |f: &str| format!("tensor_infos[{i}].{f}");
        let name = cur.str().field(|| field("name"))?;
        if name.len() > MAX_NAME_BYTES {
            let len = name.len() as u64;
            return Err(Fault::new(name_at, FormatError::NameTooLong { len }))
                .field(|| field("name"));
        }
        if !seen.insert(name) {
            return Err(Fault::new(
                name_at,
                FormatError::DuplicateTensorName(name.to_owned()),
            ))
            .field(|| field("name"));
        }
        let named = |f: &str| format!("tensor_infos[{i}] {}.{f}", quoted(name));

        let dims_at = cur.pos();
        let n_dims = cur.u32().field(|| named("n_dims"))?;
        if n_dims as usize > MAX_DIMS {
            return Err(Fault::new(dims_at, FormatError::TooManyDims(n_dims.into())))
                .field(|| named("n_dims"));
        }
        let ne_at = cur.pos();
        let mut ne = Vec::with_capacity(n_dims as usize);
        for d in 0..n_dims {
            let d_at = cur.pos();
            let v = cur.u64().field(|| named(&format!("ne[{d}]")))?;
            if v > i64::MAX as u64 {
                return Err(Fault::new(d_at, FormatError::DimTooLarge(v)))
                    .field(|| named(&format!("ne[{d}]")));
            }
            ne.push(v);
        }
        element_count(&ne)
            .map_err(|kind| Fault::new(ne_at, kind))
            .field(|| named("ne"))?;

        let type_at = cur.pos();
        let raw_type = cur.u32().field(|| named("type"))?;
        let ty = GgmlType::from_u32(raw_type)
            .ok_or(Fault::new(type_at, FormatError::UnknownGgmlType(raw_type)))
            .field(|| named("type"))?;
        let nbytes = tensor_nbytes(ty, &ne)
            .map_err(|kind| Fault::new(ne_at, kind))
            .field(|| named("ne"))?;

        let offset_at = cur.pos();
        let offset = cur.u64().field(|| named("offset"))?;
        if offset != expected_offset {
            return Err(Fault::new(
                offset_at,
                FormatError::OffsetMismatch {
                    found: offset,
                    expected: expected_offset,
                },
            ))
            .field(|| named("offset"));
        }
        expected_offset = align_up(nbytes, alignment)
            .and_then(|padded| offset.checked_add(padded))
            .ok_or(Fault::new(offset_at, FormatError::SizeOverflow))
            .field(|| named("offset"))?;

        tensors.push(TensorInfo {
            name: name.to_owned(),
            ne,
            ty,
            offset,
            nbytes,
        });
    }
    Ok(tensors)
}

/// Every tensor's bytes must lie inside the file (llama.cpp: "tensor data is not within file
/// bounds"). Padding after the last tensor is not required.
fn check_data_in_file(header: &Gguf, file_len: u64) -> Result<(), GgufError> {
    for (i, t) in header.tensors.iter().enumerate() {
        let start = u128::from(header.data_offset) + u128::from(t.offset);
        let end = start + u128::from(t.nbytes);
        if end > u128::from(file_len) {
            let offset = u64::try_from(start).unwrap_or(u64::MAX);
            return Err(Fault::new(
                offset,
                FormatError::DataOutOfBounds {
                    nbytes: t.nbytes,
                    end,
                    file_len,
                },
            ))
            .field(|| format!("tensor_infos[{i}] {}.data", quoted(&t.name)));
        }
    }
    Ok(())
}
