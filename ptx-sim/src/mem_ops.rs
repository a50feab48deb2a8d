//! Loads, stores, atomics and `cp.async`, with the coalescing and bank-conflict counters.

use crate::alu;
use crate::coalesce::Accesses;
use crate::error::Fault;
use crate::ir::{Addr, Inst, Op, Sem, Space};
use crate::lanes::lanes;
use crate::lanes::{map1, Lanes};
use crate::memory::{Alloc, GlobalMem, MemErr};
use crate::numeric::sext;
use crate::slots::{LOCAL_SLOT, SHARED_SLOT, SLOT_MASK, SLOT_SHIFT, VAR_FIRST_SLOT, VAR_SLOTS};
use crate::state::{Block, Loc, Warp};

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

/// The lanes' accesses of one warp-level request, by memory space, for the counters.
#[derive(Default)]
struct Request {
    global: Accesses,
    shared: Accesses,
}

impl Request {
    #[inline]
    fn add(&mut self, loc: Loc, bytes: u32) {
        match loc {
            Loc::Global(a) => self.global.push(a, bytes),
            Loc::Shared(a) => self.shared.push(a, bytes),
            _ => {}
        }
    }
}

impl Block<'_> {
    fn finish(&mut self, r: &Request, write: bool) {
        if !r.global.is_empty() && self.ctx.mem.any_host_mapped {
            let (host, device) = r.global.split(|a| self.ctx.mem.is_host_mapped(a));
            if !host.is_empty() {
                if write {
                    self.stats.host_bytes_written += host.bytes();
                } else {
                    self.stats.host_bytes_read += host.bytes();
                    self.stats.host_bytes_fetched += host
                        .iter()
                        .map(|(a, n)| self.ctx.mem.fetch_new(a, n))
                        .sum::<u64>();
                }
            }
            let r = Request {
                global: device,
                shared: r.shared,
            };
            return self.finish_counted(&r, write);
        }
        self.finish_counted(r, write)
    }

    /// [`Block::finish`] of a request without host-mapped accesses.
    fn finish_counted(&mut self, r: &Request, write: bool) {
        if !write && r.global.iter().any(|(a, _)| is_module_var(a)) {
            let (vars, rest) = r.global.split(is_module_var);
            self.stats.module_bytes_read += vars.bytes();
            self.stats.module_requests += 1;
            let r = Request {
                global: rest,
                shared: r.shared,
            };
            return self.finish_counted(&r, write);
        }
        if !r.global.is_empty() {
            let (bytes, sectors) = (r.global.bytes(), r.global.sectors());
            let s = &mut self.stats;
            s.global_requests += 1;
            if write {
                s.global_bytes_written += bytes;
                s.sectors_written += sectors;
            } else {
                s.global_bytes_read += bytes;
                s.sectors_read += sectors;
            }
        }
        if !r.shared.is_empty() {
            self.stats.shared_requests += 1;
            self.stats.shared_bank_conflicts += r.shared.bank_conflicts();
        }
    }
}

/// Whether `a` lies in a module-scope variable's slot (`module_vars.rs`).
#[inline]
fn is_module_var(a: u64) -> bool {
    (VAR_FIRST_SLOT..VAR_FIRST_SLOT + VAR_SLOTS).contains(&(a >> SLOT_SHIFT))
}

/// When every lane of `exec` accesses `total` bytes of global memory inside one allocation,
/// naturally aligned: that allocation and each lane's offset in it. Otherwise `None`, and the
/// caller takes the lane-by-lane path, which also finds and reports any fault.
#[inline]
fn warp_global<'m>(
    mem: &'m GlobalMem,
    space: Space,
    addrs: &Lanes,
    exec: u32,
    total: u32,
) -> Option<(&'m Alloc, Lanes)> {
    let first = addrs[exec.trailing_zeros() as usize];
    let slot = first >> SLOT_SHIFT;
    let global = match space {
        Space::Global | Space::Const => true,
        Space::Generic => slot != SHARED_SLOT && slot != LOCAL_SLOT,
        _ => false,
    };
    if !global {
        return None;
    }
    let (mut other_slot, mut misaligned, mut end) = (0u64, 0u64, 0u64);
    for l in lanes(exec) {
        let a = addrs[l];
        other_slot |= (a >> SLOT_SHIFT) ^ slot;
        misaligned |= a & (u64::from(total) - 1);
        end = end.max((a & SLOT_MASK) + u64::from(total));
    }
    let alloc = mem.region(first)?;
    if other_slot != 0 || misaligned != 0 || end > alloc.len() {
        return None;
    }
    Some((alloc, addrs.map(|a| a & SLOT_MASK)))
}

