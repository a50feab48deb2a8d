//! Hand-built byte sequences (independent of the writer) and what the reader makes of them.

mod common;

use common::Builder;
use ingot_gguf::{
    parse_header, FormatError, GgmlType, Gguf, GgufError, GgufFile, MetaArray, MetaType, MetaValue,
    TensorInfo,
};

const F32: u32 = 0;
const Q8_0: u32 = 8;

#[test]
fn a_hand_built_file_parses_to_the_expected_header() {
    let mut b = Builder::new();
    b.header(3, 2, 4)
        .kv_str("general.architecture", "deepseek2")
        .kv_u32("deepseek2.block_count", 3)
        .kv_str_array("tokenizer.ggml.tokens", &["<s>", "a", "ü"])
        .str("general.alignment")
        .u32(0) // uint8
        .u8(64);
    b.tensor("w", &[32, 2], Q8_0, 0).tensor("v", &[5], F32, 128);
    let header_end = b.pos();
    b.pad(64);
    let data_offset = b.pos();
    b.data(68, 0).pad(64).data(20, 200);
    let bytes = b.buf;

    let h = parse_header(&bytes).unwrap();
    let expected = Gguf {
        version: 3,
        alignment: 64,
        kv: vec![
            (
                "general.architecture".into(),
                MetaValue::String("deepseek2".into()),
            ),
            ("deepseek2.block_count".into(), MetaValue::U32(3)),
            (
                "tokenizer.ggml.tokens".into(),
                MetaValue::Array(MetaArray::strings(["<s>", "a", "ü"])),
            ),
            ("general.alignment".into(), MetaValue::U8(64)),
        ],
        tensors: vec![
            TensorInfo {
                name: "w".into(),
                ne: vec![32, 2],
                ty: GgmlType::Q8_0,
                offset: 0,
                nbytes: 2 * 34, // one 34-byte Q8_0 block per row
            },
            TensorInfo {
                name: "v".into(),
                ne: vec![5],
                ty: GgmlType::F32,
                offset: 128, // align_up(68, 64)
                nbytes: 20,
            },
        ],
        data_offset,
    };
    assert_eq!(h, expected);
    assert!(data_offset > header_end && data_offset.is_multiple_of(64));
    let v = &bytes[h.data_range(&h.tensors[1]).unwrap()];
    assert_eq!(v, (200u8..220).collect::<Vec<_>>());
    assert_eq!(h.get_str_array("tokenizer.ggml.tokens").unwrap()[2], "ü");
}

#[test]
fn version_2_scalars_and_unpadded_end() {
    // A 0-dimensional tensor holds one element; the file may end right after the last tensor.
    let mut b = Builder::new();
    b.header(2, 1, 1)
        .str("general.alignment")
        .u32(11)
        .raw(&8i64.to_le_bytes());
    b.tensor("s", &[], F32, 0).pad(8).data(4, 9);
    let h = parse_header(&b.buf).unwrap();
    assert_eq!(h.version, 2);
    assert_eq!(h.alignment, 8);
    assert_eq!(h.tensors[0].n_elements(), 1);
    assert_eq!(h.tensors[0].ne4(), [1, 1, 1, 1]);
    assert_eq!(h.tensors[0].nbytes, 4);
    assert_eq!(h.data_offset + 4, b.pos());
}

#[test]
fn trailing_bytes_after_the_data_are_accepted() {
    let mut b = Builder::new();
    b.header(3, 1, 0)
        .tensor("t", &[2], F32, 0)
        .pad(32)
        .data(8, 0);
    b.raw(b"trailing bytes that no tensor claims");
    assert_eq!(parse_header(&b.buf).unwrap().tensors.len(), 1);
}

#[test]
fn a_file_without_tensors_needs_no_padding() {
    let mut b = Builder::new();
    b.header(3, 0, 1).kv_str("general.name", "x");
    let h = parse_header(&b.buf).unwrap();
    assert!(h.tensors.is_empty());
    assert_eq!(h.get_str("general.name").unwrap(), "x");
}

