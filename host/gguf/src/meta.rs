//! Metadata values: the `gguf_type` enum and the typed values of the key/value section
//! (docs/gguf-format.md#metadata-values).

use std::fmt;

/// The on-disk type tag of a metadata value (`gguf_type`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MetaType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl MetaType {
    /// The type with on-disk tag `v`, or `None` past `F64 = 12`.
    pub fn from_u32(v: u32) -> Option<Self> {
        use MetaType::*;
        Some(match v {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// Bytes of one encoded value of a fixed-size type; `None` for `String` and `Array`.
    pub fn fixed_size(self) -> Option<u64> {
        use MetaType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }

    /// The fewest bytes one encoded value can take: the fixed size, or the 8-byte length prefix
    /// of a string, or an array's 4-byte element type plus 8-byte count.
    pub fn min_encoded_size(self) -> u64 {
        match self {
            MetaType::String => 8,
            MetaType::Array => 12,
            fixed => fixed.fixed_size().unwrap_or(1),
        }
    }

    /// Lower-case name as the GGUF spec writes it (`uint32`, `string`).
    pub fn name(self) -> &'static str {
        use MetaType::*;
        match self {
            U8 => "uint8",
            I8 => "int8",
            U16 => "uint16",
            I16 => "int16",
            U32 => "uint32",
            I32 => "int32",
            F32 => "float32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "uint64",
            I64 => "int64",
            F64 => "float64",
        }
    }
}

impl fmt::Display for MetaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A homogeneous array. `elem` is kept explicitly so an empty array round-trips with its type;
/// every item's [`MetaValue::meta_type`] equals `elem`, and `elem` is never `Array`
/// (both enforced by the reader and by the writer).
#[derive(Clone, Debug, PartialEq)]
pub struct MetaArray {
    pub elem: MetaType,
    pub items: Vec<MetaValue>,
}

impl MetaArray {
    /// An array of strings.
    pub fn strings<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> Self {
        MetaArray {
            elem: MetaType::String,
            items: items
                .into_iter()
                .map(|s| MetaValue::String(s.as_ref().to_owned()))
                .collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    U64(u64),
    I64(i64),
    F64(f64),
    Array(MetaArray),
}

impl MetaValue {
    pub fn meta_type(&self) -> MetaType {
        match self {
            MetaValue::U8(_) => MetaType::U8,
            MetaValue::I8(_) => MetaType::I8,
            MetaValue::U16(_) => MetaType::U16,
            MetaValue::I16(_) => MetaType::I16,
            MetaValue::U32(_) => MetaType::U32,
            MetaValue::I32(_) => MetaType::I32,
            MetaValue::F32(_) => MetaType::F32,
            MetaValue::Bool(_) => MetaType::Bool,
            MetaValue::String(_) => MetaType::String,
            MetaValue::U64(_) => MetaType::U64,
            MetaValue::I64(_) => MetaType::I64,
            MetaValue::F64(_) => MetaType::F64,
            MetaValue::Array(_) => MetaType::Array,
        }
    }

    /// Any integer width, as an exact `i128` (which holds every `u64` and `i64`).
    pub fn as_integer(&self) -> Option<i128> {
        Some(match *self {
            MetaValue::U8(v) => v.into(),
            MetaValue::I8(v) => v.into(),
            MetaValue::U16(v) => v.into(),
            MetaValue::I16(v) => v.into(),
            MetaValue::U32(v) => v.into(),
            MetaValue::I32(v) => v.into(),
            MetaValue::U64(v) => v.into(),
            MetaValue::I64(v) => v.into(),
            _ => return None,
        })
    }

    /// Any integer width whose value is non-negative.
    pub fn as_u64(&self) -> Option<u64> {
        self.as_integer().and_then(|v| u64::try_from(v).ok())
    }

    /// Any integer width whose value fits `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_integer().and_then(|v| i64::try_from(v).ok())
    }

    /// `F32`, or `F64` rounded to the nearest `f32`.
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            MetaValue::F32(v) => Some(v),
            MetaValue::F64(v) => Some(v as f32),
            _ => None,
        }
    }

    /// `F32` or `F64` as `f64` (exact).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v.into()),
            MetaValue::F64(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            MetaValue::Bool(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&MetaArray> {
        match self {
            MetaValue::Array(a) => Some(a),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_accessors_cover_every_width_and_range() {
        assert_eq!(MetaValue::U8(7).as_u64(), Some(7));
        assert_eq!(MetaValue::I16(-1).as_u64(), None);
        assert_eq!(MetaValue::I16(-1).as_i64(), Some(-1));
        assert_eq!(MetaValue::U64(u64::MAX).as_u64(), Some(u64::MAX));
        assert_eq!(MetaValue::U64(u64::MAX).as_i64(), None);
        assert_eq!(MetaValue::I64(i64::MIN).as_i64(), Some(i64::MIN));
        assert_eq!(MetaValue::F32(1.0).as_u64(), None);
        assert_eq!(MetaValue::Bool(true).as_u64(), None);
        assert_eq!(MetaValue::F64(0.5).as_f32(), Some(0.5));
        assert_eq!(MetaValue::String("x".into()).as_str(), Some("x"));
    }

    #[test]
    fn a_value_takes_32_bytes() {
        // The crate docs bound parser memory by this size per array item.
        assert_eq!(std::mem::size_of::<MetaValue>(), 32);
    }

    #[test]
    fn type_tags_round_trip() {
        for tag in 0..13 {
            let ty = MetaType::from_u32(tag).expect("tags 0..=12 are defined");
            assert_eq!(ty as u32, tag);
        }
        assert_eq!(MetaType::from_u32(13), None);
    }
}
