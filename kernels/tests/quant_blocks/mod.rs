//! Random valid quantized blocks for the kernel tests: random bytes (every quant, scale, min and
//! high-bit pattern occurs) with the f16 scale fields replaced by random finite non-zero values.

#![allow(dead_code)]

use half::f16;
use ingot_abi::weight_types::GemvType;
use ingot_gguf::GgmlType;
use rand::Rng;

/// `(elements, bytes)` per block and the number of f16 scales (`d`, then `m` / `dmin` where the
/// type has one), which [`put_scale`] and [`scale`] address.
pub struct Layout {
    pub elems: usize,
    pub bytes: usize,
    pub scales: usize,
}

/// The layout of a type the GPU kernels read, from its registry row
/// (`ingot_abi::weight_types`): block size and bytes, and its scales (IQ1_M's `d` has no field
/// of its own: it is spread over the top nibbles of its 3-bit scales).
pub fn layout(ty: GgmlType) -> Layout {
    let t = gemv_type(ty);
    Layout {
        elems: t.block_elems(),
        bytes: t.block_bytes(),
        scales: if t == GemvType::Iq1M {
            1
        } else {
            t.f16_fields().len()
        },
    }
}

/// IQ1_M's `scales`, which hold its `d`.
const IQ1M_SCALES: std::ops::Range<usize> = {
    let at = std::mem::offset_of!(ingot_abi::blocks::BlockIq1M, scales);
    at..at + 8
};

fn gemv_type(ty: GgmlType) -> GemvType {
    GemvType::from_ggml_id(ty.id())
        .unwrap_or_else(|| panic!("no GPU weight type {ty:?} in the registry"))
}

/// Sets scale `k` (see [`Layout::scales`]) of one block of `ty` to `v`, rounded to f16.
pub fn put_scale(ty: GgmlType, block: &mut [u8], k: usize, v: f32) {
    let bits = f16::from_f32(v).to_bits();
    let t = gemv_type(ty);
    if t == GemvType::Iq1M {
        let sc: &mut [u8; 8] = (&mut block[IQ1M_SCALES]).try_into().unwrap();
        ingot_abi::blocks::iq1m_set_d(sc, bits);
    } else {
        let at = t.f16_fields()[k];
        block[at..at + 2].copy_from_slice(&bits.to_le_bytes());
    }
}

/// Scale `k` of one block of `ty`, widened.
pub fn scale(ty: GgmlType, block: &[u8], k: usize) -> f64 {
    let t = gemv_type(ty);
    let bits = if t == GemvType::Iq1M {
        ingot_abi::blocks::iq1m_d(block[IQ1M_SCALES].try_into().unwrap())
    } else {
        let at = t.f16_fields()[k];
        u16::from_le_bytes([block[at], block[at + 1]])
    };
    f16::from_bits(bits).to_f64()
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
        for k in 0..l.scales {
            let v = rng.random_range(1e-3f32..1e-2);
            put_scale(ty, block, k, if rng.random() { v } else { -v });
        }
    }
    w
}
