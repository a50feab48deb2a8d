//! Quantized block layouts, bit-identical to ggml-common.h.
//!
//! Every struct is `#[repr(C)]`, has no padding (checked by the size asserts below) and is
//! `Pod`, so a GGUF tensor's bytes can be viewed as `&[Block…]` when suitably aligned. Field
//! names follow ggml-common.h. Half-precision scales are stored as raw IEEE binary16 bits
//! (`u16`) so this crate needs no `half`; the host converts with `half::f16::from_bits`, device
//! code with its native conversion.
//!
//! The `#[inline(always)]` helpers at the bottom unpack packed scales; host reference code and
//! device kernels both call them, which keeps the two sides bit-identical by construction.

use bytemuck::{Pod, Zeroable};
use core::mem::size_of;

/// Elements per block of Q4_0.
pub const QK4_0: usize = 32;
/// Elements per block of Q4_1.
pub const QK4_1: usize = 32;
/// Elements per block of Q5_0.
pub const QK5_0: usize = 32;
/// Elements per block of Q5_1.
pub const QK5_1: usize = 32;
/// Elements per block of Q8_0.
pub const QK8_0: usize = 32;
/// Elements per block of Q8_1.
pub const QK8_1: usize = 32;
/// Elements per block of IQ4_NL.
pub const QK4_NL: usize = 32;
/// Elements per k-quant super-block (Q2_K…Q6_K, Q8_K, IQ4_XS).
pub const QK_K: usize = 256;
/// Bytes of packed 6-bit scales/mins in Q4_K and Q5_K (and of the 6-bit scales of Q3_K).
pub const K_SCALE_SIZE: usize = 12;

// ggml-common.h `QR*` (quants packed per byte, "ratio") and `QI*` (32-bit words of quants per
// block, `QK/(4·QR)`): the geometry the CUDA dot products index blocks with.
pub const QR4_0: usize = 2;
pub const QI4_0: usize = QK4_0 / (4 * QR4_0);
pub const QR4_1: usize = 2;
pub const QI4_1: usize = QK4_1 / (4 * QR4_1);
pub const QR5_0: usize = 2;
pub const QI5_0: usize = QK5_0 / (4 * QR5_0);
pub const QR5_1: usize = 2;
pub const QI5_1: usize = QK5_1 / (4 * QR5_1);
pub const QR8_0: usize = 1;
pub const QI8_0: usize = QK8_0 / (4 * QR8_0);
pub const QR8_1: usize = 1;
pub const QI8_1: usize = QK8_1 / (4 * QR8_1);
pub const QR2_K: usize = 4;
pub const QI2_K: usize = QK_K / (4 * QR2_K);
pub const QR3_K: usize = 4;
pub const QI3_K: usize = QK_K / (4 * QR3_K);
pub const QR4_K: usize = 2;
pub const QI4_K: usize = QK_K / (4 * QR4_K);
pub const QR5_K: usize = 2;
pub const QI5_K: usize = QK_K / (4 * QR5_K);
pub const QR6_K: usize = 2;
pub const QI6_K: usize = QK_K / (4 * QR6_K);
pub const QR4_NL: usize = 2;
pub const QI4_NL: usize = QK4_NL / (4 * QR4_NL);
pub const QR4_XS: usize = 2;
pub const QI4_XS: usize = QK_K / (4 * QR4_XS);

/// IQ4_NL / IQ4_XS non-linear 4-bit code book (`kvalues_iq4nl`), indexed by the nibble.
pub const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// 32 weights: `y = d·(q − 8)`. Element `j` is the low nibble of `qs[j]`, element `j+16` the high.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockQ4_0 {
    pub d: u16,
    pub qs: [u8; QK4_0 / 2],
}

/// 32 weights: `y = d·q + m`, nibble layout as [`BlockQ4_0`].
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockQ4_1 {
    pub d: u16,
    pub m: u16,
    pub qs: [u8; QK4_1 / 2],
}

/// 32 weights: `y = d·(q − 16)`; bit 4 of element `e` is bit `e` of `qh` read as a LE u32.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockQ5_0 {
    pub d: u16,
    pub qh: [u8; 4],
    pub qs: [u8; QK5_0 / 2],
}

