//! The [`Accelerator`] trait: what a kernel test or a bench needs from a device that runs the
//! committed PTX, either the PTX simulator ([`sim`]) or a CUDA device ([`cuda`]).
//!
//! # Which results must be bit-identical between ptx-sim and a GPU
//!
//! ptx-sim computes integer arithmetic exactly and every `.rn` f32 operation with the host's IEEE
//! operations, as the GPU does; the committed PTX has only explicitly rounded f32 arithmetic, which
//! ptxas may not contract or reorder, and every reduction has a fixed order.
//! So a kernel built only from those is **bit-identical** on both:
//! `embed_*`, `rmsnorm_*`, `quantize_q8_1`, every `gemv*` (plain, `gemv2`, grouped, `_out`,
//! `gemv_f32`, and `gemv_argmax`, whose one atomic is an integer max of a packed key),
//! `moe_down_*`, `argmax_step`, and `mmq_*`, whose tensor-core `mma` is the
//! integer one (`s8·s8 → s32`, exact: its sums stay inside `i32`).
//!
//! **Not bit-identical**, compared with a tolerance, because the GPU's result is
//! implementation-defined where the simulator's is exact:
//! - `ex2.approx` (softmax / sigmoid / SiLU): `flash_latent`, `attn_merge*`, `moe_gate_up_*`,
//!   `moe_route` and `moe_router_f32` (the selected expert ids agree except at near-ties of the
//!   router scores; the fused kernel's logits are `gemv_f32`'s, bit-identical);
//! - `sin.approx` / `cos.approx` (rotary embedding): `rope_kv*`;
//! - `mma.sync` (tensor-core accumulation order and intermediate precision are unspecified)
//!   plus `ex2.approx`: `flash_latent_mma`.
//!
//! Where such a kernel quantizes its result (q8_1, f16), an approximation one ulp off can move
//! a value across a rounding boundary, so the quantized output may differ by one level.
//!
//! On a GPU, `sim_matches_gpu` compares bytes for the gemv types, `mmq_q4k`, `quantize_q8_1` and
//! `rmsnorm_q8_1_f32`; `embed_*`, `quantize_q8_1` and the argmax kernels equal a CPU oracle on
//! both. `moe_down_*`, `rmsnorm_f32`, `gemv_f32`, `gemv2_*` and the argmax logits have no direct
//! sim-vs-GPU byte comparison yet: on the GPU they are held to their oracle tolerance only.

pub mod cuda;
#[cfg(feature = "sim")]
pub mod sim;

use crate::{KernelError, ParamKind, Result};

/// A kernel argument; buffers are the backend's own handles.
pub enum KArg<'a, B> {
    Buf(&'a B),
    U32(u32),
    I32(i32),
    F32(f32),
    U64(u64),
}

impl<B> KArg<'_, B> {
    /// The PTX parameter kind this argument fills.
    pub fn kind(&self) -> ParamKind {
        match self {
            KArg::Buf(_) => ParamKind::Ptr,
            KArg::U32(_) => ParamKind::U32,
            KArg::I32(_) => ParamKind::I32,
            KArg::F32(_) => ParamKind::F32,
            KArg::U64(_) => ParamKind::U64,
        }
    }
}

/// A device that can hold buffers and run the kernels of [`crate::PTX`].
///
/// `launch` takes raw launch dimensions; the checked entry points are in [`crate::ops`], which
/// validate shapes, buffer sizes and argument kinds first.
pub trait Accelerator {
    /// Device buffer handle.
    type Buf;
    /// Human-readable backend name, e.g. `"cuda:NVIDIA H200"` or `"ptx-sim"`.
    fn name(&self) -> &str;
    /// Allocates `bytes` bytes (16-byte aligned or better).
    fn alloc(&mut self, bytes: usize) -> Result<Self::Buf>;
    /// Size of `buf` in bytes.
    fn buf_len(&self, buf: &Self::Buf) -> usize;
    /// The device address of `buf`'s first byte as a kernel sees it (what an expert table of the
    /// MoE kernels holds: `crate::ops::moe::expert_table`).
    fn address(&self, buf: &Self::Buf) -> u64;
    /// Copies `data` to the start of `buf`; `data.len()` must not exceed the buffer.
    fn upload(&mut self, buf: &Self::Buf, data: &[u8]) -> Result<()>;
    /// Copies the first `out.len()` bytes of `buf` into `out`.
    fn download(&mut self, buf: &Self::Buf, out: &mut [u8]) -> Result<()>;
    /// Launches `kernel` and waits for it.
    fn launch(
        &mut self,
        kernel: &str,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: &[KArg<'_, Self::Buf>],
    ) -> Result<()>;
}

/// Boxes a backend error with the backend's name.
pub(crate) fn backend_err(
    backend: &'static str,
    e: impl std::error::Error + Send + Sync + 'static,
) -> KernelError {
    KernelError::Backend {
        backend,
        source: Box::new(e),
    }
}
