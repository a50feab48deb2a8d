//! Loads, stores, atomics and `cp.async`, with the coalescing and bank-conflict counters.

use crate::alu;
use crate::error::Fault;
use crate::exec::{lanes, Block, Loc, Warp};
use crate::ir::{Addr, Inst, Op, Space};
use crate::memory::MemErr;
use crate::numeric::sext;

impl Loc {
    fn plus(self, k: u64) -> Loc {
        match self {
            Loc::Global(a) => Loc::Global(a.wrapping_add(k)),
            Loc::Shared(a) => Loc::Shared(a.wrapping_add(k)),
            Loc::Local(a) => Loc::Local(a.wrapping_add(k)),
            Loc::Param(a) => Loc::Param(a.wrapping_add(k)),
        }
    }
    fn addr(self) -> u64 {
        match self {
            Loc::Global(a) | Loc::Shared(a) | Loc::Local(a) | Loc::Param(a) => a,
        }
    }
}

/// Per-request accumulation of the lanes' accesses, for the counters.
struct Request {
    global: Vec<(u64, u32)>,
    shared: Vec<(u64, u32)>,
}

impl Request {
    fn new() -> Request {
        Request {
            global: Vec::with_capacity(32),
            shared: Vec::new(),
        }
    }
    fn add(&mut self, loc: Loc, bytes: u32) {
        match loc {
            Loc::Global(a) => self.global.push((a, bytes)),
            Loc::Shared(a) => self.shared.push((a, bytes)),
            _ => {}
        }
    }
}

impl Block<'_> {
    fn finish(&mut self, r: &Request, write: bool) {
        if !r.global.is_empty() {
            let bytes: u64 = r.global.iter().map(|g| u64::from(g.1)).sum();
            let mut sectors: Vec<u64> = r
                .global
                .iter()
                .flat_map(|&(a, n)| (a >> 5)..=((a + u64::from(n) - 1) >> 5))
                .collect();
            sectors.sort_unstable();
            sectors.dedup();
            let s = &mut self.stats;
            s.global_requests += 1;
            if write {
                s.global_bytes_written += bytes;
                s.sectors_written += sectors.len() as u64;
            } else {
                s.global_bytes_read += bytes;
                s.sectors_read += sectors.len() as u64;
            }
        }
        if !r.shared.is_empty() {
            self.stats.shared_requests += 1;
            self.stats.shared_bank_conflicts += bank_conflicts(&r.shared);
        }
    }
}

/// Extra wavefronts of one shared-memory request (see [`crate::LaunchStats::shared_bank_conflicts`]).
pub(crate) fn bank_conflicts(accesses: &[(u64, u32)]) -> u64 {
    let mut words: Vec<u64> = accesses
        .iter()
        .flat_map(|&(a, n)| (a >> 2)..=((a + u64::from(n) - 1) >> 2))
        .collect();
    words.sort_unstable();
    words.dedup();
    let mut per_bank = [0u64; 32];
    for w in &words {
        per_bank[(w % 32) as usize] += 1;
    }
    let wavefronts = per_bank.iter().copied().max().unwrap_or(0);
    let ideal = (words.len() as u64).div_ceil(32);
    wavefronts.saturating_sub(ideal)
}

fn lane_addr(b: &Block, w: &Warp, a: &Addr, lane: usize) -> u64 {
    b.rd(w, a.base, lane).wrapping_add(a.offset as u64)
}

