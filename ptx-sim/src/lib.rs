//! `ptx-sim`: a CPU interpreter for the PTX that rustc's NVPTX backend (plus the project's inline
//! asm) emits, so kernels are tested bit for bit and profiled (instruction mix, coalescing, bank
//! conflicts) without a GPU, and out-of-bounds accesses, barrier misuse and warp-sync misuse are
//! reported as compute-sanitizer would, as [`SimError::Fault`] values naming the kernel, block,
//! thread, PTX line and address.
//!
//! The manual is `docs/ptx-sim.md`; the invariants a caller relies on:
//! - [`Module::parse`] loads any PTX `ptx-front` accepts; a launch of a kernel holding an
//!   instruction the simulator lacks fails with [`SimError::Unsupported`] naming its line
//!   (docs/ptx-sim.md#front-end).
//! - The in-order [`Schedule`] (the default) gives the same results and counters on every run; a
//!   random one replays bit for bit from its seed, with weak global memory, and
//!   [`Sim::set_race_check`] fails a launch whose result depends on the schedule
//!   (docs/ptx-sim.md#execution-model).
//! - Blocks that wait on each other inside a launch make progress in both schedules when they
//!   wait only on blocks that claimed a lower dynamic ticket (`atom.global.add` at the start);
//!   a wait on a block that may not have started is a [`FaultKind::StepLimit`] fault, never a
//!   hang. Spin iterations are counted in [`LaunchStats`], so a spinning kernel's counters depend
//!   on host timing (docs/ptx-sim.md#blocks-that-wait-on-each-other).
//! - Every access outside an allocation, misaligned, or into freed memory faults; registers read as
//!   zero until written; shared memory starts as `0xFF` bytes in every block (NaN as f16 or f32),
//!   as undefined as a GPU's (docs/ptx-sim.md#memory).
//! - [`LaunchStats`] counters are exact and do not depend on the fast paths
//!   (docs/ptx-sim.md#counters).
//! - f32 `.rn` arithmetic is bit-exact with the GPU; `mma.sync` and the `.approx` functions are
//!   correctly rounded where the hardware is not, so compare those with the tolerances in
//!   docs/ptx-sim.md#arithmetic-and-approximate-math.

mod alu;
mod arith;
mod cfg;
mod coalesce;
mod error;
mod exec;
mod fast_lanes;
mod interleave;
mod ir;
mod lanes;
mod lower;
mod mem_ops;
mod memory;
mod module_vars;
mod numeric;
mod slots;
mod state;
mod stats;
mod types;
mod uninit;
mod warp_ops;
mod weak;

use rayon::prelude::*;

pub use error::{Fault, FaultKind, SimError};
pub use interleave::Schedule;
pub use stats::{ClassCounts, LaunchStats};

/// A loaded PTX module: its kernels lowered for execution, and its module-scope variables.
pub struct Module {
    kernels: Kernels,
    vars: module_vars::ModuleVars,
}

/// A module's kernels: all lowered at load, or each at its first use.
enum Kernels {
    Eager(Vec<ir::Kernel>),
    Lazy(lower::LazyKernels),
}

impl Module {
    /// Parses and lowers PTX text. Malformed PTX is a [`SimError::Parse`] naming the line.
    pub fn parse(ptx: &str) -> Result<Module, SimError> {
        let (kernels, vars) = lower::lower_module(ptx)?;
        Ok(Module {
            kernels: Kernels::Eager(kernels),
            vars,
        })
    }

    /// As [`Module::parse`], but each kernel is parsed and lowered at its first launch (or
    /// [`Module::unsupported`] query), so a module of hundreds of kernels loads in the time of its
    /// header and the kernels a program runs. The price: an error in a kernel's text surfaces at
    /// its first use, not here. For text in the shape compilers emit (module-scope directives,
    /// then `.entry` functions only); other text is parsed whole, as by [`Module::parse`].
    pub fn parse_lazy(ptx: &str) -> Result<Module, SimError> {
        match lower::LazyKernels::new(ptx)? {
            Some((kernels, vars)) => Ok(Module {
                kernels: Kernels::Lazy(kernels),
                vars,
            }),
            None => Module::parse(ptx),
        }
    }

