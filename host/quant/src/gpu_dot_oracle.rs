//! Weight-block × Q8_1-activation dot products exactly as the CUDA `mul_mat_vec_q` kernels
//! compute them (`vecdotq.cuh`, docs/quant-formats.md#gpu-dot-products): the oracles for the
//! GPU kernels.
//!
//! Each `*_call` function is one `vec_dot_*_q8_1(vbq, bq8_1, kbx, iqs)` invocation: the same
//! 32-bit words, the same `dp4a` integer sums, the same f32 scale arithmetic in the same order.
//! A block's contribution is the sum of its calls over `iqs = 0, vdr, 2·vdr, … < qi`; the
//! kernel adds those partial results across threads in an order of its own, so the row sum
//! here ([`crate::vec_dot_q8_1`]) adds the per-call f32 results in f64, and a GPU kernel should
//! match it to within f32 reduction noise, not bit for bit.
//!
//! Two deliberate choices where CUDA has variants: Q4_1/Q5_1 multiply the half2 scales in f32
//! (the path without `FAST_FP16_AVAILABLE`; with it the products `d·d8` and `m·s8` are first
//! rounded to f16), and the packed 6-bit scale decodes use the shared `ingot_abi::blocks`
//! helpers, which yield the same integers as the 16-bit-word shuffles of `vecdotq.cuh`.

use crate::round::f16_to_f32;
use ingot_abi::blocks::{
    get_scale_min_k4, iq4xs_scale, q3k_scale, BlockIq4Nl, BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4K,
    BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K, BlockQ8_0, BlockQ8_1,
    KVALUES_IQ4NL,
};

/// CUDA `__dp4a(a, b, c)`: `c` plus the sum of the four signed byte products.
#[inline(always)]
pub fn dp4a(a: i32, b: i32, c: i32) -> i32 {
    let (a, b) = (a.to_le_bytes(), b.to_le_bytes());
    let mut s = c;
    for k in 0..4 {
        s = s.wrapping_add(i32::from(a[k] as i8) * i32::from(b[k] as i8));
    }
    s
}

/// CUDA `__vsubss4(a, b)`: bytewise signed subtraction, saturating to −128..=127.
#[inline(always)]
pub fn vsubss4(a: i32, b: i32) -> i32 {
    let (a, b) = (a.to_le_bytes(), b.to_le_bytes());
    let mut r = [0u8; 4];
    for k in 0..4 {
        r[k] = (a[k] as i8).saturating_sub(b[k] as i8) as u8;
    }
    i32::from_le_bytes(r)
}

/// `get_int_b{1,2,4}`: the little-endian 32-bit word `i` of a byte array.
#[inline(always)]
fn int_at(bytes: &[u8], i: usize) -> i32 {
    i32::from_le_bytes([
        bytes[4 * i],
        bytes[4 * i + 1],
        bytes[4 * i + 2],
        bytes[4 * i + 3],
    ])
}

/// Word `i` of a Q8_1 block's quants.
#[inline(always)]
fn q8_int(b: &BlockQ8_1, i: usize) -> i32 {
    int_at(bytemuck::cast_slice(&b.qs), i)
}

/// `get_int_from_table_16`: byte `k` of `.0` is `table[nibble 2k of q4]` (the low nibble of
/// byte `k`), byte `k` of `.1` is `table[high nibble of byte k]`.
#[inline(always)]
fn int_from_table_16(q4: i32, table: &[i8; 16]) -> (i32, i32) {
    let b = q4.to_le_bytes();
    let lo = b.map(|x| table[(x & 0xF) as usize] as u8);
    let hi = b.map(|x| table[(x >> 4) as usize] as u8);
    (i32::from_le_bytes(lo), i32::from_le_bytes(hi))
}

/// `(d, s)` of a Q8_1 block as floats (`__half22float2(ds)`).
#[inline(always)]
fn ds(b: &BlockQ8_1) -> (f32, f32) {
    (f16_to_f32(b.d), f16_to_f32(b.s))
}

/// `(qk, qi, vdr)` of each type: elements per block, 32-bit words of quants per block, and
/// words per call (`VDR_*_Q8_1_MMVQ` of `vecdotq.cuh`). One call per `iqs = 0, vdr, … < qi`.
pub mod shape {
    use ingot_abi::blocks::*;

