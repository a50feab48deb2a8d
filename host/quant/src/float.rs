//! Unquantized element types: F32, F16, BF16 (little-endian on disk).

use crate::chunks::{arrays, arrays_mut};
use crate::round::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};

/// Decode little-endian f32 bytes (`data.len() == 4·out.len()`, checked by the caller).
pub fn f32_from_le(data: &[u8], out: &mut [f32]) {
    for (o, b) in out.iter_mut().zip(arrays::<u8, 4>(data)) {
        *o = f32::from_le_bytes(*b);
    }
}

/// Decode little-endian IEEE binary16 bytes.
pub fn f16_from_le(data: &[u8], out: &mut [f32]) {
    for (o, b) in out.iter_mut().zip(arrays::<u8, 2>(data)) {
        *o = f16_to_f32(u16::from_le_bytes(*b));
    }
}

/// Decode little-endian bfloat16 bytes.
pub fn bf16_from_le(data: &[u8], out: &mut [f32]) {
    for (o, b) in out.iter_mut().zip(arrays::<u8, 2>(data)) {
        *o = bf16_to_f32(u16::from_le_bytes(*b));
    }
}

/// Encode as little-endian f32 bytes.
pub fn f32_to_le(x: &[f32], out: &mut [u8]) {
    for (v, b) in x.iter().zip(arrays_mut::<u8, 4>(out)) {
        *b = v.to_le_bytes();
    }
}

/// Encode as little-endian binary16, round-to-nearest-even.
pub fn f16_to_le(x: &[f32], out: &mut [u8]) {
    for (v, b) in x.iter().zip(arrays_mut::<u8, 2>(out)) {
        *b = f32_to_f16(*v).to_le_bytes();
    }
}

/// Encode as little-endian bfloat16 with ggml's rounding ([`crate::f32_to_bf16`]).
pub fn bf16_to_le(x: &[f32], out: &mut [u8]) {
    for (v, b) in x.iter().zip(arrays_mut::<u8, 2>(out)) {
        *b = f32_to_bf16(*v).to_le_bytes();
    }
}