/// Per-lane addresses of `[base + offset]`.
#[inline]
fn lane_addrs(b: &Block, w: &Warp, a: &Addr) -> Lanes {
    let base = b.fetch(w, a.base);
    let off = a.offset as u64;
    base.map(|x| x.wrapping_add(off))
}

/// The allocation holding `total` bytes at global address `a`, with the offset of `a` in it, when
/// the whole range is inside it; `None` sends the caller to the element-by-element path, which
/// reports the fault. `cache` keeps the last allocation found: a warp's lanes nearly always hit the
/// same one.
#[inline]
fn global_range<'m>(
    mem: &'m GlobalMem,
    cache: &mut Option<(u64, &'m Alloc)>,
    a: u64,
    total: u32,
) -> Option<(&'m Alloc, u64)> {
    let slot = a >> SLOT_SHIFT;
    let alloc = match *cache {
        Some((s, alloc)) if s == slot => alloc,
        _ => {
            let alloc = mem.region(a)?;
            *cache = Some((slot, alloc));
            alloc
        }
    };
    let off = a & SLOT_MASK;
    (off + u64::from(total) <= alloc.len()).then_some((alloc, off))
}

pub(crate) fn exec_mem(
    b: &mut Block,
    w: &mut Warp,
    inst: &Inst,
    exec: u32,
) -> Result<(), Box<Fault>> {
    let sem = match &inst.op {
        Op::Ld { sem, .. } | Op::St { sem, .. } | Op::Atom { sem, .. } => *sem,
        _ => Sem::Weak,
    };
    // A release access is a fence followed by the access (PTX: `st.release` orders like
    // `fence.acq_rel; st.relaxed`): the host fence orders this block's earlier stores before it
    // for blocks on other host threads (in order), and the block's buffered stores become
    // visible first (random).
    if sem.releases() {
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        if let Some(buf) = &mut b.weak {
            buf.drain(b.ctx.mem);
        }
    }
    match &inst.op {
        Op::Ld { .. } => load(b, w, &inst.op, exec)?,
        Op::St { .. } => store(b, w, &inst.op, exec)?,
        &Op::Atom {
            space,
            op,
            ty,
            d,
            addr,
            b: bsrc,
            c,
            ..
        } => {
            let size = ty.bytes();
            let addrs = lane_addrs(b, w, &addr);
            let mut req = Request::default();
            for l in lanes(exec) {
                let loc = b.locate(space, addrs[l]);
                let bv = b.rd(w, bsrc, l);
                let cv = c.map(|c| b.rd(w, c, l)).unwrap_or(0);
                let f = |old: u64| alu::atom(op, ty, old, bv, cv);
                let old = match loc {
                    Loc::Global(a) => {
                        if let Some(buf) = &mut b.weak {
                            buf.drain_range(b.ctx.mem, a, size);
                        }
                        b.ctx.mem.rmw(a, size, f)
                    }
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
            let (src_addrs, dst_addrs) = (lane_addrs(b, w, &src), lane_addrs(b, w, &dst));
            let mut reads = Request::default();
            let mut writes = Request::default();
            for l in lanes(exec) {
                let from = b.locate(Space::Global, src_addrs[l]);
                let to = b.locate(Space::Shared, dst_addrs[l]);
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
    if sem.acquires() {
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
    }
    Ok(())
}

/// `ld` of one scalar or vector per lane, warp-wide on the fast path when every lane hits one
/// allocation.
fn load(b: &mut Block, w: &mut Warp, op: &Op, exec: u32) -> Result<(), Box<Fault>> {
    let Op::Ld {
        space,
        ty,
        nc,
        ds,
        addr,
        ..
    } = op
    else {
        unreachable!("load is only called for ld");
    };
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
    let addrs = lane_addrs(b, w, addr);
    let mem = b.ctx.mem;
    let mut req = Request::default();
    let direct = b.direct_loads();
    let fast = if direct {
        warp_global(mem, *space, &addrs, exec, total)
    } else {
        None
    };
    if let Some((alloc, offs)) = fast {
        alloc.mark_read();
        if *nc {
            if let Some(l) = lanes(exec).find(|&l| alloc.stored_this_launch(offs[l], total.into()))
            {
                return Err(non_coherent(b, w, l, addrs[l]));
            }
        }
        for l in lanes(exec) {
            req.global.push(addrs[l], total);
        }
        for (i, d) in ds.iter().enumerate() {
            let Some(d) = *d else { continue };
            let k = u64::from(size) * i as u64;
            let mut v = map1(exec, &offs, |off| alloc.load(off + k, size));
            if ty.is_signed() {
                v = map1(exec, &v, |x| sext(x, ty.bits()) as u64);
            }
            w.put(d, &v, exec);
        }
        b.finish(&req, false);
        return Ok(());
    }
    let mut cache = None;
    for l in lanes(exec) {
        let loc = b.locate(*space, addrs[l]);
        if !loc.addr().is_multiple_of(u64::from(total)) {
            return Err(b.mem_fault(w, l, MemErr::Misaligned, loc, total));
        }
        req.add(loc, total);
        if let (true, Loc::Global(a)) = (*nc, loc) {
            let stored = mem.region(a).is_some_and(|al| {
                let off = a & SLOT_MASK;
                off + u64::from(total) <= al.len() && al.stored_this_launch(off, total.into())
            });
            if stored {
                return Err(non_coherent(b, w, l, a));
            }
        }
        let fast = match loc {
            Loc::Global(a) if direct => global_range(mem, &mut cache, a, total),
            _ => None,
        };
        for (i, d) in ds.iter().enumerate() {
            let k = u64::from(size) * i as u64;
            let v = match fast {
                Some((alloc, off)) => {
                    alloc.mark_read();
                    alloc.load(off + k, size)
                }
                None => {
                    let el = loc.plus(k);
                    b.load(w, l, el, size)
                        .map_err(|e| b.mem_fault(w, l, e, el, size))?
                }
            };
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
    Ok(())
}

/// The fault of lane `l`'s non-coherent load at global address `a`, which a store of the same
/// launch wrote.
fn non_coherent(b: &Block, w: &Warp, l: usize, a: u64) -> Box<Fault> {
    b.fault(
        w,
        l,
        crate::FaultKind::NonCoherentRead,
        Some(a),
        "ld.global.nc/ldu of a word this launch stored: the read-only cache may serve it stale; \
         load it with .relaxed.gpu (or without .nc)"
            .into(),
    )
}

/// `st` of one scalar or vector per lane, warp-wide on the fast path when every lane hits one
/// allocation.
fn store(b: &mut Block, w: &mut Warp, op: &Op, exec: u32) -> Result<(), Box<Fault>> {
    let Op::St {
        space,
        ty,
        sem,
        srcs,
        addr,
    } = op
    else {
        unreachable!("store is only called for st");
    };
    let size = ty.bytes();
    let total = size * srcs.len() as u32;
    if size > 8 {
        return Err(b.fault(
            w,
            exec.trailing_zeros() as usize,
            crate::FaultKind::Misaligned,
            None,
            "128-bit scalar stores are not supported".into(),
        ));
    }
    let addrs = lane_addrs(b, w, addr);
    let mem = b.ctx.mem;
    let mut req = Request::default();
    // Under the random schedule a weak global store goes through `Block::store` into the store
    // buffer; a strong one (`.relaxed`, `.volatile`, `.release`) goes to memory at once, after
    // the buffered bytes of its words (the thread's earlier stores there stay before it).
    let strong = sem.strong();
    if strong && !b.direct_loads() {
        for l in lanes(exec) {
            if let Loc::Global(a) = b.locate(*space, addrs[l]) {
                if let Some(buf) = &mut b.weak {
                    buf.drain_range(mem, a, total);
                }
            }
        }
    }
    let direct = b.weak.is_none() || strong;
    let fast = if direct {
        warp_global(mem, *space, &addrs, exec, total)
    } else {
        None
    };
    if let Some((alloc, offs)) = fast {
        alloc.mark_written();
        for l in lanes(exec) {
            req.global.push(addrs[l], total);
        }
        for (i, s) in srcs.iter().enumerate() {
            let k = u64::from(size) * i as u64;
            let v = b.fetch(w, *s);
            for l in lanes(exec) {
                alloc.store(offs[l] + k, size, v[l] & ty.mask());
            }
        }
        b.finish(&req, true);
        return Ok(());
    }
    let mut cache = None;
    for l in lanes(exec) {
        let loc = b.locate(*space, addrs[l]);
        if !loc.addr().is_multiple_of(u64::from(total)) {
            return Err(b.mem_fault(w, l, MemErr::Misaligned, loc, total));
        }
        req.add(loc, total);
        let fast = match loc {
            Loc::Global(a) if direct => global_range(mem, &mut cache, a, total),
            _ => None,
        };
        for (i, s) in srcs.iter().enumerate() {
            let k = u64::from(size) * i as u64;
            let v = b.rd(w, *s, l) & ty.mask();
            match fast {
                Some((alloc, off)) => {
                    alloc.mark_written();
                    alloc.store(off + k, size, v)
                }
                None => {
                    let el = loc.plus(k);
                    b.store(w, l, el, size, v)
                        .map_err(|e| b.mem_fault(w, l, e, el, size))?
                }
            }
        }
    }
    b.finish(&req, true);
    Ok(())
}
