//! Hand-built blocks: the bytes are assembled from the bit layouts of docs/quant-formats.md
//! (offsets written out here, never produced by this crate's quantizers), and specific elements
//! are checked against values worked out by hand. This pins the layout, not just a round trip.

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

// The grid types. Grid points used below, from ggml-common.h (value `j` = byte `j` of the
// little-endian entry): iq2xxs_grid[1] = 0x080808080808082b → [43, 8, 8, 8, 8, 8, 8, 8];
// iq2xs_grid[2] = 0x0808080808081919 → [25, 25, 8, …]; iq2s_grid[256] = 0x0819081919191919 →
// [25, 25, 25, 25, 25, 8, 25, 8]; iq3xxs_grid[1] = 0x04040414 → [20, 4, 4, 4]; iq3s_grid[1] =
// 0x01010103 → [3, 1, 1, 1]; iq3s_grid[256] = 0x05090507 → [7, 5, 9, 5]; iq1s_grid[5] =
// 0xffffffffff00ff00 → [0, −1, 0, −1, −1, −1, −1, −1]; iq1s_grid[256] = 0xff00ff01000100ff →
// [−1, 0, 1, 0, 1, −1, 0, −1]. Point 0 is all 8s (IQ2), all 4s (IQ3_XXS), all 1s (IQ3_S).
// ksigns_iq2xs[1] = 129: values 0 and 7 of the group negative.

#[test]
fn iq2_xxs() {
    // {d @0, qs[32] u16 @2}; sub-block ib is u32 a @2+8ib (grid indices, one byte per group of
    // 8), u32 b @6+8ib (7-bit sign indices at 7l, scale at 28): y = d·(0.5 + s)·0.25·grid·sign.
    let mut b = [0u8; 66];
    b[0..2].copy_from_slice(&F16_1);
    b[2 + 8 + 2] = 1; // sub-block 1, group 2 → grid point 1
    let signs_scale: u32 = (3 << 28) | (1 << 14); // group 2: sign index 1; s = 3 → db = 0.875
    b[2 + 8 + 4..2 + 8 + 8].copy_from_slice(&signs_scale.to_le_bytes());
    let y = deq(GgmlType::Iq2Xxs, &b);
    check(
        GgmlType::Iq2Xxs,
        &y,
        // Sub-block 0 is all zero: point 0, no signs, s = 0 → 8·0.125.
        &[(48, -37.625), (49, 7.0), (55, -7.0), (32, 7.0), (0, 1.0)],
    );
}

#[test]
fn iq2_xs() {
    // {d @0, qs[32] u16 @2 (index bits 0-8, sign index bits 9-15), scales[8] @66}: sub-block
    // ib's first 16 weights use scales[ib] & 15, the next 16 scales[ib] >> 4.
    let mut b = [0u8; 74];
    b[0..2].copy_from_slice(&F16_1);
    b[2 + 2 * 5..2 + 2 * 5 + 2].copy_from_slice(&(2u16 | (1 << 9)).to_le_bytes()); // group 5
    b[66 + 1] = 0x51; // sub-block 1: s = 1 (db 0.375) for 32..48, s = 5 (db 1.375) for 48..64
    let y = deq(GgmlType::Iq2Xs, &b);
    check(
        GgmlType::Iq2Xs,
        &y,
        &[(40, -9.375), (41, 9.375), (42, 3.0), (47, -3.0), (48, 11.0)],
    );
}

#[test]
fn iq2_s() {
    // {d @0, qs[64] @2 (32 low index bytes, then 32 sign bytes), qh[8] @66 (2 high index bits
    // per group), scales[8] @74}. Group 6 = sub-block 1, l = 2: high bits at qh[1] bits 4-5.
    let mut b = [0u8; 82];
    b[0..2].copy_from_slice(&F16_1);
    b[66 + 1] = 1 << 4; // index 256
    b[2 + 32 + 6] = 0x81; // values 0 and 7 negative
    b[74 + 1] = 0x30; // elements 48..64: s = 3 → db 0.875
    let y = deq(GgmlType::Iq2S, &b);
    check(
        GgmlType::Iq2S,
        &y,
        &[
            (48, -21.875),
            (52, 21.875),
            (53, 7.0),
            (55, -7.0),
            (56, 7.0),
        ],
    );
}

