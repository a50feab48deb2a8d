//! Lowering of loads, stores, atomics and asynchronous copies.

use ptx_front::statement::RawInst;

use super::modifiers::{arity, inst_type, mem_class, sem, state_space, vec_width};
use super::{invalid, unsup, KernelLowering, LResult, LowerErr};
use crate::ir::*;

impl KernelLowering<'_> {
    /// `ld`, `ldu`, `st`.
    pub(super) fn lower_ld_st(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        let op = r.opcode.as_str();
        arity(ops, 2)?;
        let t = inst_type(r)?;
        let space = state_space(&r.mods).unwrap_or(Space::Generic);
        let vec = vec_width(&r.mods);
        if op == "st" {
            Ok((
                Op::St {
                    space,
                    ty: t,
                    sem: sem(&r.mods, Sem::Weak),
                    srcs: self.srcs_vec(&ops[1], vec, t)?.into(),
                    addr: self.addr(&ops[0])?,
                },
                mem_class(space),
            ))
        } else {
            Ok((
                Op::Ld {
                    space,
                    ty: t,
                    sem: sem(&r.mods, Sem::Weak),
                    nc: op == "ldu" || r.mods.iter().any(|m| m == "nc"),
                    ds: self.regs_vec(&ops[0], vec)?.into(),
                    addr: self.addr(&ops[1])?,
                },
                mem_class(space),
            ))
        }
    }

    /// `atom`, `red`.
    /// `prefetch{.space}.level [a]`, `prefetchu.L1 [a]` (generic addresses unless a space is
    /// named; the level and eviction priority change nothing in the simulator).
    pub(super) fn lower_prefetch(&self, r: &RawInst) -> LResult<(Op, Class)> {
        arity(&r.operands, 1)?;
        Ok((
            Op::Prefetch {
                space: state_space(&r.mods).unwrap_or(Space::Generic),
                addr: self.addr(&r.operands[0])?,
            },
            Class::Other,
        ))
    }

    pub(super) fn lower_atom(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        let op = r.opcode.as_str();
        let t = inst_type(r)?;
        let space = state_space(&r.mods).unwrap_or(Space::Generic);
        let aop = r
            .mods
            .iter()
            .find_map(|m| {
                Some(match m.as_str() {
                    "add" => AtomOp::Add,
                    "min" => AtomOp::Min,
                    "max" => AtomOp::Max,
                    "exch" => AtomOp::Exch,
                    "cas" => AtomOp::Cas,
                    "and" => AtomOp::And,
                    "or" => AtomOp::Or,
                    "xor" => AtomOp::Xor,
                    "inc" => AtomOp::Inc,
                    "dec" => AtomOp::Dec,
                    _ => return None,
                })
            })
            .ok_or_else(|| LowerErr::Invalid("atom without operation".into()))?;
        if vec_width(&r.mods) != 1 || !matches!(t.bits(), 32 | 64) {
            return unsup("vector or sub-word atomics");
        }
        let (d, rest) = if op == "atom" {
            (
                Some(self.reg(ops.first().ok_or(LowerErr::Invalid("no operands".into()))?)?),
                &ops[1..],
            )
        } else {
            (None, &ops[..])
        };
        let want = if aop == AtomOp::Cas { 3 } else { 2 };
        if rest.len() != want {
            return invalid("wrong operand count for atom/red");
        }
        Ok((
            Op::Atom {
                space,
                op: aop,
                ty: t,
                sem: sem(&r.mods, Sem::Relaxed),
                d,
                addr: self.addr(&rest[0])?,
                b: self.src(&rest[1], t)?,
                c: if want == 3 {
                    Some(self.src(&rest[2], t)?)
                } else {
                    None
                },
            },
            mem_class(space),
        ))
    }

    /// `cp if r.mods.first().map(String::as_str) == Some(async)`.
    pub(super) fn lower_cp_async(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        if r.has("commit_group") || r.has("wait_group") || r.has("wait_all") {
            return Ok((Op::Nop, Class::Other));
        }
        if r.has("bulk") || r.has("mbarrier") {
            return unsup("cp.async.bulk / mbarrier");
        }
        if ops.len() < 3 || ops.len() > 4 {
            return invalid("cp.async needs dst, src, size");
        }
        let size = match self.src(&ops[2], Ty::U32)? {
            Src::Imm(s @ (4 | 8 | 16)) => s as u32,
            _ => return invalid("cp.async size must be 4, 8 or 16"),
        };
        Ok((
            Op::CpAsync {
                dst: self.addr(&ops[0])?,
                src: self.addr(&ops[1])?,
                size,
                src_size: match ops.get(3) {
                    Some(o) => Some(self.src(o, Ty::U32)?),
                    None => None,
                },
            },
            Class::Global,
        ))
    }
}
