//! The state instruction families work on: a launch's shared context, a warp (register file, local
//! memory, reconvergence stack, carry flags) and a block (shared memory, counters), with the
//! helpers every family uses to read operands, resolve addresses, access memory and report faults.
//! `exec` drives it; `arith`, `mem_ops` and `warp_ops` execute instructions on it.

use crate::error::{Fault, FaultKind};
use crate::ir::*;
use crate::lanes::{merge, Lanes, WARP};
use crate::memory::{self, GlobalMem, MemErr};
use crate::slots::{LOCAL_SLOT, SHARED_SLOT, SLOT_MASK, SLOT_SHIFT};
use crate::stats::LaunchStats;
use crate::weak::StoreBuf;

/// Everything shared by the blocks of one launch.
pub(crate) struct LaunchCtx<'a> {
    pub kernel: &'a Kernel,
    pub mem: &'a GlobalMem,
    pub params: &'a [u8],
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dyn_smem: u32,
    pub step_limit: u64,
}

/// One entry of a warp's reconvergence stack: lanes `mask` execute from `pc` until they reach
/// `reconv`, where the entry is popped and the entry below (holding the union of the diverged
/// lanes) resumes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame {
    pub pc: u32,
    pub reconv: u32,
    pub mask: u32,
}

pub(crate) struct Warp {
    pub id: u32,
    /// Register file: `regs[r][lane]`.
    pub regs: Vec<Lanes>,
    /// Local memory, `local_bytes` per lane, lane-major.
    pub local: Vec<u8>,
    pub stack: Vec<Frame>,
    /// Lanes that exist (the last warp of a block may be partial).
    pub valid: u32,
    pub exited: u32,
    /// Per-lane carry flag (CC.CF) of `add.cc`/`addc`/`sub.cc`/`subc`; starts clear.
    pub carry: u32,
    pub at_barrier: bool,
    /// The warp has executed `griddepcontrol.wait` (see [`crate::ir::Kernel::grid_dep_wait`]).
    pub waited: bool,
}

impl Warp {
    #[inline]
    pub(crate) fn set(&mut self, r: Reg, lane: usize, v: u64) {
        self.regs[r as usize][lane] = v;
    }

    /// Writes the lanes of `exec` of register `r` from `v`.
    #[inline(always)]
    pub(crate) fn put(&mut self, r: Reg, v: &Lanes, exec: u32) {
        merge(&mut self.regs[r as usize], v, exec);
    }
}

/// A source operand's lane vector: a register row of the warp, or computed values.
// Computed values stay inline: an operand lives on the stack for one instruction, and boxing them
// would allocate per operand.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Operand<'w> {
    Row(&'w Lanes),
    Owned(Lanes),
}

impl std::ops::Deref for Operand<'_> {
    type Target = Lanes;

    #[inline(always)]
    fn deref(&self) -> &Lanes {
        match self {
            Operand::Row(r) => r,
            Operand::Owned(v) => v,
        }
    }
}

/// Where a lane's access lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loc {
    Global(u64),
    Shared(u64),
    Local(u64),
    Param(u64),
}

pub(crate) struct Block<'a> {
    pub ctx: &'a LaunchCtx<'a>,
    pub ctaid: [u32; 3],
    pub shared: Vec<u8>,
    pub stats: LaunchStats,
    pub steps: u64,
    /// The current warp yields (`Yield::Preempt`) before executing the instruction that would
    /// make `steps` exceed this; at most `ctx.step_limit`, which it equals in the in-order
    /// schedule (where the step limit is the only stop).
    pub stop: u64,
    /// The random schedule's store buffer for this block's global stores (`weak.rs`); `None` in
    /// the in-order schedule, where stores go straight to global memory.
    pub weak: Option<StoreBuf>,
    /// The current instruction's PTX line, for fault reports.
    pub line: u32,
}

/// Buffers reused by the blocks one host thread runs, so that starting a block allocates (and
/// clears) almost nothing. Only used for blocks of one kernel.
#[derive(Default)]
pub(crate) struct Scratch {
    pub regs: Vec<Vec<Lanes>>,
    pub local: Vec<Vec<u8>>,
    pub shared: Vec<u8>,
}

