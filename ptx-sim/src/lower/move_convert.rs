//! Lowering of moves (scalar, pack, unpack), type conversions and address-space conversions.

use ptx_front::statement::{Opnd, RawInst};

use super::modifiers::{arity, inst_type, rounding, state_space};
use super::{invalid, unsup, KernelLowering, LResult};
use crate::ir::*;

impl KernelLowering<'_> {
    /// `mov`: a vector destination unpacks, a vector source packs.
    pub(super) fn lower_mov(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        arity(ops, 2)?;
        let t = inst_type(r)?;
        match (&ops[0], &ops[1]) {
            (Opnd::Vec(ds), a) => {
                let part_bits = t.bits() / ds.len() as u32;
                let ds = ds
                    .iter()
                    .map(|x| self.opt_reg(x))
                    .collect::<LResult<Vec<_>>>()?;
                Ok((
                    Op::Unpack {
                        ds: ds.into(),
                        a: self.src(a, t)?,
                        part_bits,
                    },
                    Class::Int,
                ))
            }
            (d, Opnd::Vec(parts)) => {
                let part_bits = t.bits() / parts.len() as u32;
                let pty = match part_bits {
                    8 => Ty::B8,
                    16 => Ty::B16,
                    32 => Ty::B32,
                    _ => Ty::B64,
                };
                let parts = parts
                    .iter()
                    .map(|x| self.src(x, pty))
                    .collect::<LResult<Vec<_>>>()?;
                Ok((
                    Op::Pack {
                        d: self.reg(d)?,
                        parts: parts.into(),
                        part_bits,
                    },
                    Class::Int,
                ))
            }
            (d, a) => Ok((
                Op::Mov {
                    ty: t,
                    d: self.reg(d)?,
                    a: self.src(a, t)?,
                },
                Class::Int,
            )),
        }
    }

    /// `cvt`.
    pub(super) fn lower_cvt(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        let rnd = rounding(&r.mods);
        let ftz = r.has("ftz");
        let sat = r.has("sat") || r.has("satfinite");
        let tys: Vec<Ty> = r.mods.iter().filter_map(|m| Ty::parse(m)).collect();
        let [dty, sty] = tys.as_slice() else {
            return invalid("cvt needs a destination and a source type");
        };
        if r.has("relu") || r.has("satfinite") && !dty.is_float() {
            return unsup("cvt .relu/.satfinite");
        }
        let packed = matches!(dty, Ty::F16x2 | Ty::BF16x2);
        if ops.len() != 2 + usize::from(packed) {
            return invalid("wrong operand count for cvt");
        }
        let d = self.reg(&ops[0])?;
        let reg_bits = self.reg_types[d as usize].bits();
        let signed_int = dty.is_signed() && !dty.is_float();
        Ok((
            Op::Cvt {
                dty: *dty,
                sty: *sty,
                rnd,
                sat,
                ftz,
                sext_to: if signed_int && reg_bits > dty.bits() {
                    reg_bits.min(64)
                } else {
                    0
                },
                d,
                a: self.src(&ops[1], *sty)?,
                b: if packed {
                    Some(self.src(&ops[2], *sty)?)
                } else {
                    None
                },
            },
            Class::Other,
        ))
    }

    /// `cvta`.
    pub(super) fn lower_cvta(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        arity(ops, 2)?;
        let t = inst_type(r)?;
        let space = state_space(&r.mods).unwrap_or(Space::Generic);
        // `.const` variables live in the global address map (`module_vars.rs`), so `cvta.const` is
        // the identity, like `cvta.global`.
        if matches!(space, Space::Generic | Space::Param) {
            return unsup("cvta of this state space");
        }
        Ok((
            Op::Cvta {
                to_generic: !r.has("to"),
                space,
                d: self.reg(&ops[0])?,
                a: self.src(&ops[1], t)?,
                bits: t.bits(),
            },
            Class::Int,
        ))
    }
}
