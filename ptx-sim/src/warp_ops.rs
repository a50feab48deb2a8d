//! Warp-synchronous instructions: `shfl.sync`, `vote.sync`, `redux.sync`, `mma.sync`, `ldmatrix`,
//! and the per-lane byte dot products `dp4a`/`dp2a`. Layouts follow docs/ptx-isa.md (`g = lane >>
//! 2`, `t = lane % 4`).

use crate::alu;
use crate::error::{Fault, FaultKind};
use crate::ir::{Inst, MmaKind, Op, ShflMode, Space, Ty, VoteMode};
use crate::lanes::lanes;
use crate::memory::MemErr;
use crate::state::{Block, Loc, Warp};

/// `dp4a` (`dp2_hi == None`) or `dp2a.lo/.hi`: `c` plus the sum of byte (and for dp2a, halfword x
/// byte) products, each factor sign- or zero-extended per its type, wrapping at 32 bits.
pub(crate) fn dot(
    a_signed: bool,
    b_signed: bool,
    dp2_hi: Option<bool>,
    a: u32,
    b: u32,
    c: u32,
) -> u32 {
    let ext = |v: u32, bits: u32, signed: bool| -> i64 {
        let m = (1u64 << bits) - 1;
        let x = u64::from(v) & m;
        if signed && x >> (bits - 1) != 0 {
            x as i64 - (1i64 << bits)
        } else {
            x as i64
        }
    };
    let mut acc = i64::from(c as i32);
    match dp2_hi {
        None => {
            for i in 0..4 {
                acc += ext(a >> (8 * i), 8, a_signed) * ext(b >> (8 * i), 8, b_signed);
            }
        }
        Some(hi) => {
            // dp2a: two 16-bit halves of `a` times two bytes of `b` (bytes 2,3 for .hi, 0,1 for
            // .lo).
            let base = if hi { 2 } else { 0 };
            for i in 0..2 {
                acc += ext(a >> (16 * i), 16, a_signed) * ext(b >> (8 * (base + i)), 8, b_signed);
            }
        }
    }
    acc as u32
}

fn sync_fault(b: &Block, w: &Warp, lane: usize, detail: String) -> Box<Fault> {
    b.fault(w, lane, FaultKind::WarpSync, None, detail)
}

/// Checks that the executing lanes are exactly the non-exited lanes of `mask` (the `.sync`
/// contract).
fn check_members(b: &Block, w: &Warp, exec: u32, mask: u32, what: &str) -> Result<(), Box<Fault>> {
    if exec & !mask != 0 {
        let lane = (exec & !mask).trailing_zeros() as usize;
        return Err(sync_fault(
            b,
            w,
            lane,
            format!("{what}: executing lane {lane} is not in membermask {mask:#010x}"),
        ));
    }
    let missing = mask & w.valid & !exec;
    if missing != 0 {
        let lane = exec.trailing_zeros() as usize;
        return Err(sync_fault(
            b,
            w,
            lane,
            format!(
                "{what}: membermask {mask:#010x} names lane {} which is not executing it",
                missing.trailing_zeros()
            ),
        ));
    }
    Ok(())
}

