//! Q4_K rows repacked once, eight at a time, into the layout the AVX2 kernels multiply directly.
//!
//! The interleaved kernels put row `r` of a group of eight in lane `r` of every vector; from the
//! GGUF layout they transpose each group's quants and decode its 12-byte scales for every call,
//! which costs about a third of a routed expert's product at the few tokens a prefill chunk sends
//! to each expert. [`BlockQ4Kx8`] holds that work done: built once when a model loads (as
//! llama.cpp's CPU backend repacks Q4_K for AVX2), then read by prefill and decode alike. It
//! takes the 1152 bytes of the eight GGUF blocks, no more: decode streams every weight byte once
//! per token on cores that share the memory bus, so a larger layout would cost it that much (a
//! first layout with the scales decoded to bytes, 2.8% larger, made decode 3.7% slower).
//!
//! Invariant: [`RowDot::q8_k_x8`](super::RowDot::q8_k_x8) on packed rows gives, row for row, the
//! bits of [`RowDot::q8_k`](super::RowDot::q8_k) on the rows they were packed from, whatever the
//! instruction set (tests in `tests.rs` pack random rows and compare with the scalar dot, and break
//! the layout on purpose).

use bytemuck::{Pod, Zeroable};
use ingot_abi::blocks::{get_scale_min_k4, BlockQ4K, QK_K};
use ingot_gguf::GgmlType;

use super::Isa;
use crate::error::QuantError;
use crate::round::f16_to_f32;

/// Rows per packed group: the eight i32 lanes of an AVX2 vector.
pub const ROWS_PER_GROUP: usize = 8;

/// The name of the layout, for stores that keep packed data beside a file's own.
pub const Q4K_X8_LAYOUT: &str = "ingot/q4_k-x8/1";

/// One super-block (256 columns) of eight Q4_K rows.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct BlockQ4Kx8 {
    /// `qs[8p + i]`: bytes `4r..4r + 4` are row `r`'s `qs[32p + 4i..32p + 4i + 4]` (low nibbles:
    /// levels of group `2p`, high nibbles: group `2p + 1`, elements `4i..4i + 4` of each).
    pub qs: [[u8; 32]; 32],
    /// `scales[j][r]`: row `r`'s 12 scale bytes `4j..4j + 4` as a little-endian word (the six-bit
    /// scales and mins of its eight groups, as [`get_scale_min_k4`] reads them).
    pub scales: [[u32; ROWS_PER_GROUP]; 3],
    /// The rows' f16 super-block scales.
    pub d: [u16; ROWS_PER_GROUP],
    /// The rows' f16 super-block mins' scales.
    pub dmin: [u16; ROWS_PER_GROUP],
}

/// The variable that turns packing off: `INGOT_CPU_REPACK=0` keeps every matrix in the file's
/// layout (to compare the two, or to save the memory the packed copies take).
pub const REPACK_VAR: &str = "INGOT_CPU_REPACK";

/// Whether `ty`'s rows are worth packing for dot products on `isa`: Q4_K on AVX2, whose
/// interleaved kernels otherwise re-transpose every group per call (AVX-VNNI and AVX-512 have
/// their own interleaved kernels on the GGUF layout, and the scalar dot gains nothing); never
/// when [`REPACK_VAR`] is `0`.
pub fn packs(ty: GgmlType, isa: Isa) -> bool {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let off = *OFF.get_or_init(|| std::env::var(REPACK_VAR).is_ok_and(|v| v.trim() == "0"));
    ty == GgmlType::Q4K && isa == Isa::Avx2 && !off
}

/// `rows` (GGUF Q4_K data of `n_rows` rows of `n_rows / rows.len()` bytes each) packed: group
/// `g`'s super-block `b` at index `g·nb + b`. Refused unless `n_rows` is a positive multiple of
/// [`ROWS_PER_GROUP`] and the bytes are whole rows of whole blocks.
pub fn pack_q4k(rows: &[u8], n_rows: usize) -> Result<Vec<BlockQ4Kx8>, QuantError> {
    let mut out = vec![BlockQ4Kx8::zeroed(); packed_blocks(rows.len(), n_rows)?];
    pack_q4k_into(rows, n_rows, &mut out)?;
    Ok(out)
}

/// How many packed blocks `n_rows` rows of Q4_K data (`rows_len` bytes) take; refused as
/// [`pack_q4k`] refuses.
pub fn packed_blocks(rows_len: usize, n_rows: usize) -> Result<usize, QuantError> {
    let block = size_of::<BlockQ4K>();
    let row_bytes = rows_len.checked_div(n_rows).unwrap_or(0);
    if n_rows == 0
        || !n_rows.is_multiple_of(ROWS_PER_GROUP)
        || row_bytes == 0
        || !row_bytes.is_multiple_of(block)
        || row_bytes * n_rows != rows_len
    {
        return Err(QuantError::ByteLength {
            ty: GgmlType::Q4K,
            elements: n_rows,
            expected: n_rows.next_multiple_of(ROWS_PER_GROUP).max(ROWS_PER_GROUP)
                * row_bytes.next_multiple_of(block).max(block),
            actual: rows_len,
        });
    }
    Ok(rows_len / block / ROWS_PER_GROUP)
}

