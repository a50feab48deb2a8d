//! Bit-exact arithmetic helpers: integer bit manipulation, float formats and rounding.
//!
//! Floats are carried as raw bits. f16/bf16 values are widened exactly to f64, computed there and
//! rounded once to the destination format (exact for add/sub/mul of two f16 or bf16 values, whose
//! exact result fits f64's 53-bit significand). Directed rounding (`.rz/.rm/.rp`) steps the
//! round-to-nearest result by one ulp when it lies on the wrong side of the exact value.

use half::{bf16, f16};

use crate::ir::{Cmp, Rnd, Ty};

/// Sign-extends the low `bits` of `v`.
pub(crate) fn sext(v: u64, bits: u32) -> i64 {
    if bits >= 64 {
        v as i64
    } else {
        ((v << (64 - bits)) as i64) >> (64 - bits)
    }
}

/// Reads bits of type `t` as a float value.
pub(crate) fn to_f64(t: Ty, v: u64) -> f64 {
    match t {
        Ty::F16 | Ty::F16x2 => f16::from_bits(v as u16).to_f64(),
        Ty::BF16 | Ty::BF16x2 => bf16::from_bits(v as u16).to_f64(),
        Ty::F32 => f64::from(f32::from_bits(v as u32)),
        _ => f64::from_bits(v),
    }
}