pub(crate) fn exec_warp(
    b: &mut Block,
    w: &mut Warp,
    inst: &Inst,
    exec: u32,
    _active: u32,
) -> Result<(), Box<Fault>> {
    let first = exec.trailing_zeros() as usize;
    match inst.op {
        Op::Shfl {
            mode,
            d,
            p,
            a,
            b: bsrc,
            c,
            mask,
        } => {
            let mask = b.rd(w, mask, first) as u32;
            check_members(b, w, exec, mask, "shfl.sync")?;
            let vals: Vec<u64> = (0..32).map(|l| b.rd(w, a, l) & 0xffff_ffff).collect();
            let mut out = [(0u64, false); 32];
            for lane in lanes(exec) {
                let bval = (b.rd(w, bsrc, lane) & 0x1f) as u32;
                let cv = b.rd(w, c, lane) as u32;
                let clamp = cv & 0x1f;
                let seg = (cv >> 8) & 0x1f;
                let l = lane as u32;
                let max_lane = (l & seg) | (clamp & !seg);
                let min_lane = l & seg;
                let (j, pval) = match mode {
                    ShflMode::Up => (
                        l as i32 - bval as i32,
                        l as i32 - bval as i32 >= max_lane as i32,
                    ),
                    ShflMode::Down => ((l + bval) as i32, l + bval <= max_lane),
                    ShflMode::Bfly => ((l ^ bval) as i32, (l ^ bval) <= max_lane),
                    ShflMode::Idx => {
                        let j = min_lane | (bval & !seg);
                        (j as i32, j <= max_lane)
                    }
                };
                let j = if pval { j as usize } else { lane };
                if exec & (1 << j) == 0 {
                    return Err(b.fault(
                        w,
                        lane,
                        FaultKind::WarpSync,
                        None,
                        format!("shfl.sync reads lane {j}, which is outside membermask {mask:#010x} or not executing"),
                    ));
                }
                out[lane] = (vals[j], pval);
            }
            for lane in lanes(exec) {
                w.set(d, lane, out[lane].0);
                if let Some(p) = p {
                    w.set(p, lane, u64::from(out[lane].1));
                }
            }
        }
        Op::Vote {
            mode,
            d,
            a,
            negate,
            mask,
        } => {
            let mask = b.rd(w, mask, first) as u32;
            check_members(b, w, exec, mask, "vote.sync")?;
            let mut ballot = 0u32;
            for l in lanes(exec) {
                if (b.rd(w, a, l) & 1 != 0) != negate {
                    ballot |= 1 << l;
                }
            }
            let v = match mode {
                VoteMode::Ballot => u64::from(ballot),
                VoteMode::All => u64::from(ballot == exec),
                VoteMode::Any => u64::from(ballot != 0),
                VoteMode::Uni => u64::from(ballot == exec || ballot == 0),
            };
            for l in lanes(exec) {
                w.set(d, l, v);
            }
        }
        Op::Redux { op, ty, d, a, mask } => {
            let mask = b.rd(w, mask, first) as u32;
            check_members(b, w, exec, mask, "redux.sync")?;
            let v = alu::redux(op, ty, lanes(exec).map(|l| b.rd(w, a, l)));
            for l in lanes(exec) {
                w.set(d, l, v);
            }
        }
        Op::Mma { .. } => mma(b, w, &inst.op, exec)?,
        Op::Ldmatrix { .. } => ldmatrix(b, w, &inst.op, exec)?,
        _ => unreachable!("exec_warp is only called for warp-synchronous instructions"),
    }
    Ok(())
}

/// `mma.sync` on the whole warp: fragments gathered from the lanes, products accumulated exactly.
fn mma(b: &mut Block, w: &mut Warp, op: &Op, exec: u32) -> Result<(), Box<Fault>> {
    let Op::Mma {
        kind,
        d,
        a,
        b: bregs,
        c,
    } = *op
    else {
        unreachable!("mma is only called for mma.sync");
    };
    let first = exec.trailing_zeros() as usize;
    if exec != u32::MAX {
        return Err(sync_fault(
            b,
            w,
            first,
            format!("mma.sync executed by lanes {exec:#010x}, needs all 32"),
        ));
    }
    let rd = |s, l| b.rd(w, s, l);
    let mut out = [[0u64; 4]; 32];
    match kind {
        MmaKind::F16F32 | MmaKind::Bf16F32 => {
            let et = if kind == MmaKind::F16F32 {
                Ty::F16
            } else {
                Ty::BF16
            };
            let (mut am, mut bm, mut cm) = ([[0f64; 16]; 16], [[0f64; 8]; 16], [[0f64; 8]; 16]);
            for lane in 0..32 {
                let (g, t) = (lane / 4, lane % 4);
                for i in 0..8 {
                    let bits = rd(a[i / 2], lane) >> (16 * (i % 2));
                    let row = if matches!(i, 0 | 1 | 4 | 5) { g } else { g + 8 };
                    let col = 2 * t + (i & 1) + if i >= 4 { 8 } else { 0 };
                    am[row][col] = crate::numeric::to_f64(et, bits & 0xffff);
                }
                for i in 0..4 {
                    let bits = rd(bregs[i / 2], lane) >> (16 * (i % 2));
                    let row = 2 * t + (i & 1) + if i >= 2 { 8 } else { 0 };
                    bm[row][g] = crate::numeric::to_f64(et, bits & 0xffff);
                }
                for i in 0..4 {
                    let row = g + if i >= 2 { 8 } else { 0 };
                    cm[row][2 * t + (i & 1)] = f64::from(f32::from_bits(rd(c[i], lane) as u32));
                }
            }
            for (lane, o) in out.iter_mut().enumerate() {
                let (g, t) = (lane / 4, lane % 4);
                for (i, slot) in o.iter_mut().enumerate() {
                    let row = g + if i >= 2 { 8 } else { 0 };
                    let col = 2 * t + (i & 1);
                    // Products of f16/bf16 values are exact in f64; the sum is rounded once to f32.
                    let s: f64 =
                        (0..16).map(|k| am[row][k] * bm[k][col]).sum::<f64>() + cm[row][col];
                    *slot = u64::from((s as f32).to_bits());
                }
            }
        }
        MmaKind::I8 {
            a_signed,
            b_signed,
            satfinite,
        } => {
            let ext = |v: u64, s: bool| {
                if s {
                    i64::from(v as u8 as i8)
                } else {
                    i64::from(v as u8)
                }
            };
            let (mut am, mut bm, mut cm) = ([[0i64; 32]; 16], [[0i64; 8]; 32], [[0i64; 8]; 16]);
            for lane in 0..32 {
                let (g, t) = (lane / 4, lane % 4);
                for i in 0..16 {
                    let byte = rd(a[i / 4], lane) >> (8 * (i % 4));
                    let row = if i < 4 || (8..12).contains(&i) {
                        g
                    } else {
                        g + 8
                    };
                    let col = 4 * t + (i & 3) + if i >= 8 { 16 } else { 0 };
                    am[row][col] = ext(byte, a_signed);
                }
                for i in 0..8 {
                    let byte = rd(bregs[i / 4], lane) >> (8 * (i % 4));
                    let row = 4 * t + (i & 3) + if i >= 4 { 16 } else { 0 };
                    bm[row][g] = ext(byte, b_signed);
                }
                for i in 0..4 {
                    let row = g + if i >= 2 { 8 } else { 0 };
                    cm[row][2 * t + (i & 1)] = i64::from(rd(c[i], lane) as u32 as i32);
                }
            }
            for (lane, o) in out.iter_mut().enumerate() {
                let (g, t) = (lane / 4, lane % 4);
                for (i, slot) in o.iter_mut().enumerate() {
                    let row = g + if i >= 2 { 8 } else { 0 };
                    let col = 2 * t + (i & 1);
                    let s: i64 =
                        (0..32).map(|k| am[row][k] * bm[k][col]).sum::<i64>() + cm[row][col];
                    let v = if satfinite {
                        s.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
                    } else {
                        s as i32
                    };
                    *slot = u64::from(v as u32);
                }
            }
        }
    }
    for (lane, o) in out.iter().enumerate() {
        for i in 0..4 {
            w.set(d[i], lane, o[i]);
        }
    }
    Ok(())
}

