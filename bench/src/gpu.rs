//! Timed kernel benches on a GPU.
//!
//! * Cold caches: each case allocates enough copies ("sets") of its buffers that cycling through
//!   them touches at least [`L2_FACTOR`] × the L2 size, so weights come from DRAM as in decode.
//! * No launch gaps in the timing: before each chunk of [`LAUNCHES_PER_CHUNK`] launches the
//!   stream gets a large device-to-device copy (about 0.3 ms on an H200), during which the host
//!   enqueues the whole chunk; the events around the chunk then see kernels back to back.
//! * The copy doubles as the bandwidth reference: [`GpuRig::copy_gbps`] times it alone, in the
//!   same run; a cold case whose figure exceeds it is impossible, so the bench is invalid
//!   ([`crate::report::over_copy`]).
//!
//! Kernels, copies and events all go to the one stream of the `ingot_cuda::Gpu` the kernels run
//! on (a non-blocking stream: events recorded on any other stream would not be ordered with the
//! kernels and would time nothing).

use std::time::Duration;

use ingot_cuda::{DeviceBuffer, Event, Gpu};
use ingot_kernels::Accelerator;

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

/// A GPU with the kernels loaded and the copy buffers allocated.
pub struct GpuRig {
    pub dev: Device,
    copy_src: DeviceBuffer,
    copy_dst: DeviceBuffer,
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
        let dev = Device::gpu(ordinal)?;
        let gpu = dev.cuda().expect("Device::gpu opens a GPU");
        let l2_bytes = match gpu.l2_bytes()? {
            0 => L2_FALLBACK_BYTES,
            b => b,
        };
        let copy_src = gpu.alloc(COPY_BYTES)?;
        let copy_dst = gpu.alloc(COPY_BYTES)?;
        Ok(GpuRig {
            dev,
            copy_src,
            copy_dst,
            l2_bytes,
        })
    }

    fn gpu(&self) -> &Gpu {
        self.dev.cuda().expect("a GpuRig holds a GPU")
    }

    fn events(&self) -> Result<(Event, Event)> {
        Ok((self.gpu().event(true)?, self.gpu().event(true)?))
    }

    /// Milliseconds between `start` and `end` once `end` has completed.
    fn elapsed_ms(start: &Event, end: &Event) -> Result<f64> {
        end.synchronize()?;
        Ok(f64::from(start.elapsed_ms(end)?))
    }

    fn copy(&self) -> Result<()> {
        Ok(self.gpu().copy_device(&self.copy_src, &self.copy_dst)?)
    }

    /// The card's copy bandwidth in GB/s (10^9 B/s), counting bytes read plus bytes written
    /// (as the kernel figures do): median over `reps` device-to-device copies of
    /// [`COPY_BYTES`], on the kernels' stream.
    pub fn copy_gbps(&mut self, reps: usize) -> Result<f64> {
        let (start, end) = self.events()?;
        self.copy()?; // warm-up
        let mut ms = Vec::with_capacity(reps);
        for _ in 0..reps.max(1) {
            self.gpu().record(&start)?;
            self.copy()?;
            self.gpu().record(&end)?;
            ms.push(Self::elapsed_ms(&start, &end)?);
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
            sets.push(setup::upload(&mut self.dev, &(case.buffers)(shape), &host)?);
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
            self.gpu().record(&start)?;
            for _ in 0..n {
                (case.launch)(&mut self.dev, &p.sets[set], p.shape)?;
                set = (set + 1) % p.sets.len();
            }
            self.gpu().record(&end)?;
            total_ms += Self::elapsed_ms(&start, &end)?;
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
