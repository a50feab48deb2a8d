//! Layout rules shared by the reader and the writer: alignment, tensor shapes and byte sizes.

use crate::error::FormatError;
use crate::ggml_type::GgmlType;
use crate::meta::MetaValue;

/// Metadata key that sets the data alignment.
pub const ALIGNMENT_KEY: &str = "general.alignment";
/// Alignment when `general.alignment` is absent (`GGUF_DEFAULT_ALIGNMENT`).
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// `GGML_MAX_DIMS`.
pub const MAX_DIMS: usize = 4;
/// `GGML_MAX_NAME` is 64 including the C string's NUL, so names hold at most 63 bytes.
pub const MAX_NAME_BYTES: usize = 63;

/// `x` rounded up to a multiple of `align` (a power of two); `None` on overflow.
pub fn align_up(x: u64, align: u64) -> Option<u64> {
    debug_assert!(align.is_power_of_two());
    x.checked_add(align - 1).map(|v| v & !(align - 1))
}

/// The alignment a `general.alignment` value declares. Any integer width is accepted (llama.cpp
/// insists on u32; the spec asks readers to be lenient); the value must be a non-zero power of two.
pub fn alignment_of(value: &MetaValue) -> Result<u64, FormatError> {
    let v = value
        .as_integer()
        .ok_or(FormatError::AlignmentType(value.meta_type()))?;
    match u64::try_from(v) {
        Ok(a) if a.is_power_of_two() => Ok(a),
        _ => Err(FormatError::BadAlignment(v)),
    }
}

/// Element count of a shape (`ne`, innermost first); the product must fit `i64` as in `gguf.cpp`.
pub fn element_count(ne: &[u64]) -> Result<u64, FormatError> {
    ne.iter().try_fold(1u64, |acc, &d| {
        if d > i64::MAX as u64 {
            return Err(FormatError::DimTooLarge(d));
        }
        acc.checked_mul(d)
            .filter(|&n| n <= i64::MAX as u64)
            .ok_or(FormatError::ElementCountOverflow)
    })
}

/// Bytes of a contiguous tensor: `row_bytes(ne[0]) · ne[1] · ne[2] · ne[3]`
/// (docs/gguf-format.md#shapes-and-byte-sizes).
/// Assumes [`element_count`] accepted `ne`.
pub fn tensor_nbytes(ty: GgmlType, ne: &[u64]) -> Result<u64, FormatError> {
    let ne0 = ne.first().copied().unwrap_or(1);
    let row = ty.row_bytes(ne0).ok_or(FormatError::RowNotBlockAligned {
        ne0,
        ty,
        block: ty.block_size(),
    })?;
    ne.iter()
        .skip(1)
        .try_fold(row, |acc, &d| acc.checked_mul(d))
        .ok_or(FormatError::SizeOverflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn align_up_rounds_and_detects_overflow() {
        assert_eq!(align_up(0, 32), Some(0));
        assert_eq!(align_up(1, 32), Some(32));
        assert_eq!(align_up(64, 32), Some(64));
        assert_eq!(align_up(u64::MAX - 3, 32), None);
    }

    #[test]
    fn alignment_accepts_any_integer_width() {
        assert_eq!(alignment_of(&MetaValue::U8(64)), Ok(64));
        assert_eq!(alignment_of(&MetaValue::I64(1)), Ok(1));
        assert_eq!(
            alignment_of(&MetaValue::I32(-32)),
            Err(FormatError::BadAlignment(-32))
        );
        assert_eq!(
            alignment_of(&MetaValue::U32(0)),
            Err(FormatError::BadAlignment(0))
        );
        assert_eq!(
            alignment_of(&MetaValue::U32(48)),
            Err(FormatError::BadAlignment(48))
        );
        assert!(matches!(
            alignment_of(&MetaValue::F32(32.0)),
            Err(FormatError::AlignmentType(_))
        ));
    }

    #[test]
    fn shapes_and_sizes() {
        assert_eq!(element_count(&[]), Ok(1));
        assert_eq!(element_count(&[3, 0, 5]), Ok(0));
        assert_eq!(
            element_count(&[1 << 32, 1 << 32]),
            Err(FormatError::ElementCountOverflow)
        );
        assert_eq!(
            element_count(&[u64::MAX]),
            Err(FormatError::DimTooLarge(u64::MAX))
        );
        // Q4_K: 144 bytes per 256 elements; 512 x 3 -> 2 blocks per row, 3 rows.
        assert_eq!(tensor_nbytes(GgmlType::Q4K, &[512, 3]), Ok(2 * 144 * 3));
        assert!(matches!(
            tensor_nbytes(GgmlType::Q4K, &[100, 3]),
            Err(FormatError::RowNotBlockAligned { ne0: 100, .. })
        ));
    }
}