/// `ldmatrix`: each lane supplies one row address, every lane receives its fragment.
fn ldmatrix(b: &mut Block, w: &mut Warp, op: &Op, exec: u32) -> Result<(), Box<Fault>> {
    let Op::Ldmatrix {
        count,
        trans,
        space,
        ref ds,
        addr,
    } = *op
    else {
        unreachable!("ldmatrix is only called for ldmatrix");
    };
    let first = exec.trailing_zeros() as usize;
    if exec != u32::MAX {
        return Err(sync_fault(
            b,
            w,
            first,
            format!("ldmatrix executed by lanes {exec:#010x}, needs all 32"),
        ));
    }
    let space = if space == Space::Generic {
        Space::Generic
    } else {
        Space::Shared
    };
    let mut rows = Vec::with_capacity(8 * count as usize);
    for lane in 0..8 * count as usize {
        let a = b.rd(w, addr.base, lane).wrapping_add(addr.offset as u64);
        let loc = b.locate(space, a);
        if !a.is_multiple_of(16) {
            return Err(b.mem_fault(w, lane, MemErr::Misaligned, loc, 16));
        }
        rows.push(loc);
    }
    let mut accesses = crate::coalesce::Accesses::default();
    for row in &rows {
        if let Loc::Shared(a) = row {
            accesses.push(*a, 16);
        }
    }
    let mut out = vec![[0u64; 4]; 32];
    for m in 0..count as usize {
        // Element (r, c) of matrix m is the b16 at row address r, byte 2c.
        let elem = |r: usize, c: usize, b: &Block, w: &Warp| -> Result<u64, Box<Fault>> {
            let loc = rows[8 * m + r];
            let at = match loc {
                Loc::Shared(x) => Loc::Shared(x + 2 * c as u64),
                Loc::Global(x) => Loc::Global(x + 2 * c as u64),
                Loc::Local(x) => Loc::Local(x + 2 * c as u64),
                Loc::Param(x) => Loc::Param(x + 2 * c as u64),
            };
            b.load(w, 8 * m + r, at, 2)
                .map_err(|e| b.mem_fault(w, 8 * m + r, e, at, 2))
        };
        for (lane, o) in out.iter_mut().enumerate() {
            let (r, c) = (lane / 4, 2 * (lane % 4));
            let (lo, hi) = if trans {
                (elem(c, r, b, w)?, elem(c + 1, r, b, w)?)
            } else {
                (elem(r, c, b, w)?, elem(r, c + 1, b, w)?)
            };
            o[m] = lo | (hi << 16);
        }
    }
    for (lane, o) in out.iter().enumerate() {
        for (m, d) in ds.iter().enumerate() {
            w.set(*d, lane, o[m]);
        }
    }
    b.stats.shared_requests += 1;
    b.stats.shared_bank_conflicts += accesses.bank_conflicts();
    Ok(())
}
