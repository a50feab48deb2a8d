//! The parsed header: metadata, tensor table, and typed metadata getters that name the key on
//! error.

use std::ops::Range;

use crate::error::{GgufError, MetaProblem};
use crate::ggml_type::GgmlType;
use crate::meta::{MetaArray, MetaValue};

/// One entry of the tensor table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// Shape, innermost (contiguous) dimension first; `len()` is the file's `n_dims` (0..=4).
    pub ne: Vec<u64>,
    pub ty: GgmlType,
    /// Byte offset of the data, relative to the start of the data section.
    pub offset: u64,
    /// Bytes of data, without alignment padding.
    pub nbytes: u64,
}

impl TensorInfo {
    /// Product of the dimensions (saturating, so a hand-made `TensorInfo` cannot overflow;
    /// for parsed headers the product is known to fit `i64`).
    pub fn n_elements(&self) -> u64 {
        self.ne.iter().fold(1u64, |acc, &d| acc.saturating_mul(d))
    }

    /// The shape padded with 1 to four dimensions, as ggml stores it.
    pub fn ne4(&self) -> [u64; 4] {
        let mut out = [1; 4];
        for (o, &d) in out.iter_mut().zip(&self.ne) {
            *o = d;
        }
        out
    }

    /// Bytes of one row (`ne[0]` elements).
    pub fn row_bytes(&self) -> u64 {
        self.ty.row_bytes(self.ne4()[0]).unwrap_or(0)
    }
}

/// A parsed, validated GGUF header.
#[derive(Clone, Debug, PartialEq)]
pub struct Gguf {
    pub version: u32,
    pub alignment: u64,
    /// Metadata in file order; keys are non-empty and unique.
    pub kv: Vec<(String, MetaValue)>,
    /// Tensor table in file order; offsets are the running aligned sum of sizes.
    pub tensors: Vec<TensorInfo>,
    /// Absolute byte offset of the data section in the file.
    pub data_offset: u64,
}

impl Gguf {
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.kv.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Absolute byte range of a tensor's data in the file, `None` if it does not fit `usize`.
    /// In range of the file for every tensor of a header that [`crate::parse_header`] returned.
    pub fn data_range(&self, t: &TensorInfo) -> Option<Range<usize>> {
        let start = self.data_offset.checked_add(t.offset)?;
        let end = start.checked_add(t.nbytes)?;
        Some(usize::try_from(start).ok()?..usize::try_from(end).ok()?)
    }

    /// Sum of all tensors' data bytes (without padding).
    pub fn total_tensor_bytes(&self) -> u64 {
        self.tensors.iter().map(|t| t.nbytes).sum()
    }

    fn require(&self, key: &str) -> Result<&MetaValue, GgufError> {
        self.get(key)
            .ok_or_else(|| meta_err(key, MetaProblem::Missing))
    }

    /// Any non-negative integer width.
    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        let v = self.require(key)?;
        integer(key, v, "a non-negative integer", |i| u64::try_from(i).ok())
    }

    /// Any integer width whose value fits `u32`.
    pub fn get_u32(&self, key: &str) -> Result<u32, GgufError> {
        let v = self.require(key)?;
        integer(key, v, "a u32", |i| u32::try_from(i).ok())
    }

    /// Any integer width whose value fits `usize`.
    pub fn get_usize(&self, key: &str) -> Result<usize, GgufError> {
        let v = self.require(key)?;
        integer(key, v, "a usize", |i| usize::try_from(i).ok())
    }

    /// Any integer width whose value fits `i64`.
    pub fn get_i64(&self, key: &str) -> Result<i64, GgufError> {
        let v = self.require(key)?;
        integer(key, v, "an i64", |i| i64::try_from(i).ok())
    }

    /// `float32`, or `float64` rounded to `f32`.
    pub fn get_f32(&self, key: &str) -> Result<f32, GgufError> {
        let v = self.require(key)?;
        v.as_f32().ok_or_else(|| wrong_type(key, "a float", v))
    }

    pub fn get_bool(&self, key: &str) -> Result<bool, GgufError> {
        let v = self.require(key)?;
        v.as_bool().ok_or_else(|| wrong_type(key, "a bool", v))
    }

    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        let v = self.require(key)?;
        v.as_str().ok_or_else(|| wrong_type(key, "a string", v))
    }

    pub fn get_array(&self, key: &str) -> Result<&MetaArray, GgufError> {
        let v = self.require(key)?;
        v.as_array().ok_or_else(|| wrong_type(key, "an array", v))
    }

    /// An array of strings.
    pub fn get_str_array(&self, key: &str) -> Result<Vec<&str>, GgufError> {
        self.array_of(key, "an array of strings", MetaValue::as_str)
    }

    /// An array of `float32`/`float64`, as `f32`.
    pub fn get_f32_array(&self, key: &str) -> Result<Vec<f32>, GgufError> {
        self.array_of(key, "an array of floats", MetaValue::as_f32)
    }

    /// An array of any integer width, each value fitting `i64`.
    pub fn get_i64_array(&self, key: &str) -> Result<Vec<i64>, GgufError> {
        self.array_of(key, "an array of integers", MetaValue::as_i64)
    }

    /// An array of any integer width, each value fitting `u32`.
    pub fn get_u32_array(&self, key: &str) -> Result<Vec<u32>, GgufError> {
        self.array_of(key, "an array of u32 integers", |v| {
            v.as_u64().and_then(|x| u32::try_from(x).ok())
        })
    }

    /// `Ok(None)` when the key is absent, otherwise as [`Gguf::get_u64`].
    pub fn get_u64_opt(&self, key: &str) -> Result<Option<u64>, GgufError> {
        self.optional(key, Self::get_u64)
    }

    /// `Ok(None)` when the key is absent, otherwise as [`Gguf::get_f32`].
    pub fn get_f32_opt(&self, key: &str) -> Result<Option<f32>, GgufError> {
        self.optional(key, Self::get_f32)
    }

    /// `Ok(None)` when the key is absent, otherwise as [`Gguf::get_bool`].
    pub fn get_bool_opt(&self, key: &str) -> Result<Option<bool>, GgufError> {
        self.optional(key, Self::get_bool)
    }

    /// `Ok(None)` when the key is absent, otherwise as [`Gguf::get_str`].
    pub fn get_str_opt(&self, key: &str) -> Result<Option<&str>, GgufError> {
        if self.get(key).is_none() {
            return Ok(None);
        }
        self.get_str(key).map(Some)
    }

    fn optional<T>(
        &self,
        key: &str,
        get: impl FnOnce(&Self, &str) -> Result<T, GgufError>,
    ) -> Result<Option<T>, GgufError> {
        if self.get(key).is_none() {
            return Ok(None);
        }
        get(self, key).map(Some)
    }

    fn array_of<'a, T>(
        &'a self,
        key: &str,
        expected: &'static str,
        item: impl Fn(&'a MetaValue) -> Option<T>,
    ) -> Result<Vec<T>, GgufError> {
        let v = self.require(key)?;
        let arr = v.as_array().ok_or_else(|| wrong_type(key, expected, v))?;
        arr.items
            .iter()
            .enumerate()
            .map(|(index, v)| {
                item(v).ok_or_else(|| {
                    meta_err(
                        key,
                        MetaProblem::WrongItemType {
                            index,
                            expected,
                            found: v.meta_type(),
                        },
                    )
                })
            })
            .collect()
    }
}

