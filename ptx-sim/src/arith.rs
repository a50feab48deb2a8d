//! Warp-wide execution of the arithmetic, logic, comparison and conversion instructions.
//!
//! Each instruction fetches its operands as lane vectors, picks the per-lane function once from its
//! opcode and types, and maps it over the executing lanes (see `lanes.rs`). The common forms
//! emitted by rustc and the project's kernels (32/64-bit integer add/mul/shift/logic,
//! `mad.lo`/`mad.wide`, `dp4a`, f32 `.rn` add/mul/fma, integer<->f32 `cvt`, integer `setp`) have
//! dedicated lane functions (`fast_lanes.rs`); every other form calls the general per-lane
//! semantics in `alu.rs`/`numeric.rs`, which define the results.

use crate::alu;
use crate::fast_lanes::{compare, cvt, dp4a, fbin, fma, int_bin, lop3, mad};
use crate::ir::*;
use crate::lanes::{map1, map2, map3, Lanes, WARP};
use crate::numeric::{self, sext};
use crate::slots::{LOCAL_SLOT, SHARED_SLOT, SLOT_MASK, SLOT_SHIFT};
use crate::state::{Block, Warp};
use crate::warp_ops;

/// Executes `op` (not a memory, warp-synchronous or control instruction) for the lanes of `exec`.
pub(crate) fn exec(b: &Block, w: &mut Warp, op: &Op, exec: u32) {
    match op {
        Op::Mov { .. } | Op::Pack { .. } | Op::Unpack { .. } | Op::Cvt { .. } | Op::Cvta { .. } => {
            moves_and_conversions(b, w, op, exec)
        }
        Op::IntBin { .. }
        | Op::Carry { .. }
        | Op::IntUn { .. }
        | Op::Mad { .. }
        | Op::Bfe { .. }
        | Op::Bfi { .. }
        | Op::Prmt { .. }
        | Op::Dp { .. }
        | Op::Lop3 { .. }
        | Op::Shf { .. } => integer(b, w, op, exec),
        Op::FBin { .. }
        | Op::FUn { .. }
        | Op::Fma { .. }
        | Op::Setp { .. }
        | Op::Set { .. }
        | Op::Selp { .. } => float_and_compare(b, w, op, exec),
        _ => unreachable!("arith::exec is only called for arithmetic instructions"),
    }
}

/// `mov` (scalar, pack, unpack), `cvt` and `cvta`.
fn moves_and_conversions(b: &Block, w: &mut Warp, op: &Op, exec: u32) {
    match *op {
        Op::Mov { ty, d, a } => {
            let m = ty.mask();
            let v = map1(exec, &b.fetch(w, a), |x| x & m);
            w.put(d, &v, exec);
        }
        Op::Pack {
            d,
            ref parts,
            part_bits,
        } => {
            let pm = low_mask(part_bits);
            let mut v = [0u64; WARP];
            // Parts beyond bit 63 (a 128-bit pack) do not fit the 64-bit container.
            for (i, p) in parts
                .iter()
                .enumerate()
                .take_while(|(i, _)| (*i as u32) * part_bits < 64)
            {
                let shift = i as u32 * part_bits;
                let x = b.fetch(w, *p);
                for l in 0..WARP {
                    v[l] |= (x[l] & pm) << shift;
                }
            }
            w.put(d, &v, exec);
        }
        Op::Unpack {
            ref ds,
            a,
            part_bits,
        } => {
            let pm = low_mask(part_bits);
            let x: Lanes = *b.fetch(w, a);
            for (i, d) in ds.iter().enumerate() {
                if let Some(d) = *d {
                    let shift = i as u32 * part_bits;
                    let v = map1(exec, &x, |v| v.checked_shr(shift).unwrap_or(0) & pm);
                    w.put(d, &v, exec);
                }
            }
        }
        Op::Cvt {
            dty,
            sty,
            rnd,
            sat,
            ftz,
            sext_to,
            d,
            a,
            b: lo,
        } => {
            let x = b.fetch(w, a);
            let v = match lo {
                Some(lo) => {
                    let et = if dty == Ty::F16x2 { Ty::F16 } else { Ty::BF16 };
                    map2(exec, &x, &b.fetch(w, lo), |hi, lo| {
                        (alu::cvt(et, sty, rnd, sat, ftz, hi) << 16)
                            | alu::cvt(et, sty, rnd, sat, ftz, lo)
                    })
                }
                None if sext_to != 0 => {
                    let (bits, m) = (dty.bits(), u64::MAX >> (64 - sext_to));
                    let narrow = cvt(dty, sty, rnd, sat, ftz, exec, &x);
                    map1(exec, &narrow, |v| sext(v, bits) as u64 & m)
                }
                None => cvt(dty, sty, rnd, sat, ftz, exec, &x),
            };
            w.put(d, &v, exec);
        }
        Op::Cvta {
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
            let m = low_mask(bits);
            let v = map1(exec, &b.fetch(w, a), |x| {
                let v = if slot == 0 {
                    x
                } else if to_generic {
                    (slot << SLOT_SHIFT) | (x & SLOT_MASK)
                } else if x >> SLOT_SHIFT == slot {
                    x & SLOT_MASK
                } else {
                    // Not an address of that window: the ISA leaves this undefined; keep the bits
                    // so the access faults later with the offending address.
                    x
                };
                v & m
            });
            w.put(d, &v, exec);
        }
        _ => unreachable!("arith::moves_and_conversions is only called for moves and conversions"),
    }
}

