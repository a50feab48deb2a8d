//! The device a bench runs on: the PTX simulator (keeping each launch's counters) or a GPU
//! (launching without waiting, so a batch of launches can be timed between two events).
//!
//! Both are one type implementing [`ingot_kernels::Accelerator`], so a bench case's launch
//! function is a plain `fn` through the checked launchers of [`ingot_kernels::ops`], written
//! once for both devices.

use std::fmt;

use ingot_kernels::{Accelerator, KArg, KernelError, PTX};
use ptx_sim::{DevicePtr, LaunchConfig, LaunchStats};

use crate::error::Result;

/// The simulator with the committed PTX parsed.
pub struct SimDevice {
    sim: ptx_sim::Sim,
    module: &'static ptx_sim::Module,
    last: Option<LaunchStats>,
}

/// A GPU with the committed PTX JIT-loaded.
pub struct GpuDevice {
    pub(crate) gpu: ingot_cuda::Gpu,
    module: ingot_cuda::Module,
    name: String,
}

/// A bench device.
// One per process: the simulator variant's size costs nothing, and boxing it would only add an
// indirection to every launch.
#[allow(clippy::large_enum_variant)]
pub enum Device {
    Sim(SimDevice),
    Gpu(GpuDevice),
}

/// A buffer of either device.
pub enum Buf {
    Sim { ptr: DevicePtr, len: usize },
    Gpu(ingot_cuda::DeviceBuffer),
}

/// A buffer of one device was handed to the other.
#[derive(Debug)]
struct WrongDevice(&'static str);

impl fmt::Display for WrongDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a buffer of another device was passed to the {}", self.0)
    }
}

impl std::error::Error for WrongDevice {}

fn backend_err(
    backend: &'static str,
    e: impl std::error::Error + Send + Sync + 'static,
) -> KernelError {
    KernelError::Backend {
        backend,
        source: Box::new(e),
    }
}

impl Device {
    /// The PTX simulator.
    pub fn sim() -> Result<Device> {
        Ok(Device::Sim(SimDevice {
            sim: ptx_sim::Sim::new(),
            module: ingot_kernels::backend::sim::module()?,
            last: None,
        }))
    }

    /// The PTX simulator running every launch under `schedule`: `Schedule::Random` interleaves
    /// blocks on one host thread in an order fixed by its seed, so the instructions a block
    /// spends waiting for another are the same every run (under the default in-order schedule
    /// blocks run on the host's cores and those depend on its timing).
    pub fn sim_with(schedule: ptx_sim::Schedule) -> Result<Device> {
        let mut sim = ptx_sim::Sim::new();
        sim.set_schedule(schedule);
        Ok(Device::Sim(SimDevice {
            sim,
            module: ingot_kernels::backend::sim::module()?,
            last: None,
        }))
    }

    /// GPU `ordinal`; [`ingot_cuda::CudaError::NoDriver`] / `NoDevice` when there is none.
    pub fn gpu(ordinal: usize) -> Result<Device, ingot_cuda::CudaError> {
        let gpu = ingot_cuda::Gpu::new(ordinal)?;
        let module = gpu.load_ptx(PTX)?;
        let name = gpu.name()?;
        Ok(Device::Gpu(GpuDevice { gpu, module, name }))
    }

    /// The GPU, if this is one (its stream is the one every launch goes to).
    pub fn cuda(&self) -> Option<&ingot_cuda::Gpu> {
        match self {
            Device::Sim(_) => None,
            Device::Gpu(g) => Some(&g.gpu),
        }
    }

    /// The simulator's counters of the last launch, if this is the simulator and a launch ran.
    pub fn last_stats(&self) -> Option<LaunchStats> {
        match self {
            Device::Sim(s) => s.last,
            Device::Gpu(_) => None,
        }
    }

    /// Frees a simulator buffer now (a GPU buffer is freed when dropped).
    pub fn free(&mut self, buf: Buf) {
        if let (Device::Sim(s), Buf::Sim { ptr, .. }) = (self, &buf) {
            s.sim.free(*ptr);
        }
    }
}

impl Accelerator for Device {
    type Buf = Buf;

    fn name(&self) -> &str {
        match self {
            Device::Sim(_) => "ptx-sim",
            Device::Gpu(g) => &g.name,
        }
    }

    fn alloc(&mut self, bytes: usize) -> ingot_kernels::Result<Buf> {
        match self {
            Device::Sim(s) => {
                let ptr = s.sim.alloc(bytes).map_err(|e| backend_err("ptx-sim", e))?;
                Ok(Buf::Sim { ptr, len: bytes })
            }
            Device::Gpu(g) => g
                .gpu
                .alloc(bytes)
                .map(Buf::Gpu)
                .map_err(|e| backend_err("cuda", e)),
        }
    }

