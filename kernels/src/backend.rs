//! The [`Backend`] trait: what a kernel test or the decoder needs from a device.

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
pub trait Backend {
    /// Device buffer handle.
    type Buf;
    /// Human-readable backend name, e.g. `"cuda:NVIDIA H200"` or `"ptx-sim"`.
    fn name(&self) -> &str;
    /// Allocates `bytes` bytes (16-byte aligned or better).
    fn alloc(&mut self, bytes: usize) -> Result<Self::Buf>;
    /// Size of `buf` in bytes.
    fn buf_len(&self, buf: &Self::Buf) -> usize;
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
