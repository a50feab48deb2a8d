//! Random valid quantized blocks for the kernel tests: random bytes (every quant, scale, min and
//! high-bit pattern occurs) with the f16 scale fields replaced by random finite non-zero values.

#![allow(dead_code)]

use half::f16;
use ingot_abi::weight_types::GemvType;
use ingot_gguf::GgmlType;
use rand::Rng;

/// `(elements, bytes)` per block and the byte offsets of the f16 scale `d` and of the f16 min
/// (`m` / `dmin`) where the type has one.
pub struct Layout {
    pub elems: usize,
    pub bytes: usize,
    pub d_at: usize,
    pub m_at: Option<usize>,
}

/// The layout of a type the GPU kernels read, from its registry row
/// (`ingot_abi::weight_types`): block size and bytes, and its f16 fields.
pub fn layout(ty: GgmlType) -> Layout {
    let t = GemvType::from_ggml_id(ty.id())
        .unwrap_or_else(|| panic!("no GPU weight type {ty:?} in the registry"));
    let f = t.f16_fields();
    Layout {
        elems: t.block_elems(),
        bytes: t.block_bytes(),
        d_at: f[0],
        m_at: f.get(1).copied(),
    }
}

/// `n` random finite weights of float type `ty` (F32, F16, BF16), each of random sign and
/// magnitude in `[lo, hi)`, encoded as `ty` stores them.
pub fn random_floats(rng: &mut impl Rng, ty: GgmlType, n: usize, lo: f32, hi: f32) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 4);
    for _ in 0..n {
        let m = rng.random_range(lo..hi);
        let v = if rng.random() { m } else { -m };
        match ty {
            GgmlType::F32 => out.extend_from_slice(&v.to_le_bytes()),
            GgmlType::F16 => out.extend_from_slice(&f16::from_f32(v).to_bits().to_le_bytes()),
            GgmlType::Bf16 => out.extend_from_slice(&((v.to_bits() >> 16) as u16).to_le_bytes()),
            other => panic!("{other:?} is not a float type"),
        }
    }
    out
}

/// Writes `v` as f16 bits at byte `at`.
pub fn put_f16(block: &mut [u8], at: usize, v: f32) {
    block[at..at + 2].copy_from_slice(&f16::from_f32(v).to_bits().to_le_bytes());
}

/// The f16 at byte `at`, widened.
pub fn get_f16(block: &[u8], at: usize) -> f64 {
    f16::from_bits(u16::from_le_bytes([block[at], block[at + 1]])).to_f64()
}

/// `nblocks` random blocks of `ty` with scales of random sign and magnitude in [1e-3, 1e-2];
/// for the float types, 32 weights per block of random sign and magnitude in [1e-3, 1e-2].
pub fn random_blocks(rng: &mut impl Rng, ty: GgmlType, nblocks: usize) -> Vec<u8> {
    if matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::Bf16) {
        return random_floats(rng, ty, nblocks * 32, 1e-3, 1e-2);
    }
    let l = layout(ty);
    let mut w = vec![0u8; nblocks * l.bytes];
    rng.fill(&mut w[..]);
    for block in w.chunks_exact_mut(l.bytes) {
        for at in std::iter::once(l.d_at).chain(l.m_at) {
            let v = rng.random_range(1e-3f32..1e-2);
            put_f16(block, at, if rng.random() { v } else { -v });
        }
    }
    w
}