    pub const Q4_0: (usize, usize, usize) = (QK4_0, QI4_0, 2);
    pub const Q4_1: (usize, usize, usize) = (QK4_1, QI4_1, 2);
    pub const Q5_0: (usize, usize, usize) = (QK5_0, QI5_0, 2);
    pub const Q5_1: (usize, usize, usize) = (QK5_1, QI5_1, 2);
    pub const Q8_0: (usize, usize, usize) = (QK8_0, QI8_0, 2);
    pub const Q2_K: (usize, usize, usize) = (QK_K, QI2_K, 1);
    pub const Q3_K: (usize, usize, usize) = (QK_K, QI3_K, 1);
    pub const Q4_K: (usize, usize, usize) = (QK_K, QI4_K, 2);
    pub const Q5_K: (usize, usize, usize) = (QK_K, QI5_K, 2);
    pub const Q6_K: (usize, usize, usize) = (QK_K, QI6_K, 1);
    pub const IQ4_NL: (usize, usize, usize) = (QK4_NL, QI4_NL, 2);
    pub const IQ4_XS: (usize, usize, usize) = (QK_K, QI4_XS, 4);

    // The (qk, qi, vdr) table of docs/quant-formats.md#gpu-dot-products and the call patterns
    // below.
    const _: () = assert!(QI4_0 == 4 && QI8_0 == 8 && QI2_K == 16 && QI3_K == 16);
    const _: () = assert!(QI4_K == 32 && QI5_K == 32 && QI6_K == 32 && QI4_XS == 32);
}

/// `vec_dot_q4_0_q8_1` (vdr 2): nibbles against words `iqs+i` and `iqs+i+4`; the −8 offset is
/// applied through `ds.y = Σx` as `−(8·vdr/qi)·s8 = −4·s8` per call.
pub fn q4_0_call(bq: &BlockQ4_0, bq8: &BlockQ8_1, iqs: usize) -> f32 {
    let mut sumi = 0;
    for i in 0..2 {
        let v = int_at(&bq.qs, iqs + i);
        sumi = dp4a(v & 0x0F0F_0F0F, q8_int(bq8, iqs + i), sumi);
        sumi = dp4a((v >> 4) & 0x0F0F_0F0F, q8_int(bq8, iqs + i + 4), sumi);
    }
    let (d8, s8) = ds(bq8);
    f16_to_f32(bq.d) * (sumi as f32 * d8 - 4.0 * s8)
}

/// `vec_dot_q4_1_q8_1` (vdr 2): `sumi·d4·d8 + m4·s8/2` per call (f32 scale products).
pub fn q4_1_call(bq: &BlockQ4_1, bq8: &BlockQ8_1, iqs: usize) -> f32 {
    let mut sumi = 0;
    for i in 0..2 {
        let v = int_at(&bq.qs, iqs + i);
        sumi = dp4a(v & 0x0F0F_0F0F, q8_int(bq8, iqs + i), sumi);
        sumi = dp4a((v >> 4) & 0x0F0F_0F0F, q8_int(bq8, iqs + i + 4), sumi);
    }
    let (d8, s8) = ds(bq8);
    let d4d8 = f16_to_f32(bq.d) * d8;
    let m4s8 = f16_to_f32(bq.m) * s8;
    sumi as f32 * d4d8 + m4s8 / 2.0
}

/// The four fifth bits `vh` (already shifted by `4·(iqs+i)`) moved to bit 4 of each byte, for
/// the low-nibble word (`.0`, elements `4k..4k+3`) and the high-nibble word (`.1`, `+16`).
#[inline(always)]
fn q5_high_bits(vh: u32) -> (i32, i32) {
    let lo = ((vh << 4) & 0x10)
        | ((vh << 11) & 0x1000)
        | ((vh << 18) & 0x10_0000)
        | ((vh << 25) & 0x1000_0000);
    let hi = ((vh >> 12) & 0x10)
        | ((vh >> 5) & 0x1000)
        | ((vh << 2) & 0x10_0000)
        | ((vh << 9) & 0x1000_0000);
    (lo as i32, hi as i32)
}

