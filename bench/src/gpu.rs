//! Timed kernel benches on a GPU.
//!
//! * Cold caches: each case allocates enough copies ("sets") of its buffers that cycling through
//!   them touches at least [`L2_FACTOR`] × the L2 size, so weights come from DRAM as in decode.
//! * No launch gaps in the timing: before each chunk of [`LAUNCHES_PER_CHUNK`] launches the
//!   stream gets a large device-to-device copy (about 0.3 ms on an H200), during which the host
//!   enqueues the whole chunk; the events around the chunk then see kernels back to back.
//! * The copy doubles as the bandwidth reference: [`GpuRig::copy_gbps`] times it alone.
//!
//! Kernels are launched through `ingot_cuda` on the legacy default stream of the primary
//! context; the copies and events here use cudarc's handle to that same stream, so everything
//! is ordered on one queue.

use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DriverError};
use ingot_kernels::Backend;

use crate::cases::{Case, Shape};
use crate::device::{Buf, Device};
use crate::error::{BenchError, Result};
use crate::setup;

/// Bytes of the filler / reference copy (each of source and destination).
pub const COPY_BYTES: usize = 512 << 20;
/// Launches timed between one pair of events; the host enqueues them while the filler copy
/// runs (a launch costs the host 2–5 µs, the copy lasts about 300 µs).
pub const LAUNCHES_PER_CHUNK: u64 = 32;
/// The rotation sets of a case together span at least this many L2 sizes.
pub const L2_FACTOR: usize = 2;
/// L2 size assumed when the driver does not report one (H100/H200: 50–60 MB).
pub const L2_FALLBACK_BYTES: usize = 60 << 20;
/// Most rotation sets per case: small kernels (a 2 KB norm) cannot fill the L2 with a sane
/// number of buffers; they are timed warm and reported as such.
pub const MAX_SETS: usize = 256;
/// At least this many sets, so no launch reads what the previous one just left in L2.
pub const MIN_SETS: usize = 2;

fn driver(call: &'static str) -> impl FnOnce(DriverError) -> BenchError {
    move |source| BenchError::Driver { call, source }
}

/// A GPU with the kernels loaded and the copy buffers allocated.
pub struct GpuRig {
    pub dev: Device,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    copy_src: CudaSlice<u8>,
    copy_dst: CudaSlice<u8>,
    /// L2 size in bytes as the driver reports it.
    pub l2_bytes: usize,
}

/// A case's buffers on the GPU, [`MIN_SETS`]..=[`MAX_SETS`] copies of them.
pub struct Prepared {
    sets: Vec<Vec<Buf>>,
    pub shape: Shape,
    /// Bytes of all sets together.
    pub working_set: usize,
    /// Bytes one launch must read plus write.
    pub required: usize,
}

impl Prepared {
    /// Whether cycling through the sets evicts the L2 (else the timing is L2-warm).
    pub fn cold(&self, l2_bytes: usize) -> bool {
        self.working_set >= L2_FACTOR * l2_bytes
    }
}

impl GpuRig {
    /// Opens GPU `ordinal`; `Err(BenchError::Cuda(NoDriver | NoDevice))` when there is none.
    pub fn open(ordinal: usize) -> Result<GpuRig> {
        // Opening through ingot-cuda first checks that libcuda loads: cudarc panics otherwise.
        let dev = Device::gpu(ordinal)?;
        let ctx = CudaContext::new(ordinal).map_err(driver("cuDevicePrimaryCtxRetain"))?;
        let stream = ctx.default_stream();
        let l2 = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
            .map_err(driver("cuDeviceGetAttribute"))?;
        let l2_bytes = usize::try_from(l2)
            .ok()
            .filter(|&b| b > 0)
            .unwrap_or(L2_FALLBACK_BYTES);
        let copy_src = stream
            .alloc_zeros::<u8>(COPY_BYTES)
            .map_err(driver("cuMemAlloc"))?;
        let copy_dst = stream
            .alloc_zeros::<u8>(COPY_BYTES)
            .map_err(driver("cuMemAlloc"))?;
        Ok(GpuRig {
            dev,
            ctx,
            stream,
            copy_src,
            copy_dst,
            l2_bytes,
        })
    }

