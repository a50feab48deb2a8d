//! Execution of one block: warps of 32 lanes in lockstep, a reconvergence stack per warp, and
//! `bar.sync` scheduling across the warps of the block.

use crate::arith;
use crate::error::{Fault, FaultKind};
use crate::ir::*;
use crate::lanes::WARP;
use crate::slots::{LOCAL_SLOT, SHARED_SLOT, SLOT_SHIFT};
use crate::state::{Block, Frame, LaunchCtx, Loc, Scratch, Warp};
use crate::stats::LaunchStats;
use crate::weak::StoreBuf;
use crate::{mem_ops, warp_ops};

/// Control-flow outcome of running a warp.
pub(crate) enum Yield {
    Barrier,
    Done,
    /// The warp executed `nanosleep`: it resumes after it, once other warps have had a turn.
    Sleep,
    /// The warp reached `Block::stop` (random schedule): it resumes at its current pc.
    Preempt,
}

/// The byte every block's shared memory starts as: a GPU leaves it undefined (an earlier block's
/// data), so a kernel must not rely on zeros; `0xFF` reads as NaN in f16 and f32 and as all ones
/// in integers, which a read before a write cannot mistake for a neutral value.
pub(crate) const SHARED_POISON: u8 = 0xFF;

pub(crate) fn run_block(
    ctx: &LaunchCtx,
    ctaid: [u32; 3],
    scratch: &mut Scratch,
) -> Result<LaunchStats, Box<Fault>> {
    let (mut b, mut warps) = start_block(ctx, ctaid, scratch, None);
    let result = schedule(&mut b, &mut warps);
    finish_block(scratch, b, warps);
    result
}

/// A block about to run its first instruction, with its warps, on buffers taken from `scratch`.
pub(crate) fn start_block<'a>(
    ctx: &'a LaunchCtx<'a>,
    ctaid: [u32; 3],
    scratch: &mut Scratch,
    weak: Option<StoreBuf>,
) -> (Block<'a>, Vec<Warp>) {
    let k = ctx.kernel;
    let nthreads = ctx.block[0] * ctx.block[1] * ctx.block[2];
    let nwarps = nthreads.div_ceil(32);
    let mut shared = std::mem::take(&mut scratch.shared);
    shared.clear();
    shared.resize((k.static_shared + ctx.dyn_smem) as usize, SHARED_POISON);
    let b = Block {
        ctx,
        ctaid,
        shared,
        stats: LaunchStats {
            blocks: 1,
            ..LaunchStats::default()
        },
        steps: 0,
        stop: ctx.step_limit,
        weak,
        line: 0,
    };
    let nregs = k.nregs as usize;
    let warps: Vec<Warp> = (0..nwarps)
        .map(|id| {
            let n = (nthreads - id * 32).min(32);
            let valid = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
            // A reused register file keeps stale values except in the registers that may be read
            // before being written, which start at zero like a fresh one.
            let regs = match scratch.regs.pop() {
                Some(mut regs) if regs.len() == nregs => {
                    for &r in &k.zero_regs {
                        regs[r as usize] = [0; WARP];
                    }
                    regs
                }
                _ => vec![[0; WARP]; nregs],
            };
            let mut local = scratch.local.pop().unwrap_or_default();
            local.clear();
            local.resize(k.local_bytes as usize * 32, 0);
            Warp {
                id,
                regs,
                local,
                stack: vec![Frame {
                    pc: 0,
                    reconv: u32::MAX,
                    mask: valid,
                }],
                valid,
                exited: 0,
                carry: 0,
                at_barrier: false,
                waited: false,
            }
        })
        .collect();
    (b, warps)
}

/// Returns a block's buffers to `scratch` for the next block.
pub(crate) fn finish_block(scratch: &mut Scratch, b: Block, warps: Vec<Warp>) {
    scratch.shared = b.shared;
    for w in warps {
        scratch.regs.push(w.regs);
        scratch.local.push(w.local);
    }
}

