//! Execution of one block: warps of 32 lanes in lockstep, a reconvergence stack per warp, and `bar.sync`
//! scheduling across the warps of the block.

use crate::alu;
use crate::error::{Fault, FaultKind};
use crate::ir::*;
use crate::memory::{self, GlobalMem, MemErr, LOCAL_SLOT, SHARED_SLOT, SLOT_MASK, SLOT_SHIFT};
use crate::numeric;
use crate::stats::LaunchStats;
use crate::warp_ops;

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

/// One entry of a warp's reconvergence stack: lanes `mask` execute from `pc` until they reach `reconv`,
/// where the entry is popped and the entry below (holding the union of the diverged lanes) resumes.
#[derive(Clone, Copy, Debug)]
struct Frame {
    pc: u32,
    reconv: u32,
    mask: u32,
}

pub(crate) struct Warp {
    pub id: u32,
    /// Register file, register-major: `regs[r * 32 + lane]`.
    pub regs: Vec<u64>,
    /// Local memory, `local_bytes` per lane, lane-major.
    pub local: Vec<u8>,
    stack: Vec<Frame>,
    /// Lanes that exist (the last warp of a block may be partial).
    pub valid: u32,
    exited: u32,
    at_barrier: bool,
}

impl Warp {
    #[inline]
    pub(crate) fn set(&mut self, r: Reg, lane: usize, v: u64) {
        self.regs[r as usize * 32 + lane] = v;
    }
}

/// Iterates the set bits of a lane mask.
#[inline]
pub(crate) fn lanes(mut m: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if m == 0 {
            None
        } else {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            Some(l)
        }
    })
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
    steps: u64,
    /// The current instruction's PTX line, for fault reports.
    pub line: u32,
}

/// Control-flow outcome of running a warp.
enum Yield {
    Barrier,
    Done,
}

pub(crate) fn run_block(ctx: &LaunchCtx, ctaid: [u32; 3]) -> Result<LaunchStats, Box<Fault>> {
    let k = ctx.kernel;
    let nthreads = ctx.block[0] * ctx.block[1] * ctx.block[2];
    let nwarps = nthreads.div_ceil(32);
    let mut b = Block {
        ctx,
        ctaid,
        shared: vec![0u8; (k.static_shared + ctx.dyn_smem) as usize],
        stats: LaunchStats {
            blocks: 1,
            ..LaunchStats::default()
        },
        steps: 0,
        line: 0,
    };
    let mut warps: Vec<Warp> = (0..nwarps)
        .map(|id| {
            let n = (nthreads - id * 32).min(32);
            let valid = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
            Warp {
                id,
                regs: vec![0; k.nregs as usize * 32],
                local: vec![0; k.local_bytes as usize * 32],
                stack: vec![Frame {
                    pc: 0,
                    reconv: u32::MAX,
                    mask: valid,
                }],
                valid,
                exited: 0,
                at_barrier: false,
            }
        })
        .collect();
    loop {
        let mut waiting = 0;
        for w in warps.iter_mut() {
            if w.stack.is_empty() {
                continue;
            }
            if !w.at_barrier {
                match b.run_warp(w)? {
                    Yield::Barrier => w.at_barrier = true,
                    Yield::Done => continue,
                }
            }
            waiting += 1;
        }
        if waiting == 0 {
            return Ok(b.stats);
        }
        // Every live warp waits at a barrier: all threads of the block must be there.
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
    }
}

