//! Registers a thread may read before it has written them, found once per kernel at load.
//!
//! PTX registers start undefined; the simulator defines them as zero. Zeroing a whole register file
//! for every block is the dominant cost of short blocks (a gemv block has four warps of ~400
//! registers, i.e. 400 KB to clear for ~1000 warp instructions), so register files are reused from
//! block to block and only the registers this analysis returns are cleared: every other register is
//! written on every path before any read, so a stale value from an earlier block can never be
//! observed.
//!
//! This is the classic forward "definitely assigned" data flow over the instruction graph of one
//! thread: a register is assigned after an instruction if it was assigned on every path into it, or
//! if the instruction writes it unconditionally (a guarded write may not happen). A read of a
//! register that is not definitely assigned marks it.

use crate::ir::{Inst, Op, Reg, Src};

/// Registers of a kernel with `nregs` registers that some thread may read before writing,
/// ascending.
pub(crate) fn maybe_uninit_reads(insts: &[Inst], nregs: u32) -> Vec<Reg> {
    let n = insts.len();
    let words = (nregs as usize).div_ceil(64);
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (i, inst) in insts.iter().enumerate() {
        for s in successors(inst, i, n) {
            preds[s].push(i as u32);
        }
    }
    // `out[i]`: registers definitely assigned after instruction i. Unvisited instructions start at
    // "all", the identity of the intersection; the entry has nothing assigned.
    let mut out = vec![u64::MAX; n * words];
    let mut assigned = vec![0u64; words];
    let mut changed = true;
    while changed {
        changed = false;
        for i in 0..n {
            entry_set(i, &preds[i], &out, words, &mut assigned);
            if insts[i].guard.is_none() {
                writes(&insts[i].op, |r| set(&mut assigned, r));
            }
            let o = &mut out[i * words..(i + 1) * words];
            if *o != assigned[..] {
                o.copy_from_slice(&assigned);
                changed = true;
            }
        }
    }
    let mut uninit = vec![0u64; words];
    for (i, inst) in insts.iter().enumerate() {
        entry_set(i, &preds[i], &out, words, &mut assigned);
        let mut check = |r: Reg| {
            if !get(&assigned, r) {
                set(&mut uninit, r);
            }
        };
        if let Some(g) = inst.guard {
            check(g.reg);
        }
        reads(&inst.op, &mut check);
    }
    (0..nregs).filter(|&r| get(&uninit, r)).collect()
}

/// Registers definitely assigned on entry to instruction `i`: the intersection over its
/// predecessors (instruction 0 is also entered from the kernel start, where nothing is assigned).
fn entry_set(i: usize, preds: &[u32], out: &[u64], words: usize, acc: &mut [u64]) {
    if i == 0 || preds.is_empty() {
        // Unreachable instructions (no predecessor) never run; treating them as entry points is
        // merely conservative.
        acc.fill(0);
        return;
    }
    acc.fill(u64::MAX);
    for &p in preds {
        let p = p as usize;
        for (a, o) in acc.iter_mut().zip(&out[p * words..(p + 1) * words]) {
            *a &= o;
        }
    }
}

fn set(bits: &mut [u64], r: Reg) {
    bits[r as usize / 64] |= 1 << (r % 64);
}

fn get(bits: &[u64], r: Reg) -> bool {
    bits[r as usize / 64] & (1 << (r % 64)) != 0
}

/// Instructions a thread may execute after instruction `i` (falling off the end is an exit).
fn successors(inst: &Inst, i: usize, n: usize) -> impl Iterator<Item = usize> {
    let guarded = inst.guard.is_some();
    let (a, b) = match inst.op {
        Op::Bra { target, .. } => (Some(target as usize), guarded.then_some(i + 1)),
        Op::Exit | Op::Trap => (None, guarded.then_some(i + 1)),
        _ => (Some(i + 1), None),
    };
    a.into_iter().chain(b).filter(move |&s| s < n)
}

/// Calls `f` with each register `op` writes.
fn writes(op: &Op, mut f: impl FnMut(Reg)) {
    match op {
        Op::Mov { d, .. }
        | Op::Pack { d, .. }
        | Op::IntBin { d, .. }
        | Op::Carry { d, .. }
        | Op::IntUn { d, .. }
        | Op::Mad { d, .. }
        | Op::Bfe { d, .. }
        | Op::Bfi { d, .. }
        | Op::Prmt { d, .. }
        | Op::Dp { d, .. }
        | Op::Lop3 { d, .. }
        | Op::Shf { d, .. }
        | Op::FBin { d, .. }
        | Op::FUn { d, .. }
        | Op::Fma { d, .. }
        | Op::Set { d, .. }
        | Op::Selp { d, .. }
        | Op::Cvt { d, .. }
        | Op::Cvta { d, .. }
        | Op::Vote { d, .. }
        | Op::Redux { d, .. }
        | Op::Activemask { d } => f(*d),
        Op::Unpack { ds, .. } | Op::Ld { ds, .. } => ds.iter().flatten().for_each(|&d| f(d)),
        Op::Setp { p, q, .. } => {
            f(*p);
            q.iter().for_each(|&q| f(q));
        }
        Op::Atom { d, .. } => d.iter().for_each(|&d| f(d)),
        Op::Shfl { d, p, .. } => {
            f(*d);
            p.iter().for_each(|&p| f(p));
        }
        Op::Mma { d, .. } => d.iter().for_each(|&d| f(d)),
        Op::Ldmatrix { ds, .. } => ds.iter().for_each(|&d| f(d)),
        Op::St { .. }
        | Op::CpAsync { .. }
        | Op::Bra { .. }
        | Op::Exit
        | Op::Trap
        | Op::Bar { .. }
        | Op::Nop
        | Op::Prefetch { .. }
        | Op::GridDepWait
        | Op::Fence
        | Op::Sleep
        | Op::Unsupported => {}
    }
}

