//! Hand-built blocks: the bytes are assembled from the bit layouts of spec §2 (offsets written
//! out here, never produced by this crate's quantizers), and specific elements are checked
//! against values worked out by hand. This pins the layout, not just a round trip.

use ingot_gguf::GgmlType;
use ingot_quant::dequantize_row;

const F16_0_25: [u8; 2] = 0x3400u16.to_le_bytes();
const F16_0_5: [u8; 2] = 0x3800u16.to_le_bytes();
const F16_1: [u8; 2] = 0x3C00u16.to_le_bytes();
const F16_2: [u8; 2] = 0x4000u16.to_le_bytes();
const F16_NEG_1: [u8; 2] = 0xBC00u16.to_le_bytes();

fn deq(ty: GgmlType, bytes: &[u8]) -> Vec<f32> {
    assert_eq!(
        bytes.len() as u64,
        ty.type_size(),
        "hand-built {ty} block size"
    );
    let mut out = vec![f32::NAN; ty.block_size() as usize];
    dequantize_row(ty, bytes, &mut out).unwrap();
    out
}

/// Every value below is a small multiple of a power of two, so the expected results are exact.
fn check(ty: GgmlType, y: &[f32], cases: &[(usize, f32)]) {
    for &(e, want) in cases {
        assert_eq!(y[e], want, "{ty} element {e}");
    }
}

#[test]
fn float_types() {
    let y = deq(GgmlType::F32, &1.5f32.to_le_bytes());
    check(GgmlType::F32, &y, &[(0, 1.5)]);
    let y = deq(GgmlType::F16, &0x3E00u16.to_le_bytes());
    check(GgmlType::F16, &y, &[(0, 1.5)]);
    let y = deq(GgmlType::Bf16, &0xBFC0u16.to_le_bytes());
    check(GgmlType::Bf16, &y, &[(0, -1.5)]);
}

#[test]
fn q4_0() {
    // {d: f16, qs[16]}: element j = low nibble of qs[j], j+16 = high nibble; y = d·(q − 8).
    let mut b = [0u8; 18];
    b[0..2].copy_from_slice(&F16_0_5);
    b[2 + 5] = 0x3A;
    let y = deq(GgmlType::Q4_0, &b);
    check(
        GgmlType::Q4_0,
        &y,
        &[(5, 0.5 * 2.0), (21, 0.5 * -5.0), (0, -4.0)],
    );
}

#[test]
fn q4_1() {
    // {d, m, qs[16]}: y = d·q + m.
    let mut b = [0u8; 20];
    b[0..2].copy_from_slice(&F16_0_5);
    b[2..4].copy_from_slice(&F16_NEG_1);
    b[4 + 7] = 0xF2;
    let y = deq(GgmlType::Q4_1, &b);
    check(GgmlType::Q4_1, &y, &[(7, 0.0), (23, 6.5), (0, -1.0)]);
}

#[test]
fn q5_0() {
    // {d, qh[4] (LE u32, bit e = 5th bit of element e), qs[16]}: y = d·(q − 16).
    let mut b = [0u8; 22];
    b[0..2].copy_from_slice(&F16_0_25);
    let qh: u32 = (1 << 3) | (1 << 31);
    b[2..6].copy_from_slice(&qh.to_le_bytes());
    b[6 + 3] = 0x1F;
    let y = deq(GgmlType::Q5_0, &b);
    check(
        GgmlType::Q5_0,
        &y,
        &[(3, 0.25 * 15.0), (19, 0.25 * -15.0), (31, 0.0), (15, -4.0)],
    );
}

#[test]
fn q5_1() {
    // {d, m, qh[4], qs[16]}: y = d·q + m.
    let mut b = [0u8; 24];
    b[0..2].copy_from_slice(&F16_0_5);
    b[2..4].copy_from_slice(&F16_1);
    b[4..8].copy_from_slice(&(1u32 << 20).to_le_bytes());
    b[8 + 4] = 0x30;
    let y = deq(GgmlType::Q5_1, &b);
    check(GgmlType::Q5_1, &y, &[(20, 0.5 * 19.0 + 1.0), (4, 1.0)]);
}

