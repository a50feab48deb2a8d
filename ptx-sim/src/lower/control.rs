//! Lowering of branches and barriers (`ret`, `exit`, `trap` and the no-op hints map directly in
//! `lower_inst`).

use ptx_front::statement::{Opnd, RawInst};

use super::modifiers::arity;
use super::{invalid, unsup, KernelLowering, LResult};
use crate::ir::*;

impl KernelLowering<'_> {
    /// `bra`, `brx`: direct branches only; the reconvergence point is filled in after the kernel is
    /// lowered.
    pub(super) fn lower_branch(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        arity(ops, 1)?;
        let Opnd::Name(l) = &ops[0] else {
            return unsup("indirect branch");
        };
        match self.labels.get(l) {
            Some(t) => Ok((
                Op::Bra {
                    target: *t,
                    reconv: u32::MAX,
                },
                Class::Control,
            )),
            None => invalid(format!("unknown label `{l}`")),
        }
    }

    /// `bar`, `barrier`.
    pub(super) fn lower_bar(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        if r.has("warp") {
            return Ok((Op::Nop, Class::Control));
        }
        if !(r.has("sync") || r.mods.is_empty() || r.has("cta")) || r.has("arrive") || r.has("red")
        {
            return unsup("bar.arrive / bar.red");
        }
        let count = match ops.len() {
            0 | 1 => None,
            2 => Some(self.src(&ops[1], Ty::U32)?),
            _ => return invalid("bar.sync takes a barrier id and an optional count"),
        };
        let id = match ops.first() {
            Some(o) => self.src(o, Ty::U32)?,
            None => Src::Imm(0),
        };
        Ok((Op::Bar { id, count }, Class::Control))
    }
}
