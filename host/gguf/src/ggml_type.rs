//! The `ggml_type` enum (`include/ggml.h`) and its block geometry (`type_traits` in `src/ggml.c`).
//!
//! Every id that ggml currently defines is listed, including types no dequantizer in this project
//! supports: the container must be able to describe (and reject downstream, by name) any tensor a
//! real file holds. Ids 4, 5, 31–33 and 36–38 were removed upstream and are unknown here, as in
//! `gguf.cpp` (whose `ggml_type_size` is 0 for them).

use std::fmt;

/// A ggml tensor element type, with its on-disk id as discriminant.
#[allow(non_camel_case_types)] // the names follow ggml's own spelling (`Q4_0`, `TQ1_0`)
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgmlType {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2K = 10,
    Q3K = 11,
    Q4K = 12,
    Q5K = 13,
    Q6K = 14,
    Q8K = 15,
    Iq2Xxs = 16,
    Iq2Xs = 17,
    Iq3Xxs = 18,
    Iq1S = 19,
    Iq4Nl = 20,
    Iq3S = 21,
    Iq2S = 22,
    Iq4Xs = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    Iq1M = 29,
    Bf16 = 30,
    Tq1_0 = 34,
    Tq2_0 = 35,
    Mxfp4 = 39,
    Nvfp4 = 40,
    Q1_0 = 41,
    Q2_0 = 42,
}

/// Geometry of one type: `(type, name, elements per block, bytes per block)`.
/// Sizes are `sizeof(block_*)` from `ggml-common.h` (docs/gguf-format.md#block-geometry); block
/// size 1 means a plain scalar.
const TABLE: [(GgmlType, &str, u64, u64); 35] = [
    (GgmlType::F32, "F32", 1, 4),
    (GgmlType::F16, "F16", 1, 2),
    (GgmlType::Q4_0, "Q4_0", 32, 18),
    (GgmlType::Q4_1, "Q4_1", 32, 20),
    (GgmlType::Q5_0, "Q5_0", 32, 22),
    (GgmlType::Q5_1, "Q5_1", 32, 24),
    (GgmlType::Q8_0, "Q8_0", 32, 34),
    (GgmlType::Q8_1, "Q8_1", 32, 36),
    (GgmlType::Q2K, "Q2_K", 256, 84),
    (GgmlType::Q3K, "Q3_K", 256, 110),
    (GgmlType::Q4K, "Q4_K", 256, 144),
    (GgmlType::Q5K, "Q5_K", 256, 176),
    (GgmlType::Q6K, "Q6_K", 256, 210),
    (GgmlType::Q8K, "Q8_K", 256, 292),
    (GgmlType::Iq2Xxs, "IQ2_XXS", 256, 66),
    (GgmlType::Iq2Xs, "IQ2_XS", 256, 74),
    (GgmlType::Iq3Xxs, "IQ3_XXS", 256, 98),
    (GgmlType::Iq1S, "IQ1_S", 256, 50),
    (GgmlType::Iq4Nl, "IQ4_NL", 32, 18),
    (GgmlType::Iq3S, "IQ3_S", 256, 110),
    (GgmlType::Iq2S, "IQ2_S", 256, 82),
    (GgmlType::Iq4Xs, "IQ4_XS", 256, 136),
    (GgmlType::I8, "I8", 1, 1),
    (GgmlType::I16, "I16", 1, 2),
    (GgmlType::I32, "I32", 1, 4),
    (GgmlType::I64, "I64", 1, 8),
    (GgmlType::F64, "F64", 1, 8),
    (GgmlType::Iq1M, "IQ1_M", 256, 56),
    (GgmlType::Bf16, "BF16", 1, 2),
    (GgmlType::Tq1_0, "TQ1_0", 256, 54),
    (GgmlType::Tq2_0, "TQ2_0", 256, 66),
    (GgmlType::Mxfp4, "MXFP4", 32, 17),
    (GgmlType::Nvfp4, "NVFP4", 64, 36),
    (GgmlType::Q1_0, "Q1_0", 128, 18),
    (GgmlType::Q2_0, "Q2_0", 64, 18),
];

/// `TABLE` row of each on-disk id below 64, or `NONE` for removed and unknown ids.
const NONE: u8 = u8::MAX;
const ROW_OF_ID: [u8; 64] = {
    let mut rows = [NONE; 64];
    let mut i = 0;
    while i < TABLE.len() {
        rows[TABLE[i].0 as usize] = i as u8;
        i += 1;
    }
    rows
};

