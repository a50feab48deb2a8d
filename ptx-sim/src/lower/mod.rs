//! Lowering of a parsed PTX module into per-kernel IR: [`lower_module`] walks the module's directives,
//! [`KernelLowering`] one kernel (`kernel.rs`), and [`KernelLowering::lower_inst`] maps each instruction,
//! read by `ptx_front::statement` as opcode, modifiers and operands, to one IR operation through the
//! module of its instruction family.

mod arith;
mod bits;
mod compare;
mod control;
mod kernel;
mod memory;
mod modifiers;
mod move_convert;
mod operands;
mod warp;

use std::collections::HashMap;

use ptx_front::statement::RawInst;
use ptx_front::{LineIndex, PtxError, Source};
use ptx_syntax::r#type::{ModuleDirective, ModuleVariableDirective, VariableDirective};
use ptx_syntax::{PtxToken, Span};

use crate::error::SimError;
use crate::ir::*;
use crate::module_vars::ModuleVars;
use crate::types::var_layout;

/// Why one instruction could not be lowered.
enum LowerErr {
    /// Valid PTX this simulator does not implement: the kernel still loads, but cannot be launched.
    Unsupported(String),
    /// Malformed or inconsistent PTX (unknown register, wrong operand count): the module is rejected.
    Invalid(String),
}

type LResult<T> = Result<T, LowerErr>;

fn unsup<T>(msg: impl Into<String>) -> LResult<T> {
    Err(LowerErr::Unsupported(msg.into()))
}
fn invalid<T>(msg: impl Into<String>) -> LResult<T> {
    Err(LowerErr::Invalid(msg.into()))
}

/// Shared-memory layout, grown as module- and function-scope `.shared` variables are seen.
#[derive(Clone, Default)]
struct SharedLayout {
    offsets: HashMap<String, u32>,
    /// Names of `.extern .shared x[]` (dynamic) variables with their alignment; they alias the dynamic region.
    dynamic: Vec<(String, u32)>,
    size: u32,
}

impl SharedLayout {
    fn add(&mut self, v: &VariableDirective) -> Result<(), String> {
        let (align, size) = var_layout(v);
        match size {
            Some(s) => {
                let off = self.size.next_multiple_of(align);
                let end = u64::from(off) + s;
                if end > u64::from(MAX_SHARED) {
                    return Err(format!(
                        "static shared memory of {end} bytes exceeds {MAX_SHARED}"
                    ));
                }
                self.offsets.insert(v.name.val.clone(), off);
                self.size = end as u32;
            }
            None => self.dynamic.push((v.name.val.clone(), align)),
        }
        Ok(())
    }
}

/// Largest static + dynamic shared memory per block the simulator accepts (228 KiB, the sm_90 maximum).
pub(crate) const MAX_SHARED: u32 = 228 * 1024;
/// Largest `.local` frame per thread accepted (the ISA's 512 KiB per-thread local memory limit).
pub(crate) const MAX_LOCAL: u32 = 512 * 1024;

/// The simulator's form of a front-end error: the line, and the message without it.
fn parse_error(e: PtxError) -> SimError {
    match e {
        PtxError::Parse { line, message, .. } => SimError::Parse { line, message },
        PtxError::InvalidToken { line, .. } => SimError::Parse {
            line,
            message: "invalid token".into(),
        },
        other => SimError::Parse {
            line: 0,
            message: other.to_string(),
        },
    }
}

