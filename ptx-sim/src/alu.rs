//! Per-lane semantics of the arithmetic, logic, comparison and conversion instructions.

use crate::ir::{AtomOp, FBinOp, FUnOp, IntBinOp, IntUnOp, MadMode, ReduxOp, Rnd, Ty};
use crate::numeric::{self, ftz32, sext, to_f64};

pub(crate) fn int_bin(op: IntBinOp, ty: Ty, a: u64, b: u64) -> u64 {
    let bits = ty.bits();
    let m = ty.mask();
    let (ua, ub) = (a & m, b & m);
    let (sa, sb) = (sext(a, bits), sext(b, bits));
    let signed = ty.is_signed();
    match op {
        IntBinOp::Add => ua.wrapping_add(ub) & m,
        IntBinOp::Sub => ua.wrapping_sub(ub) & m,
        // `.sat` exists only for s32: clamp to the s32 range.
        IntBinOp::AddSat => (sa as i32).saturating_add(sb as i32) as u32 as u64,
        IntBinOp::SubSat => (sa as i32).saturating_sub(sb as i32) as u32 as u64,
        IntBinOp::MulLo => ua.wrapping_mul(ub) & m,
        IntBinOp::MulHi => {
            if signed {
                ((i128::from(sa) * i128::from(sb)) >> bits) as u64 & m
            } else {
                ((u128::from(ua) * u128::from(ub)) >> bits) as u64 & m
            }
        }
        IntBinOp::MulWide => {
            let wm = crate::types::wide(ty).mask();
            if signed {
                (sa.wrapping_mul(sb)) as u64 & wm
            } else {
                ua.wrapping_mul(ub) & wm
            }
        }
        // Division by zero is unspecified in PTX; hardware returns all ones for the quotient and
        // the dividend for the remainder, which is what is modelled.
        IntBinOp::Div => {
            if ub == 0 {
                m
            } else if signed {
                sa.wrapping_div(sb) as u64 & m
            } else {
                ua / ub
            }
        }
        IntBinOp::Rem => {
            if ub == 0 {
                ua
            } else if signed {
                sa.wrapping_rem(sb) as u64 & m
            } else {
                ua % ub
            }
        }
        IntBinOp::Min => {
            if signed {
                sa.min(sb) as u64 & m
            } else {
                ua.min(ub)
            }
        }
        IntBinOp::Max => {
            if signed {
                sa.max(sb) as u64 & m
            } else {
                ua.max(ub)
            }
        }
        IntBinOp::And => ua & ub,
        IntBinOp::Or => ua | ub,
        IntBinOp::Xor => ua ^ ub,
        // Shift amounts larger than the width clamp (PTX semantics), unlike Rust's shifts.
        IntBinOp::Shl => {
            let s = b & 0xffff_ffff;
            if s >= u64::from(bits) {
                0
            } else {
                (ua << s) & m
            }
        }
        IntBinOp::Shr => {
            let s = (b & 0xffff_ffff).min(u64::from(bits) - 1 + u64::from(!signed));
            if signed {
                (sa >> s.min(63)) as u64 & m
            } else if s >= u64::from(bits) {
                0
            } else {
                ua >> s
            }
        }
    }
}

pub(crate) fn int_un(op: IntUnOp, ty: Ty, a: u64) -> u64 {
    let bits = ty.bits();
    let m = ty.mask();
    let ua = a & m;
    let sa = sext(a, bits);
    match op {
        IntUnOp::Neg => sa.wrapping_neg() as u64 & m,
        IntUnOp::Abs => sa.wrapping_abs() as u64 & m,
        IntUnOp::Not => !ua & m,
        IntUnOp::Cnot => u64::from(ua == 0),
        IntUnOp::Popc => u64::from(ua.count_ones()),
        IntUnOp::Clz => u64::from(ua.leading_zeros() - (64 - bits)),
        IntUnOp::Brev => ua.reverse_bits() >> (64 - bits),
        IntUnOp::Bfind => {
            let v = if ty.is_signed() && sa < 0 {
                !ua & m
            } else {
                ua
            };
            if v == 0 {
                0xffff_ffff
            } else {
                u64::from(63 - v.leading_zeros())
            }
        }
    }
}

