//! Operands: registers by scope, symbols by state space, literals as raw bits of the operand type,
//! special registers.

use ptx_front::statement::Opnd;

use super::{invalid, unsup, KernelLowering, LResult};
use crate::ir::*;
use crate::types::lit_bits;

impl KernelLowering<'_> {
    /// A destination register.
    pub(super) fn reg(&self, o: &Opnd) -> LResult<Reg> {
        match o {
            Opnd::Reg(n, None) | Opnd::Name(n) => match self.lookup(n) {
                Some(r) => Ok(r),
                None => invalid(format!("undeclared register `{n}`")),
            },
            other => invalid(format!("expected a register, found {other:?}")),
        }
    }

    pub(super) fn opt_reg(&self, o: &Opnd) -> LResult<Option<Reg>> {
        match o {
            Opnd::Sink => Ok(None),
            o => self.reg(o).map(Some),
        }
    }

    /// Address of a named variable in its state space (shared, local, param).
    pub(super) fn symbol(&self, n: &str) -> LResult<(Space, u64)> {
        if let Some(o) = self.shared.offsets.get(n) {
            return Ok((Space::Shared, u64::from(*o)));
        }
        if self.shared.dynamic.iter().any(|d| d.0 == n) {
            let a = self.shared.dynamic.iter().map(|d| d.1).max().unwrap_or(1);
            return Ok((
                Space::Shared,
                u64::from(self.shared.size.next_multiple_of(a)),
            ));
        }
        if let Some(o) = self.local.get(n) {
            return Ok((Space::Local, u64::from(*o)));
        }
        if let Some(o) = self.params.get(n) {
            return Ok((Space::Param, u64::from(*o)));
        }
        match self.module_vars.symbol(n) {
            Some(Ok(s)) => return Ok(s),
            Some(Err(why)) => return unsup(why),
            None => {}
        }
        invalid(format!("unknown symbol `{n}`"))
    }

    /// A source operand of type `ty`.
    pub(super) fn src(&self, o: &Opnd, ty: Ty) -> LResult<Src> {
        match o {
            Opnd::Reg(n, comp) => {
                if let Some(s) = special(n, comp.as_deref()) {
                    return Ok(Src::Special(s));
                }
                if comp.is_some() {
                    return unsup(format!("vector register component `{n}`"));
                }
                self.reg(o).map(Src::Reg)
            }
            Opnd::Name(n) => match self.lookup(n) {
                Some(r) => Ok(Src::Reg(r)),
                None => self.symbol(n).map(|(_, a)| Src::Imm(a)),
            },
            Opnd::Addr(Some(base), off) if matches!(**base, Opnd::Name(_)) => {
                let Opnd::Name(n) = &**base else {
                    unreachable!()
                };
                let (_, a) = self.symbol(n)?;
                Ok(Src::Imm(a.wrapping_add(*off as u64)))
            }
            Opnd::Lit(l) => Ok(Src::Imm(lit_bits(l, ty))),
            other => invalid(format!("bad source operand {other:?}")),
        }
    }

    pub(super) fn addr(&self, o: &Opnd) -> LResult<Addr> {
        match o {
            Opnd::Addr(None, off) => Ok(Addr {
                base: Src::Imm(0),
                offset: *off,
            }),
            Opnd::Addr(Some(b), off) => Ok(Addr {
                base: self.src(b, Ty::U64)?,
                offset: *off,
            }),
            other => invalid(format!("expected an address, found {other:?}")),
        }
    }

    pub(super) fn regs_vec(&self, o: &Opnd, n: usize) -> LResult<Vec<Option<Reg>>> {
        match o {
            Opnd::Vec(v) if v.len() == n => v.iter().map(|x| self.opt_reg(x)).collect(),
            o if n == 1 => Ok(vec![self.opt_reg(o)?]),
            other => invalid(format!("expected {n} registers, found {other:?}")),
        }
    }

    pub(super) fn srcs_vec(&self, o: &Opnd, n: usize, ty: Ty) -> LResult<Vec<Src>> {
        match o {
            Opnd::Vec(v) if v.len() == n => v.iter().map(|x| self.src(x, ty)).collect(),
            o if n == 1 => Ok(vec![self.src(o, ty)?]),
            other => invalid(format!("expected {n} operands, found {other:?}")),
        }
    }
}

pub(super) fn special(name: &str, comp: Option<&str>) -> Option<SReg> {
    let axis = match comp {
        Some("y") => 1,
        Some("z") => 2,
        _ => 0,
    };
    Some(match name {
        "%tid" => SReg::Tid(axis),
        "%ntid" => SReg::Ntid(axis),
        "%ctaid" => SReg::Ctaid(axis),
        "%nctaid" => SReg::Nctaid(axis),
        "%laneid" => SReg::LaneId,
        "%warpid" => SReg::WarpId,
        "%nwarpid" => SReg::NWarpId,
        "%clock" => SReg::Clock,
        "%clock64" => SReg::Clock64,
        "%lanemask_eq" => SReg::LanemaskEq,
        "%lanemask_lt" => SReg::LanemaskLt,
        "%lanemask_le" => SReg::LanemaskLe,
        "%lanemask_gt" => SReg::LanemaskGt,
        "%lanemask_ge" => SReg::LanemaskGe,
        "%dynamic_smem_size" => SReg::DynamicSmemSize,
        _ => return None,
    })
}