    fn events(&self) -> Result<(cudarc::driver::CudaEvent, cudarc::driver::CudaEvent)> {
        let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
        Ok((
            self.ctx.new_event(flags).map_err(driver("cuEventCreate"))?,
            self.ctx.new_event(flags).map_err(driver("cuEventCreate"))?,
        ))
    }

    fn copy(&mut self) -> Result<()> {
        self.stream
            .memcpy_dtod(&self.copy_src, &mut self.copy_dst)
            .map_err(driver("cuMemcpyDtoDAsync"))
    }

    /// The card's copy bandwidth in GB/s (10^9 B/s), counting bytes read plus bytes written
    /// (as the kernel figures do): median over `reps` device-to-device copies of
    /// [`COPY_BYTES`].
    pub fn copy_gbps(&mut self, reps: usize) -> Result<f64> {
        let (start, end) = self.events()?;
        self.copy()?; // warm-up
        let mut ms = Vec::with_capacity(reps);
        for _ in 0..reps.max(1) {
            start
                .record(&self.stream)
                .map_err(driver("cuEventRecord"))?;
            self.copy()?;
            end.record(&self.stream).map_err(driver("cuEventRecord"))?;
            ms.push(f64::from(
                start
                    .elapsed_ms(&end)
                    .map_err(driver("cuEventElapsedTime"))?,
            ));
        }
        let t = median(&mut ms).unwrap_or(f64::NAN) * 1e-3;
        Ok(2.0 * COPY_BYTES as f64 / t / 1e9)
    }

    /// Builds the inputs of `case` at its real shape once and uploads as many copies as the
    /// L2 rotation needs.
    pub fn prepare(&mut self, case: &Case) -> Result<Prepared> {
        let shape = case.shape;
        let bad = |reason: &str| BenchError::Shape {
            case: case.id(),
            reason: reason.into(),
        };
        let (read, written) = case
            .required_bytes(shape)
            .ok_or_else(|| bad("required bytes not representable"))?;
        let set_bytes = case
            .buffer_bytes(shape)
            .ok_or_else(|| bad("buffer size not representable"))?;
        let n_sets = (L2_FACTOR * self.l2_bytes)
            .div_ceil(set_bytes.max(1))
            .clamp(MIN_SETS, MAX_SETS);
        let host = setup::host_buffers(case, shape)?;
        let mut sets = Vec::with_capacity(n_sets);
        for _ in 0..n_sets {
            sets.push(setup::upload(&mut self.dev, &host)?);
        }
        Ok(Prepared {
            sets,
            shape,
            working_set: n_sets * set_bytes,
            required: read + written,
        })
    }

    /// GPU time of `iters` launches of `case`, cycling through the sets of `p` (the sum of
    /// the event-timed chunks; the filler copies between chunks are not counted).
    pub fn time(&mut self, case: &Case, p: &Prepared, iters: u64) -> Result<Duration> {
        let (start, end) = self.events()?;
        let mut total_ms = 0.0f64;
        let (mut done, mut set) = (0u64, 0usize);
        while done < iters {
            let n = LAUNCHES_PER_CHUNK.min(iters - done);
            self.copy()?;
            start
                .record(&self.stream)
                .map_err(driver("cuEventRecord"))?;
            for _ in 0..n {
                (case.launch)(&mut self.dev, &p.sets[set], p.shape)?;
                set = (set + 1) % p.sets.len();
            }
            end.record(&self.stream).map_err(driver("cuEventRecord"))?;
            total_ms += f64::from(
                start
                    .elapsed_ms(&end)
                    .map_err(driver("cuEventElapsedTime"))?,
            );
            done += n;
        }
        Ok(Duration::from_secs_f64(total_ms * 1e-3))
    }

    /// The device name.
    pub fn name(&self) -> &str {
        self.dev.name()
    }
}

/// Median of `v` (mean of the middle two for even lengths); `None` when empty.
pub fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        0.5 * (v[m - 1] + v[m])
    })
}