/// The integer part of a Q5_0/Q5_1 call (vdr 2): words `iqs`, `iqs+1` of `qs`, each byte's low
/// nibble with its fifth bit from `qh` against Q8_1 word `iqs+i`, its high nibble against word
/// `iqs+i+4`. Scales and offsets are the caller's.
#[inline(always)]
fn q5_sumi(qs: &[u8], qh: u32, bq8: &BlockQ8_1, iqs: usize) -> i32 {
    let mut sumi = 0;
    for i in 0..2 {
        let vl = int_at(qs, iqs + i);
        let (h0, h1) = q5_high_bits(qh >> (4 * (iqs + i)));
        sumi = dp4a((vl & 0x0F0F_0F0F) | h0, q8_int(bq8, iqs + i), sumi);
        sumi = dp4a(
            ((vl >> 4) & 0x0F0F_0F0F) | h1,
            q8_int(bq8, iqs + i + 4),
            sumi,
        );
    }
    sumi
}

/// `vec_dot_q5_0_q8_1` (vdr 2): 5-bit quants, offset −16 applied as `−(16·vdr/qi)·s8 = −8·s8`.
pub fn q5_0_call(bq: &BlockQ5_0, bq8: &BlockQ8_1, iqs: usize) -> f32 {
    let sumi = q5_sumi(&bq.qs, bq.qh_bits(), bq8, iqs);
    let (d8, s8) = ds(bq8);
    f16_to_f32(bq.d) * (sumi as f32 * d8 - 8.0 * s8)
}

/// `vec_dot_q5_1_q8_1` (vdr 2): `sumi·d5·d8 + m5·s8/2` per call (f32 scale products).
pub fn q5_1_call(bq: &BlockQ5_1, bq8: &BlockQ8_1, iqs: usize) -> f32 {
    let sumi = q5_sumi(&bq.qs, bq.qh_bits(), bq8, iqs);
    let (d8, s8) = ds(bq8);
    let d5d8 = f16_to_f32(bq.d) * d8;
    let m5s8 = f16_to_f32(bq.m) * s8;
    sumi as f32 * d5d8 + m5s8 / 2.0
}

/// `vec_dot_q8_0_q8_1` (vdr 2): `d·d8·Σ dp4a` over words `iqs`, `iqs+1`; `ds.y` unused.
pub fn q8_0_call(bq: &BlockQ8_0, bq8: &BlockQ8_1, iqs: usize) -> f32 {
    let qs: &[u8] = bytemuck::cast_slice(&bq.qs);
    let mut sumi = 0;
    for i in 0..2 {
        sumi = dp4a(int_at(qs, iqs + i), q8_int(bq8, iqs + i), sumi);
    }
    f16_to_f32(bq.d) * f16_to_f32(bq8.d) * sumi as f32
}

/// `vec_dot_q2_K_q8_1` (vdr 1, `iqs ∈ 0..16`): word `iqs` of `qs` holds 4 bit pairs per byte,
/// pair `i` against word `iqs%8` of Q8_1 block `4·(iqs/8) + i`; the min uses the integer sum
/// of the quantized activations.
pub fn q2_k_call(bq: &BlockQ2K, bq8: &[BlockQ8_1; 8], iqs: usize) -> f32 {
    let bq8_offset = 4 * (iqs / 8);
    let scale_offset = iqs - iqs % 8 + (iqs % 8) / 4;
    let v = int_at(&bq.qs, iqs);
    let mut sumf_d = 0.0f32;
    let mut sumf_m = 0.0f32;
    for i in 0..4 {
        let b8 = &bq8[bq8_offset + i];
        let u = q8_int(b8, iqs % 8);
        let d8 = f16_to_f32(b8.d);
        let sc = i32::from(bq.scales[scale_offset + 2 * i]);
        let vi = (v >> (2 * i)) & 0x0303_0303;
        sumf_d += d8 * (dp4a(vi, u, 0) * (sc & 0xF)) as f32;
        let m = (sc >> 4) * 0x0101_0101;
        sumf_m += d8 * dp4a(m, u, 0) as f32;
    }
    f16_to_f32(bq.d) * sumf_d - f16_to_f32(bq.dmin) * sumf_m
}