/// Runs the warps of a block round robin, each until it exits, sleeps (`nanosleep`) or waits at
/// `bar.sync`, releasing the barrier when every live warp waits at it.
fn schedule(b: &mut Block, warps: &mut [Warp]) -> Result<LaunchStats, Box<Fault>> {
    loop {
        let mut waiting = 0;
        // A warp that slept has not arrived at the barrier: the round goes on without a release.
        let mut slept = false;
        for w in warps.iter_mut() {
            if w.stack.is_empty() {
                continue;
            }
            if !w.at_barrier {
                match b.run_warp(w)? {
                    Yield::Barrier => w.at_barrier = true,
                    Yield::Done => continue,
                    Yield::Sleep => {
                        slept = true;
                        continue;
                    }
                    Yield::Preempt => {
                        unreachable!("the in-order schedule's stop is the step limit")
                    }
                }
            }
            waiting += 1;
        }
        if slept {
            continue;
        }
        if waiting == 0 {
            return Ok(b.stats);
        }
        release_barrier(b, warps, waiting)?;
    }
}

/// Releases the barrier that every live warp of the block (`waiting` of them) waits at; a fault if
/// some warp has exited instead, as its threads can never arrive.
pub(crate) fn release_barrier(
    b: &mut Block,
    warps: &mut [Warp],
    waiting: usize,
) -> Result<(), Box<Fault>> {
    if let Some(w) = warps.iter().find(|w| w.stack.is_empty()) {
        let lane = w.valid.trailing_zeros() as usize;
        return Err(b.fault(
            w,
            lane,
            FaultKind::BarrierDivergence,
            None,
            format!(
                "{waiting} warp(s) wait at bar.sync but warp {} has exited (thread shown)",
                w.id
            ),
        ));
    }
    b.stats.barriers += 1;
    for w in warps.iter_mut() {
        w.at_barrier = false;
    }
    Ok(())
}