fn meta_err(key: &str, problem: MetaProblem) -> GgufError {
    GgufError::Meta {
        key: key.to_owned(),
        problem,
    }
}

fn wrong_type(key: &str, expected: &'static str, v: &MetaValue) -> GgufError {
    meta_err(
        key,
        MetaProblem::WrongType {
            expected,
            found: v.meta_type(),
        },
    )
}

fn integer<T>(
    key: &str,
    v: &MetaValue,
    expected: &'static str,
    narrow: impl FnOnce(i128) -> Option<T>,
) -> Result<T, GgufError> {
    let i = v.as_integer().ok_or_else(|| wrong_type(key, expected, v))?;
    narrow(i).ok_or_else(|| {
        meta_err(
            key,
            MetaProblem::OutOfRange {
                value: i.to_string(),
                expected,
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::MetaType;

    fn header(kv: Vec<(&str, MetaValue)>) -> Gguf {
        Gguf {
            version: 3,
            alignment: 32,
            kv: kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            tensors: vec![],
            data_offset: 0,
        }
    }

    #[test]
    fn getters_name_the_key_and_the_problem() {
        let h = header(vec![
            ("a.count", MetaValue::I32(-3)),
            ("a.name", MetaValue::String("x".into())),
            (
                "a.list",
                MetaValue::Array(MetaArray {
                    elem: MetaType::U8,
                    items: vec![MetaValue::U8(1)],
                }),
            ),
        ]);
        assert_eq!(h.get_i64("a.count").unwrap(), -3);
        let e = h.get_u64("a.count").unwrap_err();
        assert_eq!(
            e.to_string(),
            "gguf: metadata key \"a.count\" value -3 does not fit a non-negative integer"
        );
        let e = h.get_u64("a.name").unwrap_err();
        assert_eq!(
            e.to_string(),
            "gguf: metadata key \"a.name\" is string, expected a non-negative integer"
        );
        let e = h.get_f32("missing.key").unwrap_err();
        assert_eq!(e.to_string(), "gguf: metadata key \"missing.key\" missing");
        assert_eq!(h.get_u64_opt("missing.key").unwrap(), None);
        assert!(h.get_u64_opt("a.name").is_err());
        let e = h.get_str_array("a.list").unwrap_err();
        assert!(matches!(
            e,
            GgufError::Meta {
                problem: MetaProblem::WrongItemType { index: 0, .. },
                ..
            }
        ));
        assert_eq!(h.get_u32_array("a.list").unwrap(), vec![1]);
    }

    #[test]
    fn ne4_pads_with_ones() {
        let t = TensorInfo {
            name: "t".into(),
            ne: vec![8, 3],
            ty: GgmlType::F32,
            offset: 0,
            nbytes: 96,
        };
        assert_eq!(t.ne4(), [8, 3, 1, 1]);
        assert_eq!(t.n_elements(), 24);
        assert_eq!(t.row_bytes(), 32);
    }
}