    /// Names of the `.entry` kernels, in source order.
    pub fn kernels(&self) -> Vec<&str> {
        match &self.kernels {
            Kernels::Eager(k) => k.iter().map(|k| k.name.as_str()).collect(),
            Kernels::Lazy(k) => k.names().collect(),
        }
    }

    /// Instructions of `kernel` the simulator cannot execute, as `(PTX line, text)` (a lazily
    /// loaded kernel whose text does not parse: its error, as the one entry).
    pub fn unsupported(&self, kernel: &str) -> Vec<(usize, String)> {
        match self.kernel(kernel) {
            Some(Ok(k)) => k
                .unsupported
                .iter()
                .map(|(l, t)| (*l as usize, t.clone()))
                .collect(),
            Some(Err(e)) => vec![(0, e.to_string())],
            None => Vec::new(),
        }
    }

    fn kernel(&self, name: &str) -> Option<Result<&ir::Kernel, SimError>> {
        match &self.kernels {
            Kernels::Eager(k) => k.iter().find(|k| k.name == name).map(Ok),
            Kernels::Lazy(k) => k.get(name, &self.vars),
        }
    }
}

/// A device address returned by [`Sim::alloc`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevicePtr(pub u64);

impl DevicePtr {
    /// The address `bytes` further on (for passing sub-buffers to kernels).
    pub fn offset(self, bytes: u64) -> DevicePtr {
        DevicePtr(self.0.wrapping_add(bytes))
    }
}

/// Grid and block dimensions and dynamic shared memory, like `cudaLaunchKernel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Bytes of dynamic (`.extern .shared`) shared memory per block.
    pub shared_bytes: u32,
}

/// One kernel argument; it must match the size of the corresponding `.param`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    U32(u32),
    I32(i32),
    U64(u64),
    F32(f32),
    Ptr(DevicePtr),
}

impl Arg {
    fn bytes(&self) -> Vec<u8> {
        match *self {
            Arg::U32(v) => v.to_le_bytes().to_vec(),
            Arg::I32(v) => v.to_le_bytes().to_vec(),
            Arg::F32(v) => v.to_le_bytes().to_vec(),
            Arg::U64(v) => v.to_le_bytes().to_vec(),
            Arg::Ptr(p) => p.0.to_le_bytes().to_vec(),
        }
    }
}

/// Default per-block step limit: warp instructions one block may execute before it is declared
/// hung.
pub const DEFAULT_STEP_LIMIT: u64 = 200_000_000;
/// Default cap on live simulated global memory.
pub const DEFAULT_MEMORY_LIMIT: u64 = 4 << 30;
/// Most threads per block (the CUDA limit).
const MAX_THREADS_PER_BLOCK: u32 = 1024;

/// The simulated device: global memory plus launch settings.
pub struct Sim {
    mem: memory::GlobalMem,
    step_limit: u64,
    schedule: Schedule,
    /// Random schedules each launch is rerun under by the race check (0: off).
    race_seeds: u32,
    /// Launches of more warp instructions than this (in order) are not rerun by the race check.
    race_limit: u64,
    race_counts: RaceCheckCounts,
    /// Launches so far: with the seed's index, what the race check's seeds are made from.
    launches: u64,
}

/// How many launches the race check ([`Sim::set_race_check`]) has rerun, and how many it ran in
/// order only because they exceeded [`Sim::set_race_check_limit`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaceCheckCounts {
    pub rerun: u64,
    pub over_limit: u64,
}

/// Environment variable [`Sim::new`] takes its race-check seed count from (0 when unset).
pub const RACE_SEEDS_ENV: &str = "INGOT_SIM_RACE_SEEDS";

/// The seed count [`RACE_SEEDS_ENV`] names, `None` when it is unset.
pub fn race_seeds_from_env() -> Result<Option<u32>, SimError> {
    match std::env::var(RACE_SEEDS_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Ok(v) => v.trim().parse().map(Some).map_err(|_| SimError::BadEnv {
            var: RACE_SEEDS_ENV,
            value: v,
            expected: "a count of seeds (a decimal u32)",
        }),
        Err(std::env::VarError::NotUnicode(v)) => Err(SimError::BadEnv {
            var: RACE_SEEDS_ENV,
            value: v.to_string_lossy().into_owned(),
            expected: "a count of seeds (a decimal u32)",
        }),
    }
}

