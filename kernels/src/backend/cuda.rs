//! [`Accelerator`] on a real GPU through `ingot-cuda`.

use super::{backend_err, Accelerator, KArg};
use crate::{KernelError, Result};
use ingot_cuda::{Arg, CudaError, DeviceBuffer, Gpu, JitReport, LaunchShape, Module};

/// A GPU with the kernels loaded (cubin or [`crate::PTX`]).
pub struct CudaAccelerator {
    gpu: Gpu,
    module: Module,
    name: String,
}

impl CudaAccelerator {
    /// Opens device `ordinal` and loads the kernels ([`crate::cubin::load_module`]: the device's
    /// embedded cubin, else the committed PTX through the JIT). Without a driver or device this
    /// is `Err(CudaError::NoDriver | NoDevice)`, which callers report as "no GPU"; a module the
    /// JIT rejects is `Err(CudaError::Jit)` with the JIT's error log.
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        let gpu = Gpu::new(ordinal)?;
        let module = crate::cubin::load_module(&gpu)?;
        let name = format!("cuda:{}", gpu.name()?);
        Ok(Self { gpu, module, name })
    }

    /// What the driver reported for the kernels' module (cubin or PTX, wall time, info log).
    pub fn jit_report(&self) -> &JitReport {
        self.module.jit_report()
    }

    /// The underlying device, e.g. for event timing.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }
}

fn err(e: CudaError) -> KernelError {
    backend_err("cuda", e)
}

impl Accelerator for CudaAccelerator {
    type Buf = DeviceBuffer;

    fn name(&self) -> &str {
        &self.name
    }

    fn alloc(&mut self, bytes: usize) -> Result<DeviceBuffer> {
        self.gpu.alloc(bytes).map_err(err)
    }

    fn buf_len(&self, buf: &DeviceBuffer) -> usize {
        buf.len()
    }

    fn address(&self, buf: &DeviceBuffer) -> u64 {
        self.gpu.device_address(buf)
    }

    fn upload(&mut self, buf: &DeviceBuffer, data: &[u8]) -> Result<()> {
        self.gpu.upload(buf, data).map_err(err)
    }

    fn download(&mut self, buf: &DeviceBuffer, out: &mut [u8]) -> Result<()> {
        self.gpu.download(buf, out).map_err(err)
    }

    fn launch(
        &mut self,
        kernel: &str,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: &[KArg<'_, DeviceBuffer>],
    ) -> Result<()> {
        let args: Vec<Arg<'_>> = args
            .iter()
            .map(|a| match *a {
                KArg::Buf(b) => Arg::Buf(b),
                KArg::U32(v) => Arg::U32(v),
                KArg::I32(v) => Arg::I32(v),
                KArg::F32(v) => Arg::F32(v),
                KArg::U64(v) => Arg::U64(v),
            })
            .collect();
        let shape = LaunchShape {
            grid,
            block,
            shared_bytes,
        };
        self.gpu
            .launch(&mut self.module, kernel, shape, &args)
            .map_err(err)?;
        self.gpu.synchronize().map_err(err)
    }
}
