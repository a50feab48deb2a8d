//! Reading a raw instruction's modifiers (rounding, comparison, state space, vector width), its
//! operand count and its type.

use ptx_front::statement::{Opnd, RawInst};

use super::{invalid, LResult, LowerErr};
use crate::ir::*;

/// Exactly `k` operands.
pub(super) fn arity(ops: &[Opnd], k: usize) -> LResult<()> {
    if ops.len() == k {
        Ok(())
    } else {
        invalid(format!("expected {k} operands, found {}", ops.len()))
    }
}

/// The instruction type: the last type-like modifier, for most opcodes.
pub(super) fn inst_type(r: &RawInst) -> LResult<Ty> {
    r.mods
        .iter()
        .rev()
        .find_map(|m| Ty::parse(m))
        .ok_or_else(|| LowerErr::Invalid("missing type modifier".into()))
}

/// The counter class of a floating-point (or integer) operation of type `t`.
pub(super) fn fclass(t: Ty) -> Class {
    match t {
        Ty::F32 => Class::Fp32,
        Ty::F64 => Class::Fp64,
        t if t.is_float() => Class::Fp16,
        _ => Class::Int,
    }
}

pub(super) fn rounding(mods: &[String]) -> Option<Rnd> {
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

pub(super) fn parse_cmp(m: &str) -> Option<Cmp> {
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

pub(super) fn state_space(mods: &[String]) -> Option<Space> {
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

pub(super) fn vec_width(mods: &[String]) -> usize {
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

pub(super) fn mem_class(space: Space) -> Class {
    match space {
        Space::Shared => Class::Shared,
        Space::Local => Class::Local,
        _ => Class::Global,
    }
}

/// The memory-ordering semantics its qualifiers give a memory instruction; `default` when it
/// names none (weak for `ld`/`st`, relaxed for `atom`/`red`).
pub(super) fn sem(mods: &[String], default: Sem) -> Sem {
    mods.iter()
        .find_map(|m| {
            Some(match m.as_str() {
                "weak" => Sem::Weak,
                "relaxed" | "volatile" | "mmio" => Sem::Relaxed,
                "acquire" => Sem::Acquire,
                "release" => Sem::Release,
                "acq_rel" => Sem::AcqRel,
                _ => return None,
            })
        })
        .unwrap_or(default)
}
