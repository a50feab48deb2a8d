//! Error and fault reports. Every problem a kernel or its input can cause is one of these values;
//! the simulator never panics on bad PTX, bad arguments or a misbehaving kernel.

use std::fmt;

/// Everything that can go wrong while loading PTX or running a kernel.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SimError {
    /// The PTX text was rejected by the `ptx-syntax` front end or by lowering.
    #[error("PTX parse error at line {line}: {message}")]
    Parse { line: usize, message: String },
    /// The kernel contains an instruction (or form of one) this simulator does not implement.
    #[error("unsupported PTX in kernel `{kernel}` at line {line}: `{text}`")]
    Unsupported {
        kernel: String,
        line: usize,
        text: String,
    },
    /// No `.entry` of that name exists in the module.
    #[error("no kernel named `{0}` in the module")]
    UnknownKernel(String),
    /// The launch arguments do not match the kernel's `.param` list.
    #[error("bad arguments for kernel `{kernel}`: {detail}")]
    BadArgs { kernel: String, detail: String },
    /// The launch configuration is impossible (zero dimensions, too many threads, too much shared
    /// memory).
    #[error("bad launch configuration for kernel `{kernel}`: {detail}")]
    BadLaunch { kernel: String, detail: String },
    /// A host-side allocation request exceeded the simulator's memory limit.
    #[error("out of simulated device memory: requested {requested} bytes, {available} bytes left under the limit")]
    OutOfMemory { requested: u64, available: u64 },
    /// A host read/write touched memory outside a live allocation.
    #[error("host access to {address:#x}+{len} is outside any live allocation")]
    HostAccess { address: u64, len: usize },
    /// A schedule's text (see [`crate::Schedule::parse`]) is neither `in-order` nor `random:<u64>`.
    #[error("bad schedule `{0}`: expected `in-order` or `random:<seed>` (a decimal u64)")]
    BadSchedule(String),
    /// An environment variable the simulator reads holds something it cannot use.
    #[error("{var}={value:?}: expected {expected}")]
    BadEnv {
        var: &'static str,
        value: String,
        expected: &'static str,
    },
    /// The race check ([`crate::Sim::set_race_check`]): a rerun of the launch under a random
    /// schedule left global memory different from the in-order run.
    #[error(
        "kernel `{kernel}` is schedule-dependent: under schedule random:{seed} {detail} \
         (INGOT_SIM_SCHEDULE=random:{seed} runs every launch under that schedule)"
    )]
    ScheduleDependent {
        kernel: String,
        seed: u64,
        detail: String,
    },
    /// The race check cannot rerun a launch: in order it wrote an allocation that none of its
    /// pointer arguments points into, whose starting contents were therefore not saved.
    #[error(
        "kernel `{kernel}`: the race check cannot rerun this launch: it wrote the allocation at \
         {address:#x}, which no pointer argument points into"
    )]
    RaceCheckUnrestorable { kernel: String, address: u64 },
    /// The kernel did something illegal while running.
    #[error("{0}")]
    Fault(Box<Fault>),
}

/// What kind of illegal action a [`Fault`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Access outside every live allocation (or outside a state space's window).
    OutOfBounds,
    /// Access whose address is not a multiple of its size.
    Misaligned,
    /// A `bar.sync` that not every thread of the block reached (some exited, or the warp was
    /// diverged).
    BarrierDivergence,
    /// A warp-synchronous instruction (`shfl`, `vote`, `redux`, `mma`, `ldmatrix`) whose member
    /// mask does not match the executing lanes, or that names a lane outside the member mask.
    WarpSync,
    /// The kernel executed `trap`.
    Trap,
    /// A block executed more warp instructions than the step limit (an infinite loop, most likely).
    StepLimit,
    /// A write to read-only memory (kernel parameters, module constants).
    ReadOnly,
    /// A global memory access by a warp that has not yet executed the kernel's
    /// `griddepcontrol.wait`: on sm_90 it could read what the previous kernel has not yet written.
    BeforeGridDependencyWait,
    /// An `ld.global.nc` (or `ldu`) of a word a store of the same launch wrote: the non-coherent
    /// cache may serve a line fetched before that store, so such data needs a coherent load.
    NonCoherentRead,
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FaultKind::OutOfBounds => "out-of-bounds access",
            FaultKind::Misaligned => "misaligned access",
            FaultKind::BarrierDivergence => "barrier not reached by every thread",
            FaultKind::WarpSync => "invalid warp-synchronous operation",
            FaultKind::Trap => "trap",
            FaultKind::StepLimit => "step limit exceeded",
            FaultKind::ReadOnly => "write to read-only memory",
            FaultKind::BeforeGridDependencyWait => {
                "global memory access before griddepcontrol.wait"
            }
            FaultKind::NonCoherentRead => "non-coherent load of memory this launch wrote",
        })
    }
}

/// A kernel fault, located like a compute-sanitizer memcheck report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub kind: FaultKind,
    pub kernel: String,
    /// `%ctaid` of the faulting block.
    pub block: [u32; 3],
    /// `%tid` of the first faulting thread.
    pub thread: [u32; 3],
    /// 1-based line of the faulting instruction in the PTX text.
    pub ptx_line: usize,
    /// The offending address, when the fault is a memory access.
    pub address: Option<u64>,
    pub detail: String,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} in kernel `{}` block ({},{},{}) thread ({},{},{}) at PTX line {}",
            self.kind,
            self.kernel,
            self.block[0],
            self.block[1],
            self.block[2],
            self.thread[0],
            self.thread[1],
            self.thread[2],
            self.ptx_line
        )?;
        if let Some(a) = self.address {
            write!(f, " address {a:#x}")?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

impl From<Fault> for SimError {
    fn from(f: Fault) -> Self {
        SimError::Fault(Box::new(f))
    }
}
