//! Lowering of warp-collective instructions: shuffles, votes, reductions, tensor-core matrix loads
//! and `mma`.

use ptx_front::statement::{Opnd, RawInst};

use super::modifiers::{arity, inst_type, state_space};
use super::{invalid, unsup, KernelLowering, LResult, LowerErr};
use crate::ir::*;

impl KernelLowering<'_> {
    /// `shfl`.
    pub(super) fn lower_shfl(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        arity(ops, 5)?;
        if !r.has("sync") {
            return unsup("shfl without .sync");
        }
        let mode = if r.has("up") {
            ShflMode::Up
        } else if r.has("down") {
            ShflMode::Down
        } else if r.has("bfly") {
            ShflMode::Bfly
        } else {
            ShflMode::Idx
        };
        let (d, p) = match &ops[0] {
            Opnd::Pipe(d, p) => (self.reg(d)?, Some(self.reg(p)?)),
            d => (self.reg(d)?, None),
        };
        Ok((
            Op::Shfl {
                mode,
                d,
                p,
                a: self.src(&ops[1], Ty::B32)?,
                b: self.src(&ops[2], Ty::U32)?,
                c: self.src(&ops[3], Ty::U32)?,
                mask: self.src(&ops[4], Ty::U32)?,
            },
            Class::Other,
        ))
    }

    /// `vote`.
    pub(super) fn lower_vote(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        arity(ops, 3)?;
        let mode = if r.has("all") {
            VoteMode::All
        } else if r.has("any") {
            VoteMode::Any
        } else if r.has("uni") {
            VoteMode::Uni
        } else {
            VoteMode::Ballot
        };
        let (a, negate) = match &ops[1] {
            Opnd::Not(a) => (self.src(a, Ty::Pred)?, true),
            a => (self.src(a, Ty::Pred)?, false),
        };
        Ok((
            Op::Vote {
                mode,
                d: self.reg(&ops[0])?,
                a,
                negate,
                mask: self.src(&ops[2], Ty::U32)?,
            },
            Class::Other,
        ))
    }

    /// `redux`.
    pub(super) fn lower_redux(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        arity(ops, 3)?;
        let t = inst_type(r)?;
        if t.is_float() {
            return unsup("redux.sync on f32");
        }
        let rop = match r
            .mods
            .iter()
            .find(|m| matches!(m.as_str(), "add" | "min" | "max" | "and" | "or" | "xor"))
        {
            Some(m) => match m.as_str() {
                "add" => ReduxOp::Add,
                "min" => ReduxOp::Min,
                "max" => ReduxOp::Max,
                "and" => ReduxOp::And,
                "or" => ReduxOp::Or,
                _ => ReduxOp::Xor,
            },
            None => return invalid("redux without operation"),
        };
        Ok((
            Op::Redux {
                op: rop,
                ty: t,
                d: self.reg(&ops[0])?,
                a: self.src(&ops[1], t)?,
                mask: self.src(&ops[2], Ty::U32)?,
            },
            Class::Other,
        ))
    }

    /// `activemask`.
    pub(super) fn lower_activemask(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        arity(ops, 1)?;
        Ok((
            Op::Activemask {
                d: self.reg(&ops[0])?,
            },
            Class::Other,
        ))
    }

    /// `ldmatrix`.
    pub(super) fn lower_ldmatrix(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        arity(ops, 2)?;
        let count = if r.has("x4") {
            4
        } else if r.has("x2") {
            2
        } else {
            1
        };
        if !r.has("m8n8") || inst_type(r)? != Ty::B16 {
            return unsup("ldmatrix shape other than .m8n8 .b16");
        }
        let ds = self.regs_vec(&ops[0], count)?;
        let ds = ds
            .into_iter()
            .map(|d| d.ok_or(LowerErr::Invalid("ldmatrix sink".into())))
            .collect::<LResult<Vec<_>>>()?;
        Ok((
            Op::Ldmatrix {
                count: count as u8,
                trans: r.has("trans"),
                space: state_space(&r.mods).unwrap_or(Space::Generic),
                ds: ds.into(),
                addr: self.addr(&ops[1])?,
            },
            Class::Shared,
        ))
    }

    pub(super) fn lower_mma(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let tys: Vec<Ty> = r.mods.iter().filter_map(|m| Ty::parse(m)).collect();
        if !r.has("row") || !r.has("col") || r.operands.len() != 4 {
            return unsup("mma layout other than .row.col");
        }
        let kind = match (r.has("m16n8k16"), r.has("m16n8k32"), tys.as_slice()) {
            (true, _, [Ty::F32, Ty::F16, Ty::F16, Ty::F32]) => MmaKind::F16F32,
            (true, _, [Ty::F32, Ty::BF16, Ty::BF16, Ty::F32]) => MmaKind::Bf16F32,
            (_, true, [Ty::S32, a @ (Ty::S8 | Ty::U8), b @ (Ty::S8 | Ty::U8), Ty::S32]) => {
                MmaKind::I8 {
                    a_signed: a.is_signed(),
                    b_signed: b.is_signed(),
                    satfinite: r.has("satfinite"),
                }
            }
            _ => return unsup("mma shape/type combination"),
        };
        let acc = if matches!(kind, MmaKind::I8 { .. }) {
            Ty::S32
        } else {
            Ty::F32
        };
        let d = self.regs_vec(&r.operands[0], 4)?;
        let d: Vec<Reg> = d
            .into_iter()
            .map(|x| x.ok_or(LowerErr::Invalid("mma sink".into())))
            .collect::<LResult<_>>()?;
        let a = self.srcs_vec(&r.operands[1], 4, Ty::B32)?;
        let b = self.srcs_vec(&r.operands[2], 2, Ty::B32)?;
        let c = self.srcs_vec(&r.operands[3], 4, acc)?;
        Ok((
            Op::Mma {
                kind,
                d: [d[0], d[1], d[2], d[3]],
                a: [a[0], a[1], a[2], a[3]],
                b: [b[0], b[1]],
                c: [c[0], c[1], c[2], c[3]],
            },
            Class::Tensor,
        ))
    }
}
