//! Random valid quantized blocks for the kernel tests: random bytes (every quant, scale, min and
//! high-bit pattern occurs) with the f16 scale fields replaced by random finite non-zero values.

#![allow(dead_code)]

use half::f16;
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

/// The layout of a quantized type, from `ggml-common.h` (spec §2).
pub fn layout(ty: GgmlType) -> Layout {
    let (elems, bytes, d_at, m_at) = match ty {
        GgmlType::Q4_0 | GgmlType::Iq4Nl => (32, 18, 0, None),
        GgmlType::Q4_1 => (32, 20, 0, Some(2)),
        GgmlType::Q5_0 => (32, 22, 0, None),
        GgmlType::Q5_1 => (32, 24, 0, Some(2)),
        GgmlType::Q8_0 => (32, 34, 0, None),
        GgmlType::Q3K => (256, 110, 108, None),
        GgmlType::Q4K => (256, 144, 0, Some(2)),
        GgmlType::Q5K => (256, 176, 0, Some(2)),
        GgmlType::Q6K => (256, 210, 208, None),
        other => panic!("no test layout for {other:?}"),
    };
    Layout {
        elems,
        bytes,
        d_at,
        m_at,
    }
}

/// Writes `v` as f16 bits at byte `at`.
pub fn put_f16(block: &mut [u8], at: usize, v: f32) {
    block[at..at + 2].copy_from_slice(&f16::from_f32(v).to_bits().to_le_bytes());
}

/// The f16 at byte `at`, widened.
pub fn get_f16(block: &[u8], at: usize) -> f64 {
    f16::from_bits(u16::from_le_bytes([block[at], block[at + 1]])).to_f64()
}

/// `nblocks` random blocks of `ty` with scales of random sign and magnitude in [1e-3, 1e-2].
pub fn random_blocks(rng: &mut impl Rng, ty: GgmlType, nblocks: usize) -> Vec<u8> {
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
