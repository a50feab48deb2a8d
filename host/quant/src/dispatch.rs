//! The `GgmlType`-level API: length checks, then one monomorphic loop per block type.
//!
//! Byte buffers need no particular alignment: an aligned buffer (e.g. a GGUF mapping, whose
//! tensors start 32-byte aligned) is viewed in place as `&[Block]`, anything else is read one
//! block at a time with an unaligned copy.

use crate::chunks::{arrays, arrays_mut};
use crate::error::QuantError;
use crate::{
    cpu_dot, float, iq1_m, iq1_s, iq2_s, iq2_xs, iq2_xxs, iq3_s, iq3_xxs, iq4_nl, iq4_xs, mmvq,
    q2_k, q3_k, q4_0, q4_1, q4_k, q5_0, q5_1, q5_k, q6_k, q8_0, q8_1, q8_k,
};
use bytemuck::Pod;
use core::mem::size_of;
use ingot_abi::blocks::{
    BlockIq1M, BlockIq1S, BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockIq4Nl,
    BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1,
    BlockQ6K, BlockQ8K, BlockQ8_0, BlockQ8_1, QK8_0, QK8_1, QK_K,
};
use ingot_gguf::GgmlType;

/// Whether [`dequantize_row`] handles `ty`.
pub fn can_dequantize(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(
        ty,
        F32 | F16
            | Bf16
            | Q4_0
            | Q4_1
            | Q5_0
            | Q5_1
            | Q8_0
            | Q8_1
            | Q2K
            | Q3K
            | Q4K
            | Q5K
            | Q6K
            | Q8K
            | Iq4Nl
            | Iq4Xs
            | Iq2Xxs
            | Iq2Xs
            | Iq2S
            | Iq3Xxs
            | Iq3S
            | Iq1S
            | Iq1M
    )
}

/// Whether [`quantize_row`] handles `ty` (the weight formats `llama-quantize` writes without an
/// importance matrix; Q8_1 and Q8_K are activation formats with their own functions).
pub fn can_quantize(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(
        ty,
        F32 | F16
            | Bf16
            | Q4_0
            | Q4_1
            | Q5_0
            | Q5_1
            | Q8_0
            | Q2K
            | Q3K
            | Q4K
            | Q5K
            | Q6K
            | Iq4Nl
            | Iq4Xs
            | Iq2S
            | Iq3Xxs
            | Iq3S
            | Iq1M
    )
}

/// Whether [`vec_dot_q8_1`] (the CUDA mmvq oracle) handles weights of type `ty`.
pub fn can_vec_dot_q8_1(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(
        ty,
        Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q2K | Q3K | Q4K | Q5K | Q6K | Iq4Nl | Iq4Xs
    )
}

/// The activation type ggml's CPU backend pairs with weights of type `ty` (`vec_dot_type`,
/// docs/quant-formats.md#cpu-dot-products), for the types this crate can dot: Q8_K for
/// k-quants, IQ4_XS and the grid types IQ1_S…IQ3_S ([`vec_dot_q8_k`]), Q8_0 for
/// Q4_0/Q5_0/Q8_0/IQ4_NL ([`vec_dot_q8_0`]).
pub fn cpu_vec_dot_type(ty: GgmlType) -> Option<GgmlType> {
    use GgmlType::*;
    match ty {
        Q2K | Q3K | Q4K | Q5K | Q6K | Iq4Xs => Some(Q8K),
        Iq2Xxs | Iq2Xs | Iq2S | Iq3Xxs | Iq3S | Iq1S | Iq1M => Some(Q8K),
        Q4_0 | Q5_0 | Q8_0 | Iq4Nl => Some(Q8_0),
        _ => None,
    }
}

fn geometry(ty: GgmlType) -> (usize, usize) {
    (ty.block_size() as usize, ty.type_size() as usize)
}

/// Number of blocks in `elements`, which must be a whole number of blocks.
fn whole_blocks(ty: GgmlType, elements: usize) -> Result<usize, QuantError> {
    let (bs, _) = geometry(ty);
    if !elements.is_multiple_of(bs) {
        return Err(QuantError::PartialBlock {
            ty,
            elements,
            block_size: bs,
        });
    }
    Ok(elements / bs)
}