/// `vec_dot_q3_K_q8_1` (vdr 1, `iqs ∈ 0..16`): low bit pairs as Q2_K, inverted `hmask` bits
/// subtract 4 (`__vsubss4`), signed 6-bit scales.
pub fn q3_k_call(bq: &BlockQ3K, bq8: &[BlockQ8_1; 8], iqs: usize) -> f32 {
    let bq8_offset = 4 * (iqs / 8);
    let scale_offset = iqs - iqs % 8 + (iqs % 8) / 4;
    let vl = int_at(&bq.qs, iqs);
    // Inverted so that a clear bit yields 4 to subtract.
    let vh = !(int_at(&bq.hmask, iqs % 8) as u32) >> bq8_offset;
    let mut sumf = 0.0f32;
    for i in 0..4 {
        let b8 = &bq8[bq8_offset + i];
        let sc = q3k_scale(&bq.scales, scale_offset + 2 * i);
        let vil = (vl >> (2 * i)) & 0x0303_0303;
        let vih = (((vh >> i) << 2) & 0x0404_0404) as i32;
        let vi = vsubss4(vil, vih);
        sumf += f16_to_f32(b8.d) * (dp4a(vi, q8_int(b8, iqs % 8), 0) * sc) as f32;
    }
    f16_to_f32(bq.d) * sumf
}

/// `vec_dot_q4_K_q8_1` (vdr 2, `iqs ∈ {0,2,…,30}`): sub-blocks `bq8_offset` and `+1`
/// (`bq8_offset = 2·(iqs/8)`), two words each; the min correction is
/// `d8·(Σ integer q8)·m`, not `ds.y`.
pub fn q4_k_call(bq: &BlockQ4K, bq8: &[BlockQ8_1; 8], iqs: usize) -> f32 {
    let bq8_offset = 2 * ((iqs / 2) / 4);
    let word = 4 * bq8_offset + (iqs / 2) % 4;
    let v = [int_at(&bq.qs, word), int_at(&bq.qs, word + 4)];
    let mut sumf_d = 0.0f32;
    let mut sumf_m = 0.0f32;
    for i in 0..2 {
        let b8 = &bq8[bq8_offset + i];
        let u = [q8_int(b8, (iqs / 2) % 4), q8_int(b8, (iqs / 2) % 4 + 4)];
        let (sc, m) = get_scale_min_k4(bq8_offset + i, &bq.scales);
        let v0i = (v[0] >> (4 * i)) & 0x0F0F_0F0F;
        let v1i = (v[1] >> (4 * i)) & 0x0F0F_0F0F;
        let dot1 = dp4a(v1i, u[1], dp4a(v0i, u[0], 0));
        let dot2 = dp4a(0x0101_0101, u[1], dp4a(0x0101_0101, u[0], 0));
        let d8 = f16_to_f32(b8.d);
        sumf_d += d8 * (dot1 * i32::from(sc)) as f32;
        sumf_m += d8 * (dot2 * i32::from(m)) as f32;
    }
    f16_to_f32(bq.d) * sumf_d - f16_to_f32(bq.dmin) * sumf_m
}

/// `vec_dot_q5_K_q8_1` (vdr 2): Q4_K plus bit `bq8_offset + i` of each `qh` byte as bit 4.
pub fn q5_k_call(bq: &BlockQ5K, bq8: &[BlockQ8_1; 8], iqs: usize) -> f32 {
    let bq8_offset = 2 * ((iqs / 2) / 4);
    let word = 4 * bq8_offset + (iqs / 2) % 4;
    let vl = [int_at(&bq.qs, word), int_at(&bq.qs, word + 4)];
    let hword = (iqs / 2) % 4;
    let vh = [
        int_at(&bq.qh, hword) >> bq8_offset,
        int_at(&bq.qh, hword + 4) >> bq8_offset,
    ];
    let mut sumf_d = 0.0f32;
    let mut sumf_m = 0.0f32;
    for i in 0..2 {
        let b8 = &bq8[bq8_offset + i];
        let u = [q8_int(b8, (iqs / 2) % 4), q8_int(b8, (iqs / 2) % 4 + 4)];
        let (sc, m) = get_scale_min_k4(bq8_offset + i, &bq.scales);
        let v0i = ((vl[0] >> (4 * i)) & 0x0F0F_0F0F) | (((vh[0] >> i) << 4) & 0x1010_1010);
        let v1i = ((vl[1] >> (4 * i)) & 0x0F0F_0F0F) | (((vh[1] >> i) << 4) & 0x1010_1010);
        let dot1 = dp4a(v0i, u[0], dp4a(v1i, u[1], 0));
        let dot2 = dp4a(0x0101_0101, u[0], dp4a(0x0101_0101, u[1], 0));
        let d8 = f16_to_f32(b8.d);
        sumf_d += d8 * (dot1 * i32::from(sc)) as f32;
        sumf_m += d8 * (dot2 * i32::from(m)) as f32;
    }
    f16_to_f32(bq.d) * sumf_d - f16_to_f32(bq.dmin) * sumf_m
}

