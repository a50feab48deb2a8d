//! Lowering of a parsed PTX module into per-kernel IR.

use std::collections::HashMap;

use ptx_syntax::r#type::{
    DataType, EntryFunctionDirective, FunctionStatement, ModuleDirective, ModuleVariableDirective,
    ParameterDirective, StatementDirective, VariableDirective,
};
use ptx_syntax::{PtxToken, Span};

use crate::error::SimError;
use crate::ir::*;
use crate::module_vars::ModuleVars;
use crate::syntax::{normalize_red, read_inst, Lit, Opnd, RawInst};
use crate::{cfg, uninit};

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

/// Maps byte offsets to 1-based line numbers.
pub(crate) struct Lines(Vec<usize>);

impl Lines {
    pub(crate) fn new(src: &str) -> Lines {
        let mut v = vec![0];
        v.extend(src.match_indices('\n').map(|(i, _)| i + 1));
        Lines(v)
    }
    pub(crate) fn line(&self, byte: usize) -> usize {
        self.0.partition_point(|&s| s <= byte)
    }
}

fn data_type_bytes(t: &DataType) -> u32 {
    match t {
        DataType::U8 { .. } | DataType::S8 { .. } | DataType::B8 { .. } | DataType::Pred { .. } => {
            1
        }
        DataType::U16 { .. }
        | DataType::S16 { .. }
        | DataType::B16 { .. }
        | DataType::F16 { .. } => 2,
        DataType::U32 { .. }
        | DataType::S32 { .. }
        | DataType::B32 { .. }
        | DataType::F32 { .. }
        | DataType::F16x2 { .. } => 4,
        DataType::B128 { .. } => 16,
        _ => 8,
    }
}

fn data_type_name(t: &DataType) -> Option<Ty> {
    Some(match t {
        DataType::U8 { .. } => Ty::U8,
        DataType::U16 { .. } => Ty::U16,
        DataType::U32 { .. } => Ty::U32,
        DataType::U64 { .. } => Ty::U64,
        DataType::S8 { .. } => Ty::S8,
        DataType::S16 { .. } => Ty::S16,
        DataType::S32 { .. } => Ty::S32,
        DataType::S64 { .. } => Ty::S64,
        DataType::F16 { .. } => Ty::F16,
        DataType::F16x2 { .. } => Ty::F16x2,
        DataType::F32 { .. } => Ty::F32,
        DataType::F64 { .. } => Ty::F64,
        DataType::B8 { .. } => Ty::B8,
        DataType::B16 { .. } => Ty::B16,
        DataType::B32 { .. } => Ty::B32,
        DataType::B64 { .. } => Ty::B64,
        DataType::B128 { .. } => Ty::B128,
        DataType::Pred { .. } => Ty::Pred,
        _ => return None,
    })
}

/// The element type of a variable whose initializer values are scalars of at most 64 bits.
pub(crate) fn scalar_type(t: &DataType) -> Option<Ty> {
    data_type_name(t).filter(|t| !matches!(t, Ty::B128 | Ty::Pred))
}