/// Checks that `bytes` is exactly the encoding of `elements` values of `ty`.
pub(crate) fn check_bytes(ty: GgmlType, elements: usize, bytes: usize) -> Result<(), QuantError> {
    let (_, ts) = geometry(ty);
    let expected = whole_blocks(ty, elements)? * ts;
    if bytes != expected {
        return Err(QuantError::ByteLength {
            ty,
            elements,
            expected,
            actual: bytes,
        });
    }
    Ok(())
}

/// Whether [`dequantize_row`] accepts `bytes` bytes of `ty` decoding into `elements` values.
pub(crate) fn check_dequantize(
    ty: GgmlType,
    bytes: usize,
    elements: usize,
) -> Result<(), QuantError> {
    if !can_dequantize(ty) {
        return Err(unsupported(ty, "dequantization"));
    }
    check_bytes(ty, elements, bytes)
}

/// Whether [`quantize_row`] accepts `elements` values encoding into `bytes` bytes of `ty`.
pub(crate) fn check_quantize(
    ty: GgmlType,
    elements: usize,
    bytes: usize,
) -> Result<(), QuantError> {
    if !can_quantize(ty) {
        return Err(unsupported(ty, "quantization"));
    }
    check_bytes(ty, elements, bytes)
}

/// Calls `f` on every block of `data` (whose length is a multiple of the block size).
#[inline(always)]
fn for_each_block<B: Pod>(data: &[u8], mut f: impl FnMut(usize, &B)) {
    match bytemuck::try_cast_slice::<u8, B>(data) {
        Ok(blocks) => blocks.iter().enumerate().for_each(|(i, b)| f(i, b)),
        Err(_) => data
            .chunks_exact(size_of::<B>())
            .enumerate()
            .for_each(|(i, c)| f(i, &bytemuck::pod_read_unaligned::<B>(c))),
    }
}

fn dequant_blocks<B: Pod, const N: usize>(data: &[u8], out: &mut [f32], f: fn(&B, &mut [f32; N])) {
    let mut outs = arrays_mut::<f32, N>(out);
    for_each_block::<B>(data, |_, b| {
        if let Some(y) = outs.next() {
            f(b, y);
        }
    });
}

fn quant_blocks<B: Pod, const N: usize>(x: &[f32], out: &mut [u8], f: fn(&[f32; N]) -> B) {
    for (xb, ob) in arrays::<f32, N>(x).zip(out.chunks_exact_mut(size_of::<B>())) {
        ob.copy_from_slice(bytemuck::bytes_of(&f(xb)));
    }
}

/// Decode `out.len()` values of type `ty` from `data`, which must hold exactly that many
/// (a whole number of blocks).
pub fn dequantize_row(ty: GgmlType, data: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
    check_dequantize(ty, data.len(), out.len())?;
    use GgmlType::*;
    match ty {
        F32 => float::f32_from_le(data, out),
        F16 => float::f16_from_le(data, out),
        Bf16 => float::bf16_from_le(data, out),
        Q4_0 => dequant_blocks::<BlockQ4_0, 32>(data, out, q4_0::dequantize),
        Q4_1 => dequant_blocks::<BlockQ4_1, 32>(data, out, q4_1::dequantize),
        Q5_0 => dequant_blocks::<BlockQ5_0, 32>(data, out, q5_0::dequantize),
        Q5_1 => dequant_blocks::<BlockQ5_1, 32>(data, out, q5_1::dequantize),
        Q8_0 => dequant_blocks::<BlockQ8_0, 32>(data, out, q8_0::dequantize),
        Q8_1 => dequant_blocks::<BlockQ8_1, 32>(data, out, q8_1::dequantize),
        Q2K => dequant_blocks::<BlockQ2K, QK_K>(data, out, q2_k::dequantize),
        Q3K => dequant_blocks::<BlockQ3K, QK_K>(data, out, q3_k::dequantize),
        Q4K => dequant_blocks::<BlockQ4K, QK_K>(data, out, q4_k::dequantize),
        Q5K => dequant_blocks::<BlockQ5K, QK_K>(data, out, q5_k::dequantize),
        Q6K => dequant_blocks::<BlockQ6K, QK_K>(data, out, q6_k::dequantize),
        Q8K => dequant_blocks::<BlockQ8K, QK_K>(data, out, q8_k::dequantize),
        Iq4Nl => dequant_blocks::<BlockIq4Nl, 32>(data, out, iq4_nl::dequantize),
        Iq4Xs => dequant_blocks::<BlockIq4Xs, QK_K>(data, out, iq4_xs::dequantize),
        Iq2Xxs => dequant_blocks::<BlockIq2Xxs, QK_K>(data, out, iq2_xxs::dequantize),
        Iq2Xs => dequant_blocks::<BlockIq2Xs, QK_K>(data, out, iq2_xs::dequantize),
        Iq2S => dequant_blocks::<BlockIq2S, QK_K>(data, out, iq2_s::dequantize),
        Iq3Xxs => dequant_blocks::<BlockIq3Xxs, QK_K>(data, out, iq3_xxs::dequantize),
        Iq3S => dequant_blocks::<BlockIq3S, QK_K>(data, out, iq3_s::dequantize),
        Iq1S => dequant_blocks::<BlockIq1S, QK_K>(data, out, iq1_s::dequantize),
        Iq1M => dequant_blocks::<BlockIq1M, QK_K>(data, out, iq1_m::dequantize),
        _ => return Err(unsupported(ty, "dequantization")),
    }
    Ok(())
}