/// Integer and bit-manipulation instructions.
fn integer(b: &Block, w: &mut Warp, op: &Op, exec: u32) {
    match *op {
        Op::IntBin {
            op,
            ty,
            d,
            a,
            b: bs,
        } => {
            let v = int_bin(op, ty, exec, &b.fetch(w, a), &b.fetch(w, bs));
            w.put(d, &v, exec);
        }
        Op::Carry {
            sub,
            carry_in,
            carry_out,
            ty,
            d,
            a,
            b: bs,
        } => {
            let (x, y) = (b.fetch(w, a), b.fetch(w, bs));
            let (m, bits) = (ty.mask(), ty.bits());
            let mut v = [0u64; WARP];
            let mut flags = 0u32;
            for l in crate::lanes::lanes(exec) {
                let cin = u128::from(carry_in && w.carry & (1 << l) != 0);
                let (x, y) = (u128::from(x[l] & m), u128::from(y[l] & m));
                let (r, out) = if sub {
                    (x.wrapping_sub(y + cin), x < y + cin)
                } else {
                    let s = x + y + cin;
                    (s, s >> bits != 0)
                };
                v[l] = r as u64 & m;
                flags |= u32::from(out) << l;
            }
            w.put(d, &v, exec);
            if carry_out {
                w.carry = (w.carry & !exec) | flags;
            }
        }
        Op::IntUn { op, ty, d, a } => {
            let v = map1(exec, &b.fetch(w, a), |x| alu::int_un(op, ty, x));
            w.put(d, &v, exec);
        }
        Op::Mad {
            mode,
            ty,
            d,
            a,
            b: bs,
            c,
        } => {
            let (x, y, z) = (b.fetch(w, a), b.fetch(w, bs), b.fetch(w, c));
            let v = mad(mode, ty, exec, &x, &y, &z);
            w.put(d, &v, exec);
        }
        Op::Bfe { ty, d, a, pos, len } => {
            let m = ty.mask();
            let (x, p, n) = (b.fetch(w, a), b.fetch(w, pos), b.fetch(w, len));
            let v = map3(exec, &x, &p, &n, |x, p, n| numeric::bfe(ty, x & m, p, n));
            w.put(d, &v, exec);
        }
        Op::Bfi {
            ty,
            d,
            f,
            b: bs,
            pos,
            len,
        } => {
            let (x, y) = (b.fetch(w, f), b.fetch(w, bs));
            let (p, n) = (b.fetch(w, pos), b.fetch(w, len));
            let mut v = [0u64; WARP];
            for l in crate::lanes::lanes(exec) {
                v[l] = numeric::bfi(ty, x[l], y[l], p[l], n[l]);
            }
            w.put(d, &v, exec);
        }
        Op::Prmt {
            mode,
            d,
            a,
            b: bs,
            c,
        } => {
            let (x, y, z) = (b.fetch(w, a), b.fetch(w, bs), b.fetch(w, c));
            let v = map3(exec, &x, &y, &z, |x, y, z| {
                u64::from(numeric::prmt(mode, x as u32, y as u32, z as u32))
            });
            w.put(d, &v, exec);
        }
        Op::Dp {
            a_signed,
            b_signed,
            dp2_hi,
            d,
            a,
            b: bs,
            c,
        } => {
            let (x, y, z) = (b.fetch(w, a), b.fetch(w, bs), b.fetch(w, c));
            let v = match (dp2_hi, a_signed, b_signed) {
                (None, true, true) => map3(exec, &x, &y, &z, dp4a::<true, true>),
                (None, false, false) => map3(exec, &x, &y, &z, dp4a::<false, false>),
                (None, true, false) => map3(exec, &x, &y, &z, dp4a::<true, false>),
                (None, false, true) => map3(exec, &x, &y, &z, dp4a::<false, true>),
                (Some(_), ..) => map3(exec, &x, &y, &z, |x, y, z| {
                    let r = warp_ops::dot(a_signed, b_signed, dp2_hi, x as u32, y as u32, z as u32);
                    u64::from(r)
                }),
            };
            w.put(d, &v, exec);
        }
        Op::Lop3 {
            d,
            a,
            b: bs,
            c,
            lut,
        } => {
            let (x, y, z) = (b.fetch(w, a), b.fetch(w, bs), b.fetch(w, c));
            let v = map3(exec, &x, &y, &z, |x, y, z| lop3(lut, x, y, z));
            w.put(d, &v, exec);
        }
        Op::Shf {
            left,
            clamp,
            d,
            a,
            b: bs,
            c,
        } => {
            let (x, y, z) = (b.fetch(w, a), b.fetch(w, bs), b.fetch(w, c));
            let v = map3(exec, &x, &y, &z, |x, y, s| {
                let s = s as u32;
                let n = if clamp { s.min(32) } else { s & 31 };
                let cat = ((y & 0xffff_ffff) << 32) | (x & 0xffff_ffff);
                let r = if left { (cat << n) >> 32 } else { cat >> n };
                r & 0xffff_ffff
            });
            w.put(d, &v, exec);
        }
        _ => unreachable!("arith::integer is only called for integer instructions"),
    }
}

