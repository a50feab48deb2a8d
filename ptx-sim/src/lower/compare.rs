//! Lowering of comparisons and selection.

use ptx_front::statement::{Opnd, RawInst};

use super::modifiers::{arity, fclass, inst_type, parse_cmp};
use super::{invalid, unsup, KernelLowering, LResult, LowerErr};
use crate::ir::*;

impl KernelLowering<'_> {
    /// `setp`.
    pub(super) fn lower_setp(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        let t = inst_type(r)?;
        let cmp = r
            .mods
            .iter()
            .find_map(|m| parse_cmp(m))
            .ok_or_else(|| LowerErr::Invalid("setp without comparison".into()))?;
        let bop = r.mods.iter().find_map(|m| match m.as_str() {
            "and" => Some(BoolOp::And),
            "or" => Some(BoolOp::Or),
            "xor" => Some(BoolOp::Xor),
            _ => None,
        });
        if ops.len() != 3 + usize::from(bop.is_some()) {
            return invalid("wrong operand count for setp");
        }
        let (p, q) = match &ops[0] {
            Opnd::Pipe(p, q) => (self.reg(p)?, Some(self.reg(q)?)),
            p => (self.reg(p)?, None),
        };
        let comb = match (bop, ops.get(3)) {
            (Some(b), Some(Opnd::Not(c))) => Some((b, self.src(c, Ty::Pred)?, true)),
            (Some(b), Some(c)) => Some((b, self.src(c, Ty::Pred)?, false)),
            _ => None,
        };
        Ok((
            Op::Setp {
                cmp,
                ty: t,
                p,
                q,
                a: self.src(&ops[1], t)?,
                b: self.src(&ops[2], t)?,
                comb,
            },
            fclass(t),
        ))
    }

    /// `set`.
    pub(super) fn lower_set(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        arity(ops, 3)?;
        let tys: Vec<Ty> = r.mods.iter().filter_map(|m| Ty::parse(m)).collect();
        let cmp = r.mods.iter().find_map(|m| parse_cmp(m));
        match (cmp, tys.as_slice()) {
            (Some(cmp), [dty, sty]) if !r.has("and") && !r.has("or") && !r.has("xor") => Ok((
                Op::Set {
                    cmp,
                    dty: *dty,
                    sty: *sty,
                    d: self.reg(&ops[0])?,
                    a: self.src(&ops[1], *sty)?,
                    b: self.src(&ops[2], *sty)?,
                },
                fclass(*sty),
            )),
            _ => unsup("set form"),
        }
    }

    /// `selp`.
    pub(super) fn lower_selp(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        arity(ops, 4)?;
        let t = inst_type(r)?;
        Ok((
            Op::Selp {
                ty: t,
                d: self.reg(&ops[0])?,
                a: self.src(&ops[1], t)?,
                b: self.src(&ops[2], t)?,
                c: self.src(&ops[3], Ty::Pred)?,
            },
            Class::Int,
        ))
    }
}
