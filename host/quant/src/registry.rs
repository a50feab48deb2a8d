//! The CPU type registry: one row per GGML type this crate decodes, read by every per-type
//! dispatch of the crate's CPU side. Still per type outside it: the SIMD kernels, and the grid
//! types' stand-ins ([`crate::GRID_TYPES`]).
//!
//! A block row names the [`GgmlType`], its block struct (`ingot_abi::blocks`), weights per block,
//! the module of its `dequantize` (and `quantize`), the activation block and [`crate::cpu_dot`]
//! function of its CPU dot (ggml's `vec_dot_type`), and the [`crate::gpu_dot_oracle`] call of its
//! q8_1 oracle ([`crate::vec_dot_q8_1`]); a float row (F32, F16, BF16) its [`crate::float`] codecs.
//! From the rows come the [`CpuBlock`] and [`CpuDot`] impls, [`CPU_TYPES`], [`cpu_type`], and the
//! one `match` per operation that turns a `GgmlType` into a monomorphic call (`visit`, `visit_dot`,
//! `mmvq_row`). The SIMD row kernels (`cpu_dot/rows.rs`, `avx2_rows`) stay per type; a dotted type
//! without one runs its row's scalar dot.
//!
//! Invariants:
//! * a row's weights per block and block bytes are its type's `GgmlType::block_size` and
//!   `type_size` (test `rows_match_ggml_geometry`), so the byte-length checks, which read
//!   `GgmlType`, describe the blocks the dispatch casts to;
//! * a type has at most one row (same test; a second block row would also be an unreachable
//!   arm in `visit`, which the lints refuse);
//! * a dotted row's activation block spans exactly its weight block (asserted at compile time
//!   per row): `RowDot::check` and the row loops pair weight block `i` with activation block `i`;
//! * a quantizer inverts its dequantizer up to the format's rounding (test
//!   `quantizers_round_trip`);
//! * a row's dot is the dot of its dequantized blocks up to f32 rounding of the scale products
//!   (test `dots_match_dequantized_blocks`), so a row cannot pair a block with another
//!   format's dot.
//!
//! Adding a CPU type: docs/architecture.md lists and counts the files.

use crate::float;
use bytemuck::Pod;
use core::mem::size_of;
use ingot_abi::blocks::{
    BlockIq1M, BlockIq1S, BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockIq4Nl,
    BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1,
    BlockQ6K, BlockQ8K, BlockQ8_0, BlockQ8_1, QK8_0, QK_K,
};
use ingot_gguf::GgmlType;

#[cfg(test)]
mod tests;

/// A block type with a registry row: `QK` weights per block (a const parameter, as array
/// lengths cannot name associated consts on stable Rust).
pub trait CpuBlock<const QK: usize>: Pod {
    /// The ggml type of the row.
    const TYPE: GgmlType;
    /// The reference quantizer of one block, where the crate has one.
    const QUANTIZE: Option<fn(&[f32; QK]) -> Self>;
    /// Decodes the block's `QK` weights.
    fn dequantize(&self, y: &mut [f32; QK]);
}

/// A block type with a CPU dot product against activation blocks [`CpuDot::Act`].
pub trait CpuDot<const QK: usize>: CpuBlock<QK> {
    /// The activation block (Q8_K or Q8_0), spanning the same `QK` weights.
    type Act: ActBlock;
    /// `Σ weight·activation` over the block, as ggml's CPU backend computes it.
    fn dot(&self, y: &Self::Act) -> f32;
}

/// An activation block of the CPU dot products.
pub trait ActBlock: Pod {
    /// Its ggml type.
    const TYPE: GgmlType;
    /// Activations per block.
    const QK: usize;
}

impl ActBlock for BlockQ8K {
    const TYPE: GgmlType = GgmlType::Q8K;
    const QK: usize = QK_K;
}

impl ActBlock for BlockQ8_0 {
    const TYPE: GgmlType = GgmlType::Q8_0;
    const QK: usize = QK8_0;
}

/// `a` as a slice of `B` when `A` and `B` are the same activation type (no copy), else `None`.
/// Lets a generic visitor hand its activations to a row whose `Act` it cannot name.
#[inline(always)]
pub(crate) fn acts_as<A: ActBlock, B: ActBlock>(a: &[A]) -> Option<&[B]> {
    if A::TYPE != B::TYPE {
        return None;
    }
    bytemuck::try_cast_slice(a).ok()
}