#[test]
fn q8_0() {
    // {d, qs[32] int8}: y = d·q.
    let mut b = [0u8; 34];
    b[0..2].copy_from_slice(&F16_2);
    b[2 + 9] = (-7i8) as u8;
    b[2 + 31] = 127;
    let y = deq(GgmlType::Q8_0, &b);
    check(GgmlType::Q8_0, &y, &[(9, -14.0), (31, 254.0), (0, 0.0)]);
}

#[test]
fn q2_k() {
    // {scales[16] @0, qs[64] @16, d @80, dmin @82}. Element 37: chunk 0, bit pair 1, byte 5,
    // sub-block 2. Element 200: chunk 1, 200−128 = 72 → bit pair 2, byte 32+8, sub-block 12.
    let mut b = [0u8; 84];
    b[2] = 0x53; // sub-block 2: scale 3, min 5
    b[12] = 0x2F; // sub-block 12: scale 15, min 2
    b[16 + 5] = 2 << 2;
    b[16 + 40] = 3 << 4;
    b[80..82].copy_from_slice(&F16_0_5);
    b[82..84].copy_from_slice(&F16_0_25);
    let y = deq(GgmlType::Q2K, &b);
    check(
        GgmlType::Q2K,
        &y,
        &[
            (37, 0.5 * 3.0 * 2.0 - 0.25 * 5.0),
            (200, 0.5 * 15.0 * 3.0 - 0.25 * 2.0),
            (32, -0.25 * 5.0), // same sub-block, level 0
        ],
    );
}

#[test]
fn q3_k() {
    // {hmask[32] @0, qs[64] @32, scales[12] @96, d @108}.
    let mut b = [0u8; 110];
    // Element 37: sub-block 2; hmask[5] bit 1 is 0 → q = low2 − 4; low2 in qs[5] bits 2-3.
    b[32 + 5] = 1 << 2;
    // S_2 = 45 = 0b10_1101: low nibble 13 in scales[2] bits 0-3, top bits 2 in scales[10] bits 0-1.
    b[96 + 2] = 0x0D;
    b[96 + 10] = 0x02;
    // Element 200: sub-block 12; hmask[8] bit 6 set → q = low2 = 3 (qs[40] bits 4-5).
    b[8] = 1 << 6;
    b[32 + 40] = 3 << 4;
    // S_12 = 10: low nibble in scales[4] bits 4-7, top bits 0 in scales[8] bits 6-7.
    b[96 + 4] = 0xA0;
    b[108..110].copy_from_slice(&F16_0_5);
    let y = deq(GgmlType::Q3K, &b);
    check(
        GgmlType::Q3K,
        &y,
        &[
            (37, 0.5 * (45.0 - 32.0) * (1.0 - 4.0)),
            (200, 0.5 * (10.0 - 32.0) * 3.0),
            // Element 36 (same sub-block, all bits 0): low2 0, hbit 0 → q = −4.
            (36, 0.5 * 13.0 * -4.0),
        ],
    );
}

/// Scales shared by the Q4_K and Q5_K cases: sub-block 3 has (sc, m) = (10, 5); sub-block 7
/// has sc = 1 | (3 << 4) = 49 (top bits from scales[3] bits 6-7) and m = 2 | (0 << 4) = 2.
fn k4_scales() -> [u8; 12] {
    let mut s = [0u8; 12];
    s[3] = 0xC0 | 10;
    s[7] = 5;
    s[11] = 0x21;
    s
}

