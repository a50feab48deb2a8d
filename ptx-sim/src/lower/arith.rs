//! Lowering of integer and floating-point arithmetic: binary and unary operations, multiply-add,
//! and add/subtract with carry.

use ptx_front::statement::{Opnd, RawInst};

use super::modifiers::{arity, fclass, inst_type, rounding};
use super::{unsup, KernelLowering, LResult};
use crate::ir::*;
use crate::types::wide;

impl KernelLowering<'_> {
    /// `add`, `sub`, `mul`, `div`, `rem`, `min`, `max`, `and`, `or`, `xor`, `shl`, `shr`: float or
    /// integer by the instruction type; `.cc` writes the carry.
    pub(super) fn lower_binary(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        let op = r.opcode.as_str();
        let rnd = rounding(&r.mods);
        let ftz = r.has("ftz");
        let sat = r.has("sat") || r.has("satfinite");
        arity(ops, 3)?;
        let t = inst_type(r)?;
        let d = self.reg(&ops[0])?;
        if t.is_float() && !matches!(op, "rem" | "and" | "or" | "xor" | "shl" | "shr") {
            if r.has("NaN") || r.has("xorsign") {
                return unsup("min/max .NaN/.xorsign");
            }
            let fop = match op {
                "add" => FBinOp::Add,
                "sub" => FBinOp::Sub,
                "mul" => FBinOp::Mul,
                "div" => FBinOp::Div,
                "min" => FBinOp::Min,
                _ => FBinOp::Max,
            };
            return Ok((
                Op::FBin {
                    op: fop,
                    ty: t,
                    rnd: rnd.unwrap_or(Rnd::Rn),
                    ftz,
                    sat,
                    d,
                    a: self.src(&ops[1], t)?,
                    b: self.src(&ops[2], t)?,
                },
                fclass(t),
            ));
        }
        if r.has("cc") && matches!(op, "add" | "sub") {
            return self.carry(op == "sub", false, true, t, ops);
        }
        if r.has("cc") || t == Ty::F16x2 {
            return unsup("carry or packed integer form");
        }
        let iop = match op {
            "add" if sat => IntBinOp::AddSat,
            "sub" if sat => IntBinOp::SubSat,
            "add" => IntBinOp::Add,
            "sub" => IntBinOp::Sub,
            "mul" if r.has("hi") => IntBinOp::MulHi,
            "mul" if r.has("wide") => IntBinOp::MulWide,
            "mul" => IntBinOp::MulLo,
            "div" => IntBinOp::Div,
            "rem" => IntBinOp::Rem,
            "min" => IntBinOp::Min,
            "max" => IntBinOp::Max,
            "and" => IntBinOp::And,
            "or" => IntBinOp::Or,
            "xor" => IntBinOp::Xor,
            "shl" => IntBinOp::Shl,
            _ => IntBinOp::Shr,
        };
        let bty = if matches!(iop, IntBinOp::Shl | IntBinOp::Shr) {
            Ty::U32
        } else {
            t
        };
        Ok((
            Op::IntBin {
                op: iop,
                ty: t,
                d,
                a: self.src(&ops[1], t)?,
                b: self.src(&ops[2], bty)?,
            },
            Class::Int,
        ))
    }

    /// `neg`, `abs`, `not`, `cnot`, `popc`, `clz`, `brev`, `bfind` (integer or float), and the
    /// float-only `sqrt`, `rsqrt`, `rcp`, `ex2`, `lg2`, `sin`, `cos`, `tanh`.
    pub(super) fn lower_unary(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        let op = r.opcode.as_str();
        let ftz = r.has("ftz");
        arity(ops, 2)?;
        let t = inst_type(r)?;
        let d = self.reg(&ops[0])?;
        let a = self.src(&ops[1], t)?;
        if t.is_float() && !matches!(op, "not" | "cnot" | "popc" | "clz" | "brev" | "bfind") {
            let fop = match op {
                "neg" => FUnOp::Neg,
                "abs" => FUnOp::Abs,
                "sqrt" => FUnOp::Sqrt,
                "rsqrt" => FUnOp::Rsqrt,
                "rcp" => FUnOp::Rcp,
                "ex2" => FUnOp::Ex2,
                "lg2" => FUnOp::Lg2,
                "sin" => FUnOp::Sin,
                "cos" => FUnOp::Cos,
                _ => FUnOp::Tanh,
            };
            return Ok((
                Op::FUn {
                    op: fop,
                    ty: t,
                    ftz,
                    d,
                    a,
                },
                fclass(t),
            ));
        }
        let iop = match op {
            "neg" => IntUnOp::Neg,
            "abs" => IntUnOp::Abs,
            "not" => IntUnOp::Not,
            "cnot" => IntUnOp::Cnot,
            "popc" => IntUnOp::Popc,
            "clz" => IntUnOp::Clz,
            "brev" => IntUnOp::Brev,
            "bfind" if !r.has("shiftamt") => IntUnOp::Bfind,
            _ => return unsup("integer form of a float-only instruction"),
        };
        Ok((
            Op::IntUn {
                op: iop,
                ty: t,
                d,
                a,
            },
            Class::Int,
        ))
    }

    /// `mad`, `fma`.
    pub(super) fn lower_mad(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        let rnd = rounding(&r.mods);
        let ftz = r.has("ftz");
        let sat = r.has("sat") || r.has("satfinite");
        arity(ops, 4)?;
        let t = inst_type(r)?;
        let d = self.reg(&ops[0])?;
        let (a, b) = (&ops[1], &ops[2]);
        if t.is_float() {
            return Ok((
                Op::Fma {
                    ty: t,
                    rnd: rnd.unwrap_or(Rnd::Rn),
                    ftz,
                    sat,
                    d,
                    a: self.src(a, t)?,
                    b: self.src(b, t)?,
                    c: self.src(&ops[3], t)?,
                },
                fclass(t),
            ));
        }
        if r.has("cc") || sat {
            return unsup("mad.cc / mad.sat");
        }
        let mode = if r.has("hi") {
            MadMode::Hi
        } else if r.has("wide") {
            MadMode::Wide
        } else {
            MadMode::Lo
        };
        let cty = if mode == MadMode::Wide { wide(t) } else { t };
        Ok((
            Op::Mad {
                mode,
                ty: t,
                d,
                a: self.src(a, t)?,
                b: self.src(b, t)?,
                c: self.src(&ops[3], cty)?,
            },
            Class::Int,
        ))
    }

    /// `addc`, `subc`.
    pub(super) fn lower_addc(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        let op = r.opcode.as_str();
        arity(ops, 3)?;
        self.carry(op == "subc", true, r.has("cc"), inst_type(r)?, ops)
    }

    /// An add/subtract that writes the carry flag, and reads it when `carry_in`.
    pub(super) fn carry(
        &self,
        sub: bool,
        carry_in: bool,
        carry_out: bool,
        t: Ty,
        ops: &[Opnd],
    ) -> LResult<(Op, Class)> {
        if !matches!(t, Ty::U32 | Ty::S32 | Ty::U64 | Ty::S64) || ops.len() != 3 {
            return unsup("carry arithmetic form");
        }
        Ok((
            Op::Carry {
                sub,
                carry_in,
                carry_out,
                ty: t,
                d: self.reg(&ops[0])?,
                a: self.src(&ops[1], t)?,
                b: self.src(&ops[2], t)?,
            },
            Class::Int,
        ))
    }
}