/// What the registry says of one type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuType {
    /// The type.
    pub ty: GgmlType,
    /// Weights per block (1 for the float types).
    pub block_elems: usize,
    /// Bytes per block.
    pub block_bytes: usize,
    /// Whether `quantize_row` encodes it.
    pub quantize: bool,
    /// The activation type of its CPU dot product (`cpu_vec_dot_type`).
    pub dot_act: Option<GgmlType>,
    /// Whether `vec_dot_q8_1` (the CUDA mmvq oracle) takes it.
    pub q8_1_dot: bool,
}

/// The whole-row codecs of a float row.
pub(crate) struct FloatCodec {
    pub dequantize: fn(&[u8], &mut [f32]),
    pub quantize: fn(&[f32], &mut [u8]),
}

/// An operation generic over the registry's rows, run by `visit` on the row of a type.
pub(crate) trait Visit {
    type Out;
    /// The operation on blocks of `B`.
    fn block<B: CpuBlock<QK>, const QK: usize>(self) -> Self::Out;
    /// The operation on a float row.
    fn float(self, codec: FloatCodec) -> Self::Out;
}

/// An operation generic over the rows with a CPU dot product, run by `visit_dot`.
pub(crate) trait VisitDot {
    type Out;
    /// The operation on blocks of `B` dotted with blocks of `A`.
    fn dot<B: CpuDot<QK, Act = A>, A: ActBlock, const QK: usize>(self) -> Self::Out;
}

/// `Some(f)` for a listed function, `None` for an empty column.
macro_rules! some_or_none {
    () => {
        None
    };
    ($f:expr) => {
        Some($f)
    };
}

/// Whether a column is filled.
macro_rules! filled {
    () => {
        false
    };
    ($($t:tt)+) => {
        true
    };
}

macro_rules! registry {
    (
        blocks { $($v:ident $block:ident $qk:literal $module:ident [$($quant:ident)?]
                   [$($act:ident $dot:ident)?] [$($mmvq:ident $shape:ident $call:ident)?];)* }
        floats { $($fv:ident $bytes:literal $from:ident $to:ident;)* }
    ) => {
        $(
            impl CpuBlock<$qk> for $block {
                const TYPE: GgmlType = GgmlType::$v;
                const QUANTIZE: Option<fn(&[f32; $qk]) -> Self> =
                    some_or_none!($(crate::$module::$quant)?);
                #[inline(always)]
                fn dequantize(&self, y: &mut [f32; $qk]) {
                    crate::$module::dequantize(self, y)
                }
            }
            $(
                impl CpuDot<$qk> for $block {
                    type Act = $act;
                    #[inline(always)]
                    fn dot(&self, y: &$act) -> f32 {
                        crate::cpu_dot::$dot(self, y)
                    }
                }
                const _: () = assert!(<$act as ActBlock>::QK == $qk);
            )?
        )*

        /// Every row: the block rows, then the float rows.
        pub const CPU_TYPES: &[CpuType] = &[
            $(CpuType {
                ty: GgmlType::$v,
                block_elems: $qk,
                block_bytes: size_of::<$block>(),
                quantize: filled!($($quant)?),
                dot_act: some_or_none!($(<$act as ActBlock>::TYPE)?),
                q8_1_dot: filled!($($mmvq)?),
            },)*
            $(CpuType {
                ty: GgmlType::$fv,
                block_elems: 1,
                block_bytes: $bytes,
                quantize: true,
                dot_act: None,
                q8_1_dot: false,
            },)*
        ];

        /// Runs `v` on the row of `ty`; `None` for a type without one.
        pub(crate) fn visit<V: Visit>(ty: GgmlType, v: V) -> Option<V::Out> {
            Some(match ty {
                $(GgmlType::$v => v.block::<$block, $qk>(),)*
                $(GgmlType::$fv => v.float(FloatCodec {
                    dequantize: float::$from,
                    quantize: float::$to,
                }),)*
                _ => return None,
            })
        }

        /// Runs `v` on the row of `ty` if it has a CPU dot product.
        pub(crate) fn visit_dot<V: VisitDot>(ty: GgmlType, v: V) -> Option<V::Out> {
            Some(match ty {
                $($(GgmlType::$v => v.dot::<$block, $act, $qk>(),)?)*
                _ => return None,
            })
        }

        /// The q8_1 oracle's row sum for `ty` (lengths checked by the caller); `None` for a
        /// type without one.
        pub(crate) fn mmvq_row(ty: GgmlType, row: &[u8], act: &[BlockQ8_1]) -> Option<f32> {
            Some(match ty {
                $($(GgmlType::$v => crate::dispatch::$mmvq::<$block>(
                    row,
                    act,
                    crate::gpu_dot_oracle::shape::$shape,
                    crate::gpu_dot_oracle::$call,
                ),)?)*
                _ => return None,
            })
        }
    };
}

