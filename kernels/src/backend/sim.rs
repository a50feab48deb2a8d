//! [`Accelerator`] on the CPU PTX interpreter `ptx-sim` (feature `sim`).

use super::{backend_err, Accelerator, KArg};
use crate::{Result, PTX};
use ptx_sim::{Arg, DevicePtr, LaunchConfig, Module, Sim, SimError};
use std::sync::OnceLock;

/// The committed [`PTX`], loaded once per process and each kernel lowered at its first launch
/// ([`Module::parse_lazy`]): parsing all of its kernels takes seconds (18 MB of text) while a
/// test runs a few of them, and every simulator of a process (each kernel test, each sim
/// executor of the graph crate) runs this same module against its own [`Sim`]. That the whole
/// text parses and every kernel lowers is checked once, by `ptx-sim`'s `project_kernels` test.
pub fn module() -> std::result::Result<&'static Module, SimError> {
    static MODULE: OnceLock<std::result::Result<Module, SimError>> = OnceLock::new();
    MODULE
        .get_or_init(|| Module::parse_lazy(PTX))
        .as_ref()
        .map_err(Clone::clone)
}

/// [`module`] as a Hopper card runs it: the PTX rewritten by [`crate::grid_dep::for_sm90`], so
/// every kernel waits on its predecessor (programmatic dependent launch). ptx-sim faults on a
/// global access before a kernel's wait, so a plan that runs on this module keeps the PDL contract
/// on the paths it took.
pub fn hopper_module() -> std::result::Result<&'static Module, SimError> {
    static MODULE: OnceLock<std::result::Result<Module, SimError>> = OnceLock::new();
    MODULE
        .get_or_init(|| match crate::grid_dep::for_sm90(PTX) {
            Ok(text) => Module::parse_lazy(&text),
            Err(e) => Err(SimError::Parse {
                line: 0,
                message: e.to_string(),
            }),
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Random schedules each launch is rerun under when `INGOT_SIM_RACE_SEEDS` is unset (see
/// [`SimAccelerator::new`]).
pub const DEFAULT_RACE_SEEDS: u32 = 2;

/// Launches of more warp instructions than this run in order only (see
/// [`SimAccelerator::new`]); `INGOT_SIM_RACE_LIMIT` overrides it.
pub const DEFAULT_RACE_LIMIT: u64 = 1 << 20;

/// A fresh simulator running the shared parsed [`PTX`] ([`module`]).
pub struct SimAccelerator {
    sim: Sim,
    module: &'static Module,
}

/// A simulator allocation: device address and size in bytes.
pub struct SimBuf {
    ptr: DevicePtr,
    len: usize,
}

impl SimBuf {
    /// The allocation's device address in the simulator (what a table of addresses holds).
    pub fn address(&self) -> u64 {
        self.ptr.0
    }
}

fn err(e: SimError) -> crate::KernelError {
    backend_err("ptx-sim", e)
}

impl SimAccelerator {
    /// A fresh simulator (memory, counters) on the committed PTX, with the race check on
    /// ([`Sim::set_race_check`]): each launch runs in order, then again under
    /// `INGOT_SIM_RACE_SEEDS` random schedules ([`DEFAULT_RACE_SEEDS`] when unset; 0 turns the
    /// check off), and fails unless every run leaves memory bit-for-bit the same. ingot's
    /// kernels are deterministic by design (no float atomics; their integer atomics commute), so
    /// a difference is a missing barrier or fence, or another schedule-dependent bug.
    ///
    /// Launches of more than `INGOT_SIM_RACE_LIMIT` warp instructions ([`DEFAULT_RACE_LIMIT`]
    /// when unset) run in order only: a random schedule runs on one host thread, and the kernel
    /// tests' model-shape launches would add minutes to CI while their kernels are rechecked at
    /// the tests' smaller shapes. How many launches were rerun and how many were over the limit
    /// is printed when the accelerator is dropped.
    pub fn new() -> Result<Self> {
        Self::with_module(module().map_err(err)?)
    }

    /// As [`SimAccelerator::new`] on another module (a test's modified PTX).
    pub fn with_module(module: &'static Module) -> Result<Self> {
        let mut sim = Sim::new();
        let seeds = ptx_sim::race_seeds_from_env().map_err(err)?;
        sim.set_race_check(seeds.unwrap_or(DEFAULT_RACE_SEEDS));
        sim.set_race_check_limit(race_limit_from_env()?.unwrap_or(DEFAULT_RACE_LIMIT));
        Ok(Self { sim, module })
    }

    /// The simulator, to change its schedule or race check.
    pub fn sim_mut(&mut self) -> &mut Sim {
        &mut self.sim
    }
}

/// `INGOT_SIM_RACE_LIMIT`: a count of warp instructions, `None` when unset.
fn race_limit_from_env() -> Result<Option<u64>> {
    const VAR: &str = "INGOT_SIM_RACE_LIMIT";
    let bad = |value: String| {
        err(SimError::BadEnv {
            var: VAR,
            value,
            expected: "a count of warp instructions (a decimal u64)",
        })
    };
    match std::env::var(VAR) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Ok(v) => v.trim().parse().map(Some).map_err(|_| bad(v)),
        Err(std::env::VarError::NotUnicode(v)) => Err(bad(v.to_string_lossy().into_owned())),
    }
}

impl Drop for SimAccelerator {
    fn drop(&mut self) {
        let c = self.sim.race_check_counts();
        if c.rerun + c.over_limit > 0 {
            eprintln!(
                "ptx-sim race check: {} launch(es) rerun under random schedules, {} over the \
                 limit ran in order only",
                c.rerun, c.over_limit
            );
        }
    }
}

impl Accelerator for SimAccelerator {
    type Buf = SimBuf;

    fn name(&self) -> &str {
        "ptx-sim"
    }

    fn alloc(&mut self, bytes: usize) -> Result<SimBuf> {
        let ptr = self.sim.alloc(bytes).map_err(err)?;
        Ok(SimBuf { ptr, len: bytes })
    }

    fn buf_len(&self, buf: &SimBuf) -> usize {
        buf.len
    }

    fn address(&self, buf: &SimBuf) -> u64 {
        buf.address()
    }

    fn upload(&mut self, buf: &SimBuf, data: &[u8]) -> Result<()> {
        self.sim.write(buf.ptr, data).map_err(err)
    }

    fn download(&mut self, buf: &SimBuf, out: &mut [u8]) -> Result<()> {
        self.sim.read(buf.ptr, out).map_err(err)
    }

    fn launch(
        &mut self,
        kernel: &str,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: &[KArg<'_, SimBuf>],
    ) -> Result<()> {
        let args: Vec<Arg> = args
            .iter()
            .map(|a| match *a {
                KArg::Buf(b) => Arg::Ptr(b.ptr),
                KArg::U32(v) => Arg::U32(v),
                KArg::I32(v) => Arg::I32(v),
                KArg::F32(v) => Arg::F32(v),
                KArg::U64(v) => Arg::U64(v),
            })
            .collect();
        let config = LaunchConfig {
            grid,
            block,
            shared_bytes,
        };
        self.sim
            .launch(self.module, kernel, config, &args)
            .map(|_stats| ())
            .map_err(err)
    }
}