impl Default for Sim {
    fn default() -> Self {
        Sim::new()
    }
}

impl Sim {
    /// A simulator with no allocations, the default limits, and the schedule that
    /// [`Schedule::ENV`] (`INGOT_SIM_SCHEDULE`) names, [`Schedule::InOrder`] when unset.
    ///
    /// # Panics
    /// If `INGOT_SIM_SCHEDULE` is set to something [`Schedule::parse`] rejects: a by-hand
    /// setting that silently fell back to the in-order schedule would test nothing.
    pub fn new() -> Sim {
        let schedule = Schedule::from_env().unwrap_or_else(|e| panic!("{}: {e}", Schedule::ENV));
        let race_seeds = race_seeds_from_env()
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or(0);
        Sim {
            mem: memory::GlobalMem::new(DEFAULT_MEMORY_LIMIT),
            step_limit: DEFAULT_STEP_LIMIT,
            schedule,
            race_seeds,
            race_limit: u64::MAX,
            race_counts: RaceCheckCounts::default(),
            launches: 0,
        }
    }

    /// The race check: with `seeds > 0`, every launch under [`Schedule::InOrder`] is run again
    /// under `seeds` random schedules, each from the memory the launch started from, and fails
    /// with [`SimError::ScheduleDependent`] (or the rerun's [`SimError::Fault`]) unless each rerun
    /// leaves every allocation bit-for-bit as the in-order run did. The in-order run's memory and
    /// counters are what the launch leaves and returns. Seeds are made from the launch's ordinal
    /// in this `Sim` and the rerun's index (1-based): `launch << 20 | index`.
    ///
    /// To restore a launch's starting memory only the allocations its pointer arguments point
    /// into (and module variables) are saved; a launch that writes any other allocation (through
    /// a pointer read from memory) fails the check with [`SimError::ScheduleDependent`].
    /// Launches under a random schedule are not rechecked.
    pub fn set_race_check(&mut self, seeds: u32) {
        self.race_seeds = seeds;
    }

    /// Limits the race check to launches of at most `warp_instructions` (counted in order):
    /// larger launches run in order only, and are counted in [`Sim::race_check_counts`]. A random
    /// schedule runs a launch on one host thread; the limit bounds what that costs.
    pub fn set_race_check_limit(&mut self, warp_instructions: u64) {
        self.race_limit = warp_instructions;
    }

    /// Launches the race check has rerun, and those over its limit.
    pub fn race_check_counts(&self) -> RaceCheckCounts {
        self.race_counts
    }

    /// Sets how later launches order their blocks and warps (see "Execution model").
    pub fn set_schedule(&mut self, schedule: Schedule) {
        self.schedule = schedule;
    }

    /// The schedule launches run under.
    pub fn schedule(&self) -> Schedule {
        self.schedule
    }

    /// Sets how many warp instructions one block may execute before a launch fails with
    /// [`FaultKind::StepLimit`].
    pub fn set_step_limit(&mut self, warp_instructions_per_block: u64) {
        self.step_limit = warp_instructions_per_block;
    }

    /// Sets the cap on live global memory (allocations beyond it fail with
    /// [`SimError::OutOfMemory`]).
    pub fn set_memory_limit(&mut self, bytes: u64) {
        self.mem.limit = bytes;
    }

    /// Allocates `bytes` of zeroed global memory.
    pub fn alloc(&mut self, bytes: usize) -> Result<DevicePtr, SimError> {
        self.mem.alloc(bytes).map(DevicePtr)
    }