/// Calls `f` with each register `op` reads.
fn reads(op: &Op, mut f: impl FnMut(Reg)) {
    let mut src = |s: &Src| {
        if let Src::Reg(r) = s {
            f(*r)
        }
    };
    match op {
        Op::Mov { a, .. }
        | Op::Unpack { a, .. }
        | Op::IntUn { a, .. }
        | Op::FUn { a, .. }
        | Op::Cvta { a, .. } => src(a),
        Op::Pack { parts, .. } => parts.iter().for_each(src),
        Op::IntBin { a, b, .. }
        | Op::Carry { a, b, .. }
        | Op::FBin { a, b, .. }
        | Op::Set { a, b, .. } => [a, b].into_iter().for_each(src),
        Op::Mad { a, b, c, .. }
        | Op::Prmt { a, b, c, .. }
        | Op::Dp { a, b, c, .. }
        | Op::Lop3 { a, b, c, .. }
        | Op::Shf { a, b, c, .. }
        | Op::Fma { a, b, c, .. }
        | Op::Selp { a, b, c, .. } => [a, b, c].into_iter().for_each(src),
        Op::Bfe { a, pos, len, .. } => [a, pos, len].into_iter().for_each(src),
        Op::Bfi {
            f: x, b, pos, len, ..
        } => [x, b, pos, len].into_iter().for_each(src),
        Op::Setp { a, b, comb, .. } => {
            [a, b].into_iter().for_each(&mut src);
            if let Some((_, c, _)) = comb {
                src(c);
            }
        }
        Op::Cvt { a, b, .. } => {
            src(a);
            b.iter().for_each(src);
        }
        Op::Ld { addr, .. } | Op::Ldmatrix { addr, .. } | Op::Prefetch { addr, .. } => {
            src(&addr.base)
        }
        Op::St { srcs, addr, .. } => {
            srcs.iter().for_each(&mut src);
            src(&addr.base);
        }
        Op::Atom { addr, b, c, .. } => {
            [&addr.base, b].into_iter().for_each(&mut src);
            c.iter().for_each(src);
        }
        Op::CpAsync {
            dst,
            src: s,
            src_size,
            ..
        } => {
            [&dst.base, &s.base].into_iter().for_each(&mut src);
            src_size.iter().for_each(src);
        }
        Op::Bar { id, count } => {
            src(id);
            count.iter().for_each(src);
        }
        Op::Shfl { a, b, c, mask, .. } => [a, b, c, mask].into_iter().for_each(src),
        Op::Vote { a, mask, .. } | Op::Redux { a, mask, .. } => [a, mask].into_iter().for_each(src),
        Op::Mma { a, b, c, .. } => a.iter().chain(b).chain(c).for_each(src),
        Op::Activemask { .. }
        | Op::Bra { .. }
        | Op::Exit
        | Op::Trap
        | Op::Nop
        | Op::GridDepWait
        | Op::Fence
        | Op::Sleep
        | Op::Unsupported => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Class, Guard, IntBinOp, Ty};

    fn inst(op: Op, guard: Option<Guard>) -> Inst {
        Inst {
            op,
            guard,
            class: Class::Int,
            line: 0,
        }
    }

    fn add(d: Reg, a: Reg, b: Reg) -> Op {
        Op::IntBin {
            op: IntBinOp::Add,
            ty: Ty::U32,
            d,
            a: Src::Reg(a),
            b: Src::Reg(b),
        }
    }

    fn mov_imm(d: Reg) -> Op {
        Op::Mov {
            ty: Ty::U32,
            d,
            a: Src::Imm(1),
        }
    }

    #[test]
    fn straight_line_writes_before_reads_need_no_zeroing() {
        let insts = [
            inst(mov_imm(0), None),
            inst(mov_imm(1), None),
            inst(add(2, 0, 1), None),
        ];
        assert_eq!(maybe_uninit_reads(&insts, 3), Vec::<Reg>::new());
    }

    #[test]
    fn reads_before_writes_guarded_writes_and_one_sided_paths_are_found() {
        let p = Guard {
            reg: 3,
            negate: false,
        };
        let insts = [
            // 0: r0 read before any write.
            inst(add(1, 0, 0), None),
            // 1: p (r3) read uninitialised as a guard; r4 written only when p holds.
            inst(mov_imm(4), Some(p)),
            // 2: branch over the write of r5.
            inst(
                Op::Bra {
                    target: 4,
                    reconv: u32::MAX,
                },
                Some(p),
            ),
            inst(mov_imm(5), None),
            // 4: r4 (guarded write) and r5 (one path) may be unassigned; r1 is assigned.
            inst(add(6, 4, 5), None),
            inst(add(7, 1, 6), None),
        ];
        assert_eq!(maybe_uninit_reads(&insts, 8), vec![0, 3, 4, 5]);
    }

    #[test]
    fn loop_carried_registers_assigned_before_the_loop_need_no_zeroing() {
        let insts = [
            inst(mov_imm(0), None),
            // 1: loop head reads r0, which is assigned on entry and on the back edge.
            inst(add(0, 0, 0), None),
            inst(
                Op::Bra {
                    target: 1,
                    reconv: u32::MAX,
                },
                Some(Guard {
                    reg: 0,
                    negate: false,
                }),
            ),
        ];
        assert_eq!(maybe_uninit_reads(&insts, 1), Vec::<Reg>::new());
    }
}