impl Block<'_> {
    /// Whether global loads may read allocations directly (no buffered stores of this block to
    /// put over them).
    #[inline]
    pub(crate) fn direct_loads(&self) -> bool {
        self.weak.as_ref().is_none_or(StoreBuf::is_empty)
    }

    pub(crate) fn tid(&self, w: &Warp, lane: usize) -> [u32; 3] {
        let lin = w.id * 32 + lane as u32;
        let [bx, by, _] = self.ctx.block;
        [lin % bx, (lin / bx) % by, lin / (bx * by)]
    }

    pub(crate) fn fault(
        &self,
        w: &Warp,
        lane: usize,
        kind: FaultKind,
        address: Option<u64>,
        detail: String,
    ) -> Box<Fault> {
        Box::new(Fault {
            kind,
            kernel: self.ctx.kernel.name.clone(),
            block: self.ctaid,
            thread: self.tid(w, lane),
            ptx_line: self.line as usize,
            address,
            detail,
        })
    }

    pub(crate) fn mem_fault(
        &self,
        w: &Warp,
        lane: usize,
        e: MemErr,
        loc: Loc,
        size: u32,
    ) -> Box<Fault> {
        let (space, a) = match loc {
            Loc::Global(a) => ("global", a),
            Loc::Shared(a) => ("shared", a),
            Loc::Local(a) => ("local", a),
            Loc::Param(a) => ("param", a),
        };
        let (kind, what) = match e {
            MemErr::OutOfBounds => (FaultKind::OutOfBounds, "outside any valid range"),
            MemErr::Misaligned => (FaultKind::Misaligned, "not aligned to the access size"),
        };
        self.fault(
            w,
            lane,
            kind,
            Some(a),
            format!("{size}-byte {space} access {what}"),
        )
    }

    #[inline]
    pub(crate) fn rd(&self, w: &Warp, s: Src, lane: usize) -> u64 {
        match s {
            Src::Reg(r) => w.regs[r as usize][lane],
            Src::Imm(v) => v,
            Src::Special(sr) => self.special(w, sr, lane),
        }
    }

    /// The operand's value in every lane (lanes that do not execute get harmless values). A
    /// register is borrowed, not copied.
    #[inline(always)]
    pub(crate) fn fetch<'w>(&self, w: &'w Warp, s: Src) -> Operand<'w> {
        match s {
            Src::Reg(r) => Operand::Row(&w.regs[r as usize]),
            Src::Imm(v) => Operand::Owned([v; WARP]),
            Src::Special(sr) => Operand::Owned(std::array::from_fn(|l| self.special(w, sr, l))),
        }
    }

    pub(crate) fn special(&self, w: &Warp, s: SReg, lane: usize) -> u64 {
        let t = self.tid(w, lane);
        let l = lane as u32;
        u64::from(match s {
            SReg::Tid(a) => t[a as usize],
            SReg::Ntid(a) => self.ctx.block[a as usize],
            SReg::Ctaid(a) => self.ctaid[a as usize],
            SReg::Nctaid(a) => self.ctx.grid[a as usize],
            SReg::LaneId => l,
            SReg::WarpId => w.id,
            SReg::NWarpId => (self.ctx.block.iter().product::<u32>()).div_ceil(32),
            // A monotonic per-block counter of warp instructions stands in for the cycle counter.
            SReg::Clock => self.steps as u32,
            SReg::Clock64 => return self.steps,
            SReg::LanemaskEq => 1 << l,
            SReg::LanemaskLt => (1u32 << l) - 1,
            SReg::LanemaskLe => ((1u64 << (l + 1)) - 1) as u32,
            SReg::LanemaskGt => !(((1u64 << (l + 1)) - 1) as u32),
            SReg::LanemaskGe => !((1u32 << l) - 1),
            SReg::DynamicSmemSize => self.ctx.dyn_smem,
        })
    }

    /// Resolves a lane's address in `space` to the memory it lands in.
    pub(crate) fn locate(&self, space: Space, a: u64) -> Loc {
        let window = |a: u64, slot: u64| {
            if a >> SLOT_SHIFT == slot {
                a & SLOT_MASK
            } else {
                a
            }
        };
        match space {
            Space::Global | Space::Const => Loc::Global(a),
            Space::Shared => Loc::Shared(window(a, SHARED_SLOT)),
            Space::Local => Loc::Local(window(a, LOCAL_SLOT)),
            Space::Param => Loc::Param(a),
            Space::Generic => match a >> SLOT_SHIFT {
                SHARED_SLOT => Loc::Shared(a & SLOT_MASK),
                LOCAL_SLOT => Loc::Local(a & SLOT_MASK),
                _ => Loc::Global(a),
            },
        }
    }

    pub(crate) fn load(&self, w: &Warp, lane: usize, loc: Loc, size: u32) -> Result<u64, MemErr> {
        match loc {
            Loc::Global(a) => match &self.weak {
                Some(buf) => self.ctx.mem.load(a, size).map(|v| buf.overlay(a, size, v)),
                None => self.ctx.mem.load(a, size),
            },
            Loc::Shared(a) => memory::buf_load(&self.shared, a, size),
            Loc::Local(a) => {
                let lb = self.ctx.kernel.local_bytes as usize;
                memory::buf_load(&w.local[lane * lb..(lane + 1) * lb], a, size)
            }
            Loc::Param(a) => memory::buf_load(self.ctx.params, a, size),
        }
    }

    pub(crate) fn store(
        &mut self,
        w: &mut Warp,
        lane: usize,
        loc: Loc,
        size: u32,
        v: u64,
    ) -> Result<(), MemErr> {
        match loc {
            Loc::Global(a) => match &mut self.weak {
                Some(buf) => self.ctx.mem.check(a, size).map(|_| buf.store(a, size, v)),
                None => self.ctx.mem.store(a, size, v),
            },
            Loc::Shared(a) => memory::buf_store(&mut self.shared, a, size, v),
            Loc::Local(a) => {
                let lb = self.ctx.kernel.local_bytes as usize;
                memory::buf_store(&mut w.local[lane * lb..(lane + 1) * lb], a, size, v)
            }
            // Kernel parameters are read-only; reported as out of bounds of any writable space.
            Loc::Param(_) => Err(MemErr::OutOfBounds),
        }
    }
}