    /// Allocates `bytes` of zeroed host-mapped memory: host memory the device reads over the host
    /// link (`cuMemHostAlloc` with `CU_MEMHOSTALLOC_DEVICEMAP`). Kernels access it as global
    /// memory; its traffic is counted in
    /// [`LaunchStats::host_bytes_read`]/[`LaunchStats::host_bytes_written`], not in the global
    /// (DRAM) counters.
    pub fn alloc_host_mapped(&mut self, bytes: usize) -> Result<DevicePtr, SimError> {
        self.mem.alloc_host_mapped(bytes).map(DevicePtr)
    }

    /// Frees an allocation; later accesses to it fault.
    pub fn free(&mut self, p: DevicePtr) {
        self.mem.free(p.0)
    }

    /// Copies host bytes to device memory at `p`.
    pub fn write(&mut self, p: DevicePtr, data: &[u8]) -> Result<(), SimError> {
        self.mem.write_bytes(p.0, data)
    }

    /// Whether a kernel has read (loaded from, or atomically updated) the allocation holding `p`
    /// since the last [`Sim::clear_read_marks`]; host reads and writes ([`Sim::read`],
    /// [`Sim::write`]) do not count. Tells the buffers a launch reads from those it only writes.
    pub fn was_read(&self, p: DevicePtr) -> bool {
        self.mem.was_read(p.0)
    }

    /// Forgets which allocations kernels have read (see [`Sim::was_read`]).
    pub fn clear_read_marks(&self) {
        self.mem.clear_read()
    }

    /// Whether a kernel has written (stored to, or atomically updated) the allocation holding `p`
    /// since the last [`Sim::clear_write_marks`]; host writes do not count.
    pub fn was_written(&self, p: DevicePtr) -> bool {
        self.mem.was_written(p.0)
    }

    /// Base addresses of the allocations (and module variables) kernels have written since the
    /// last [`Sim::clear_write_marks`], in address order.
    pub fn written_allocations(&self) -> Vec<DevicePtr> {
        self.mem.written().into_iter().map(DevicePtr).collect()
    }

    /// Forgets which allocations kernels have written (see [`Sim::was_written`]).
    pub fn clear_write_marks(&self) {
        self.mem.clear_written()
    }

    /// Copies device memory at `p` to `out`.
    pub fn read(&self, p: DevicePtr, out: &mut [u8]) -> Result<(), SimError> {
        self.mem.read_bytes(p.0, out)
    }

    /// The address and size of module `m`'s `.global`/`.const` variable `name` in this simulator
    /// (like `cudaGetSymbolAddress`), creating and initialising the module's variables if no launch
    /// has yet. `None` if the module declares no such variable with storage.
    pub fn module_variable(
        &mut self,
        m: &Module,
        name: &str,
    ) -> Result<Option<(DevicePtr, u64)>, SimError> {
        self.mem.ensure_module_vars(&m.vars)?;
        Ok(m.vars
            .vars
            .iter()
            .find(|v| v.name == name)
            .map(|v| (DevicePtr(v.address()), v.size)))
    }

    /// Runs `kernel` to completion. Blocks run in parallel; the reported fault (if several blocks
    /// fault) is the one of the lowest linear block index among the blocks that ran.
    pub fn launch(
        &mut self,
        m: &Module,
        kernel: &str,
        cfg: LaunchConfig,
        args: &[Arg],
    ) -> Result<LaunchStats, SimError> {
        self.launch_some(m, kernel, cfg, args, None)
    }

    /// Runs only the blocks whose linear indices are in `blocks` (each below the grid's block
    /// count) of the launch `cfg`: they see the full grid's `%ctaid`/`%nctaid`, and the counters
    /// are theirs alone. For estimating a large launch's counters from a sample of its blocks;
    /// blocks that depend on other blocks' results (none of ingot's kernels do) would see memory
    /// the skipped blocks never wrote.
    pub fn launch_blocks(
        &mut self,
        m: &Module,
        kernel: &str,
        cfg: LaunchConfig,
        args: &[Arg],
        blocks: &[u64],
    ) -> Result<LaunchStats, SimError> {
        self.launch_some(m, kernel, cfg, args, Some(blocks))
    }