#[test]
fn every_scalar_type_decodes_from_its_bytes() {
    let mut b = Builder::new();
    b.header(3, 0, 12);
    b.str("u8").u32(0).u8(0xfe);
    b.str("i8").u32(1).u8(0xfe);
    b.str("u16").u32(2).raw(&0xfffeu16.to_le_bytes());
    b.str("i16").u32(3).raw(&0xfffeu16.to_le_bytes());
    b.str("u32").u32(4).u32(0xffff_fffe);
    b.str("i32").u32(5).u32(0xffff_fffe);
    b.str("f32").u32(6).raw(&[0, 0, 0xc0, 0x3f]); // 1.5
    b.str("bool").u32(7).u8(1);
    b.str("u64").u32(10).u64(u64::MAX - 1);
    b.str("i64").u32(11).u64(u64::MAX - 1);
    b.str("f64").u32(12).raw(&[0, 0, 0, 0, 0, 0, 0xf8, 0xbf]); // -1.5
    b.str("empty").u32(9).u32(6).u64(0);
    let h = parse_header(&b.buf).unwrap();
    let got: Vec<MetaValue> = h.kv.iter().map(|(_, v)| v.clone()).collect();
    assert_eq!(
        got,
        [
            MetaValue::U8(254),
            MetaValue::I8(-2),
            MetaValue::U16(65534),
            MetaValue::I16(-2),
            MetaValue::U32(4_294_967_294),
            MetaValue::I32(-2),
            MetaValue::F32(1.5),
            MetaValue::Bool(true),
            MetaValue::U64(u64::MAX - 1),
            MetaValue::I64(-2),
            MetaValue::F64(-1.5),
            MetaValue::Array(MetaArray {
                elem: MetaType::F32,
                items: vec![]
            }),
        ]
    );
}

#[test]
fn an_empty_file_is_a_format_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.gguf");
    std::fs::write(&path, b"").unwrap();
    let e = GgufFile::open(&path).unwrap_err();
    assert!(
        matches!(
            e,
            GgufError::Format {
                kind: FormatError::Truncated {
                    needed: 4,
                    available: 0
                },
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_foreign_tensor_info_gives_an_empty_view() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one.gguf");
    let mut b = Builder::new();
    b.header(3, 1, 0)
        .tensor("t", &[2], F32, 0)
        .pad(32)
        .data(8, 0);
    std::fs::write(&path, &b.buf).unwrap();
    let f = GgufFile::open(&path).unwrap();
    let foreign = TensorInfo {
        name: "elsewhere".into(),
        ne: vec![1 << 20],
        ty: GgmlType::F32,
        offset: 1 << 30,
        nbytes: 4 << 20,
    };
    assert_eq!(f.tensor_data(&foreign), &[] as &[u8]);
    assert_eq!(f.tensor_data(&f.tensors[0]).len(), 8);
}

/// A tensor's derived data is built once, from the tensor's own bytes, and then returned as is
/// (8-byte aligned); a second layout for the same tensor and a foreign tensor get `None`; a failing
/// build is the caller's error and leaves nothing behind.
#[test]
fn derived_data_is_built_once_per_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.gguf");
    let mut b = Builder::new();
    b.header(3, 2, 0)
        .tensor("a", &[2], F32, 0)
        .tensor("b", &[2], F32, 32)
        .pad(32)
        .data(64, 7);
    std::fs::write(&path, &b.buf).unwrap();
    let f = GgufFile::open(&path).unwrap();
    let (a, bt) = (&f.tensors[0], &f.tensors[1]);
    let want = f.tensor_data(a).to_vec();
    let builds = std::cell::Cell::new(0);
    let build = |bytes: &[u8]| -> Result<Vec<u64>, ()> {
        builds.set(builds.get() + 1);
        Ok(bytes.iter().map(|&x| u64::from(x) + 1).collect())
    };
    let first = f.derived_data(a, "plus-one", build).unwrap().unwrap();
    assert_eq!(first.as_ptr() as usize % 8, 0, "8-byte aligned");
    let words: Vec<u64> = want.iter().map(|&x| u64::from(x) + 1).collect();
    assert_eq!(first, bytemuck_bytes(&words));
    let again = f.derived_data(a, "plus-one", build).unwrap().unwrap();
    assert_eq!(
        again.as_ptr(),
        first.as_ptr(),
        "the same bytes, not rebuilt"
    );
    assert_eq!(builds.get(), 1);
    assert!(f.derived_data(a, "other", build).unwrap().is_none());
    assert!(f
        .derived_data(bt, "x", |_| Err::<Vec<u64>, _>("no"))
        .is_err());
    assert_eq!(
        f.derived_data(bt, "x", |_| Ok::<_, ()>(vec![5])).unwrap(),
        Some(&[5, 0, 0, 0, 0, 0, 0, 0][..])
    );
    let foreign = TensorInfo {
        name: "elsewhere".into(),
        ..bt.clone()
    };
    assert!(f
        .derived_data(&foreign, "x", |_| Ok::<_, ()>(vec![]))
        .unwrap()
        .is_none());
}

fn bytemuck_bytes(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}