registry! {
    blocks {
        // variant block     qk  module  quantizer  CPU dot (act, fn)    q8_1 oracle (sum, shape, call)
        Q4_0   BlockQ4_0   32  q4_0    [quantize] [BlockQ8_0 q4_0]    [mmvq_small Q4_0 q4_0_call];
        Q4_1   BlockQ4_1   32  q4_1    [quantize] []                  [mmvq_small Q4_1 q4_1_call];
        Q5_0   BlockQ5_0   32  q5_0    [quantize] [BlockQ8_0 q5_0]    [mmvq_small Q5_0 q5_0_call];
        Q5_1   BlockQ5_1   32  q5_1    [quantize] []                  [mmvq_small Q5_1 q5_1_call];
        Q8_0   BlockQ8_0   32  q8_0    [quantize] [BlockQ8_0 q8_0]    [mmvq_small Q8_0 q8_0_call];
        Q8_1   BlockQ8_1   32  q8_1    []         []                  [];
        Iq4Nl  BlockIq4Nl  32  iq4_nl  [quantize] [BlockQ8_0 iq4_nl]  [mmvq_small IQ4_NL iq4_nl_call];
        Q2K    BlockQ2K    256 q2_k    [quantize] [BlockQ8K q2_k]     [mmvq_k Q2_K q2_k_call];
        Q3K    BlockQ3K    256 q3_k    [quantize] [BlockQ8K q3_k]     [mmvq_k Q3_K q3_k_call];
        Q4K    BlockQ4K    256 q4_k    [quantize] [BlockQ8K q4_k]     [mmvq_k Q4_K q4_k_call];
        Q5K    BlockQ5K    256 q5_k    [quantize] [BlockQ8K q5_k]     [mmvq_k Q5_K q5_k_call];
        Q6K    BlockQ6K    256 q6_k    [quantize] [BlockQ8K q6_k]     [mmvq_k Q6_K q6_k_call];
        Q8K    BlockQ8K    256 q8_k    []         []                  [];
        Iq4Xs  BlockIq4Xs  256 iq4_xs  [quantize] [BlockQ8K iq4_xs]   [mmvq_k IQ4_XS iq4_xs_call];
        Iq2Xxs BlockIq2Xxs 256 iq2_xxs []         [BlockQ8K iq2_xxs]  [];
        Iq2Xs  BlockIq2Xs  256 iq2_xs  []         [BlockQ8K iq2_xs]   [];
        Iq2S   BlockIq2S   256 iq2_s   [quantize] [BlockQ8K iq2_s]    [];
        Iq3Xxs BlockIq3Xxs 256 iq3_xxs [quantize] [BlockQ8K iq3_xxs]  [];
        Iq3S   BlockIq3S   256 iq3_s   [quantize] [BlockQ8K iq3_s]    [];
        Iq1S   BlockIq1S   256 iq1_s   []         [BlockQ8K iq1_s]    [];
        Iq1M   BlockIq1M   256 iq1_m   [quantize] [BlockQ8K iq1_m]    [];
    }
    floats {
        // variant bytes  decode       encode
        F32   4  f32_from_le  f32_to_le;
        F16   2  f16_from_le  f16_to_le;
        Bf16  2  bf16_from_le bf16_to_le;
    }
}

/// Row index of each ggml id (`u8::MAX`: no row); ids are below 64 (asserted).
const ROW_OF_ID: [u8; 64] = {
    let mut by_id = [u8::MAX; 64];
    let mut i = 0;
    while i < CPU_TYPES.len() {
        let id = CPU_TYPES[i].ty as usize;
        assert!(
            id < 64 && by_id[id] == u8::MAX,
            "ids below 64, one row per type"
        );
        by_id[id] = i as u8;
        i += 1;
    }
    by_id
};

/// The registry row of `ty`, if the CPU side handles it.
pub fn cpu_type(ty: GgmlType) -> Option<&'static CpuType> {
    CPU_TYPES.get(usize::from(*ROW_OF_ID.get(ty as usize)?))
}
