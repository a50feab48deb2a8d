//! ggml quantization formats for ingot (block layouts, reference quantizers and dot products:
//! docs/quant-formats.md).
//!
//! * Dequantizers for F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K…Q6_K, IQ4_NL, IQ4_XS,
//!   the grid types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M (plus the activation
//!   formats Q8_1 and Q8_K): [`dequantize_row`], [`dequantize_tensor`].
//! * Reference quantizers, bit-identical to ggml's `quantize_row_*_ref` / `quantize_*` with no
//!   importance matrix (what `llama-quantize` runs without one), for every weight type whose ggml
//!   quantizer runs without one: [`quantize_row`], [`quantize_tensor`]. The grid types
//!   IQ3_XXS, IQ3_S, IQ2_S and IQ1_M share one code-book search (`codebook`).
//! * Activation quantizers: [`quantize_q8_1`] (the CUDA kernel's variant), [`quantize_q8_k`]
//!   and [`quantize_q8_0`] (ggml's CPU reference).
//! * Dot products: [`vec_dot_q8_1`], the oracle of the GPU `mul_mat_vec_q` kernels (one small
//!   function per type in [`gpu_dot_oracle`], readable side by side with `vecdotq.cuh`), and
//!   [`vec_dot_q8_k`] / [`vec_dot_q8_0`], the CPU backend's fast paths (the grid types dot
//!   against Q8_K there).
//!
//! Block layouts live in `ingot_abi::blocks`, shared with the device crate. Each format has its
//! own module with `dequantize`/`quantize` for a single block.

mod chunks;
mod codebook;
pub mod cpu_dot;
mod dispatch;
mod error;
pub mod float;
pub mod gpu_dot_oracle;
pub mod iq1_m;
pub mod iq1_s;
pub mod iq2_s;
pub mod iq2_xs;
pub mod iq2_xxs;
pub mod iq3_s;
pub mod iq3_xxs;
pub mod iq4_nl;
pub mod iq4_xs;
pub mod q2_k;
pub mod q3_k;
pub mod q4_0;
pub mod q4_1;
pub mod q4_k;
pub mod q5_0;
pub mod q5_1;
pub mod q5_k;
pub mod q6_k;
pub mod q8_0;
pub mod q8_1;
pub mod q8_k;
pub mod registry;
mod round;
mod search;
mod stand_in;
mod tensor;

pub use dispatch::{
    can_dequantize, can_quantize, can_vec_dot_q8_1, cpu_vec_dot_type, dequantize_row,
    quantize_q8_0, quantize_row, vec_dot_q8_0, vec_dot_q8_1, vec_dot_q8_k,
};
pub use error::QuantError;
pub use ingot_abi::blocks;
pub use q8_1::quantize_q8_1;
pub use q8_k::quantize_q8_k;
pub use round::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
pub use stand_in::{can_stand_in, quantize_or_stand_in, stand_in_row};
pub use tensor::{dequantize_tensor, quantize_tensor};

/// The IQ1/IQ2/IQ3 types, whose weights are indices into code-book grids
/// (`ingot_abi::iq_grids`): dequantized and dotted against Q8_K on the CPU. IQ2_XXS, IQ2_XS and
/// IQ1_S have no quantizer here (ggml's needs an importance matrix): synthetic files use
/// stand-in blocks ([`quantize_or_stand_in`]).
pub const GRID_TYPES: [ingot_gguf::GgmlType; 7] = [
    ingot_gguf::GgmlType::Iq2Xxs,
    ingot_gguf::GgmlType::Iq2Xs,
    ingot_gguf::GgmlType::Iq2S,
    ingot_gguf::GgmlType::Iq3Xxs,
    ingot_gguf::GgmlType::Iq3S,
    ingot_gguf::GgmlType::Iq1S,
    ingot_gguf::GgmlType::Iq1M,
];