    fn launch_some(
        &mut self,
        m: &Module,
        kernel: &str,
        cfg: LaunchConfig,
        args: &[Arg],
        only: Option<&[u64]>,
    ) -> Result<LaunchStats, SimError> {
        let k = m
            .kernel(kernel)
            .ok_or_else(|| SimError::UnknownKernel(kernel.to_string()))??;
        if let Some((line, text)) = k.unsupported.first() {
            return Err(SimError::Unsupported {
                kernel: k.name.clone(),
                line: *line as usize,
                text: text.clone(),
            });
        }
        let bad = |detail: String| SimError::BadLaunch {
            kernel: k.name.clone(),
            detail,
        };
        let threads = u64::from(cfg.block[0]) * u64::from(cfg.block[1]) * u64::from(cfg.block[2]);
        if threads == 0 || threads > u64::from(MAX_THREADS_PER_BLOCK) {
            return Err(bad(format!(
                "block {:?} has {threads} threads (1..=1024)",
                cfg.block
            )));
        }
        if cfg.grid.contains(&0) {
            return Err(bad(format!("grid {:?} has a zero dimension", cfg.grid)));
        }
        if u64::from(k.static_shared) + u64::from(cfg.shared_bytes) > u64::from(lower::MAX_SHARED) {
            return Err(bad(format!(
                "{} bytes of static + {} bytes of dynamic shared memory exceed {}",
                k.static_shared,
                cfg.shared_bytes,
                lower::MAX_SHARED
            )));
        }
        if args.len() != k.params.len() {
            return Err(SimError::BadArgs {
                kernel: k.name.clone(),
                detail: format!(
                    "{} arguments given, kernel declares {}",
                    args.len(),
                    k.params.len()
                ),
            });
        }
        self.mem.ensure_module_vars(&m.vars)?;
        let mut params = vec![0u8; k.param_bytes as usize];
        for (a, p) in args.iter().zip(&k.params) {
            let b = a.bytes();
            if b.len() != p.size as usize {
                return Err(SimError::BadArgs {
                    kernel: k.name.clone(),
                    detail: format!(
                        "parameter `{}` is {} bytes, argument {a:?} is {}",
                        p.name,
                        p.size,
                        b.len()
                    ),
                });
            }
            params[p.offset as usize..p.offset as usize + b.len()].copy_from_slice(&b);
        }
        if self.mem.any_host_mapped {
            self.mem.reset_fetched();
        }
        self.mem.begin_launch();
        let ctx = state::LaunchCtx {
            kernel: k,
            mem: &self.mem,
            params: &params,
            grid: cfg.grid,
            block: cfg.block,
            dyn_smem: cfg.shared_bytes,
            step_limit: self.step_limit,
        };
        let [gx, gy, gz] = cfg.grid;
        let nblocks = u64::from(gx) * u64::from(gy) * u64::from(gz);
        let indices: Vec<u64> = match only {
            None => (0..nblocks).collect(),
            Some(b) => {
                if let Some(&i) = b.iter().find(|&&i| i >= nblocks) {
                    return Err(bad(format!(
                        "block {i} is outside the grid of {nblocks} blocks"
                    )));
                }
                b.to_vec()
            }
        };
        self.launches += 1;
        match self.schedule {
            Schedule::Random { seed } => {
                interleave::run_random(&ctx, indices, seed).map_err(SimError::Fault)
            }
            Schedule::InOrder if self.race_seeds > 0 => {
                let r = race_check(
                    &ctx,
                    args,
                    indices,
                    self.launches,
                    self.race_seeds,
                    self.race_limit,
                );
                r.map(|(stats, rerun)| {
                    if rerun {
                        self.race_counts.rerun += 1;
                    } else {
                        self.race_counts.over_limit += 1;
                    }
                    stats
                })
            }
            Schedule::InOrder => run_in_order(&ctx, indices),
        }
    }
}