/// Floating-point arithmetic, comparisons and selection.
fn float_and_compare(b: &Block, w: &mut Warp, op: &Op, exec: u32) {
    match *op {
        Op::FBin {
            op,
            ty,
            rnd,
            ftz,
            sat,
            d,
            a,
            b: bs,
        } => {
            let (x, y) = (b.fetch(w, a), b.fetch(w, bs));
            w.put(d, &fbin(op, ty, rnd, ftz, sat, exec, &x, &y), exec);
        }
        Op::FUn { op, ty, ftz, d, a } => {
            let v = map1(exec, &b.fetch(w, a), |x| alu::fun(op, ty, ftz, x));
            w.put(d, &v, exec);
        }
        Op::Fma {
            ty,
            rnd,
            ftz,
            sat,
            d,
            a,
            b: bs,
            c,
        } => {
            let (x, y, z) = (b.fetch(w, a), b.fetch(w, bs), b.fetch(w, c));
            w.put(d, &fma(ty, rnd, ftz, sat, exec, &x, &y, &z), exec);
        }
        Op::Setp {
            cmp,
            ty,
            p,
            q,
            a,
            b: bs,
            comb,
        } => {
            let t = compare(cmp, ty, exec, &b.fetch(w, a), &b.fetch(w, bs));
            let (mut r1, mut r2) = (t, map1(exec, &t, |v| v ^ 1));
            if let Some((bop, c, neg)) = comb {
                let cv = map1(exec, &b.fetch(w, c), |v| (v & 1) ^ u64::from(neg));
                let f = |x: u64, c: u64| match bop {
                    BoolOp::And => x & c,
                    BoolOp::Or => x | c,
                    BoolOp::Xor => x ^ c,
                };
                r1 = map2(exec, &r1, &cv, f);
                r2 = map2(exec, &r2, &cv, f);
            }
            w.put(p, &r1, exec);
            if let Some(q) = q {
                w.put(q, &r2, exec);
            }
        }
        Op::Set {
            cmp,
            dty,
            sty,
            d,
            a,
            b: bs,
        } => {
            let t = compare(cmp, sty, exec, &b.fetch(w, a), &b.fetch(w, bs));
            let one = match dty {
                Ty::F32 => u64::from(1.0f32.to_bits()),
                _ => dty.mask(),
            };
            w.put(d, &map1(exec, &t, |t| if t != 0 { one } else { 0 }), exec);
        }
        Op::Selp { ty, d, a, b: bs, c } => {
            let m = ty.mask();
            let (x, y, z) = (b.fetch(w, a), b.fetch(w, bs), b.fetch(w, c));
            let v = map3(
                exec,
                &x,
                &y,
                &z,
                |x, y, c| if c & 1 != 0 { x & m } else { y & m },
            );
            w.put(d, &v, exec);
        }
        _ => unreachable!(
            "arith::float_and_compare is only called for float, compare and select instructions"
        ),
    }
}

/// Mask of the low `bits` bits (all ones from 64 up).
fn low_mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}