pub(crate) fn mad(mode: MadMode, ty: Ty, a: u64, b: u64, c: u64) -> u64 {
    match mode {
        MadMode::Lo => int_bin(IntBinOp::MulLo, ty, a, b).wrapping_add(c) & ty.mask(),
        MadMode::Hi => int_bin(IntBinOp::MulHi, ty, a, b).wrapping_add(c) & ty.mask(),
        MadMode::Wide => {
            let w = crate::types::wide(ty);
            int_bin(IntBinOp::MulWide, ty, a, b).wrapping_add(c) & w.mask()
        }
    }
}

fn sat01(x: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

/// Applies `f` to each 16-bit half of a packed x2 value, or to the whole value for scalar types.
fn per_half(ty: Ty, a: u64, b: u64, c: u64, f: impl Fn(Ty, u64, u64, u64) -> u64) -> u64 {
    match ty {
        Ty::F16x2 | Ty::BF16x2 => {
            let et = if ty == Ty::F16x2 { Ty::F16 } else { Ty::BF16 };
            let lo = f(et, a & 0xffff, b & 0xffff, c & 0xffff) & 0xffff;
            let hi = f(
                et,
                (a >> 16) & 0xffff,
                (b >> 16) & 0xffff,
                (c >> 16) & 0xffff,
            ) & 0xffff;
            lo | (hi << 16)
        }
        _ => f(ty, a, b, c),
    }
}

fn fmin_max(x: f64, y: f64, max: bool) -> f64 {
    if x.is_nan() {
        return y;
    }
    if y.is_nan() {
        return x;
    }
    if x == y {
        // -0.0 is less than +0.0 for min/max.
        return if (x.is_sign_negative()) != max { x } else { y };
    }
    if (x < y) != max {
        x
    } else {
        y
    }
}

pub(crate) fn fbin(op: FBinOp, ty: Ty, rnd: Rnd, ftz: bool, sat: bool, a: u64, b: u64) -> u64 {
    if ty == Ty::F32 && rnd == Rnd::Rn {
        let (mut x, mut y) = (f32::from_bits(a as u32), f32::from_bits(b as u32));
        if ftz {
            x = ftz32(x);
            y = ftz32(y);
        }
        let mut r = match op {
            FBinOp::Add => x + y,
            FBinOp::Sub => x - y,
            FBinOp::Mul => x * y,
            FBinOp::Div => x / y,
            FBinOp::Min => fmin_max(f64::from(x), f64::from(y), false) as f32,
            FBinOp::Max => fmin_max(f64::from(x), f64::from(y), true) as f32,
        };
        if ftz {
            r = ftz32(r);
        }
        if sat {
            r = sat01(f64::from(r)) as f32;
        }
        return u64::from(r.to_bits());
    }
    if ty == Ty::F64 {
        let (x, y) = (f64::from_bits(a), f64::from_bits(b));
        let r = match op {
            FBinOp::Add => x + y,
            FBinOp::Sub => x - y,
            FBinOp::Mul => x * y,
            FBinOp::Div => x / y,
            FBinOp::Min => fmin_max(x, y, false),
            FBinOp::Max => fmin_max(x, y, true),
        };
        return r.to_bits();
    }
    per_half(ty, a, b, 0, |t, a, b, _| {
        let (x, y) = (to_f64(t, a), to_f64(t, b));
        let mut r = match op {
            FBinOp::Add => x + y,
            FBinOp::Sub => x - y,
            FBinOp::Mul => x * y,
            FBinOp::Div => x / y,
            FBinOp::Min => fmin_max(x, y, false),
            FBinOp::Max => fmin_max(x, y, true),
        };
        if sat {
            r = sat01(r);
        }
        numeric::from_f64(t, r, rnd)
    })
}

pub(crate) fn fma(ty: Ty, rnd: Rnd, ftz: bool, sat: bool, a: u64, b: u64, c: u64) -> u64 {
    match ty {
        Ty::F32 => {
            let f = |v: u64| {
                let x = f32::from_bits(v as u32);
                if ftz {
                    ftz32(x)
                } else {
                    x
                }
            };
            let (x, y, z) = (f(a), f(b), f(c));
            let mut r = if rnd == Rnd::Rn {
                x.mul_add(y, z)
            } else {
                numeric::f64_to_f32(f64::from(x) * f64::from(y) + f64::from(z), rnd)
            };
            if ftz {
                r = ftz32(r);
            }
            if sat {
                r = sat01(f64::from(r)) as f32;
            }
            u64::from(r.to_bits())
        }
        Ty::F64 => f64::from_bits(a)
            .mul_add(f64::from_bits(b), f64::from_bits(c))
            .to_bits(),
        _ => per_half(ty, a, b, c, |t, a, b, c| {
            let mut r = to_f64(t, a).mul_add(to_f64(t, b), to_f64(t, c));
            if sat {
                r = sat01(r);
            }
            numeric::from_f64(t, r, rnd)
        }),
    }
}

pub(crate) fn fun(op: FUnOp, ty: Ty, ftz: bool, a: u64) -> u64 {
    let sign: u64 = match ty {
        Ty::F16x2 | Ty::BF16x2 => 0x8000_8000,
        Ty::F16 | Ty::BF16 => 0x8000,
        Ty::F32 => 0x8000_0000,
        _ => 1 << 63,
    };
    match op {
        FUnOp::Neg => return a ^ sign,
        FUnOp::Abs => return a & !sign,
        _ => {}
    }
    per_half(ty, a, 0, 0, |t, a, _, _| {
        let mut x = to_f64(t, a);
        if ftz && t == Ty::F32 {
            x = f64::from(ftz32(x as f32));
        }
        // Exact math in f64, rounded once to the destination type (see the crate docs for the
        // hardware's error bounds on the `.approx` forms).
        let r = match op {
            FUnOp::Sqrt => x.sqrt(),
            FUnOp::Rsqrt => 1.0 / x.sqrt(),
            FUnOp::Rcp => 1.0 / x,
            FUnOp::Ex2 => x.exp2(),
            FUnOp::Lg2 => x.log2(),
            FUnOp::Sin => x.sin(),
            FUnOp::Cos => x.cos(),
            FUnOp::Tanh => x.tanh(),
            FUnOp::Neg | FUnOp::Abs => unreachable!("handled above"),
        };
        let out = numeric::from_f64(t, r, Rnd::Rn);
        if ftz && t == Ty::F32 {
            u64::from(ftz32(f32::from_bits(out as u32)).to_bits())
        } else {
            out
        }
    })
}

/// `cvt` of one value (the packed x2 forms call this per half).
pub(crate) fn cvt(dty: Ty, sty: Ty, rnd: Option<Rnd>, sat: bool, ftz: bool, a: u64) -> u64 {
    let sbits = sty.bits();
    match (dty.is_float(), sty.is_float()) {
        (false, false) => {
            let v: i128 = if sty.is_signed() {
                i128::from(sext(a, sbits))
            } else {
                i128::from(a & sty.mask())
            };
            if sat {
                let (lo, hi) = if dty.is_signed() {
                    (
                        -(1i128 << (dty.bits() - 1)),
                        (1i128 << (dty.bits() - 1)) - 1,
                    )
                } else {
                    (0, (1i128 << dty.bits()) - 1)
                };
                (v.clamp(lo, hi) as u64) & dty.mask()
            } else {
                (v as u64) & dty.mask()
            }
        }
        (true, false) => {
            let v: i128 = if sty.is_signed() {
                i128::from(sext(a, sbits))
            } else {
                i128::from(a & sty.mask())
            };
            let r = numeric::int_to_float(v, dty, rnd.unwrap_or(Rnd::Rn));
            if sat {
                numeric::from_f64(dty, sat01(to_f64(dty, r)), Rnd::Rn)
            } else {
                r
            }
        }
        (false, true) => {
            let mut x = to_f64(sty, a);
            if ftz && sty == Ty::F32 {
                x = f64::from(ftz32(x as f32));
            }
            numeric::float_to_int(x, rnd.unwrap_or(Rnd::Rzi), dty)
        }
        (true, true) => {
            let mut x = to_f64(sty, a);
            if ftz && sty == Ty::F32 {
                x = f64::from(ftz32(x as f32));
            }
            let mut r = rnd.unwrap_or(Rnd::Rn);
            if matches!(r, Rnd::Rni | Rnd::Rzi | Rnd::Rmi | Rnd::Rpi) {
                x = numeric::round_integral(x, r);
                r = Rnd::Rn;
            }
            if sat {
                x = sat01(x);
            }
            let out = numeric::from_f64(dty, x, r);
            if ftz && dty == Ty::F32 {
                u64::from(ftz32(f32::from_bits(out as u32)).to_bits())
            } else {
                out
            }
        }
    }
}

/// New value of an atomic location; `b` and `c` are the instruction's operands.
pub(crate) fn atom(op: AtomOp, ty: Ty, old: u64, b: u64, c: u64) -> u64 {
    let m = ty.mask();
    match op {
        AtomOp::Add if ty == Ty::F32 => {
            u64::from((f32::from_bits(old as u32) + f32::from_bits(b as u32)).to_bits())
        }
        AtomOp::Add if ty == Ty::F64 => (f64::from_bits(old) + f64::from_bits(b)).to_bits(),
        AtomOp::Add => old.wrapping_add(b) & m,
        AtomOp::Min if ty.is_float() => {
            numeric::from_f64(ty, fmin_max(to_f64(ty, old), to_f64(ty, b), false), Rnd::Rn)
        }
        AtomOp::Max if ty.is_float() => {
            numeric::from_f64(ty, fmin_max(to_f64(ty, old), to_f64(ty, b), true), Rnd::Rn)
        }
        AtomOp::Min => int_bin(IntBinOp::Min, ty, old, b),
        AtomOp::Max => int_bin(IntBinOp::Max, ty, old, b),
        AtomOp::Exch => b & m,
        AtomOp::Cas => {
            if old & m == b & m {
                c & m
            } else {
                old
            }
        }
        AtomOp::And => old & b & m,
        AtomOp::Or => (old | b) & m,
        AtomOp::Xor => (old ^ b) & m,
        AtomOp::Inc => {
            if old & m >= b & m {
                0
            } else {
                (old + 1) & m
            }
        }
        AtomOp::Dec => {
            if old & m == 0 || old & m > b & m {
                b & m
            } else {
                (old - 1) & m
            }
        }
    }
}

pub(crate) fn redux(op: ReduxOp, ty: Ty, vals: impl Iterator<Item = u64>) -> u64 {
    let m = ty.mask();
    let signed = ty.is_signed();
    let mut acc: Option<u64> = None;
    for v in vals {
        let v = v & m;
        acc = Some(match acc {
            None => v,
            Some(a) => match op {
                ReduxOp::Add => a.wrapping_add(v) & m,
                ReduxOp::And => a & v,
                ReduxOp::Or => a | v,
                ReduxOp::Xor => a ^ v,
                ReduxOp::Min if signed => int_bin(IntBinOp::Min, ty, a, v),
                ReduxOp::Max if signed => int_bin(IntBinOp::Max, ty, a, v),
                ReduxOp::Min => a.min(v),
                ReduxOp::Max => a.max(v),
            },
        });
    }
    acc.unwrap_or(0)
}