#[test]
fn q4_k() {
    // {d @0, dmin @2, scales[12] @4, qs[128] @16}. Element 100 = 64·1 + 32 + 4 → high nibble
    // of qs[32+4], sub-block 3. Element 230 = 64·3 + 32 + 6 → high nibble of qs[96+6], sub-block 7.
    let mut b = [0u8; 144];
    b[0..2].copy_from_slice(&F16_0_5);
    b[2..4].copy_from_slice(&F16_1);
    b[4..16].copy_from_slice(&k4_scales());
    b[16 + 36] = 9 << 4;
    b[16 + 102] = 4 << 4;
    let y = deq(GgmlType::Q4K, &b);
    check(
        GgmlType::Q4K,
        &y,
        &[(100, 0.5 * 10.0 * 9.0 - 5.0), (230, 0.5 * 49.0 * 4.0 - 2.0)],
    );
}

#[test]
fn q5_k() {
    // {d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48}. Element 100 (p = 1, high half)
    // takes bit 2p+1 = 3 of qh[36−32 = 4]; element 230 (p = 3) bit 7 of qh[6], left clear.
    let mut b = [0u8; 176];
    b[0..2].copy_from_slice(&F16_0_5);
    b[2..4].copy_from_slice(&F16_1);
    b[4..16].copy_from_slice(&k4_scales());
    b[16 + 4] = 1 << 3;
    b[48 + 36] = 9 << 4;
    b[48 + 102] = 4 << 4;
    let y = deq(GgmlType::Q5K, &b);
    check(
        GgmlType::Q5K,
        &y,
        &[
            (100, 0.5 * 10.0 * 25.0 - 5.0),
            (230, 0.5 * 49.0 * 4.0 - 2.0),
        ],
    );
}

#[test]
fn q6_k() {
    // {ql[128] @0, qh[64] @128, scales[16] int8 @192, d @208}.
    let mut b = [0u8; 210];
    // Element 200: chunk 1, l = 8 of the "+64" quarter → ql[64+8] high nibble, qh[32+8] bits 4-5.
    b[72] = 0x70;
    b[128 + 40] = 0b10 << 4;
    b[192 + 12] = (-3i8) as u8;
    // Element 45: chunk 0, l = 13 of the "+32" quarter → ql[13+32] low nibble, qh[13] bits 2-3.
    b[45] = 0x05;
    b[192 + 2] = 4;
    b[208..210].copy_from_slice(&F16_0_25);
    let y = deq(GgmlType::Q6K, &b);
    check(
        GgmlType::Q6K,
        &y,
        &[(200, 0.25 * -3.0 * 7.0), (45, 0.25 * 4.0 * -27.0)],
    );
}

#[test]
fn iq4_nl() {
    // {d, qs[16]}: y = d·kvalues[nibble], kvalues[0] = −127, kvalues[15] = 113.
    let mut b = [0u8; 18];
    b[0..2].copy_from_slice(&F16_0_5);
    b[2 + 2] = 0xF0;
    let y = deq(GgmlType::Iq4Nl, &b);
    check(GgmlType::Iq4Nl, &y, &[(2, -63.5), (18, 56.5), (0, -63.5)]);
}

#[test]
fn iq4_xs() {
    // {d @0, scales_h @2, scales_l[4] @4, qs[128] @8}. Element 179 = 32·5 + 16 + 3 → high
    // nibble of qs[16·5 + 3]; ls_5 = 40: low nibble 8 in scales_l[2] bits 4-7, top bits 2 in
    // scales_h bits 10-11 → dl = d·(40 − 32) = 4.
    let mut b = [0u8; 136];
    b[0..2].copy_from_slice(&F16_0_5);
    b[2..4].copy_from_slice(&(2u16 << 10).to_le_bytes());
    b[4 + 2] = 0x80;
    b[8 + 83] = 12 << 4;
    let y = deq(GgmlType::Iq4Xs, &b);
    // kvalues[12] = 53; element 163 (low nibble 0 of the same byte) → kvalues[0] = −127.
    check(
        GgmlType::Iq4Xs,
        &y,
        &[(179, 4.0 * 53.0), (163, 4.0 * -127.0)],
    );
}