/// 32 weights: `y = d·q + m`, 5-bit layout as [`BlockQ5_0`].
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockQ5_1 {
    pub d: u16,
    pub m: u16,
    pub qh: [u8; 4],
    pub qs: [u8; QK5_1 / 2],
}

/// 32 weights: `y = d·q`.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockQ8_0 {
    pub d: u16,
    pub qs: [i8; QK8_0],
}

/// 32 activations: `y = d·q`, plus `s` (ggml's `ds.y`). What `s` holds depends on the producer:
/// the CPU reference stores `d·Σq`, the CUDA activation quantizer stores `Σx` of the float inputs.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockQ8_1 {
    pub d: u16,
    pub s: u16,
    pub qs: [i8; QK8_1],
}

/// 256 weights in 16 sub-blocks of 16: `y = d·(sc&15)·q − dmin·(sc>>4)`, `q ∈ 0..=3`.
/// `qs[32n+l]` holds elements `128n+l`, `+32`, `+64`, `+96` in bit pairs 0-1, 2-3, 4-5, 6-7.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockQ2K {
    pub scales: [u8; QK_K / 16],
    pub qs: [u8; QK_K / 4],
    pub d: u16,
    pub dmin: u16,
}

/// 256 weights in 16 sub-blocks of 16: `y = d·(S_j − 32)·q`, `q = low2 − (hbit ? 0 : 4)`.
/// Low bits packed as in [`BlockQ2K`]; element `e`'s high bit is bit `e/32` of `hmask[e%32]`;
/// 6-bit scales `S_j` packed as [`q3k_scale`] unpacks them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockQ3K {
    pub hmask: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 4],
    pub scales: [u8; K_SCALE_SIZE],
    pub d: u16,
}

/// 256 weights in 8 sub-blocks of 32: `y = d·sc_j·q − dmin·m_j`, `q ∈ 0..=15`, with
/// `(sc_j, m_j)` from [`get_scale_min_k4`]. `qs[32p+l]`: low nibble = element `64p+l`,
/// high nibble = element `64p+32+l`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockQ4K {
    pub d: u16,
    pub dmin: u16,
    pub scales: [u8; K_SCALE_SIZE],
    pub qs: [u8; QK_K / 2],
}

/// As [`BlockQ4K`] with a 5th bit: element `64p+l` uses bit `2p` of `qh[l]`, element
/// `64p+32+l` bit `2p+1`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockQ5K {
    pub d: u16,
    pub dmin: u16,
    pub scales: [u8; K_SCALE_SIZE],
    pub qh: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 2],
}

/// 256 weights in 16 sub-blocks of 16: `y = d·scales[e/16]·(q − 32)`, `q ∈ 0..=63`.
/// Per 128-element chunk `n` (ql offset 64n, qh offset 32n), `l ∈ 0..32`: element `l` =
/// `ql[l]&15 | (qh[l]&3)<<4`, `l+32` = `ql[l+32]&15 | (qh[l]>>2&3)<<4`, `l+64` =
/// `ql[l]>>4 | (qh[l]>>4&3)<<4`, `l+96` = `ql[l+32]>>4 | (qh[l]>>6&3)<<4`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockQ6K {
    pub ql: [u8; QK_K / 2],
    pub qh: [u8; QK_K / 4],
    pub scales: [i8; QK_K / 16],
    pub d: u16,
}

/// 256 activations (CPU k-quant dot partner): `y = d·q` with an f32 `d`, and `bsums[k]` =
/// Σ of the 16 quants of group `k`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; QK_K],
    pub bsums: [i16; QK_K / 16],
}

/// 32 weights: `y = d·KVALUES_IQ4NL[nibble]`, nibble layout as [`BlockQ4_0`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockIq4Nl {
    pub d: u16,
    pub qs: [u8; QK4_NL / 2],
}

/// 256 weights in 8 sub-blocks of 32: `y = d·(ls_ib − 32)·KVALUES_IQ4NL[nibble]` with `ls_ib`
/// from [`iq4xs_scale`]; `qs[16ib+j]` low nibble = element `32ib+j`, high = `32ib+16+j`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockIq4Xs {
    pub d: u16,
    pub scales_h: u16,
    pub scales_l: [u8; QK_K / 64],
    pub qs: [u8; QK_K / 2],
}