impl GgmlType {
    /// Every known type, in id order.
    pub const ALL: [GgmlType; 35] = {
        let mut all = [GgmlType::F32; 35];
        let mut i = 0;
        while i < TABLE.len() {
            all[i] = TABLE[i].0;
            i += 1;
        }
        all
    };

    /// The type with on-disk id `v`, or `None` for removed and unknown ids.
    pub fn from_u32(v: u32) -> Option<Self> {
        let row = *ROW_OF_ID.get(usize::try_from(v).ok()?)?;
        TABLE.get(usize::from(row)).map(|r| r.0)
    }

    /// The on-disk id.
    pub fn id(self) -> u32 {
        self as u32
    }

    fn row(self) -> &'static (GgmlType, &'static str, u64, u64) {
        // Every variant has a row in TABLE (unit test `table_is_a_bijection_over_ids`), so the
        // index is in bounds.
        &TABLE[usize::from(ROW_OF_ID[self as usize])]
    }

    /// Upper-case name as gguf-py and llama.cpp's quantize tool print it (`"Q4_K"`, `"IQ2_XXS"`).
    pub fn name(self) -> &'static str {
        self.row().1
    }

    /// Elements per block.
    pub fn block_size(self) -> u64 {
        self.row().2
    }

    /// Bytes per block.
    pub fn type_size(self) -> u64 {
        self.row().3
    }

    /// Whether the type is a block-quantized format (block size above 1).
    pub fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// Bytes of one row of `ne0` elements; `None` if `ne0` is not a whole number of blocks or the
    /// size overflows `u64`.
    pub fn row_bytes(self, ne0: u64) -> Option<u64> {
        let blocks = ne0 / self.block_size();
        if blocks * self.block_size() != ne0 {
            return None;
        }
        blocks.checked_mul(self.type_size())
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_a_bijection_over_ids() {
        for (i, ty) in GgmlType::ALL.iter().enumerate() {
            assert_eq!(GgmlType::from_u32(ty.id()), Some(*ty));
            assert_eq!(TABLE[i].0, *ty);
            assert!(
                TABLE.iter().filter(|r| r.0 == *ty).count() == 1,
                "{ty:?} listed twice"
            );
        }
        // Removed ids (4, 5, 31–33, 36–38) and ids at or past GGML_TYPE_COUNT = 43 are unknown.
        for id in [4, 5, 31, 32, 33, 36, 37, 38, 43, 77, u32::MAX] {
            assert_eq!(GgmlType::from_u32(id), None, "id {id}");
        }
        let known = (0..64)
            .filter(|&id| GgmlType::from_u32(id).is_some())
            .count();
        assert_eq!(known, 43 - 8, "43 ids minus 8 removed ones");
    }

    #[test]
    fn bits_per_weight_match_spec_table() {
        // docs/gguf-format.md#block-geometry lists bits per weight; bytes·8/block must
        // reproduce them exactly.
        let bpw = [
            (GgmlType::F32, 32.0),
            (GgmlType::F16, 16.0),
            (GgmlType::Bf16, 16.0),
            (GgmlType::Q4_0, 4.5),
            (GgmlType::Q4_1, 5.0),
            (GgmlType::Q5_0, 5.5),
            (GgmlType::Q5_1, 6.0),
            (GgmlType::Q8_0, 8.5),
            (GgmlType::Q8_1, 9.0),
            (GgmlType::Q2K, 2.625),
            (GgmlType::Q3K, 3.4375),
            (GgmlType::Q4K, 4.5),
            (GgmlType::Q5K, 5.5),
            (GgmlType::Q6K, 6.5625),
            (GgmlType::Iq4Nl, 4.5),
            (GgmlType::Iq4Xs, 4.25),
        ];
        for (ty, expect) in bpw {
            let got = ty.type_size() as f64 * 8.0 / ty.block_size() as f64;
            assert_eq!(got, expect, "{ty}");
        }
    }

    #[test]
    fn row_bytes_rejects_partial_blocks_and_overflow() {
        assert_eq!(GgmlType::Q4K.row_bytes(512), Some(288));
        assert_eq!(GgmlType::Q4K.row_bytes(100), None);
        assert_eq!(GgmlType::F32.row_bytes(u64::MAX), None);
        assert_eq!(
            GgmlType::F32.row_bytes(u64::MAX / 4),
            Some(u64::MAX / 4 * 4)
        );
        assert_eq!(GgmlType::Q8_0.name(), "Q8_0");
        assert_eq!(format!("{}", GgmlType::Iq2Xxs), "IQ2_XXS");
    }
}