pub(crate) fn exec_mem(
    b: &mut Block,
    w: &mut Warp,
    inst: &Inst,
    exec: u32,
) -> Result<(), Box<Fault>> {
    match &inst.op {
        Op::Ld {
            space,
            ty,
            ds,
            addr,
        } => {
            let size = ty.bytes();
            let total = size * ds.len() as u32;
            if size > 8 {
                return Err(b.fault(
                    w,
                    exec.trailing_zeros() as usize,
                    crate::FaultKind::Misaligned,
                    None,
                    "128-bit scalar loads are not supported".into(),
                ));
            }
            let mut req = Request::new();
            for l in lanes(exec) {
                let loc = b.locate(*space, lane_addr(b, w, addr, l));
                if !loc.addr().is_multiple_of(u64::from(total)) {
                    return Err(b.mem_fault(w, l, MemErr::Misaligned, loc, total));
                }
                req.add(loc, total);
                for (i, d) in ds.iter().enumerate() {
                    let el = loc.plus(u64::from(size) * i as u64);
                    let v = b
                        .load(w, l, el, size)
                        .map_err(|e| b.mem_fault(w, l, e, el, size))?;
                    let v = if ty.is_signed() {
                        sext(v, ty.bits()) as u64
                    } else {
                        v
                    };
                    if let Some(d) = d {
                        w.set(*d, l, v);
                    }
                }
            }
            b.finish(&req, false);
        }
        Op::St {
            space,
            ty,
            srcs,
            addr,
        } => {
            let size = ty.bytes();
            let total = size * srcs.len() as u32;
            let mut req = Request::new();
            for l in lanes(exec) {
                let loc = b.locate(*space, lane_addr(b, w, addr, l));
                if !loc.addr().is_multiple_of(u64::from(total)) {
                    return Err(b.mem_fault(w, l, MemErr::Misaligned, loc, total));
                }
                req.add(loc, total);
                for (i, s) in srcs.iter().enumerate() {
                    let el = loc.plus(u64::from(size) * i as u64);
                    let v = b.rd(w, *s, l) & ty.mask();
                    b.store(w, l, el, size, v)
                        .map_err(|e| b.mem_fault(w, l, e, el, size))?;
                }
            }
            b.finish(&req, true);
        }
        &Op::Atom {
            space,
            op,
            ty,
            d,
            addr,
            b: bsrc,
            c,
        } => {
            let size = ty.bytes();
            let mut req = Request::new();
            for l in lanes(exec) {
                let loc = b.locate(space, lane_addr(b, w, &addr, l));
                let bv = b.rd(w, bsrc, l);
                let cv = c.map(|c| b.rd(w, c, l)).unwrap_or(0);
                let f = |old: u64| alu::atom(op, ty, old, bv, cv);
                let old = match loc {
                    Loc::Global(a) => b.ctx.mem.rmw(a, size, f),
                    _ => b
                        .load(w, l, loc, size)
                        .and_then(|old| b.store(w, l, loc, size, f(old)).map(|_| old)),
                }
                .map_err(|e| b.mem_fault(w, l, e, loc, size))?;
                req.add(loc, size);
                if let Some(d) = d {
                    w.set(d, l, old);
                }
            }
            // An atomic both reads and writes its location; it is counted once, as a read.
            b.finish(&req, false);
        }
        &Op::CpAsync {
            dst,
            src,
            size,
            src_size,
        } => {
            let mut reads = Request::new();
            let mut writes = Request::new();
            for l in lanes(exec) {
                let from = b.locate(Space::Global, lane_addr(b, w, &src, l));
                let to = b.locate(Space::Shared, lane_addr(b, w, &dst, l));
                let valid = src_size
                    .map(|s| b.rd(w, s, l) as u32)
                    .unwrap_or(size)
                    .min(size);
                for (loc, what) in [(from, "source"), (to, "destination")] {
                    if loc.addr() % u64::from(size) != 0 {
                        let mut f = b.mem_fault(w, l, MemErr::Misaligned, loc, size);
                        f.detail = format!("cp.async {what}: {}", f.detail);
                        return Err(f);
                    }
                }
                for k in (0..size).step_by(4) {
                    let v = if k < valid {
                        let v = b
                            .load(w, l, from.plus(u64::from(k)), 4)
                            .map_err(|e| b.mem_fault(w, l, e, from.plus(u64::from(k)), 4))?;
                        let keep = (valid - k).min(4);
                        if keep == 4 {
                            v
                        } else {
                            v & ((1u64 << (8 * keep)) - 1)
                        }
                    } else {
                        0
                    };
                    b.store(w, l, to.plus(u64::from(k)), 4, v)
                        .map_err(|e| b.mem_fault(w, l, e, to.plus(u64::from(k)), 4))?;
                }
                reads.add(from, valid.max(1));
                writes.add(to, size);
            }
            b.finish(&reads, false);
            b.finish(&writes, true);
        }
        _ => unreachable!("exec_mem is only called for memory instructions"),
    }
    Ok(())
}