/// `vec_dot_q6_K_q8_1` (vdr 1, `iqs ∈ 0..32`): word `iqs` of `ql`, the matching 2-bit pairs of
/// `qh`, bytewise −32, against Q8_1 blocks `bq8_offset` and `bq8_offset + 2`.
pub fn q6_k_call(bq: &BlockQ6K, bq8: &[BlockQ8_1; 8], iqs: usize) -> f32 {
    let bq8_offset = 4 * (iqs / 16) + (iqs % 16) / 8;
    let scale_offset = 8 * (iqs / 16) + (iqs % 16) / 4;
    let vh_shift = 2 * ((iqs % 16) / 8);
    let vl = int_at(&bq.ql, iqs);
    let vh = int_at(&bq.qh, 8 * (iqs / 16) + iqs % 8) >> vh_shift;
    let mut sumf = 0.0f32;
    for i in 0..2 {
        let b8 = &bq8[bq8_offset + 2 * i];
        let sc = i32::from(bq.scales[scale_offset + 4 * i]);
        let vil = (vl >> (4 * i)) & 0x0F0F_0F0F;
        let vih = ((vh >> (4 * i)) << 4) & 0x3030_3030;
        let vi = vsubss4(vil | vih, 0x2020_2020);
        sumf += f16_to_f32(b8.d) * (dp4a(vi, q8_int(b8, iqs % 8), 0) * sc) as f32;
    }
    f16_to_f32(bq.d) * sumf
}

/// `vec_dot_iq4_nl_q8_1` (vdr 2): code-book bytes against words `iqs+l` and `iqs+l+4`.
pub fn iq4_nl_call(bq: &BlockIq4Nl, bq8: &BlockQ8_1, iqs: usize) -> f32 {
    let mut sumi = 0;
    for l in 0..2 {
        let (vx, vy) = int_from_table_16(int_at(&bq.qs, iqs + l), &KVALUES_IQ4NL);
        sumi = dp4a(vx, q8_int(bq8, iqs + l), sumi);
        sumi = dp4a(vy, q8_int(bq8, iqs + l + 4), sumi);
    }
    f16_to_f32(bq.d) * f16_to_f32(bq8.d) * sumi as f32
}

/// `vec_dot_iq4_xs_q8_1` (vdr 4, `iqs ∈ {0,4,…,28}`): one whole 32-element sub-block `iqs/4`
/// per call, times its signed 6-bit scale.
pub fn iq4_xs_call(bq: &BlockIq4Xs, bq8: &[BlockQ8_1; 8], iqs: usize) -> f32 {
    let b8 = &bq8[iqs / 4];
    let mut sumi = 0;
    for j in 0..4 {
        let (vx, vy) = int_from_table_16(int_at(&bq.qs, iqs + j), &KVALUES_IQ4NL);
        sumi = dp4a(vx, q8_int(b8, j), sumi);
        sumi = dp4a(vy, q8_int(b8, j + 4), sumi);
    }
    sumi *= iq4xs_scale(bq.scales_h, &bq.scales_l, iqs / 4);
    f16_to_f32(bq.d) * f16_to_f32(b8.d) * sumi as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dp4a_is_signed_bytewise() {
        // bytes a = [1, -1, 127, -128], b = [2, 3, -1, -1] → 2 − 3 − 127 + 128 = 0, plus c = 5.
        let a = i32::from_le_bytes([1, 0xFF, 127, 0x80]);
        let b = i32::from_le_bytes([2, 3, 0xFF, 0xFF]);
        assert_eq!(dp4a(a, b, 5), 5);
        assert_eq!(
            dp4a(0x0101_0101, i32::from_le_bytes([10, 20, 30, 0xF6]), 0),
            50
        );
    }

    #[test]
    fn vsubss4_saturates_per_byte() {
        let a = i32::from_le_bytes([0x80, 3, 100, 0]);
        let b = i32::from_le_bytes([1, 4, 0x9C, 0]); // 1, 4, −100, 0
        assert_eq!(vsubss4(a, b).to_le_bytes(), [0x80, 0xFF, 127, 0]);
    }
}