pub(crate) fn lower_module(src: &str) -> Result<(Vec<Kernel>, ModuleVars), SimError> {
    let source = Source::new(src);
    let lines = source.lines();
    let module = source.parse().map_err(parse_error)?;
    let toks = source.tokens().map_err(parse_error)?;
    let mut shared = SharedLayout::default();
    let mut module_vars = ModuleVars::default();
    let mut kernels = Vec::new();
    for d in &module.directives {
        match d {
            ModuleDirective::ModuleVariable {
                directive, span, ..
            } => match directive {
                ModuleVariableDirective::Shared { directive, .. } => {
                    shared.add(directive).map_err(|m| SimError::Parse {
                        line: lines.line(span.start),
                        message: m,
                    })?
                }
                ModuleVariableDirective::Global { directive, .. }
                | ModuleVariableDirective::Const { directive, .. } => module_vars
                    .declare(directive, var_layout(directive).1, &toks)
                    .map_err(|m| SimError::Parse {
                        line: lines.line(span.start),
                        message: m,
                    })?,
                ModuleVariableDirective::Tex { directive, .. } => {
                    module_vars.unsupported.insert(
                        directive.name.val.clone(),
                        format!("texture reference `{}`", directive.name.val),
                    );
                }
            },
            ModuleDirective::EntryFunction { directive, .. } => {
                let k = KernelLowering::new(src, &toks, lines, shared.clone(), &module_vars)
                    .lower(directive)?;
                kernels.push(k);
            }
            _ => {}
        }
    }
    Ok((kernels, module_vars))
}
struct KernelLowering<'a> {
    src: &'a str,
    toks: &'a [(PtxToken, Span)],
    lines: &'a LineIndex,
    shared: SharedLayout,
    module_vars: &'a ModuleVars,
    scopes: Vec<HashMap<String, Reg>>,
    reg_types: Vec<Ty>,
    labels: HashMap<String, u32>,
    params: HashMap<String, u32>,
    local: HashMap<String, u32>,
    local_size: u32,
    insts: Vec<Inst>,
    unsupported: Vec<(u32, String)>,
    name: String,
}

impl<'a> KernelLowering<'a> {
    fn new(
        src: &'a str,
        toks: &'a [(PtxToken, Span)],
        lines: &'a LineIndex,
        shared: SharedLayout,
        module_vars: &'a ModuleVars,
    ) -> Self {
        KernelLowering {
            src,
            toks,
            lines,
            shared,
            module_vars,
            scopes: vec![HashMap::new()],
            reg_types: Vec::new(),
            labels: HashMap::new(),
            params: HashMap::new(),
            local: HashMap::new(),
            local_size: 0,
            insts: Vec::new(),
            unsupported: Vec::new(),
            name: String::new(),
        }
    }

    fn perr(&self, byte: usize, message: String) -> SimError {
        SimError::Parse {
            line: self.lines.line(byte),
            message: format!("kernel `{}`: {message}", self.name),
        }
    }

    fn lower_inst(&self, r: &RawInst) -> LResult<(Op, Class)> {
        match r.opcode.as_str() {
            "mov" => self.lower_mov(r),
            "add" | "sub" | "mul" | "div" | "rem" | "min" | "max" | "and" | "or" | "xor"
            | "shl" | "shr" => self.lower_binary(r),
            "neg" | "abs" | "not" | "cnot" | "popc" | "clz" | "brev" | "bfind" | "sqrt"
            | "rsqrt" | "rcp" | "ex2" | "lg2" | "sin" | "cos" | "tanh" => self.lower_unary(r),
            "mad" | "fma" => self.lower_mad(r),
            "bfe" => self.lower_bfe(r),
            "bfi" => self.lower_bfi(r),
            "prmt" => self.lower_prmt(r),
            "dp4a" | "dp2a" => self.lower_dot(r),
            "lop3" => self.lower_lop3(r),
            "shf" => self.lower_shf(r),
            "setp" => self.lower_setp(r),
            "set" => self.lower_set(r),
            "selp" => self.lower_selp(r),
            "cvt" => self.lower_cvt(r),
            "cvta" => self.lower_cvta(r),
            "ld" | "ldu" | "st" => self.lower_ld_st(r),
            "atom" | "red" => self.lower_atom(r),
            "bra" | "brx" => self.lower_branch(r),
            "addc" | "subc" => self.lower_addc(r),
            "ret" | "exit" => Ok((Op::Exit, Class::Control)),
            "trap" => Ok((Op::Trap, Class::Control)),
            "bar" | "barrier" => self.lower_bar(r),
            "membar" | "fence" | "prefetch" | "prefetchu" | "pmevent" | "nanosleep" => {
                Ok((Op::Nop, Class::Other))
            }
            "cp" if r.mods.first().map(String::as_str) == Some("async") => self.lower_cp_async(r),
            "shfl" => self.lower_shfl(r),
            "vote" => self.lower_vote(r),
            "redux" => self.lower_redux(r),
            "activemask" => self.lower_activemask(r),
            "mma" => self.lower_mma(r),
            "ldmatrix" => self.lower_ldmatrix(r),
            _ => unsup("opcode not implemented"),
        }
    }
}