/// Runs the blocks `indices` of a launch in parallel, each whole ([`Schedule::InOrder`]). The
/// reported fault (if several blocks fault) is the one of the lowest linear block index among
/// the blocks that ran.
fn run_in_order(ctx: &state::LaunchCtx, indices: Vec<u64>) -> Result<LaunchStats, SimError> {
    let [gx, gy, _] = ctx.grid;
    let failed = std::sync::atomic::AtomicBool::new(false);
    let results: Vec<(u64, Result<LaunchStats, Box<Fault>>)> = indices
        .into_par_iter()
        .map_init(state::Scratch::default, |scratch, i| {
            if failed.load(std::sync::atomic::Ordering::Relaxed) {
                return None;
            }
            let ctaid = [
                (i % u64::from(gx)) as u32,
                ((i / u64::from(gx)) % u64::from(gy)) as u32,
                (i / (u64::from(gx) * u64::from(gy))) as u32,
            ];
            let r = exec::run_block(ctx, ctaid, scratch);
            if r.is_err() {
                failed.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            Some((i, r))
        })
        .flatten()
        .collect();
    let mut total = LaunchStats::default();
    let mut first_fault: Option<(u64, Box<Fault>)> = None;
    for (i, r) in results {
        match r {
            Ok(s) => total += s,
            Err(f) => {
                if first_fault.as_ref().is_none_or(|(j, _)| i < *j) {
                    first_fault = Some((i, f));
                }
            }
        }
    }
    match first_fault {
        Some((_, f)) => Err(SimError::Fault(f)),
        None => Ok(total),
    }
}

/// [`Sim::set_race_check`]: the launch in order, then, when it took at most `limit` warp
/// instructions, under `seeds` random schedules. The in-order counters, and whether it was rerun.
fn race_check(
    ctx: &state::LaunchCtx,
    args: &[Arg],
    indices: Vec<u64>,
    launch: u64,
    seeds: u32,
    limit: u64,
) -> Result<(LaunchStats, bool), SimError> {
    let mem = ctx.mem;
    // The allocations the launch can reach: those its pointer arguments point into, and the
    // module variables.
    let mut bases: Vec<u64> = args
        .iter()
        .filter_map(|a| match a {
            Arg::Ptr(p) => mem.region(p.0).map(|_| p.0 & !slots::SLOT_MASK),
            _ => None,
        })
        .chain(mem.var_bases())
        .collect();
    bases.sort_unstable();
    bases.dedup();
    let before: Vec<(u64, Vec<u32>)> = bases
        .iter()
        .filter_map(|&b| mem.snapshot(b).map(|s| (b, s)))
        .collect();
    mem.clear_written();
    let stats = run_in_order(ctx, indices.clone())?;
    if stats.warp_instructions > limit {
        return Ok((stats, false));
    }
    let written = mem.written();
    let kernel = || ctx.kernel.name.clone();
    if let Some(&a) = written.iter().find(|a| bases.binary_search(a).is_err()) {
        return Err(SimError::RaceCheckUnrestorable {
            kernel: kernel(),
            address: a,
        });
    }
    let after: Vec<(u64, Vec<u32>)> = written
        .iter()
        .filter_map(|&b| mem.snapshot(b).map(|s| (b, s)))
        .collect();
    for k in 1..=u64::from(seeds) {
        let seed = (launch << 20) | k;
        for (b, words) in before.iter().filter(|(b, _)| written.contains(b)) {
            mem.restore(*b, words);
        }
        mem.clear_written();
        interleave::run_random(ctx, indices.clone(), seed).map_err(|mut f| {
            f.detail += " (the in-order schedule ran this launch without a fault)";
            SimError::Fault(f)
        })?;
        let dependent = |detail: String| SimError::ScheduleDependent {
            kernel: kernel(),
            seed,
            detail,
        };
        if let Some(&a) = mem.written().iter().find(|a| !written.contains(a)) {
            return Err(dependent(format!(
                "wrote the allocation at {a:#x}, which the in-order schedule did not"
            )));
        }
        for (b, words) in &after {
            if let Some((off, now, was)) = mem.first_difference(*b, words) {
                // Leave memory as the in-order run did, so that a caller going on sees its result.
                for (b, words) in &after {
                    mem.restore(*b, words);
                }
                return Err(dependent(format!(
                    "left byte {off} of the allocation at {b:#x} = {now:#04x}, the in-order \
                     schedule {was:#04x}"
                )));
            }
        }
    }
    Ok((stats, true))
}