/// Encode `x` as type `ty` into `out`, which must be exactly the encoded size. Quantized types
/// use ggml's reference quantizers without importance matrix, bit-identical to
/// `llama-quantize` (IQ4_NL/IQ4_XS: the `quantize_iq4_*` path with 7 scale tries).
pub fn quantize_row(ty: GgmlType, x: &[f32], out: &mut [u8]) -> Result<(), QuantError> {
    check_quantize(ty, x.len(), out.len())?;
    use GgmlType::*;
    match ty {
        F32 => float::f32_to_le(x, out),
        F16 => float::f16_to_le(x, out),
        Bf16 => float::bf16_to_le(x, out),
        Q4_0 => quant_blocks::<BlockQ4_0, 32>(x, out, q4_0::quantize),
        Q4_1 => quant_blocks::<BlockQ4_1, 32>(x, out, q4_1::quantize),
        Q5_0 => quant_blocks::<BlockQ5_0, 32>(x, out, q5_0::quantize),
        Q5_1 => quant_blocks::<BlockQ5_1, 32>(x, out, q5_1::quantize),
        Q8_0 => quant_blocks::<BlockQ8_0, 32>(x, out, q8_0::quantize),
        Q2K => quant_blocks::<BlockQ2K, QK_K>(x, out, q2_k::quantize),
        Q3K => quant_blocks::<BlockQ3K, QK_K>(x, out, q3_k::quantize),
        Q4K => quant_blocks::<BlockQ4K, QK_K>(x, out, q4_k::quantize),
        Q5K => quant_blocks::<BlockQ5K, QK_K>(x, out, q5_k::quantize),
        Q6K => quant_blocks::<BlockQ6K, QK_K>(x, out, q6_k::quantize),
        Iq4Nl => quant_blocks::<BlockIq4Nl, 32>(x, out, iq4_nl::quantize),
        Iq4Xs => quant_blocks::<BlockIq4Xs, QK_K>(x, out, iq4_xs::quantize),
        Iq2S => quant_blocks::<BlockIq2S, QK_K>(x, out, iq2_s::quantize),
        Iq3Xxs => quant_blocks::<BlockIq3Xxs, QK_K>(x, out, iq3_xxs::quantize),
        Iq3S => quant_blocks::<BlockIq3S, QK_K>(x, out, iq3_s::quantize),
        Iq1M => quant_blocks::<BlockIq1M, QK_K>(x, out, iq1_m::quantize),
        _ => return Err(unsupported(ty, "quantization")),
    }
    Ok(())
}

/// The refusal for a type an operation does not cover. (In the `match` fallbacks below it is
/// unreachable, as the `can_*` predicates refuse first; it keeps the matches total.)
pub(crate) fn unsupported(ty: GgmlType, op: &'static str) -> QuantError {
    QuantError::Unsupported { ty, op }
}

/// Elements of a quantized row of `row_bytes` bytes.
fn row_elements(ty: GgmlType, row_bytes: usize) -> Result<usize, QuantError> {
    let (bs, ts) = geometry(ty);
    if !row_bytes.is_multiple_of(ts) {
        return Err(QuantError::RowBytes {
            ty,
            bytes: row_bytes,
            type_size: ts,
        });
    }
    Ok(row_bytes / ts * bs)
}