#[test]
fn iq3_xxs() {
    // {d @0, qs[96] @2}: bytes 0..64 grid indices (4 values each), then one u32 per sub-block
    // (sign indices at 7l for its groups of 8, scale at 28): y = d·(0.5 + s)·0.5·grid·sign.
    let mut b = [0u8; 98];
    b[0..2].copy_from_slice(&F16_1);
    b[2 + 18] = 1; // sub-block 2, group 1: elements 72..76 from point 1, 76..80 from point 0
    let signs_scale: u32 = (5 << 28) | (1 << 7); // group 1: sign index 1; s = 5 → db 2.75
    b[2 + 64 + 8..2 + 64 + 12].copy_from_slice(&signs_scale.to_le_bytes());
    let y = deq(GgmlType::Iq3Xxs, &b);
    check(
        GgmlType::Iq3Xxs,
        &y,
        &[(72, -55.0), (73, 11.0), (76, 11.0), (79, -11.0), (80, 11.0)],
    );
}

#[test]
fn iq3_s() {
    // {d @0, qs[64] @2, qh[8] @66 (9th index bit of qs[k] at qh[k/8] bit k%8), signs[32] @74
    // (bit e%8 of signs[e/8]), scales[4] @106 (sub-block ib: nibble ib%2 of scales[ib/2])}:
    // y = d·(1 + 2s)·grid·sign.
    let mut b = [0u8; 110];
    b[0..2].copy_from_slice(&F16_1);
    b[2 + 9] = 1; // elements 36..40 from point 1
    b[66 + 1] = 1 << 2; // qs[10] → point 256: elements 40..44
    b[74 + 4] = 1 << 4; // element 36 negative
    b[106] = 0x20; // sub-block 1: s = 2 → db 5
    let y = deq(GgmlType::Iq3S, &b);
    check(
        GgmlType::Iq3S,
        &y,
        &[
            (36, -15.0),
            (37, 5.0),
            (40, 35.0),
            (42, 45.0),
            (32, 5.0),
            (0, 1.0),
        ],
    );
}

#[test]
fn iq1_s() {
    // {d @0, qs[32] @2, qh[8] u16 @34}: group 4ib + l has index qs[4ib+l] | (qh[ib] >> 3l & 7)
    // << 8; qh[ib] bits 12-14 are the scale, bit 15 the shift's sign: y = d·(2s+1)·(grid ± 1/8).
    let mut b = [0u8; 50];
    b[0..2].copy_from_slice(&F16_1);
    let qh: u16 = 0x8000 | (2 << 12) | (1 << 3); // sub-block 3: s = 2, shift −1/8; group 1 → 256
    b[34 + 6..34 + 8].copy_from_slice(&qh.to_le_bytes());
    let y = deq(GgmlType::Iq1S, &b);
    check(
        GgmlType::Iq1S,
        &y,
        // Elements 104..112: 5·([−1, 0, 1, 0, 1, −1, 0, −1] − 0.125); 96..104 point 0 (all −1).
        &[
            (104, -5.625),
            (105, -0.625),
            (106, 4.375),
            (109, -5.625),
            (96, -5.625),
        ],
    );
}

#[test]
fn iq1_m() {
    // {qs[32] @0, qh[16] @32, scales[8] @48}: group g has index qs[g] | (qh[g/2] >> 4(g%2) & 7)
    // << 8 and shift sign qh[g/2] bit 3 + 4(g%2); scales are four u16 whose bits 12-15 make d
    // (first u16 lowest), half h of sub-block ib has scale bits 6(ib%2) + 3h of u16 ib/2.
    let mut b = [0u8; 56];
    b[10] = 5; // group 10 (sub-block 2, half 1) → point 5
    b[32 + 5] = 0x08; // group 10: shift −1/8
    let d = 0x3C00u16; // 1.0: nibbles 0, 0, 0xC, 0x3
    let scales: [u16; 4] = [0, 3 << 3, (d >> 8 & 0xF) << 12, (d >> 12) << 12];
    for (k, s) in scales.iter().enumerate() {
        b[48 + 2 * k..48 + 2 * k + 2].copy_from_slice(&s.to_le_bytes());
    }
    let y = deq(GgmlType::Iq1M, &b);
    check(
        GgmlType::Iq1M,
        &y,
        // Elements 80..88: 7·([0, −1, 0, −1, …] − 0.125); 88..96 (point 0, shift +1/8, scale 3).
        &[
            (80, -0.875),
            (81, -7.875),
            (82, -0.875),
            (88, -6.125),
            (0, -0.875),
        ],
    );
}
