//! Lowering of bit-field, byte-permute, dot-product, three-input logic and funnel-shift
//! instructions.

use ptx_front::statement::RawInst;

use super::modifiers::{arity, inst_type};
use super::{invalid, KernelLowering, LResult};
use crate::ir::*;

impl KernelLowering<'_> {
    /// `bfe`.
    pub(super) fn lower_bfe(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        arity(ops, 4)?;
        let t = inst_type(r)?;
        Ok((
            Op::Bfe {
                ty: t,
                d: self.reg(&ops[0])?,
                a: self.src(&ops[1], t)?,
                pos: self.src(&ops[2], Ty::U32)?,
                len: self.src(&ops[3], Ty::U32)?,
            },
            Class::Int,
        ))
    }

    /// `bfi`.
    pub(super) fn lower_bfi(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        arity(ops, 5)?;
        let t = inst_type(r)?;
        Ok((
            Op::Bfi {
                ty: t,
                d: self.reg(&ops[0])?,
                f: self.src(&ops[1], t)?,
                b: self.src(&ops[2], t)?,
                pos: self.src(&ops[3], Ty::U32)?,
                len: self.src(&ops[4], Ty::U32)?,
            },
            Class::Int,
        ))
    }

    /// `prmt`.
    pub(super) fn lower_prmt(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        arity(ops, 4)?;
        let mode = if r.has("f4e") {
            PrmtMode::F4e
        } else if r.has("b4e") {
            PrmtMode::B4e
        } else if r.has("rc8") {
            PrmtMode::Rc8
        } else if r.has("ecl") {
            PrmtMode::Ecl
        } else if r.has("ecr") {
            PrmtMode::Ecr
        } else if r.has("rc16") {
            PrmtMode::Rc16
        } else {
            PrmtMode::Generic
        };
        Ok((
            Op::Prmt {
                mode,
                d: self.reg(&ops[0])?,
                a: self.src(&ops[1], Ty::B32)?,
                b: self.src(&ops[2], Ty::B32)?,
                c: self.src(&ops[3], Ty::B32)?,
            },
            Class::Int,
        ))
    }

    /// `dp4a`, `dp2a`.
    pub(super) fn lower_dot(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        let op = r.opcode.as_str();
        arity(ops, 4)?;
        let tys: Vec<Ty> = r.mods.iter().filter_map(|m| Ty::parse(m)).collect();
        if tys.len() != 2 {
            return invalid("dp4a/dp2a need two types");
        }
        let dp2_hi = if op == "dp2a" {
            Some(r.has("hi"))
        } else {
            None
        };
        Ok((
            Op::Dp {
                a_signed: tys[0].is_signed(),
                b_signed: tys[1].is_signed(),
                dp2_hi,
                d: self.reg(&ops[0])?,
                a: self.src(&ops[1], Ty::B32)?,
                b: self.src(&ops[2], Ty::B32)?,
                c: self.src(&ops[3], Ty::B32)?,
            },
            Class::Int,
        ))
    }

    /// `lop3`: the LUT must be an immediate.
    pub(super) fn lower_lop3(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        arity(ops, 5)?;
        let lut = match self.src(&ops[4], Ty::B32)? {
            Src::Imm(v) => v as u8,
            _ => return invalid("lop3 LUT must be an immediate"),
        };
        Ok((
            Op::Lop3 {
                d: self.reg(&ops[0])?,
                a: self.src(&ops[1], Ty::B32)?,
                b: self.src(&ops[2], Ty::B32)?,
                c: self.src(&ops[3], Ty::B32)?,
                lut,
            },
            Class::Int,
        ))
    }

    /// `shf`.
    pub(super) fn lower_shf(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        arity(ops, 4)?;
        Ok((
            Op::Shf {
                left: r.has("l"),
                clamp: r.has("clamp"),
                d: self.reg(&ops[0])?,
                a: self.src(&ops[1], Ty::B32)?,
                b: self.src(&ops[2], Ty::B32)?,
                c: self.src(&ops[3], Ty::U32)?,
            },
            Class::Int,
        ))
    }
}