impl<'a> Block<'a> {
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
            Src::Reg(r) => w.regs[r as usize * 32 + lane],
            Src::Imm(v) => v,
            Src::Special(sr) => self.special(w, sr, lane),
        }
    }

    fn special(&self, w: &Warp, s: SReg, lane: usize) -> u64 {
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

    fn pred_mask(&self, w: &Warp, g: Guard, mask: u32) -> u32 {
        let base = g.reg as usize * 32;
        let mut m = 0u32;
        for l in lanes(mask) {
            if (w.regs[base + l] & 1 != 0) != g.negate {
                m |= 1 << l;
            }
        }
        m
    }

    fn exit_lanes(w: &mut Warp, m: u32) {
        w.exited |= m;
        for f in w.stack.iter_mut() {
            f.mask &= !m;
        }
    }

    fn run_warp(&mut self, w: &mut Warp) -> Result<Yield, Box<Fault>> {
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
            if self.steps > self.ctx.step_limit {
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
                Some(g) => self.pred_mask(w, g, top.mask),
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
                Op::Bar { .. } => {
                    if exec == 0 {
                        w.stack.last_mut().expect("top exists").pc = next;
                        continue;
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
            Loc::Global(a) => self.ctx.mem.load(a, size),
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
            Loc::Global(a) => self.ctx.mem.store(a, size, v),
            Loc::Shared(a) => memory::buf_store(&mut self.shared, a, size, v),
            Loc::Local(a) => {
                let lb = self.ctx.kernel.local_bytes as usize;
                memory::buf_store(&mut w.local[lane * lb..(lane + 1) * lb], a, size, v)
            }
            // Kernel parameters are read-only; reported as out of bounds of any writable space.
            Loc::Param(_) => Err(MemErr::OutOfBounds),
        }
    }

    fn exec(
        &mut self,
        w: &mut Warp,
        inst: &Inst,
        exec: u32,
        active: u32,
    ) -> Result<(), Box<Fault>> {
        match &inst.op {
            &Op::Mov { ty, d, a } => {
                let m = ty.mask();
                for l in lanes(exec) {
                    let v = self.rd(w, a, l) & m;
                    w.set(d, l, v);
                }
            }
            Op::Pack {
                d,
                parts,
                part_bits,
            } => {
                let pm = if *part_bits >= 64 {
                    u64::MAX
                } else {
                    (1u64 << part_bits) - 1
                };
                for l in lanes(exec) {
                    let mut v = 0u64;
                    for (i, p) in parts.iter().enumerate() {
                        v |= (self.rd(w, *p, l) & pm) << (i as u32 * part_bits);
                    }
                    w.set(*d, l, v);
                }
            }
            Op::Unpack { ds, a, part_bits } => {
                let pm = if *part_bits >= 64 {
                    u64::MAX
                } else {
                    (1u64 << part_bits) - 1
                };
                for l in lanes(exec) {
                    let v = self.rd(w, *a, l);
                    for (i, d) in ds.iter().enumerate() {
                        if let Some(d) = d {
                            w.set(*d, l, (v >> (i as u32 * part_bits)) & pm);
                        }
                    }
                }
            }
            &Op::IntBin { op, ty, d, a, b } => {
                if exec == u32::MAX && ty.bits() == 32 && op == IntBinOp::Add {
                    // Fast path for the most common instruction: full-warp 32-bit add.
                    for l in 0..32 {
                        let v = (self.rd(w, a, l) as u32).wrapping_add(self.rd(w, b, l) as u32);
                        w.set(d, l, u64::from(v));
                    }
                } else {
                    for l in lanes(exec) {
                        let v = alu::int_bin(op, ty, self.rd(w, a, l), self.rd(w, b, l));
                        w.set(d, l, v);
                    }
                }
            }
            &Op::IntUn { op, ty, d, a } => {
                for l in lanes(exec) {
                    let v = alu::int_un(op, ty, self.rd(w, a, l));
                    w.set(d, l, v);
                }
            }
            &Op::Mad {
                mode,
                ty,
                d,
                a,
                b,
                c,
            } => {
                for l in lanes(exec) {
                    let v = alu::mad(
                        mode,
                        ty,
                        self.rd(w, a, l),
                        self.rd(w, b, l),
                        self.rd(w, c, l),
                    );
                    w.set(d, l, v);
                }
            }
            &Op::Bfe { ty, d, a, pos, len } => {
                for l in lanes(exec) {
                    let v = numeric::bfe(
                        ty,
                        self.rd(w, a, l) & ty.mask(),
                        self.rd(w, pos, l),
                        self.rd(w, len, l),
                    );
                    w.set(d, l, v);
                }
            }
            &Op::Bfi {
                ty,
                d,
                f,
                b,
                pos,
                len,
            } => {
                for l in lanes(exec) {
                    let v = numeric::bfi(
                        ty,
                        self.rd(w, f, l),
                        self.rd(w, b, l),
                        self.rd(w, pos, l),
                        self.rd(w, len, l),
                    );
                    w.set(d, l, v);
                }
            }
            &Op::Prmt { mode, d, a, b, c } => {
                for l in lanes(exec) {
                    let v = numeric::prmt(
                        mode,
                        self.rd(w, a, l) as u32,
                        self.rd(w, b, l) as u32,
                        self.rd(w, c, l) as u32,
                    );
                    w.set(d, l, u64::from(v));
                }
            }
            &Op::Dp {
                a_signed,
                b_signed,
                dp2_hi,
                d,
                a,
                b,
                c,
            } => {
                for l in lanes(exec) {
                    let (x, y, z) = (
                        self.rd(w, a, l) as u32,
                        self.rd(w, b, l) as u32,
                        self.rd(w, c, l) as u32,
                    );
                    let v = warp_ops::dot(a_signed, b_signed, dp2_hi, x, y, z);
                    w.set(d, l, u64::from(v));
                }
            }
            &Op::Lop3 { d, a, b, c, lut } => {
                for l in lanes(exec) {
                    let (x, y, z) = (
                        self.rd(w, a, l) as u32,
                        self.rd(w, b, l) as u32,
                        self.rd(w, c, l) as u32,
                    );
                    let mut v = 0u32;
                    for i in 0..32 {
                        let idx = (((x >> i) & 1) << 2) | (((y >> i) & 1) << 1) | ((z >> i) & 1);
                        v |= u32::from((lut >> idx) & 1) << i;
                    }
                    w.set(d, l, u64::from(v));
                }
            }
            &Op::Shf {
                left,
                clamp,
                d,
                a,
                b,
                c,
            } => {
                for l in lanes(exec) {
                    let (x, y, s) = (
                        self.rd(w, a, l),
                        self.rd(w, b, l) & 0xffff_ffff,
                        self.rd(w, c, l) as u32,
                    );
                    let n = if clamp { s.min(32) } else { s & 31 };
                    let cat = (y << 32) | (x & 0xffff_ffff);
                    let v = if left { (cat << n) >> 32 } else { cat >> n };
                    w.set(d, l, v & 0xffff_ffff);
                }
            }
            &Op::FBin {
                op,
                ty,
                rnd,
                ftz,
                sat,
                d,
                a,
                b,
            } => {
                for l in lanes(exec) {
                    let v = alu::fbin(op, ty, rnd, ftz, sat, self.rd(w, a, l), self.rd(w, b, l));
                    w.set(d, l, v);
                }
            }
            &Op::FUn { op, ty, ftz, d, a } => {
                for l in lanes(exec) {
                    let v = alu::fun(op, ty, ftz, self.rd(w, a, l));
                    w.set(d, l, v);
                }
            }
            &Op::Fma {
                ty,
                rnd,
                ftz,
                sat,
                d,
                a,
                b,
                c,
            } => {
                for l in lanes(exec) {
                    let v = alu::fma(
                        ty,
                        rnd,
                        ftz,
                        sat,
                        self.rd(w, a, l),
                        self.rd(w, b, l),
                        self.rd(w, c, l),
                    );
                    w.set(d, l, v);
                }
            }
            &Op::Setp {
                cmp,
                ty,
                p,
                q,
                a,
                b,
                comb,
            } => {
                for l in lanes(exec) {
                    let t = numeric::compare(cmp, ty, self.rd(w, a, l), self.rd(w, b, l));
                    let (mut r1, mut r2) = (t, !t);
                    if let Some((bop, c, neg)) = comb {
                        let cv = (self.rd(w, c, l) & 1 != 0) != neg;
                        let f = |x: bool| match bop {
                            BoolOp::And => x && cv,
                            BoolOp::Or => x || cv,
                            BoolOp::Xor => x ^ cv,
                        };
                        r1 = f(r1);
                        r2 = f(r2);
                    }
                    w.set(p, l, u64::from(r1));
                    if let Some(q) = q {
                        w.set(q, l, u64::from(r2));
                    }
                }
            }
            &Op::Set {
                cmp,
                dty,
                sty,
                d,
                a,
                b,
            } => {
                for l in lanes(exec) {
                    let t = numeric::compare(cmp, sty, self.rd(w, a, l), self.rd(w, b, l));
                    let v = match (dty, t) {
                        (Ty::F32, true) => u64::from(1.0f32.to_bits()),
                        (_, true) => dty.mask(),
                        (_, false) => 0,
                    };
                    w.set(d, l, v);
                }
            }
            &Op::Selp { ty, d, a, b, c } => {
                for l in lanes(exec) {
                    let v = if self.rd(w, c, l) & 1 != 0 {
                        self.rd(w, a, l)
                    } else {
                        self.rd(w, b, l)
                    };
                    w.set(d, l, v & ty.mask());
                }
            }
            &Op::Cvt {
                dty,
                sty,
                rnd,
                sat,
                ftz,
                d,
                a,
                b,
            } => {
                for l in lanes(exec) {
                    let x = self.rd(w, a, l);
                    let v = match b {
                        Some(b) => {
                            let et = if dty == Ty::F16x2 { Ty::F16 } else { Ty::BF16 };
                            let hi = alu::cvt(et, sty, rnd, sat, ftz, x);
                            let lo = alu::cvt(et, sty, rnd, sat, ftz, self.rd(w, b, l));
                            (hi << 16) | lo
                        }
                        None => alu::cvt(dty, sty, rnd, sat, ftz, x),
                    };
                    w.set(d, l, v);
                }
            }
            &Op::Cvta {
                to_generic,
                space,
                d,
                a,
                bits,
            } => {
                let slot = match space {
                    Space::Shared => SHARED_SLOT,
                    Space::Local => LOCAL_SLOT,
                    _ => 0,
                };
                let m = if bits >= 64 {
                    u64::MAX
                } else {
                    (1u64 << bits) - 1
                };
                for l in lanes(exec) {
                    let x = self.rd(w, a, l);
                    let v = if slot == 0 {
                        x
                    } else if to_generic {
                        (slot << SLOT_SHIFT) | (x & SLOT_MASK)
                    } else if x >> SLOT_SHIFT == slot {
                        x & SLOT_MASK
                    } else {
                        // Not an address of that window: the ISA leaves this undefined; keep the bits so the
                        // access faults later with the offending address.
                        x
                    };
                    w.set(d, l, v & m);
                }
            }
            Op::Ld { .. } | Op::St { .. } | Op::Atom { .. } | Op::CpAsync { .. } => {
                crate::mem_ops::exec_mem(self, w, inst, exec)?
            }
            Op::Shfl { .. }
            | Op::Vote { .. }
            | Op::Redux { .. }
            | Op::Mma { .. }
            | Op::Ldmatrix { .. } => warp_ops::exec_warp(self, w, inst, exec, active)?,
            &Op::Activemask { d } => {
                for l in lanes(exec) {
                    w.set(d, l, u64::from(active));
                }
            }
            Op::Nop => {}
            Op::Unsupported => {
                let lane = exec.trailing_zeros() as usize;
                return Err(self.fault(
                    w,
                    lane,
                    FaultKind::Trap,
                    None,
                    "unsupported instruction".into(),
                ));
            }
            Op::Bra { .. } | Op::Exit | Op::Trap | Op::Bar { .. } => {
                unreachable!("handled by run_warp")
            }
        }
        Ok(())
    }
}
