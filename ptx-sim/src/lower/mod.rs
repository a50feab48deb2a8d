//! Lowering of a parsed PTX module into per-kernel IR: [`lower_module`] walks the module's
//! directives, [`KernelLowering`] one kernel (`kernel.rs`), and [`KernelLowering::lower_inst`] maps
//! each instruction, read by `ptx_front::statement` as opcode, modifiers and operands, to one IR
//! operation through the module of its instruction family.

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
use std::ops::Range;
use std::sync::OnceLock;

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
    /// Malformed or inconsistent PTX (unknown register, wrong operand count): the module is
    /// rejected.
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
    /// Names of `.extern .shared x[]` (dynamic) variables with their alignment; they alias the
    /// dynamic region.
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

/// Largest static + dynamic shared memory per block the simulator accepts (228 KiB, the sm_90
/// maximum).
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
    let (kernels, _, vars) = lower_text(src, None)?;
    Ok((kernels, vars))
}

/// Parses and lowers `src`: its module-scope variables into a new [`ModuleVars`] (or, given
/// `header`, against that header's layout and variables, whose declarations `src` repeats), and
/// every `.entry` in it. Returns the shared layout after the last module-scope variable.
fn lower_text(
    src: &str,
    header: Option<(&SharedLayout, &ModuleVars)>,
) -> Result<(Vec<Kernel>, SharedLayout, ModuleVars), SimError> {
    let source = Source::new(src);
    let lines = source.lines();
    let module = source.parse().map_err(parse_error)?;
    let toks = source.tokens().map_err(parse_error)?;
    let mut shared = SharedLayout::default();
    let mut own_vars = ModuleVars::default();
    let mut kernels = Vec::new();
    for d in &module.directives {
        match d {
            ModuleDirective::ModuleVariable { .. } if header.is_some() => {}
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
                | ModuleVariableDirective::Const { directive, .. } => own_vars
                    .declare(directive, var_layout(directive).1, &toks)
                    .map_err(|m| SimError::Parse {
                        line: lines.line(span.start),
                        message: m,
                    })?,
                ModuleVariableDirective::Tex { directive, .. } => {
                    own_vars.unsupported.insert(
                        directive.name.val.clone(),
                        format!("texture reference `{}`", directive.name.val),
                    );
                }
            },
            ModuleDirective::EntryFunction { directive, .. } => {
                let (layout, vars) = header.unwrap_or((&shared, &own_vars));
                let k = KernelLowering::new(src, &toks, lines, layout.clone(), vars)
                    .lower(directive)?;
                kernels.push(k);
            }
            _ => {}
        }
    }
    Ok((kernels, shared, own_vars))
}

/// A module lowered one kernel at a time, at the kernel's first use: the header (module-scope
/// variables) is lowered at once, each kernel from a text of the header, blank lines up to the
/// kernel's first line (so errors name the lines of the whole text), and the kernel.
pub(crate) struct LazyKernels {
    src: String,
    header_end: usize,
    shared: SharedLayout,
    kernels: Vec<LazyKernel>,
}

/// A kernel's name, byte range in the text, and its lowering once it was asked for.
type LazyKernel = (String, Range<usize>, OnceLock<Result<Kernel, SimError>>);

impl LazyKernels {
    /// The header of `src` lowered, and its kernels found; `None` when `src` is not in the shape
    /// [`ptx_front::entries::entries`] splits (the caller lowers it whole).
    pub(crate) fn new(src: &str) -> Result<Option<(LazyKernels, ModuleVars)>, SimError> {
        let Some(e) = ptx_front::entries::entries(src) else {
            return Ok(None);
        };
        let (none, shared, vars) = lower_text(&src[..e.header_end], None)?;
        debug_assert!(none.is_empty());
        let kernels = e
            .kernels
            .into_iter()
            .map(|(name, range)| (name, range, OnceLock::new()))
            .collect();
        Ok(Some((
            LazyKernels {
                src: src.to_string(),
                header_end: e.header_end,
                shared,
                kernels,
            },
            vars,
        )))
    }

    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.kernels.iter().map(|(n, ..)| n.as_str())
    }

    /// Kernel `name`, lowered now if this is its first use; `None` if the module has no such
    /// kernel.
    pub(crate) fn get(&self, name: &str, vars: &ModuleVars) -> Option<Result<&Kernel, SimError>> {
        let (_, range, lowered) = self.kernels.iter().find(|(n, ..)| n == name)?;
        let k = lowered.get_or_init(|| {
            let header = &self.src[..self.header_end];
            let gap = self.src[self.header_end..range.start].matches('\n').count();
            let mut text = String::with_capacity(header.len() + gap + range.len());
            text.push_str(header);
            text.extend(std::iter::repeat_n('\n', gap));
            text.push_str(&self.src[range.clone()]);
            let (mut kernels, ..) = lower_text(&text, Some((&self.shared, vars)))?;
            match kernels.pop() {
                Some(k) if kernels.is_empty() && k.name == name => Ok(k),
                _ => Err(SimError::Parse {
                    line: 0,
                    message: format!("kernel `{name}`: its text is not one `.entry` of that name"),
                }),
            }
        });
        Some(k.as_ref().map_err(Clone::clone))
    }
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
            "membar" | "fence" => Ok((Op::Fence, Class::Other)),
            "prefetch" | "prefetchu" => self.lower_prefetch(r),
            "pmevent" => Ok((Op::Nop, Class::Other)),
            "nanosleep" => Ok((Op::Sleep, Class::Other)),
            "griddepcontrol" => match r.mods.first().map(String::as_str) {
                Some("wait") => Ok((Op::GridDepWait, Class::Other)),
                Some("launch_dependents") => Ok((Op::Nop, Class::Other)),
                _ => unsup("griddepcontrol form not implemented"),
            },
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
