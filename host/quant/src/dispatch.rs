//! The `GgmlType`-level API: length checks, then one monomorphic loop per block type, chosen by
//! the type's row in [`crate::registry`].
//!
//! Byte buffers need no particular alignment: an aligned buffer (e.g. a GGUF mapping, whose
//! tensors start 32-byte aligned) is viewed in place as `&[Block]`, anything else is read one
//! block at a time with an unaligned copy.

use crate::chunks::{arrays, arrays_mut};
use crate::error::QuantError;
use crate::q8_0;
use crate::registry::{
    self, acts_as, cpu_type, ActBlock, CpuBlock, CpuDot, FloatCodec, Visit, VisitDot,
};
use bytemuck::Pod;
use core::mem::size_of;
use ingot_abi::blocks::{BlockQ8K, BlockQ8_0, BlockQ8_1, QK8_0, QK8_1};
use ingot_gguf::GgmlType;

/// Whether [`dequantize_row`] handles `ty` (it has a registry row).
pub fn can_dequantize(ty: GgmlType) -> bool {
    cpu_type(ty).is_some()
}

/// Whether [`quantize_row`] handles `ty` (the weight formats `llama-quantize` writes without an
/// importance matrix; Q8_1 and Q8_K are activation formats with their own functions).
pub fn can_quantize(ty: GgmlType) -> bool {
    cpu_type(ty).is_some_and(|r| r.quantize)
}

/// Whether [`vec_dot_q8_1`] (the CUDA mmvq oracle) handles weights of type `ty`.
pub fn can_vec_dot_q8_1(ty: GgmlType) -> bool {
    cpu_type(ty).is_some_and(|r| r.q8_1_dot)
}

/// The activation type ggml's CPU backend pairs with weights of type `ty` (`vec_dot_type`,
/// docs/quant-formats.md#cpu-dot-products), for the types this crate can dot: Q8_K for
/// k-quants, IQ4_XS and the grid types IQ1_S…IQ3_S ([`vec_dot_q8_k`]), Q8_0 for
/// Q4_0/Q5_0/Q8_0/IQ4_NL ([`vec_dot_q8_0`]).
pub fn cpu_vec_dot_type(ty: GgmlType) -> Option<GgmlType> {
    cpu_type(ty)?.dot_act
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
    registry::visit(ty, Dequantize { data, out }).ok_or_else(|| unsupported(ty, "dequantization"))
}

/// [`dequantize_row`] on a row of the registry (lengths checked).
struct Dequantize<'a> {
    data: &'a [u8],
    out: &'a mut [f32],
}

impl Visit for Dequantize<'_> {
    type Out = ();
    fn block<B: CpuBlock<QK>, const QK: usize>(self) {
        dequant_blocks::<B, QK>(self.data, self.out, B::dequantize)
    }
    fn float(self, codec: FloatCodec) {
        (codec.dequantize)(self.data, self.out)
    }
}

/// Encode `x` as type `ty` into `out`, which must be exactly the encoded size. Quantized types
/// use ggml's reference quantizers without importance matrix, bit-identical to
/// `llama-quantize` (IQ4_NL/IQ4_XS: the `quantize_iq4_*` path with 7 scale tries).
pub fn quantize_row(ty: GgmlType, x: &[f32], out: &mut [u8]) -> Result<(), QuantError> {
    check_quantize(ty, x.len(), out.len())?;
    match registry::visit(ty, Quantize { x, out }) {
        Some(true) => Ok(()),
        _ => Err(unsupported(ty, "quantization")),
    }
}

/// [`quantize_row`] on a row of the registry (lengths checked): whether the row has a quantizer.
struct Quantize<'a> {
    x: &'a [f32],
    out: &'a mut [u8],
}

impl Visit for Quantize<'_> {
    type Out = bool;
    fn block<B: CpuBlock<QK>, const QK: usize>(self) -> bool {
        let Some(quantize) = B::QUANTIZE else {
            return false;
        };
        quant_blocks::<B, QK>(self.x, self.out, quantize);
        true
    }
    fn float(self, codec: FloatCodec) -> bool {
        (codec.quantize)(self.x, self.out);
        true
    }
}

/// The refusal for a type an operation does not cover. (After the `can_*` predicates it is
/// unreachable in the dispatch below; it keeps the dispatch total.)
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
pub(crate) fn mmvq_small<B: Pod>(
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
pub(crate) fn mmvq_k<B: Pod>(
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
/// computed as the CUDA `mul_mat_vec_q` kernels do (see [`crate::gpu_dot_oracle`]). `act` must hold
/// exactly one block per 32 row elements.
pub fn vec_dot_q8_1(ty: GgmlType, row: &[u8], act: &[BlockQ8_1]) -> Result<f32, QuantError> {
    if !can_vec_dot_q8_1(ty) {
        return Err(unsupported(ty, "the q8_1 dot product"));
    }
    let elements = row_elements(ty, row.len())?;
    check_activation(ty, elements, QK8_1, act.len())?;
    registry::mmvq_row(ty, row, act).ok_or_else(|| unsupported(ty, "the q8_1 dot product"))
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
    vec_dot_cpu(ty, row, act, "the q8_K dot product")
}

/// Dot product of one Q4_0/Q5_0/Q8_0/IQ4_NL weight row with Q8_0 activations (from
/// [`quantize_q8_0`]) the way ggml's CPU backend computes it.
pub fn vec_dot_q8_0(ty: GgmlType, row: &[u8], act: &[BlockQ8_0]) -> Result<f32, QuantError> {
    vec_dot_cpu(ty, row, act, "the q8_0 dot product")
}

/// [`vec_dot_q8_k`] and [`vec_dot_q8_0`]: one activation block of `A` per weight block.
fn vec_dot_cpu<A: ActBlock>(
    ty: GgmlType,
    row: &[u8],
    act: &[A],
    op: &'static str,
) -> Result<f32, QuantError> {
    if cpu_vec_dot_type(ty) != Some(A::TYPE) {
        return Err(unsupported(ty, op));
    }
    let elements = row_elements(ty, row.len())?;
    check_activation(ty, elements, A::QK, act.len())?;
    registry::visit_dot(ty, RowSum { row, act })
        .flatten()
        .ok_or_else(|| unsupported(ty, op))
}

/// One row's Σ of per-block CPU dot products (lengths checked); `None` if the row dots with
/// another activation type than `A`.
struct RowSum<'a, A> {
    row: &'a [u8],
    act: &'a [A],
}

impl<X: ActBlock> VisitDot for RowSum<'_, X> {
    type Out = Option<f32>;
    fn dot<B: CpuDot<QK, Act = A>, A: ActBlock, const QK: usize>(self) -> Option<f32> {
        Some(cpu_rows::<B, A>(self.row, acts_as(self.act)?, B::dot))
    }
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
