//! PTX data types in the simulator's terms: byte sizes and IR types of declared types, variable
//! layouts, the double-width type of `.wide` results, and literals as raw operand bits.

use ptx_front::statement::Lit;
use ptx_syntax::r#type::{DataType, VariableDirective};

use crate::ir::Ty;

/// Bytes of one element of `t` (a `.pred` counts one byte).
pub(crate) fn data_type_bytes(t: &DataType) -> u32 {
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

/// The IR type of a declared type; `None` for opaque handles.
pub(crate) fn data_type_name(t: &DataType) -> Option<Ty> {
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
pub(crate) fn var_layout(v: &VariableDirective) -> (u32, Option<u64>) {
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