/// 256 weights in 8 sub-blocks of 32, each 4 groups of 8 on the [`IQ2XXS_GRID`] code book.
/// Sub-block `ib` is `qs[4ib..4ib+4]` read as two little-endian u32 `(a, b)`: byte `l` of `a`
/// is the grid index of group `l`; bits `7l..7l+7` of `b` index [`KSIGNS_IQ2XS`] for its signs;
/// `b >> 28` is the 4-bit scale `s`. `y = d·(0.5 + s)·0.25·grid·sign`.
///
/// [`IQ2XXS_GRID`]: crate::iq_grids::IQ2XXS_GRID
/// [`KSIGNS_IQ2XS`]: crate::iq_grids::KSIGNS_IQ2XS
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockIq2Xxs {
    pub d: u16,
    pub qs: [u16; QK_K / 8],
}

/// 256 weights in 32 groups of 8 on the [`IQ2XS_GRID`] code book: `qs[g]` bits 0-8 are the grid
/// index of group `g`, bits 9-15 its [`KSIGNS_IQ2XS`] index. Sub-block `ib` of 32 has two
/// 4-bit scales, `scales[ib] & 15` for its first 16 weights and `scales[ib] >> 4` for the
/// next 16: `y = d·(0.5 + s)·0.25·grid·sign`.
///
/// [`IQ2XS_GRID`]: crate::iq_grids::IQ2XS_GRID
/// [`KSIGNS_IQ2XS`]: crate::iq_grids::KSIGNS_IQ2XS
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockIq2Xs {
    pub d: u16,
    pub qs: [u16; QK_K / 8],
    pub scales: [u8; QK_K / 32],
}

/// 256 weights in 32 groups of 8 on the [`IQ2S_GRID`] code book. Group `g = 4ib + l` has the
/// 10-bit grid index `qs[g] | ((qh[ib] >> 2l) & 3) << 8` and its 8 sign bits in `qs[32 + g]`
/// (bit `j` set: value `j` negative, no parity rule). Scales as [`BlockIq2Xs`]:
/// `y = d·(0.5 + s)·0.25·grid·sign`.
///
/// [`IQ2S_GRID`]: crate::iq_grids::IQ2S_GRID
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockIq2S {
    pub d: u16,
    pub qs: [u8; QK_K / 4],
    pub qh: [u8; QK_K / 32],
    pub scales: [u8; QK_K / 32],
}

/// 256 weights in 8 sub-blocks of 32 on the [`IQ3XXS_GRID`] code book (4 values per point).
/// `qs[0..64]` are grid indices, element `4k..4k+4` from `qs[k]`; `qs[64..96]` are 8 little-endian
/// u32 `b`, one per sub-block: bits `7l..7l+7` index [`KSIGNS_IQ2XS`] for group `l` (8 values,
/// two grid points), `b >> 28` is the 4-bit scale `s`. `y = d·(0.5 + s)·0.5·grid·sign`.
///
/// [`IQ3XXS_GRID`]: crate::iq_grids::IQ3XXS_GRID
/// [`KSIGNS_IQ2XS`]: crate::iq_grids::KSIGNS_IQ2XS
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockIq3Xxs {
    pub d: u16,
    pub qs: [u8; 3 * QK_K / 8],
}

/// 256 weights on the [`IQ3S_GRID`] code book (4 values per point): element `4k..4k+4` has the
/// 9-bit index `qs[k] | ((qh[k/8] >> k%8) & 1) << 8`; bit `e%8` of `signs[e/8]` set makes element
/// `e` negative; sub-block `ib` of 32 has the 4-bit scale `s = scales[ib/2] >> 4·(ib%2) & 15`:
/// `y = d·(1 + 2s)·grid·sign`.
///
/// [`IQ3S_GRID`]: crate::iq_grids::IQ3S_GRID
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockIq3S {
    pub d: u16,
    pub qs: [u8; QK_K / 4],
    pub qh: [u8; QK_K / 32],
    pub signs: [u8; QK_K / 8],
    pub scales: [u8; QK_K / 64],
}