/// Flushes an f32 subnormal to zero of the same sign.
pub(crate) fn ftz32(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

/// Moves one ulp towards +inf (`up`) or -inf on a sign-magnitude float encoding with sign bit
/// `sign`.
fn step(bits: u32, up: bool, sign: u32) -> u32 {
    if bits & !sign == 0 {
        return if up { 1 } else { sign | 1 };
    }
    if up == (bits & sign == 0) {
        bits + 1
    } else {
        bits - 1
    }
}

/// Whether the round-to-nearest result `rv` lies on the wrong side of `x` for `rnd`, and which way
/// to step.
fn directed_fix(x: f64, rv: f64, rnd: Rnd) -> Option<bool> {
    let (wrong, up) = match rnd {
        Rnd::Rz => (rv.abs() > x.abs(), x < 0.0),
        Rnd::Rm => (rv > x, false),
        Rnd::Rp => (rv < x, true),
        _ => (false, false),
    };
    (wrong && !x.is_nan()).then_some(up)
}

/// Rounds the exact value `x` (f64) to f32 with `rnd` (integer-rounding variants act as
/// round-to-nearest).
pub(crate) fn f64_to_f32(x: f64, rnd: Rnd) -> f32 {
    let r = x as f32;
    match directed_fix(x, f64::from(r), rnd) {
        Some(up) => f32::from_bits(step(r.to_bits(), up, 0x8000_0000)),
        None => r,
    }
}

macro_rules! half_round {
    ($name:ident, $t:ty) => {
        /// Rounds the exact value `x` to this 16-bit format with `rnd`.
        pub(crate) fn $name(x: f64, rnd: Rnd) -> u16 {
            let r = <$t>::from_f64(x);
            match directed_fix(x, r.to_f64(), rnd) {
                Some(up) => step(u32::from(r.to_bits()), up, 0x8000) as u16,
                None => r.to_bits(),
            }
        }
    };
}
half_round!(f64_to_f16, f16);
half_round!(f64_to_bf16, bf16);

/// Rounds an exact value to float type `t` and returns its bits.
pub(crate) fn from_f64(t: Ty, x: f64, rnd: Rnd) -> u64 {
    match t {
        Ty::F16 | Ty::F16x2 => u64::from(f64_to_f16(x, rnd)),
        Ty::BF16 | Ty::BF16x2 => u64::from(f64_to_bf16(x, rnd)),
        Ty::F32 => u64::from(f64_to_f32(x, rnd).to_bits()),
        _ => x.to_bits(),
    }
}

/// Rounds to an integral value per the `cvt` integer-rounding modifiers (`.rni` etc.; plain `.rn`
/// etc. too).
pub(crate) fn round_integral(x: f64, rnd: Rnd) -> f64 {
    match rnd {
        Rnd::Rni | Rnd::Rn => x.round_ties_even(),
        Rnd::Rzi | Rnd::Rz => x.trunc(),
        Rnd::Rmi | Rnd::Rm => x.floor(),
        Rnd::Rpi | Rnd::Rp => x.ceil(),
        Rnd::Rna => x.round(),
    }
}

/// Float -> integer conversion with PTX semantics: round per `rnd`, saturate to the integer range,
/// NaN -> 0.
pub(crate) fn float_to_int(x: f64, rnd: Rnd, dty: Ty) -> u64 {
    if x.is_nan() {
        return 0;
    }
    let r = round_integral(x, rnd);
    let bits = dty.bits();
    if dty.is_signed() {
        let (lo, hi) = (
            -(2f64.powi(bits as i32 - 1)),
            2f64.powi(bits as i32 - 1) - 1.0,
        );
        let v = if r <= lo {
            i64::MIN >> (64 - bits)
        } else if r >= hi {
            i64::MAX >> (64 - bits)
        } else {
            r as i64
        };
        (v as u64) & dty.mask()
    } else {
        let hi = 2f64.powi(bits as i32) - 1.0;
        if r <= 0.0 {
            0
        } else if r >= hi {
            dty.mask()
        } else {
            r as u64
        }
    }
}

/// Integer -> float conversion of `v` (already sign/zero extended into i128) with `rnd`. f32/f64
/// results are correctly rounded (Rust's `as` rounds to nearest even exactly; directed modes step
/// one ulp after an exact integer comparison). f16/bf16 results go through f64, exact for |v| <=
/// 2^53.
pub(crate) fn int_to_float(v: i128, dty: Ty, rnd: Rnd) -> u64 {
    let wrong = |r: i128| -> Option<bool> {
        let (wrong, up) = match rnd {
            Rnd::Rz => (r.unsigned_abs() > v.unsigned_abs(), v < 0),
            Rnd::Rm => (r > v, false),
            Rnd::Rp => (r < v, true),
            _ => (false, false),
        };
        wrong.then_some(up)
    };
    match dty {
        Ty::F64 => {
            let r = v as f64;
            match wrong(r as i128) {
                Some(up) => {
                    let b = r.to_bits();

                    if b << 1 == 0 {
                        if up {
                            1
                        } else {
                            (1 << 63) | 1
                        }
                    } else if up == (r > 0.0) {
                        b + 1
                    } else {
                        b - 1
                    }
                }
                None => r.to_bits(),
            }
        }
        Ty::F32 => {
            let r = v as f32;
            match wrong(r as i128) {
                Some(up) => u64::from(step(r.to_bits(), up, 0x8000_0000)),
                None => u64::from(r.to_bits()),
            }
        }
        _ => from_f64(dty, v as f64, rnd),
    }
}

/// Compares per `setp`/`set`. Integers compare by the signedness of `t` for the ordered operators.
pub(crate) fn compare(cmp: Cmp, t: Ty, a: u64, b: u64) -> bool {
    if t.is_float() {
        let (x, y) = (to_f64(t, a), to_f64(t, b));
        let unordered = x.is_nan() || y.is_nan();
        return match cmp {
            Cmp::Eq => !unordered && x == y,
            Cmp::Ne => !unordered && x != y,
            Cmp::Lt => !unordered && x < y,
            Cmp::Le => !unordered && x <= y,
            Cmp::Gt => !unordered && x > y,
            Cmp::Ge => !unordered && x >= y,
            Cmp::Equ => unordered || x == y,
            Cmp::Neu => unordered || x != y,
            Cmp::Ltu => unordered || x < y,
            Cmp::Leu => unordered || x <= y,
            Cmp::Gtu => unordered || x > y,
            Cmp::Geu => unordered || x >= y,
            Cmp::Num => !unordered,
            Cmp::Nan => unordered,
            Cmp::Lo => !unordered && x < y,
            Cmp::Ls => !unordered && x <= y,
            Cmp::Hi => !unordered && x > y,
            Cmp::Hs => !unordered && x >= y,
        };
    }
    let bits = t.bits();
    let (ua, ub) = (a & t.mask(), b & t.mask());
    let (sa, sb) = (sext(a, bits), sext(b, bits));
    let signed = t.is_signed();
    match cmp {
        Cmp::Eq | Cmp::Equ => ua == ub,
        Cmp::Ne | Cmp::Neu => ua != ub,
        Cmp::Lt | Cmp::Ltu => {
            if signed {
                sa < sb
            } else {
                ua < ub
            }
        }
        Cmp::Le | Cmp::Leu => {
            if signed {
                sa <= sb
            } else {
                ua <= ub
            }
        }
        Cmp::Gt | Cmp::Gtu => {
            if signed {
                sa > sb
            } else {
                ua > ub
            }
        }
        Cmp::Ge | Cmp::Geu => {
            if signed {
                sa >= sb
            } else {
                ua >= ub
            }
        }
        Cmp::Lo => ua < ub,
        Cmp::Ls => ua <= ub,
        Cmp::Hi => ua > ub,
        Cmp::Hs => ua >= ub,
        Cmp::Num => true,
        Cmp::Nan => false,
    }
}

/// Mask of the low `n` bits (all ones from 64 up).
fn low_bits(n: u64) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// `bfe` per the ISA pseudocode: bit `i` of the result is bit `pos + i` of `a` while `i < len` and
/// `pos + i <= msb`, and the sign bit (bit `min(pos + len - 1, msb)` of `a` for signed types with
/// `len > 0`, else 0) above that. `pos` and `len` use their low 8 bits.
pub(crate) fn bfe(t: Ty, a: u64, pos: u64, len: u64) -> u64 {
    let bits = u64::from(t.bits());
    let msb = bits - 1;
    let pos = pos & 0xff;
    let len = len & 0xff;
    let sbit = if !t.is_signed() || len == 0 {
        0
    } else {
        (a >> (pos + len - 1).min(msb)) & 1
    };
    // The number of result bits taken from `a`.
    let width = if pos > msb { 0 } else { len.min(bits - pos) };
    let field = if width == 0 {
        0
    } else {
        (a >> pos) & low_bits(width)
    };
    let fill = if sbit == 1 {
        t.mask() & !low_bits(width)
    } else {
        0
    };
    field | fill
}

/// `bfi`: insert the low `len` bits of `f` into `b` at `pos` (bits past the type's msb are
/// dropped).
pub(crate) fn bfi(t: Ty, f: u64, b: u64, pos: u64, len: u64) -> u64 {
    let bits = u64::from(t.bits());
    let (pos, len) = (pos & 0xff, len & 0xff);
    if pos >= bits {
        return b & t.mask();
    }
    let m = low_bits(len.min(bits - pos)) << pos;
    ((b & !m) | ((f << pos) & m)) & t.mask()
}

/// `prmt` per docs/ptx-isa.md#prmt.
pub(crate) fn prmt(mode: crate::ir::PrmtMode, a: u32, b: u32, c: u32) -> u32 {
    use crate::ir::PrmtMode::*;
    let tmp = (u64::from(b) << 32) | u64::from(a);
    let byte = |i: u32| ((tmp >> (8 * i)) & 0xff) as u32;
    let sel: [u32; 4] = match mode {
        Generic => {
            let mut d = 0u32;
            for k in 0..4 {
                let ctl = (c >> (4 * k)) & 0xf;
                let mut v = byte(ctl & 7);
                if ctl & 8 != 0 {
                    v = if v & 0x80 != 0 { 0xff } else { 0 };
                }
                d |= v << (8 * k);
            }
            return d;
        }
        // Tables list d.b3 d.b2 d.b1 d.b0; stored here as [b0, b1, b2, b3].
        F4e => [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]][(c & 3) as usize],
        B4e => [[0, 7, 6, 5], [1, 0, 7, 6], [2, 1, 0, 7], [3, 2, 1, 0]][(c & 3) as usize],
        Rc8 => [[0; 4], [1; 4], [2; 4], [3; 4]][(c & 3) as usize],
        Ecl => [[0, 1, 2, 3], [1, 1, 2, 3], [2, 2, 2, 3], [3, 3, 3, 3]][(c & 3) as usize],
        Ecr => [[0, 0, 0, 0], [0, 1, 1, 1], [0, 1, 2, 2], [0, 1, 2, 3]][(c & 3) as usize],
        Rc16 => [[0, 1, 0, 1], [2, 3, 2, 3], [0, 1, 0, 1], [2, 3, 2, 3]][(c & 3) as usize],
    };
    sel.iter()
        .enumerate()
        .fold(0, |d, (k, &s)| d | (byte(s) << (8 * k)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ISA's per-bit pseudocode for `bfe`.
    fn bfe_per_bit(t: Ty, a: u64, pos: u64, len: u64) -> u64 {
        let msb = t.bits() as u64 - 1;
        let (pos, len) = (pos & 0xff, len & 0xff);
        let sbit = if !t.is_signed() || len == 0 {
            0
        } else {
            (a >> (pos + len - 1).min(msb)) & 1
        };
        let mut d = 0u64;
        for i in 0..=msb {
            let bit = if i < len && pos + i <= msb {
                (a >> (pos + i)) & 1
            } else {
                sbit
            };
            d |= bit << i;
        }
        d
    }

    /// The ISA's per-bit pseudocode for `bfi`.
    fn bfi_per_bit(t: Ty, f: u64, b: u64, pos: u64, len: u64) -> u64 {
        let msb = t.bits() as u64 - 1;
        let (pos, len) = (pos & 0xff, len & 0xff);
        let mut d = b;
        for i in 0..len {
            if pos + i > msb {
                break;
            }
            d = (d & !(1 << (pos + i))) | (((f >> i) & 1) << (pos + i));
        }
        d & t.mask()
    }

    #[test]
    fn bit_field_closed_forms_match_the_per_bit_definition() {
        let values = [
            0u64,
            1,
            0x8000_0000,
            0xffff_ffff,
            0x1234_5678_9abc_def0,
            u64::MAX,
            0x8000_0000_0000_0000,
            0x0f0f_f0f0,
        ];
        let positions = [
            0u64,
            1,
            4,
            8,
            15,
            16,
            24,
            31,
            32,
            33,
            48,
            63,
            64,
            100,
            255,
            256 + 3,
        ];
        for t in [Ty::U32, Ty::S32, Ty::U64, Ty::S64] {
            for &a in &values {
                let a = a & t.mask();
                for &pos in &positions {
                    for &len in &positions {
                        assert_eq!(
                            bfe(t, a, pos, len),
                            bfe_per_bit(t, a, pos, len),
                            "bfe {t:?} a={a:#x} pos={pos} len={len}"
                        );
                        let f = a.rotate_left(13);
                        assert_eq!(
                            bfi(t, f, a, pos, len),
                            bfi_per_bit(t, f, a, pos, len),
                            "bfi {t:?} f={f:#x} b={a:#x} pos={pos} len={len}"
                        );
                    }
                }
            }
        }
    }
}