impl Block<'_> {
    /// Lanes of `mask` whose guard predicate holds.
    #[inline]
    fn pred_mask(w: &Warp, g: Guard, mask: u32) -> u32 {
        let row = &w.regs[g.reg as usize];
        let mut m = 0u32;
        for (l, v) in row.iter().enumerate() {
            m |= ((*v & 1) as u32) << l;
        }
        if g.negate {
            m = !m;
        }
        m & mask
    }

    fn exit_lanes(w: &mut Warp, m: u32) {
        w.exited |= m;
        for f in w.stack.iter_mut() {
            f.mask &= !m;
        }
    }

    pub(crate) fn run_warp(&mut self, w: &mut Warp) -> Result<Yield, Box<Fault>> {
        let insts = &self.ctx.kernel.insts;
        loop {
            let Some(&top) = w.stack.last() else {
                return Ok(Yield::Done);
            };
            if top.mask == 0 || top.pc == top.reconv {
                w.stack.pop();
                continue;
            }
            let pc = top.pc as usize;
            let Some(inst) = insts.get(pc) else {
                // Falling off the end of the kernel is an implicit `exit`.
                Self::exit_lanes(w, top.mask);
                continue;
            };
            self.line = inst.line;
            self.steps += 1;
            // One comparison serves both stops: `stop <= step_limit`.
            if self.steps > self.stop {
                if self.steps <= self.ctx.step_limit {
                    self.steps -= 1;
                    return Ok(Yield::Preempt);
                }
                let lane = top.mask.trailing_zeros() as usize;
                return Err(self.fault(
                    w,
                    lane,
                    FaultKind::StepLimit,
                    None,
                    format!(
                        "block executed more than {} warp instructions (infinite loop?)",
                        self.ctx.step_limit
                    ),
                ));
            }
            let exec = match inst.guard {
                None => top.mask,
                Some(g) => Self::pred_mask(w, g, top.mask),
            };
            self.count(inst, w, exec);
            let next = pc as u32 + 1;
            match inst.op {
                Op::Bra { target, reconv } => {
                    let taken = exec;
                    let not = top.mask & !taken;
                    let f = w.stack.last_mut().expect("top exists");
                    if not == 0 {
                        f.pc = target;
                    } else if taken == 0 {
                        f.pc = next;
                    } else {
                        f.pc = reconv;
                        let r = reconv;
                        w.stack.push(Frame {
                            pc: next,
                            reconv: r,
                            mask: not,
                        });
                        w.stack.push(Frame {
                            pc: target,
                            reconv: r,
                            mask: taken,
                        });
                    }
                }
                Op::Exit => {
                    w.stack.last_mut().expect("top exists").pc = next;
                    Self::exit_lanes(w, exec);
                }
                Op::Sleep => {
                    w.stack.last_mut().expect("top exists").pc = next;
                    if exec != 0 {
                        return Ok(Yield::Sleep);
                    }
                }
                Op::Trap => {
                    if exec != 0 {
                        let lane = exec.trailing_zeros() as usize;
                        return Err(self.fault(
                            w,
                            lane,
                            FaultKind::Trap,
                            None,
                            "kernel executed `trap`".into(),
                        ));
                    }
                    w.stack.last_mut().expect("top exists").pc = next;
                }
                Op::Bar { count, .. } => {
                    if exec == 0 {
                        w.stack.last_mut().expect("top exists").pc = next;
                        continue;
                    }
                    if let Some(c) = count {
                        let lane = exec.trailing_zeros() as usize;
                        let n = self.rd(w, c, lane);
                        let threads: u32 = self.ctx.block.iter().product();
                        let whole = u64::from(threads.next_multiple_of(32));
                        if n != whole {
                            return Err(self.fault(
                                w,
                                lane,
                                FaultKind::BarrierDivergence,
                                None,
                                format!(
                                    "bar.sync with a count of {n} threads: only the whole block \
                                     ({whole} threads) is modelled"
                                ),
                            ));
                        }
                    }
                    if exec != w.valid {
                        let missing = w.valid & !exec;
                        let lane = missing.trailing_zeros() as usize;
                        let why = if w.exited & (1 << lane) != 0 {
                            "has exited"
                        } else {
                            "is on a diverged path"
                        };
                        return Err(self.fault(
                            w,
                            lane,
                            FaultKind::BarrierDivergence,
                            None,
                            format!("bar.sync reached by lanes {exec:#010x} of warp {}; thread shown {why}", w.id),
                        ));
                    }
                    w.stack.last_mut().expect("top exists").pc = next;
                    return Ok(Yield::Barrier);
                }
                _ => {
                    if exec != 0 {
                        self.exec(w, inst, exec, top.mask)?;
                    }
                    w.stack.last_mut().expect("top exists").pc = next;
                }
            }
        }
    }

    /// Whether memory instruction `inst` reaches global memory for the lanes of `exec` (a generic
    /// address is resolved per lane; `cp.async` always reads global memory).
    fn touches_global(&self, w: &Warp, inst: &Inst, exec: u32) -> bool {
        let (space, addr) = match &inst.op {
            Op::Ld { space, addr, .. }
            | Op::St { space, addr, .. }
            | Op::Atom { space, addr, .. } => (*space, addr),
            Op::CpAsync { .. } => return true,
            _ => return false,
        };
        match space {
            Space::Global => true,
            Space::Generic => (0..WARP).filter(|&l| exec >> l & 1 == 1).any(|lane| {
                let a = self.rd(w, addr.base, lane).wrapping_add(addr.offset as u64);
                !matches!(a >> SLOT_SHIFT, SHARED_SLOT | LOCAL_SLOT)
            }),
            _ => false,
        }
    }

    fn count(&mut self, inst: &Inst, w: &Warp, exec: u32) {
        let s = &mut self.stats;
        s.warp_instructions += 1;
        s.thread_instructions += u64::from(exec.count_ones());
        let mut class = inst.class;
        if let Op::Ld { space, addr, .. }
        | Op::St { space, addr, .. }
        | Op::Atom { space, addr, .. } = &inst.op
        {
            class = match space {
                Space::Param => Class::Other,
                Space::Generic if exec != 0 => {
                    let lane = exec.trailing_zeros() as usize;
                    let a = self.rd(w, addr.base, lane).wrapping_add(addr.offset as u64);
                    match a >> SLOT_SHIFT {
                        SHARED_SLOT => Class::Shared,
                        LOCAL_SLOT => Class::Local,
                        _ => Class::Global,
                    }
                }
                _ => class,
            };
        }
        let c = &mut self.stats.by_class;
        match class {
            Class::Int => c.int += 1,
            Class::Fp32 => c.fp32 += 1,
            Class::Fp16 => c.fp16 += 1,
            Class::Fp64 => c.fp64 += 1,
            Class::Global => c.mem_global += 1,
            Class::Shared => c.mem_shared += 1,
            Class::Local => c.mem_local += 1,
            Class::Control => c.control += 1,
            Class::Tensor => c.tensor += 1,
            Class::Other => c.other += 1,
        }
    }

    /// Executes a non-control instruction for the lanes of `exec` (`active`: the lanes of the
    /// current reconvergence entry, guard ignored).
    fn exec(
        &mut self,
        w: &mut Warp,
        inst: &Inst,
        exec: u32,
        active: u32,
    ) -> Result<(), Box<Fault>> {
        match &inst.op {
            Op::Ld { .. } | Op::St { .. } | Op::Atom { .. } | Op::CpAsync { .. } => {
                if self.ctx.kernel.grid_dep_wait && !w.waited && self.touches_global(w, inst, exec)
                {
                    let lane = exec.trailing_zeros() as usize;
                    return Err(self.fault(
                        w,
                        lane,
                        FaultKind::BeforeGridDependencyWait,
                        None,
                        "this kernel waits on the previous grid (griddepcontrol.wait) and accesses global \
                         memory before that wait"
                            .into(),
                    ));
                }
                mem_ops::exec_mem(self, w, inst, exec)
            }
            Op::GridDepWait => {
                w.waited = true;
                Ok(())
            }
            &Op::Prefetch { space, addr } => {
                for lane in (0..WARP).filter(|&l| exec >> l & 1 == 1) {
                    let a = self.rd(w, addr.base, lane).wrapping_add(addr.offset as u64);
                    // Shared and local lines are this block's own: only a global address can
                    // name memory outside the launch's buffers.
                    if let loc @ Loc::Global(g) = self.locate(space, a) {
                        self.ctx.mem.check(g, 1).map_err(|e| {
                            let mut f = self.mem_fault(w, lane, e, loc, 1);
                            f.detail = format!("prefetch: {}", f.detail);
                            f
                        })?;
                        self.stats.prefetch_lanes += 1;
                    }
                }
                Ok(())
            }
            Op::Shfl { .. }
            | Op::Vote { .. }
            | Op::Redux { .. }
            | Op::Mma { .. }
            | Op::Ldmatrix { .. } => warp_ops::exec_warp(self, w, inst, exec, active),
            &Op::Activemask { d } => {
                w.put(d, &[u64::from(active); WARP], exec);
                Ok(())
            }
            Op::Nop => Ok(()),
            Op::Fence => {
                // Blocks on other host threads (in order) see this block's earlier stores before
                // its later ones; the simulator's memory words are relaxed atomics.
                std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
                if let Some(buf) = &mut self.weak {
                    buf.drain(self.ctx.mem);
                }
                Ok(())
            }
            Op::Unsupported => {
                let lane = exec.trailing_zeros() as usize;
                Err(self.fault(
                    w,
                    lane,
                    FaultKind::Trap,
                    None,
                    "unsupported instruction".into(),
                ))
            }
            Op::Bra { .. } | Op::Exit | Op::Trap | Op::Bar { .. } | Op::Sleep => {
                unreachable!("handled by run_warp")
            }
            op => {
                arith::exec(self, w, op, exec);
                Ok(())
            }
        }
    }
}