/// Layout of one variable: (alignment, size in bytes; `None` for an unsized `[]` array).
fn var_layout(v: &VariableDirective) -> (u32, Option<u64>) {
    let mut align = data_type_bytes(&v.ty);
    let mut elem = u64::from(align);
    for m in &v.modifiers {
        match m {
            ptx_syntax::r#type::VariableModifier::Alignment { value, .. } => align = *value,
            ptx_syntax::r#type::VariableModifier::Vector { value, .. } => elem *= u64::from(*value),
            _ => {}
        }
    }
    let mut size = Some(elem);
    for d in &v.array_dims {
        size = match (size, d) {
            (Some(s), Some(n)) => Some(s.saturating_mul(*n)),
            _ => None,
        };
    }
    (align.max(1), size)
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

pub(crate) fn lower_module(src: &str) -> Result<(Vec<Kernel>, ModuleVars), SimError> {
    let lines = Lines::new(src);
    // Same length and offsets as `src`: spans index both (instruction texts are taken from `src`).
    let normalized = normalize_red(src);
    let module = ptx_syntax::parse_ptx(&normalized).map_err(|e| SimError::Parse {
        line: lines.line(e.span.start.min(src.len())),
        message: e.kind.to_string(),
    })?;
    let toks = ptx_syntax::tokenize(&normalized).map_err(|e| SimError::Parse {
        line: lines.line(e.span.start.min(src.len())),
        message: "invalid token".into(),
    })?;
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
                let k = KernelLowering::new(src, &toks, &lines, shared.clone(), &module_vars)
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
    lines: &'a Lines,
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
        lines: &'a Lines,
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

    fn lower(mut self, f: &EntryFunctionDirective) -> Result<Kernel, SimError> {
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
                    // With `.ptr`, `.align N` is the alignment of the pointee, not of the parameter.
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
            insts: self.insts,
            nregs,
            params,
            param_bytes: off,
            static_shared,
            local_bytes: self.local_size,
            unsupported: self.unsupported,
        })
    }

    fn walk(&mut self, stmts: &[FunctionStatement]) -> Result<(), SimError> {
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

    fn declare(&mut self, name: String, ty: Ty) {
        let idx = self.reg_types.len() as Reg;
        self.reg_types.push(ty);
        self.scopes
            .last_mut()
            .expect("scope stack never empty")
            .insert(name, idx);
    }

    fn lookup(&self, name: &str) -> Option<Reg> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    /// A destination register.
    fn reg(&self, o: &Opnd) -> LResult<Reg> {
        match o {
            Opnd::Reg(n, None) | Opnd::Name(n) => match self.lookup(n) {
                Some(r) => Ok(r),
                None => invalid(format!("undeclared register `{n}`")),
            },
            other => invalid(format!("expected a register, found {other:?}")),
        }
    }

    fn opt_reg(&self, o: &Opnd) -> LResult<Option<Reg>> {
        match o {
            Opnd::Sink => Ok(None),
            o => self.reg(o).map(Some),
        }
    }

    /// Address of a named variable in its state space (shared, local, param).
    fn symbol(&self, n: &str) -> LResult<(Space, u64)> {
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
    fn src(&self, o: &Opnd, ty: Ty) -> LResult<Src> {
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

    fn addr(&self, o: &Opnd) -> LResult<Addr> {
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

    fn regs_vec(&self, o: &Opnd, n: usize) -> LResult<Vec<Option<Reg>>> {
        match o {
            Opnd::Vec(v) if v.len() == n => v.iter().map(|x| self.opt_reg(x)).collect(),
            o if n == 1 => Ok(vec![self.opt_reg(o)?]),
            other => invalid(format!("expected {n} registers, found {other:?}")),
        }
    }

    fn srcs_vec(&self, o: &Opnd, n: usize, ty: Ty) -> LResult<Vec<Src>> {
        match o {
            Opnd::Vec(v) if v.len() == n => v.iter().map(|x| self.src(x, ty)).collect(),
            o if n == 1 => Ok(vec![self.src(o, ty)?]),
            other => invalid(format!("expected {n} operands, found {other:?}")),
        }
    }

    fn lower_inst(&self, r: &RawInst) -> LResult<(Op, Class)> {
        let ops = &r.operands;
        let n = |k: usize| -> LResult<()> {
            if ops.len() == k {
                Ok(())
            } else {
                invalid(format!("expected {k} operands, found {}", ops.len()))
            }
        };
        // The last type-like modifier is the instruction type for most opcodes.
        let ty = r.mods.iter().rev().find_map(|m| Ty::parse(m));
        let need_ty = || ty.ok_or_else(|| LowerErr::Invalid("missing type modifier".into()));
        let rnd = rounding(&r.mods);
        let ftz = r.has("ftz");
        let sat = r.has("sat") || r.has("satfinite");
        let fclass = |t: Ty| match t {
            Ty::F32 => Class::Fp32,
            Ty::F64 => Class::Fp64,
            t if t.is_float() => Class::Fp16,
            _ => Class::Int,
        };
        let op = r.opcode.as_str();
        match op {
            "mov" => {
                n(2)?;
                let t = need_ty()?;
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
            "add" | "sub" | "mul" | "div" | "rem" | "min" | "max" | "and" | "or" | "xor"
            | "shl" | "shr" => {
                n(3)?;
                let t = need_ty()?;
                let d = self.reg(&ops[0])?;
                if t.is_float() && !matches!(op, "rem" | "and" | "or" | "xor" | "shl" | "shr") {
                    if r.has("NaN") || r.has("xorsign") {
                        return unsup("min/max .NaN/.xorsign");
                    }
                    let fop = match op {
                        "add" => FBinOp::Add,
                        "sub" => FBinOp::Sub,
                        "mul" => FBinOp::Mul,
                        "div" => FBinOp::Div,
                        "min" => FBinOp::Min,
                        _ => FBinOp::Max,
                    };
                    return Ok((
                        Op::FBin {
                            op: fop,
                            ty: t,
                            rnd: rnd.unwrap_or(Rnd::Rn),
                            ftz,
                            sat,
                            d,
                            a: self.src(&ops[1], t)?,
                            b: self.src(&ops[2], t)?,
                        },
                        fclass(t),
                    ));
                }
                if r.has("cc") && matches!(op, "add" | "sub") {
                    return self.carry(op == "sub", false, true, t, ops);
                }
                if r.has("cc") || t == Ty::F16x2 {
                    return unsup("carry or packed integer form");
                }
                let iop = match op {
                    "add" if sat => IntBinOp::AddSat,
                    "sub" if sat => IntBinOp::SubSat,
                    "add" => IntBinOp::Add,
                    "sub" => IntBinOp::Sub,
                    "mul" if r.has("hi") => IntBinOp::MulHi,
                    "mul" if r.has("wide") => IntBinOp::MulWide,
                    "mul" => IntBinOp::MulLo,
                    "div" => IntBinOp::Div,
                    "rem" => IntBinOp::Rem,
                    "min" => IntBinOp::Min,
                    "max" => IntBinOp::Max,
                    "and" => IntBinOp::And,
                    "or" => IntBinOp::Or,
                    "xor" => IntBinOp::Xor,
                    "shl" => IntBinOp::Shl,
                    _ => IntBinOp::Shr,
                };
                let bty = if matches!(iop, IntBinOp::Shl | IntBinOp::Shr) {
                    Ty::U32
                } else {
                    t
                };
                Ok((
                    Op::IntBin {
                        op: iop,
                        ty: t,
                        d,
                        a: self.src(&ops[1], t)?,
                        b: self.src(&ops[2], bty)?,
                    },
                    Class::Int,
                ))
            }
            "neg" | "abs" | "not" | "cnot" | "popc" | "clz" | "brev" | "bfind" | "sqrt"
            | "rsqrt" | "rcp" | "ex2" | "lg2" | "sin" | "cos" | "tanh" => {
                n(2)?;
                let t = need_ty()?;
                let d = self.reg(&ops[0])?;
                let a = self.src(&ops[1], t)?;
                if t.is_float() && !matches!(op, "not" | "cnot" | "popc" | "clz" | "brev" | "bfind")
                {
                    let fop = match op {
                        "neg" => FUnOp::Neg,
                        "abs" => FUnOp::Abs,
                        "sqrt" => FUnOp::Sqrt,
                        "rsqrt" => FUnOp::Rsqrt,
                        "rcp" => FUnOp::Rcp,
                        "ex2" => FUnOp::Ex2,
                        "lg2" => FUnOp::Lg2,
                        "sin" => FUnOp::Sin,
                        "cos" => FUnOp::Cos,
                        _ => FUnOp::Tanh,
                    };
                    return Ok((
                        Op::FUn {
                            op: fop,
                            ty: t,
                            ftz,
                            d,
                            a,
                        },
                        fclass(t),
                    ));
                }
                let iop = match op {
                    "neg" => IntUnOp::Neg,
                    "abs" => IntUnOp::Abs,
                    "not" => IntUnOp::Not,
                    "cnot" => IntUnOp::Cnot,
                    "popc" => IntUnOp::Popc,
                    "clz" => IntUnOp::Clz,
                    "brev" => IntUnOp::Brev,
                    "bfind" if !r.has("shiftamt") => IntUnOp::Bfind,
                    _ => return unsup("integer form of a float-only instruction"),
                };
                Ok((
                    Op::IntUn {
                        op: iop,
                        ty: t,
                        d,
                        a,
                    },
                    Class::Int,
                ))
            }
            "mad" | "fma" => {
                n(4)?;
                let t = need_ty()?;
                let d = self.reg(&ops[0])?;
                let (a, b) = (&ops[1], &ops[2]);
                if t.is_float() {
                    return Ok((
                        Op::Fma {
                            ty: t,
                            rnd: rnd.unwrap_or(Rnd::Rn),
                            ftz,
                            sat,
                            d,
                            a: self.src(a, t)?,
                            b: self.src(b, t)?,
                            c: self.src(&ops[3], t)?,
                        },
                        fclass(t),
                    ));
                }
                if r.has("cc") || sat {
                    return unsup("mad.cc / mad.sat");
                }
                let mode = if r.has("hi") {
                    MadMode::Hi
                } else if r.has("wide") {
                    MadMode::Wide
                } else {
                    MadMode::Lo
                };
                let cty = if mode == MadMode::Wide { wide(t) } else { t };
                Ok((
                    Op::Mad {
                        mode,
                        ty: t,
                        d,
                        a: self.src(a, t)?,
                        b: self.src(b, t)?,
                        c: self.src(&ops[3], cty)?,
                    },
                    Class::Int,
                ))
            }
            "bfe" => {
                n(4)?;
                let t = need_ty()?;
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
            "bfi" => {
                n(5)?;
                let t = need_ty()?;
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
            "prmt" => {
                n(4)?;
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
            "dp4a" | "dp2a" => {
                n(4)?;
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
            "lop3" => {
                n(5)?;
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
            "shf" => {
                n(4)?;
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
            "setp" => {
                let t = need_ty()?;
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
            "set" => {
                n(3)?;
                let tys: Vec<Ty> = r.mods.iter().filter_map(|m| Ty::parse(m)).collect();
                let cmp = r.mods.iter().find_map(|m| parse_cmp(m));
                match (cmp, tys.as_slice()) {
                    (Some(cmp), [dty, sty]) if !r.has("and") && !r.has("or") && !r.has("xor") => {
                        Ok((
                            Op::Set {
                                cmp,
                                dty: *dty,
                                sty: *sty,
                                d: self.reg(&ops[0])?,
                                a: self.src(&ops[1], *sty)?,
                                b: self.src(&ops[2], *sty)?,
                            },
                            fclass(*sty),
                        ))
                    }
                    _ => unsup("set form"),
                }
            }
            "selp" => {
                n(4)?;
                let t = need_ty()?;
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
            "cvt" => {
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
            "cvta" => {
                n(2)?;
                let t = need_ty()?;
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
            "ld" | "ldu" | "st" => {
                n(2)?;
                let t = need_ty()?;
                let space = state_space(&r.mods).unwrap_or(Space::Generic);
                let vec = vec_width(&r.mods);
                if op == "st" {
                    Ok((
                        Op::St {
                            space,
                            ty: t,
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
                            ds: self.regs_vec(&ops[0], vec)?.into(),
                            addr: self.addr(&ops[1])?,
                        },
                        mem_class(space),
                    ))
                }
            }
            "atom" | "red" => {
                let t = need_ty()?;
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
                        Some(
                            self.reg(ops.first().ok_or(LowerErr::Invalid("no operands".into()))?)?,
                        ),
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
            "bra" | "brx" => {
                n(1)?;
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
            "addc" | "subc" => {
                n(3)?;
                self.carry(op == "subc", true, r.has("cc"), need_ty()?, ops)
            }
            "ret" | "exit" => Ok((Op::Exit, Class::Control)),
            "trap" => Ok((Op::Trap, Class::Control)),
            "bar" | "barrier" => {
                if r.has("warp") {
                    return Ok((Op::Nop, Class::Control));
                }
                if !(r.has("sync") || r.mods.is_empty() || r.has("cta"))
                    || r.has("arrive")
                    || r.has("red")
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
            "membar" | "fence" | "prefetch" | "prefetchu" | "pmevent" | "nanosleep" => {
                Ok((Op::Nop, Class::Other))
            }
            "cp" if r.mods.first().map(String::as_str) == Some("async") => {
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
            "shfl" => {
                n(5)?;
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
            "vote" => {
                n(3)?;
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
            "redux" => {
                n(3)?;
                let t = need_ty()?;
                if t.is_float() {
                    return unsup("redux.sync on f32");
                }
                let rop =
                    match r.mods.iter().find(|m| {
                        matches!(m.as_str(), "add" | "min" | "max" | "and" | "or" | "xor")
                    }) {
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
            "activemask" => {
                n(1)?;
                Ok((
                    Op::Activemask {
                        d: self.reg(&ops[0])?,
                    },
                    Class::Other,
                ))
            }
            "mma" => self.lower_mma(r),
            "ldmatrix" => {
                n(2)?;
                let count = if r.has("x4") {
                    4
                } else if r.has("x2") {
                    2
                } else {
                    1
                };
                if !r.has("m8n8") || need_ty()? != Ty::B16 {
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
            _ => unsup("opcode not implemented"),
        }
    }

    /// An add/subtract that writes the carry flag, and reads it when `carry_in`.
    fn carry(
        &self,
        sub: bool,
        carry_in: bool,
        carry_out: bool,
        t: Ty,
        ops: &[Opnd],
    ) -> LResult<(Op, Class)> {
        if !matches!(t, Ty::U32 | Ty::S32 | Ty::U64 | Ty::S64) || ops.len() != 3 {
            return unsup("carry arithmetic form");
        }
        Ok((
            Op::Carry {
                sub,
                carry_in,
                carry_out,
                ty: t,
                d: self.reg(&ops[0])?,
                a: self.src(&ops[1], t)?,
                b: self.src(&ops[2], t)?,
            },
            Class::Int,
        ))
    }

    fn lower_mma(&self, r: &RawInst) -> LResult<(Op, Class)> {
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

fn collect_labels(stmts: &[FunctionStatement], count: &mut u32, labels: &mut HashMap<String, u32>) {
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

fn special(name: &str, comp: Option<&str>) -> Option<SReg> {
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

fn rounding(mods: &[String]) -> Option<Rnd> {
    mods.iter().find_map(|m| {
        Some(match m.as_str() {
            "rn" => Rnd::Rn,
            "rz" => Rnd::Rz,
            "rm" => Rnd::Rm,
            "rp" => Rnd::Rp,
            "rna" => Rnd::Rna,
            "rni" => Rnd::Rni,
            "rzi" => Rnd::Rzi,
            "rmi" => Rnd::Rmi,
            "rpi" => Rnd::Rpi,
            _ => return None,
        })
    })
}

fn parse_cmp(m: &str) -> Option<Cmp> {
    Some(match m {
        "eq" => Cmp::Eq,
        "ne" => Cmp::Ne,
        "lt" => Cmp::Lt,
        "le" => Cmp::Le,
        "gt" => Cmp::Gt,
        "ge" => Cmp::Ge,
        "lo" => Cmp::Lo,
        "ls" => Cmp::Ls,
        "hi" => Cmp::Hi,
        "hs" => Cmp::Hs,
        "equ" => Cmp::Equ,
        "neu" => Cmp::Neu,
        "ltu" => Cmp::Ltu,
        "leu" => Cmp::Leu,
        "gtu" => Cmp::Gtu,
        "geu" => Cmp::Geu,
        "num" => Cmp::Num,
        "nan" => Cmp::Nan,
        _ => return None,
    })
}

fn state_space(mods: &[String]) -> Option<Space> {
    mods.iter().find_map(|m| {
        Some(match m.split("::").next().unwrap_or("") {
            "global" => Space::Global,
            "shared" => Space::Shared,
            "local" => Space::Local,
            "param" => Space::Param,
            "const" => Space::Const,
            _ => return None,
        })
    })
}

fn vec_width(mods: &[String]) -> usize {
    if mods.iter().any(|m| m == "v4") {
        4
    } else if mods.iter().any(|m| m == "v2") {
        2
    } else if mods.iter().any(|m| m == "v8") {
        8
    } else {
        1
    }
}

fn mem_class(space: Space) -> Class {
    match space {
        Space::Shared => Class::Shared,
        Space::Local => Class::Local,
        _ => Class::Global,
    }
}

/// The double-width type of `mul.wide`/`mad.wide` results.
pub(crate) fn wide(t: Ty) -> Ty {
    match t {
        Ty::U16 => Ty::U32,
        Ty::S16 => Ty::S32,
        Ty::U32 => Ty::U64,
        Ty::S32 => Ty::S64,
        t => t,
    }
}

/// Converts a literal to the raw bits of an operand of type `ty`.
pub(crate) fn lit_bits(l: &Lit, ty: Ty) -> u64 {
    let float_of = |v: f64| match ty {
        Ty::F32 => u64::from((v as f32).to_bits()),
        Ty::F16 | Ty::F16x2 => u64::from(half::f16::from_f64(v).to_bits()),
        Ty::BF16 | Ty::BF16x2 => u64::from(half::bf16::from_f64(v).to_bits()),
        _ => v.to_bits(),
    };
    match *l {
        Lit::Int(v) if ty.is_float() => float_of(v as f64),
        Lit::Int(v) => (v as u64) & ty.mask().max(1),
        Lit::F32Bits(b) if ty == Ty::F32 || !ty.is_float() => u64::from(b),
        Lit::F32Bits(b) => float_of(f64::from(f32::from_bits(b))),
        Lit::F64Bits(b) if ty == Ty::F64 || !ty.is_float() => b,
        Lit::F64Bits(b) => float_of(f64::from_bits(b)),
        Lit::Float(v) => float_of(v),
    }
}