fn check_activation(
    ty: GgmlType,
    elements: usize,
    per_block: usize,
    actual: usize,
) -> Result<(), QuantError> {
    let expected = elements / per_block;
    if actual != expected {
        return Err(QuantError::ActivationLength {
            ty,
            elements,
            expected,
            actual,
        });
    }
    Ok(())
}

/// Σ over blocks of the per-call results of a 32-element type, added in f64.
fn mmvq_small<B: Pod>(
    row: &[u8],
    act: &[BlockQ8_1],
    (_, qi, vdr): (usize, usize, usize),
    call: fn(&B, &BlockQ8_1, usize) -> f32,
) -> f32 {
    let mut sum = 0.0f64;
    for_each_block::<B>(row, |i, b| {
        for iqs in (0..qi).step_by(vdr) {
            sum += f64::from(call(b, &act[i], iqs));
        }
    });
    sum as f32
}

/// Σ over super-blocks of the per-call results of a 256-element type, added in f64.
fn mmvq_k<B: Pod>(
    row: &[u8],
    act: &[BlockQ8_1],
    (_, qi, vdr): (usize, usize, usize),
    call: fn(&B, &[BlockQ8_1; 8], usize) -> f32,
) -> f32 {
    let mut groups = arrays::<BlockQ8_1, 8>(act);
    let mut sum = 0.0f64;
    for_each_block::<B>(row, |_, b| {
        if let Some(a) = groups.next() {
            for iqs in (0..qi).step_by(vdr) {
                sum += f64::from(call(b, a, iqs));
            }
        }
    });
    sum as f32
}

/// Dot product of one quantized weight row with Q8_1 activations (from [`crate::quantize_q8_1`]),
/// computed as the CUDA `mul_mat_vec_q` kernels do (see [`crate::mmvq`]). `act` must hold
/// exactly one block per 32 row elements.
pub fn vec_dot_q8_1(ty: GgmlType, row: &[u8], act: &[BlockQ8_1]) -> Result<f32, QuantError> {
    if !can_vec_dot_q8_1(ty) {
        return Err(unsupported(ty, "the q8_1 dot product"));
    }
    let elements = row_elements(ty, row.len())?;
    check_activation(ty, elements, QK8_1, act.len())?;
    use mmvq::shape;
    use GgmlType::*;
    Ok(match ty {
        Q4_0 => mmvq_small::<BlockQ4_0>(row, act, shape::Q4_0, mmvq::q4_0_call),
        Q4_1 => mmvq_small::<BlockQ4_1>(row, act, shape::Q4_1, mmvq::q4_1_call),
        Q5_0 => mmvq_small::<BlockQ5_0>(row, act, shape::Q5_0, mmvq::q5_0_call),
        Q5_1 => mmvq_small::<BlockQ5_1>(row, act, shape::Q5_1, mmvq::q5_1_call),
        Q8_0 => mmvq_small::<BlockQ8_0>(row, act, shape::Q8_0, mmvq::q8_0_call),
        Iq4Nl => mmvq_small::<BlockIq4Nl>(row, act, shape::IQ4_NL, mmvq::iq4_nl_call),
        Q2K => mmvq_k::<BlockQ2K>(row, act, shape::Q2_K, mmvq::q2_k_call),
        Q3K => mmvq_k::<BlockQ3K>(row, act, shape::Q3_K, mmvq::q3_k_call),
        Q4K => mmvq_k::<BlockQ4K>(row, act, shape::Q4_K, mmvq::q4_k_call),
        Q5K => mmvq_k::<BlockQ5K>(row, act, shape::Q5_K, mmvq::q5_k_call),
        Q6K => mmvq_k::<BlockQ6K>(row, act, shape::Q6_K, mmvq::q6_k_call),
        Iq4Xs => mmvq_k::<BlockIq4Xs>(row, act, shape::IQ4_XS, mmvq::iq4_xs_call),
        _ => return Err(unsupported(ty, "the q8_1 dot product")),
    })
}

/// Σ of per-block CPU dot products, in f32 as ggml accumulates them.
fn cpu_rows<B: Pod, A>(row: &[u8], act: &[A], f: fn(&B, &A) -> f32) -> f32 {
    let mut sum = 0.0f32;
    for_each_block::<B>(row, |i, b| sum += f(b, &act[i]));
    sum
}

