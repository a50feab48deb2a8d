//! deepseek2 (DeepSeek-V2 / V2-Lite / V3-style MoE with MLA) on the CPU.
//!
//! * [`ModelConfig`]: hyper-parameters from GGUF keys, derived YaRN/attention constants, tensor
//!   shape checks.
//! * [`Oracle`]: the f32/f64 reference decoder that other backends are judged against.
//! * [`CpuBackend`]: the fast decoder: weights stay quantized in the memory map, activations are
//!   quantized like llama.cpp's CPU backend does, rows run in parallel.
//! * [`mod@slice`]: a file with a subset or permutation of its routed experts (`ingot slice`).
//! * [`Sampler`]: llama.cpp-style sampling (greedy, temperature, top-k, top-p, min-p, repetition
//!   penalty).
//! * [`Generator`]: the generation loop `ingot run` and `ingot serve` share (prefill, sampling,
//!   stop conditions, streamed text).

pub mod cache_type;
pub mod config;
pub mod cpu;
mod decoder;
mod dequant;
pub mod error;
pub mod expert_cache;
pub mod generate;
pub mod math;
pub mod mtp;
pub mod oracle;
pub mod rope;
pub mod routing;
pub mod sampling;
pub mod slice;
pub mod speculative;
mod tensor_names;
pub mod tensors;
pub mod trace;

pub use cache_type::CacheType;
pub use config::{AttnLayout, GatingFunc, ModelConfig, DEFAULT_CTX};
pub use cpu::{CpuBackend, MlaForm};
pub use decoder::{argmax, check_span, check_step, forward_by_decode, Decoder, Forward, Rows};
pub use error::ModelError;
pub use generate::{Finish, GenerateOptions, Generator, Piece};
pub use oracle::{DecodeTrace, Oracle};
pub use rope::{RopeParams, RopeScalingType};
pub use sampling::{Sampler, SamplerConfig, SamplingParam, SamplingRangeError};
