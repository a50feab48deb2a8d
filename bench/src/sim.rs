//! Kernel benches without a GPU: each case runs once in the PTX simulator and reports its
//! counters (instructions, global traffic against what the kernel must move, sectors per
//! request). No time is measured: the simulator's speed says nothing about a GPU's.

use ptx_sim::LaunchStats;

use crate::cases::{Case, Shape};
use crate::device::Device;
use crate::error::{BenchError, Result};
use crate::setup;

/// Most buffer bytes one simulated launch may touch. The simulator covers about 5 MB of gemv
/// weights per second on one core, so every V2-Lite layer matrix (at most 12.6 MB, the dense
/// FFN) runs whole; larger ones (the 172 MB lm_head) run fewer rows, and their required bytes
/// are those of the rows that ran.
pub const SIM_MAX_BUFFER_BYTES: usize = 16 << 20;

/// Row counts the simulator reduces to are multiples of this (whole thread blocks of every
/// gemv, and enough rows to average out per-block effects).
pub const SIM_ROW_QUANTUM: usize = 32;

/// Counters of one simulated launch.
#[derive(Clone, Copy)]
pub struct SimReport {
    pub case: Case,
    /// The shape that ran (fewer rows than `case.shape` when reduced).
    pub shape: Shape,
    pub stats: LaunchStats,
    /// Bytes the kernel must read / write at `shape`.
    pub required_read: usize,
    pub required_written: usize,
}

impl SimReport {
    /// Whether fewer rows than the real shape ran.
    pub fn reduced(&self) -> bool {
        self.shape != self.case.shape
    }

    /// Global bytes read over bytes the kernel must read (1.0 = each byte once).
    pub fn read_ratio(&self) -> f64 {
        self.stats.global_bytes_read as f64 / self.required_read.max(1) as f64
    }

    /// 32-byte sectors per warp-level global request (4 = a coalesced 4-byte access per lane,
    /// 16 = 16 bytes per lane).
    pub fn sectors_per_request(&self) -> f64 {
        (self.stats.sectors_read + self.stats.sectors_written) as f64
            / self.stats.global_requests.max(1) as f64
    }

    /// Bytes requested over bytes of sectors touched (1.0 = every fetched sector fully used).
    pub fn sector_efficiency(&self) -> f64 {
        let requested = self.stats.global_bytes_read + self.stats.global_bytes_written;
        let fetched = 32 * (self.stats.sectors_read + self.stats.sectors_written);
        requested as f64 / fetched.max(1) as f64
    }
}

/// The shape the simulator runs for `case`: the real one, or as many rows (a multiple of
/// [`SIM_ROW_QUANTUM`]) as fit [`SIM_MAX_BUFFER_BYTES`].
pub fn sim_shape(case: &Case) -> Result<Shape> {
    let real = case.shape;
    let bad = |reason: &str| BenchError::Shape {
        case: case.id(),
        reason: reason.into(),
    };
    let total = case
        .buffer_bytes(real)
        .ok_or_else(|| bad("buffer size not representable"))?;
    if total <= SIM_MAX_BUFFER_BYTES || real.rows <= SIM_ROW_QUANTUM {
        return Ok(real);
    }
    let at = |rows| case.buffer_bytes(Shape { rows, ..real });
    let per_row = match (at(1), at(2)) {
        (Some(one), Some(two)) if two > one => two - one,
        _ => return Err(bad("buffer size does not grow with rows")),
    };
    // Bytes that do not grow with rows (the input vector) come off the budget first.
    let fixed = at(1).unwrap_or(0).saturating_sub(per_row);
    let rows = (SIM_MAX_BUFFER_BYTES.saturating_sub(fixed) / per_row / SIM_ROW_QUANTUM
        * SIM_ROW_QUANTUM)
        .clamp(SIM_ROW_QUANTUM, real.rows);
    Ok(Shape { rows, ..real })
}

/// Runs `case` once on the simulator `dev` at [`sim_shape`] and returns its counters.
pub fn run_case(dev: &mut Device, case: &Case) -> Result<SimReport> {
    run_case_at(dev, case, sim_shape(case)?)
}

/// Runs `case` once on the simulator `dev` at `shape` and returns its counters.
pub fn run_case_at(dev: &mut Device, case: &Case, shape: Shape) -> Result<SimReport> {
    let (required_read, required_written) =
        case.required_bytes(shape)
            .ok_or_else(|| BenchError::Shape {
                case: case.id(),
                reason: "required bytes not representable".into(),
            })?;
    let host = setup::host_buffers(case, shape)?;
    let bufs = setup::upload(dev, &(case.buffers)(shape), &host)?;
    let launched = (case.launch)(dev, &bufs, shape);
    let stats = dev.last_stats();
    for b in bufs {
        dev.free(b);
    }
    launched?;
    let stats = stats.ok_or_else(|| BenchError::Shape {
        case: case.id(),
        reason: "the device is not the simulator: no counters".into(),
    })?;
    Ok(SimReport {
        case: *case,
        shape,
        stats,
        required_read,
        required_written,
    })
}
