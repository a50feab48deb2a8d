//! Lowering of one kernel: parameters, declarations with their register scopes, then each
//! instruction.

use std::collections::HashMap;

use ptx_front::statement::read_inst;
use ptx_syntax::r#type::{
    EntryFunctionDirective, FunctionStatement, ParameterDirective, StatementDirective,
};

use super::{KernelLowering, LowerErr, MAX_LOCAL};
use crate::error::SimError;
use crate::ir::*;
use crate::types::{data_type_bytes, data_type_name, var_layout};
use crate::{cfg, uninit};

impl KernelLowering<'_> {
    pub(super) fn lower(mut self, f: &EntryFunctionDirective) -> Result<Kernel, SimError> {
        self.name = f.name.val.clone();
        let mut params = Vec::new();
        let mut off = 0u32;
        for p in &f.params {
            match p {
                ParameterDirective::Parameter {
                    align,
                    ptr,
                    ty,
                    name,
                    array,
                    span,
                    ..
                } => {
                    let elem = data_type_bytes(ty);
                    let count: u64 = array.iter().map(|d| d.unwrap_or(0)).product();
                    let size = u64::from(elem) * count.max(1);
                    // With `.ptr`, `.align N` is the alignment of the pointee, not of the
                    // parameter.
                    let a = if *ptr {
                        elem
                    } else {
                        align.unwrap_or(elem).max(1)
                    };
                    off = off.next_multiple_of(a);
                    let size = u32::try_from(size)
                        .ok()
                        .filter(|s| *s <= 32 * 1024)
                        .ok_or_else(|| {
                            self.perr(span.start, "parameter larger than 32 KiB".into())
                        })?;
                    self.params.insert(name.val.clone(), off);
                    params.push(Param {
                        name: name.val.clone(),
                        offset: off,
                        size,
                    });
                    off += size;
                }
                ParameterDirective::Register { span, .. } => {
                    return Err(self.perr(
                        span.start,
                        "register parameters are not kernel parameters".into(),
                    ))
                }
            }
        }
        let Some(body) = &f.body else {
            return Err(self.perr(f.span.start, "kernel has no body".into()));
        };
        // Pass 1: label positions (labels may be referenced before they are defined).
        let mut count = 0u32;
        collect_labels(&body.statements, &mut count, &mut self.labels);
        // Pass 2: declarations and instructions, with register scopes following `{ }` blocks.
        self.walk(&body.statements)?;
        let reconv = cfg::reconvergence_points(&self.insts);
        for (i, r) in reconv.into_iter().enumerate() {
            if let Op::Bra { reconv, .. } = &mut self.insts[i].op {
                *reconv = r;
            }
        }
        let static_shared = match self.shared.dynamic.iter().map(|d| d.1).max() {
            Some(a) => self.shared.size.next_multiple_of(a),
            None => self.shared.size,
        };
        let nregs = self.reg_types.len() as u32;
        Ok(Kernel {
            name: self.name,
            zero_regs: uninit::maybe_uninit_reads(&self.insts, nregs),
            grid_dep_wait: self.insts.iter().any(|i| matches!(i.op, Op::GridDepWait)),
            insts: self.insts,
            nregs,
            params,
            param_bytes: off,
            static_shared,
            local_bytes: self.local_size,
            unsupported: self.unsupported,
        })
    }

    pub(super) fn walk(&mut self, stmts: &[FunctionStatement]) -> Result<(), SimError> {
        for s in stmts {
            match s {
                FunctionStatement::Label { .. } => {}
                FunctionStatement::Block { statements, .. } => {
                    self.scopes.push(HashMap::new());
                    self.walk(statements)?;
                    self.scopes.pop();
                }
                FunctionStatement::Directive { directive, span } => match directive {
                    StatementDirective::Reg { directive, .. } => {
                        let ty = data_type_name(&directive.ty).unwrap_or(Ty::B64);
                        for r in &directive.registers {
                            match r.range {
                                Some(n) => {
                                    for i in 0..n {
                                        self.declare(format!("{}{}", r.name.val, i), ty);
                                    }
                                }
                                None => self.declare(r.name.val.clone(), ty),
                            }
                        }
                    }
                    StatementDirective::Shared { directive, .. } => self
                        .shared
                        .add(directive)
                        .map_err(|m| self.perr(span.start, m))?,
                    StatementDirective::Local { directive, .. } => {
                        let (align, size) = var_layout(directive);
                        let off = self.local_size.next_multiple_of(align);
                        let end = u64::from(off) + size.unwrap_or(0);
                        if end > u64::from(MAX_LOCAL) {
                            return Err(self.perr(
                                span.start,
                                format!("local frame of {end} bytes is too large"),
                            ));
                        }
                        self.local.insert(directive.name.val.clone(), off);
                        self.local_size = end as u32;
                    }
                    _ => {}
                },
                FunctionStatement::Instruction { span, .. } => {
                    let line = self.lines.line(span.start) as u32;
                    let lo = self.toks.partition_point(|t| t.1.start < span.start);
                    let hi = self.toks.partition_point(|t| t.1.end <= span.end);
                    let text = self.src[span.start..span.end.min(self.src.len())]
                        .trim()
                        .trim_end_matches(';')
                        .to_string();
                    let raw = read_inst(&self.toks[lo..hi.max(lo)])
                        .map_err(|m| self.perr(span.start, format!("`{text}`: {m}")))?;
                    match self.lower_inst(&raw) {
                        Ok((op, class)) => {
                            let guard = match &raw.guard {
                                Some((g, negate)) => Some(Guard {
                                    reg: self.reg(g).map_err(|_| {
                                        self.perr(
                                            span.start,
                                            format!("`{text}`: bad guard predicate"),
                                        )
                                    })?,
                                    negate: *negate,
                                }),
                                None => None,
                            };
                            self.insts.push(Inst {
                                op,
                                guard,
                                class,
                                line,
                            });
                        }
                        Err(LowerErr::Unsupported(why)) => {
                            self.unsupported.push((line, format!("{text} ({why})")));
                            self.insts.push(Inst {
                                op: Op::Unsupported,
                                guard: None,
                                class: Class::Other,
                                line,
                            });
                        }
                        Err(LowerErr::Invalid(why)) => {
                            return Err(self.perr(span.start, format!("`{text}`: {why}")))
                        }
                    }
                }
            }
        }
        Ok(())
    }

    pub(super) fn declare(&mut self, name: String, ty: Ty) {
        let idx = self.reg_types.len() as Reg;
        self.reg_types.push(ty);
        self.scopes
            .last_mut()
            .expect("scope stack never empty")
            .insert(name, idx);
    }

    pub(super) fn lookup(&self, name: &str) -> Option<Reg> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }
}

pub(super) fn collect_labels(
    stmts: &[FunctionStatement],
    count: &mut u32,
    labels: &mut HashMap<String, u32>,
) {
    for s in stmts {
        match s {
            FunctionStatement::Label { label, .. } => {
                labels.insert(label.val.clone(), *count);
            }
            FunctionStatement::Instruction { .. } => *count += 1,
            FunctionStatement::Block { statements, .. } => {
                collect_labels(statements, count, labels)
            }
            FunctionStatement::Directive { .. } => {}
        }
    }
}