    fn buf_len(&self, buf: &Buf) -> usize {
        match buf {
            Buf::Sim { len, .. } => *len,
            Buf::Gpu(b) => b.len(),
        }
    }

    fn address(&self, buf: &Buf) -> u64 {
        match (self, buf) {
            (_, Buf::Sim { ptr, .. }) => ptr.0,
            (Device::Gpu(g), Buf::Gpu(b)) => g.gpu.device_address(b),
            // A GPU buffer handed to the simulator: no address it could read.
            (Device::Sim(_), Buf::Gpu(_)) => 0,
        }
    }

    fn upload(&mut self, buf: &Buf, data: &[u8]) -> ingot_kernels::Result<()> {
        match (self, buf) {
            (Device::Sim(s), Buf::Sim { ptr, len }) => {
                if data.len() > *len {
                    return Err(KernelError::BufferTooSmall {
                        kernel: "upload",
                        param: "buf",
                        have: *len,
                        need: data.len(),
                    });
                }
                s.sim
                    .write(*ptr, data)
                    .map_err(|e| backend_err("ptx-sim", e))
            }
            (Device::Gpu(g), Buf::Gpu(b)) => {
                g.gpu.upload(b, data).map_err(|e| backend_err("cuda", e))
            }
            (d, _) => Err(wrong(d)),
        }
    }

    fn download(&mut self, buf: &Buf, out: &mut [u8]) -> ingot_kernels::Result<()> {
        match (self, buf) {
            (Device::Sim(s), Buf::Sim { ptr, len }) => {
                if out.len() > *len {
                    return Err(KernelError::BufferTooSmall {
                        kernel: "download",
                        param: "buf",
                        have: *len,
                        need: out.len(),
                    });
                }
                s.sim.read(*ptr, out).map_err(|e| backend_err("ptx-sim", e))
            }
            (Device::Gpu(g), Buf::Gpu(b)) => {
                g.gpu.download(b, out).map_err(|e| backend_err("cuda", e))
            }
            (d, _) => Err(wrong(d)),
        }
    }

    /// On the simulator: runs to completion and keeps the counters. On a GPU: only enqueues;
    /// the caller synchronizes (the bench times batches between events).
    fn launch(
        &mut self,
        kernel: &str,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: &[KArg<'_, Buf>],
    ) -> ingot_kernels::Result<()> {
        match self {
            Device::Sim(s) => {
                let mut sim_args = Vec::with_capacity(args.len());
                for a in args {
                    sim_args.push(match *a {
                        KArg::Buf(Buf::Sim { ptr, .. }) => ptx_sim::Arg::Ptr(*ptr),
                        KArg::Buf(Buf::Gpu(_)) => {
                            return Err(backend_err("ptx-sim", WrongDevice("simulator")))
                        }
                        KArg::U32(v) => ptx_sim::Arg::U32(v),
                        KArg::I32(v) => ptx_sim::Arg::I32(v),
                        KArg::F32(v) => ptx_sim::Arg::F32(v),
                        KArg::U64(v) => ptx_sim::Arg::U64(v),
                    });
                }
                let config = LaunchConfig {
                    grid,
                    block,
                    shared_bytes,
                };
                s.last = None;
                let stats = s
                    .sim
                    .launch(s.module, kernel, config, &sim_args)
                    .map_err(|e| backend_err("ptx-sim", e))?;
                s.last = Some(stats);
                Ok(())
            }
            Device::Gpu(g) => {
                let mut cuda_args = Vec::with_capacity(args.len());
                for a in args {
                    cuda_args.push(match *a {
                        KArg::Buf(Buf::Gpu(b)) => ingot_cuda::Arg::Buf(b),
                        KArg::Buf(Buf::Sim { .. }) => {
                            return Err(backend_err("cuda", WrongDevice("GPU")))
                        }
                        KArg::U32(v) => ingot_cuda::Arg::U32(v),
                        KArg::I32(v) => ingot_cuda::Arg::I32(v),
                        KArg::F32(v) => ingot_cuda::Arg::F32(v),
                        KArg::U64(v) => ingot_cuda::Arg::U64(v),
                    });
                }
                let shape = ingot_cuda::LaunchShape {
                    grid,
                    block,
                    shared_bytes,
                };
                g.gpu
                    .launch(&mut g.module, kernel, shape, &cuda_args)
                    .map_err(|e| backend_err("cuda", e))
            }
        }
    }
}

fn wrong(d: &Device) -> KernelError {
    match d {
        Device::Sim(_) => backend_err("ptx-sim", WrongDevice("simulator")),
        Device::Gpu(_) => backend_err("cuda", WrongDevice("GPU")),
    }
}