/// Dot product of one k-quant (or IQ4_XS, or grid-type) weight row with Q8_K activations (from
/// [`crate::quantize_q8_k`]) the way ggml's CPU backend computes it. `act` must hold exactly
/// one block per 256 row elements.
pub fn vec_dot_q8_k(ty: GgmlType, row: &[u8], act: &[BlockQ8K]) -> Result<f32, QuantError> {
    if cpu_vec_dot_type(ty) != Some(GgmlType::Q8K) {
        return Err(unsupported(ty, "the q8_K dot product"));
    }
    let elements = row_elements(ty, row.len())?;
    check_activation(ty, elements, QK_K, act.len())?;
    use GgmlType::*;
    Ok(match ty {
        Q2K => cpu_rows::<BlockQ2K, _>(row, act, cpu_dot::q2_k),
        Q3K => cpu_rows::<BlockQ3K, _>(row, act, cpu_dot::q3_k),
        Q4K => cpu_rows::<BlockQ4K, _>(row, act, cpu_dot::q4_k),
        Q5K => cpu_rows::<BlockQ5K, _>(row, act, cpu_dot::q5_k),
        Q6K => cpu_rows::<BlockQ6K, _>(row, act, cpu_dot::q6_k),
        Iq4Xs => cpu_rows::<BlockIq4Xs, _>(row, act, cpu_dot::iq4_xs),
        Iq2Xxs => cpu_rows::<BlockIq2Xxs, _>(row, act, cpu_dot::iq2_xxs),
        Iq2Xs => cpu_rows::<BlockIq2Xs, _>(row, act, cpu_dot::iq2_xs),
        Iq2S => cpu_rows::<BlockIq2S, _>(row, act, cpu_dot::iq2_s),
        Iq3Xxs => cpu_rows::<BlockIq3Xxs, _>(row, act, cpu_dot::iq3_xxs),
        Iq3S => cpu_rows::<BlockIq3S, _>(row, act, cpu_dot::iq3_s),
        Iq1S => cpu_rows::<BlockIq1S, _>(row, act, cpu_dot::iq1_s),
        Iq1M => cpu_rows::<BlockIq1M, _>(row, act, cpu_dot::iq1_m),
        _ => return Err(unsupported(ty, "the q8_K dot product")),
    })
}

/// Dot product of one Q4_0/Q5_0/Q8_0/IQ4_NL weight row with Q8_0 activations (from
/// [`quantize_q8_0`]) the way ggml's CPU backend computes it.
pub fn vec_dot_q8_0(ty: GgmlType, row: &[u8], act: &[BlockQ8_0]) -> Result<f32, QuantError> {
    if cpu_vec_dot_type(ty) != Some(GgmlType::Q8_0) {
        return Err(unsupported(ty, "the q8_0 dot product"));
    }
    let elements = row_elements(ty, row.len())?;
    check_activation(ty, elements, QK8_0, act.len())?;
    use GgmlType::*;
    Ok(match ty {
        Q4_0 => cpu_rows::<BlockQ4_0, _>(row, act, cpu_dot::q4_0),
        Q5_0 => cpu_rows::<BlockQ5_0, _>(row, act, cpu_dot::q5_0),
        Q8_0 => cpu_rows::<BlockQ8_0, _>(row, act, cpu_dot::q8_0),
        Iq4Nl => cpu_rows::<BlockIq4Nl, _>(row, act, cpu_dot::iq4_nl),
        _ => return Err(unsupported(ty, "the q8_0 dot product")),
    })
}

/// Quantize an activation row to Q8_0 (`quantize_row_q8_0_ref`, the generic CPU
/// `from_float`); a tail that is not a whole block is padded with zeros.
pub fn quantize_q8_0(x: &[f32]) -> Vec<BlockQ8_0> {
    let mut out = Vec::with_capacity(x.len().div_ceil(QK8_0));
    out.extend(arrays::<f32, QK8_0>(x).map(q8_0::quantize));
    let rest = &x[x.len() - x.len() % QK8_0..];
    if !rest.is_empty() {
        let mut padded = [0.0f32; QK8_0];
        padded[..rest.len()].copy_from_slice(rest);
        out.push(q8_0::quantize(&padded));
    }
    out
}
