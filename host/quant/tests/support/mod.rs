//! Shared by this crate's integration tests: random valid blocks of the grid types, and the
//! Python interpreter with the packages `cargo xtask tools` pins under `.tools/python`.

// Each test binary that includes this module uses part of it.
#![allow(dead_code)]

use ingot_gguf::GgmlType;
use ingot_quant::blocks::iq1m_set_d;
use rand::{rngs::StdRng, Rng};

pub use ingot_quant::GRID_TYPES;

/// `n` random blocks of grid type `ty`, with the f16 scale of each block from `d(block)`. Every
/// byte pattern of these types is a valid block apart from its `d` (every grid index is in range
/// and every sign pattern allowed), so the bodies are uniform random bytes.
pub fn grid_blocks(
    rng: &mut StdRng,
    ty: GgmlType,
    n: usize,
    mut d: impl FnMut(usize) -> u16,
) -> Vec<u8> {
    let ts = ty.type_size() as usize;
    let mut out = vec![0u8; n * ts];
    rng.fill(out.as_mut_slice());
    for (i, b) in out.chunks_exact_mut(ts).enumerate() {
        set_d(ty, b, d(i));
    }
    out
}

/// Sets the f16 scale of one grid-type block: the first two bytes, or for IQ1_M the top nibbles
/// of its last 8 bytes (`scales`).
pub fn set_d(ty: GgmlType, block: &mut [u8], d: u16) {
    if ty == GgmlType::Iq1M {
        let at = block.len() - 8;
        let mut sc: [u8; 8] = block[at..].try_into().expect("8 scale bytes");
        iq1m_set_d(&mut sc, d);
        block[at..].copy_from_slice(&sc);
    } else {
        block[..2].copy_from_slice(&d.to_le_bytes());
    }
}

/// A finite, non-zero f16 of either sign and any exponent: subnormals (exponent field 0),
/// every normal binade up to 65504 (exponent field 30).
pub fn any_finite_f16(rng: &mut StdRng) -> u16 {
    loop {
        let v: u16 = rng.random::<u16>();
        let exp = (v >> 10) & 0x1F;
        if exp != 0x1F && v & 0x7FFF != 0 {
            return v;
        }
    }
}

#[allow(unused_imports)]
pub use ingot_testdata::python;