/// 256 weights in 8 sub-blocks of 32 on the [`IQ1S_GRID`] code book (values −1, 0, 1). Group
/// `4ib + l` has the 11-bit index `qs[4ib+l] | ((qh[ib] >> 3l) & 7) << 8`; `qh[ib]` bits 12-14
/// are the sub-block's 3-bit scale `s`, bit 15 the sign of its shift:
/// `y = d·(2s + 1)·(grid ± IQ1S_DELTA)`.
///
/// [`IQ1S_GRID`]: crate::iq_grids::IQ1S_GRID
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockIq1S {
    pub d: u16,
    pub qs: [u8; QK_K / 8],
    pub qh: [u16; QK_K / 32],
}

/// 256 weights in 32 groups of 8 on the [`IQ1S_GRID`] code book, with no stored `d`: its f16
/// bits are the top nibbles of the four little-endian u16 of `scales` ([`iq1m_d`]). Group
/// `g = 4ib + l` has the 11-bit index `qs[g] | (qh[g/2] >> 4·(g%2) & 7) << 8` and shift sign bit
/// `qh[g/2] & (8 << 4·(g%2))`; each 16-weight half `h` of sub-block `ib` has the 3-bit scale
/// `s` of [`iq1m_scale`]: `y = d·(2s + 1)·(grid ± IQ1M_DELTA)`.
///
/// [`IQ1S_GRID`]: crate::iq_grids::IQ1S_GRID
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockIq1M {
    pub qs: [u8; QK_K / 8],
    pub qh: [u8; QK_K / 16],
    pub scales: [u8; QK_K / 32],
}

/// 32 consecutive F32 weights: the unit in which the GPU kernels read an F32 row (ggml's F32
/// has no blocks; a row of a multiple of 32 values is a whole number of these).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockF32 {
    pub v: [f32; 32],
}

/// 32 consecutive F16 weights (raw binary16 bits), as [`BlockF32`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockF16 {
    pub v: [u16; 32],
}

/// 32 consecutive BF16 weights (the high 16 bits of an f32), as [`BlockF32`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockBf16 {
    pub v: [u16; 32],
}

const _: () = assert!(size_of::<BlockF32>() == 128 && size_of::<BlockF16>() == 64);
const _: () = assert!(size_of::<BlockBf16>() == 64);
const _: () = assert!(size_of::<BlockQ4_0>() == 18);
const _: () = assert!(size_of::<BlockQ4_1>() == 20);
const _: () = assert!(size_of::<BlockQ5_0>() == 22);
const _: () = assert!(size_of::<BlockQ5_1>() == 24);
const _: () = assert!(size_of::<BlockQ8_0>() == 34);
const _: () = assert!(size_of::<BlockQ8_1>() == 36);
const _: () = assert!(size_of::<BlockQ2K>() == 84);
const _: () = assert!(size_of::<BlockQ3K>() == 110);
const _: () = assert!(size_of::<BlockQ4K>() == 144);
const _: () = assert!(size_of::<BlockQ5K>() == 176);
const _: () = assert!(size_of::<BlockQ6K>() == 210);
const _: () = assert!(size_of::<BlockQ8K>() == 292);
const _: () = assert!(size_of::<BlockIq4Nl>() == 18);
const _: () = assert!(size_of::<BlockIq4Xs>() == 136);
const _: () = assert!(size_of::<BlockIq2Xxs>() == 66);
const _: () = assert!(size_of::<BlockIq2Xs>() == 74);
const _: () = assert!(size_of::<BlockIq2S>() == 82);
const _: () = assert!(size_of::<BlockIq3Xxs>() == 98);
const _: () = assert!(size_of::<BlockIq3S>() == 110);
const _: () = assert!(size_of::<BlockIq1S>() == 50);
const _: () = assert!(size_of::<BlockIq1M>() == 56);

impl BlockQ5_0 {
    /// The 32 fifth bits, bit `e` belonging to element `e`.
    #[inline(always)]
    pub fn qh_bits(&self) -> u32 {
        u32::from_le_bytes(self.qh)
    }
}

impl BlockQ5_1 {
    /// The 32 fifth bits, bit `e` belonging to element `e`.
    #[inline(always)]
    pub fn qh_bits(&self) -> u32 {
        u32::from_le_bytes(self.qh)
    }
}