/// [`pack_q4k`] into `out`, which must be [`packed_blocks`] long.
pub fn pack_q4k_into(rows: &[u8], n_rows: usize, out: &mut [BlockQ4Kx8]) -> Result<(), QuantError> {
    let total = packed_blocks(rows.len(), n_rows)?;
    if out.len() != total {
        return Err(QuantError::ByteLength {
            ty: GgmlType::Q4K,
            elements: n_rows,
            expected: total * size_of::<BlockQ4Kx8>(),
            actual: size_of_val(out),
        });
    }
    let block = size_of::<BlockQ4K>();
    let nb = total * ROWS_PER_GROUP / n_rows;
    let group_bytes = ROWS_PER_GROUP * nb * block;
    let pack_group = |(src, dst): (&[u8], &mut [BlockQ4Kx8])| {
        for (b, p) in dst.iter_mut().enumerate() {
            let x: [BlockQ4K; ROWS_PER_GROUP] = core::array::from_fn(|r| {
                bytemuck::pod_read_unaligned(&src[(r * nb + b) * block..][..block])
            });
            *p = pack_block(&x);
        }
    };
    // On all cores with the `rayon` feature: a model's Q4_K tensors are packed as it loads.
    #[cfg(feature = "rayon")]
    {
        use rayon::prelude::*;
        rows.par_chunks_exact(group_bytes)
            .zip(out.par_chunks_exact_mut(nb))
            .for_each(pack_group);
    }
    #[cfg(not(feature = "rayon"))]
    rows.chunks_exact(group_bytes)
        .zip(out.chunks_exact_mut(nb))
        .for_each(pack_group);
    Ok(())
}

/// Row `r`'s values (`r < 8`) of the packed groups `group` (one row of super-blocks), as
/// [`crate::q4_k::dequantize`] gives them from the unpacked row, bit for bit.
pub fn dequantize_row(group: &[BlockQ4Kx8], r: usize, out: &mut [f32]) {
    for (x, y) in group.iter().zip(out.chunks_exact_mut(QK_K)) {
        let d = f16_to_f32(x.d[r]);
        let min = f16_to_f32(x.dmin[r]);
        let q = levels(x, r);
        let (sc, m) = scales_mins(x, r);
        for j in 0..8 {
            let (dl, ml) = (d * sc[j] as f32, min * m[j] as f32);
            for l in 0..32 {
                y[32 * j + l] = dl * q[32 * j + l] as f32 - ml;
            }
        }
    }
}

/// Eight rows' super-blocks in the packed layout.
fn pack_block(x: &[BlockQ4K; ROWS_PER_GROUP]) -> BlockQ4Kx8 {
    let mut p = BlockQ4Kx8::zeroed();
    for (r, x) in x.iter().enumerate() {
        for (v, qs) in p.qs.iter_mut().enumerate() {
            let at = 32 * (v / 8) + 4 * (v % 8);
            qs[4 * r..4 * r + 4].copy_from_slice(&x.qs[at..at + 4]);
        }
        for (j, w) in p.scales.iter_mut().enumerate() {
            w[r] = u32::from_le_bytes(x.scales[4 * j..4 * j + 4].try_into().expect("4 bytes"));
        }
        p.d[r] = x.d;
        p.dmin[r] = x.dmin;
    }
    p
}

/// Row `r`'s six-bit scales and mins of each group of the packed super-block `x`.
pub(super) fn scales_mins(x: &BlockQ4Kx8, r: usize) -> ([u8; 8], [u8; 8]) {
    let mut bytes = [0u8; 12];
    for (b, w) in bytes.chunks_exact_mut(4).zip(&x.scales) {
        b.copy_from_slice(&w[r].to_le_bytes());
    }
    let sm: [(u8, u8); 8] = core::array::from_fn(|k| get_scale_min_k4(k, &bytes));
    (sm.map(|p| p.0), sm.map(|p| p.1))
}

/// Row `r`'s unsigned levels (`0..=15`) of the packed super-block `x`, in element order.
pub(super) fn levels(x: &BlockQ4Kx8, r: usize) -> [u8; QK_K] {
    let mut q = [0u8; QK_K];
    for (v, qs) in x.qs.iter().enumerate() {
        let (p, i) = (v / 8, v % 8);
        for e in 0..4 {
            let byte = qs[4 * r + e];
            q[64 * p + 4 * i + e] = byte & 0xF;
            q[64 * p + 32 + 4 * i + e] = byte >> 4;
        }
    }
    q
}

#[cfg(test)]
mod tests;