/// 6-bit `(scale, min)` of sub-block `j ∈ 0..8` of Q4_K/Q5_K (ggml `get_scale_min_k4`).
/// j < 4: low 6 bits of `q[j]` / `q[j+4]`; j ≥ 4: low/high nibble of `q[j+4]` plus the top two
/// bits of `q[j−4]` / `q[j]` as bits 4-5. `j` is taken mod 8, which makes every index provably
/// in bounds (no panic branch in device code).
#[inline(always)]
pub fn get_scale_min_k4(j: usize, q: &[u8; K_SCALE_SIZE]) -> (u8, u8) {
    let j = j & 7;
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Signed scale `S_j − 32 ∈ −32..=31` of sub-block `j ∈ 0..16` of Q3_K. The low nibble of `S_j`
/// is in `scales[j%8]` (bits 0-3 for j<8, 4-7 for j≥8), its top two bits in
/// `scales[8 + j%4]` at bits `2·(j/4)`. `j` is taken mod 16 (indices provably in bounds).
#[inline(always)]
pub fn q3k_scale(scales: &[u8; K_SCALE_SIZE], j: usize) -> i32 {
    let j = j & 15;
    let low = (scales[j % 8] >> (4 * (j / 8))) & 0xF;
    let high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    i32::from(low | (high << 4)) - 32
}

/// Signed scale `ls − 32 ∈ −32..=31` of sub-block `ib ∈ 0..8` of IQ4_XS: low nibble from
/// `scales_l[ib/2]` (bits `4·(ib%2)`), top two bits from `scales_h` bits `2·ib`. `ib` is taken
/// mod 8 (indices provably in bounds).
#[inline(always)]
pub fn iq4xs_scale(scales_h: u16, scales_l: &[u8; QK_K / 64], ib: usize) -> i32 {
    let ib = ib & 7;
    let low = (scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF;
    let high = ((scales_h >> (2 * ib)) & 3) as u8;
    i32::from(low | (high << 4)) - 32
}

/// The 4-bit scale of sub-block `ib ∈ 0..8` of IQ2_XXS (bits 28-31 of its second u32) and that
/// u32 itself, whose bits `7l..7l+7` are the sign indices of its groups. `ib` is taken mod 8.
#[inline(always)]
pub fn iq2xxs_signs_scale(qs: &[u16; QK_K / 8], ib: usize) -> (u32, u32) {
    let ib = ib & 7;
    let b = u32::from(qs[4 * ib + 2]) | (u32::from(qs[4 * ib + 3]) << 16);
    (b, b >> 28)
}

/// The f16 bits of an IQ1_M block's `d`: bits 12-15 of the four little-endian u16 of `scales`,
/// the first one's in bits 0-3 (ggml's `iq1m_scale_t` assembly).
#[inline(always)]
pub fn iq1m_d(scales: &[u8; QK_K / 32]) -> u16 {
    let sc = |k: usize| u16::from_le_bytes([scales[2 * k], scales[2 * k + 1]]);
    (sc(0) >> 12) | ((sc(1) >> 8) & 0x00f0) | ((sc(2) >> 4) & 0x0f00) | (sc(3) & 0xf000)
}

/// `scales` with its `d` set to the f16 bits `d` (the inverse of [`iq1m_d`]; the 3-bit scales in
/// bits 0-11 of each u16 are kept).
#[inline(always)]
pub fn iq1m_set_d(scales: &mut [u8; QK_K / 32], d: u16) {
    for k in 0..4 {
        let sc = u16::from_le_bytes([scales[2 * k], scales[2 * k + 1]]);
        let sc = (sc & 0x0fff) | (((d >> (4 * k)) & 0xf) << 12);
        [scales[2 * k], scales[2 * k + 1]] = sc.to_le_bytes();
    }
}

/// The 3-bit scale of half `h ∈ 0..2` (16 weights) of sub-block `ib ∈ 0..8` of IQ1_M: bits
/// `6·(ib%2) + 3h ..+3` of the little-endian u16 number `ib/2` of `scales`. Indices are taken
/// mod their ranges (provably in bounds).
#[inline(always)]
pub fn iq1m_scale(scales: &[u8; QK_K / 32], ib: usize, h: usize) -> u32 {
    let (ib, h) = (ib & 7, h & 1);
    let sc = u16::from_le_bytes([scales[2 * (ib / 2)], scales[2 * (ib / 2) + 1]]);
    u32::from((sc >> (6 * (ib % 2) + 3 * h)) & 7)
}
