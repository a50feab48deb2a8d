//! Facts about the code books the GPU dot products rely on (`kernels/device/src/vecdot/grid.rs`).

use ingot_abi::iq_grids::*;

/// Every byte of every IQ2/IQ3 grid point is a magnitude in `1..128`: the device negates grid
/// bytes as `(g ^ 0xFF) + 1` inside a 32-bit word, which carries into the next byte for `g = 0`
/// and is not a negation for `g ≥ 128`.
#[test]
fn iq2_iq3_grid_bytes_are_nonzero_magnitudes_below_128() {
    let bytes = IQ2XXS_GRID
        .iter()
        .chain(&IQ2XS_GRID)
        .chain(&IQ2S_GRID)
        .flat_map(|g| g.to_le_bytes())
        .chain(
            IQ3XXS_GRID
                .iter()
                .chain(&IQ3S_GRID)
                .flat_map(|g| g.to_le_bytes()),
        );
    let mut n = 0;
    for b in bytes {
        assert!((1..128).contains(&b), "grid byte {b}");
        n += 1;
    }
    assert_eq!(n, 8 * (256 + 512 + 1024) + 4 * (256 + 512));
}

/// The IQ1_S grid's bytes are the signed values −1, 0, 1 that `dp4a` multiplies directly.
#[test]
fn iq1s_grid_bytes_are_ternary() {
    for g in IQ1S_GRID {
        for b in g.to_le_bytes() {
            assert!(matches!(b as i8, -1..=1), "IQ1_S grid byte {b:#x}");
        }
    }
}

/// `ksigns_iq2xs[s] = s | parity(s) << 7`, which the device computes instead of reading the table.
#[test]
fn ksigns_is_the_parity_completion() {
    for (s, &k) in KSIGNS_IQ2XS.iter().enumerate() {
        let s = s as u32;
        assert_eq!(u32::from(k), s | ((s.count_ones() & 1) << 7), "ksigns[{s}]");
    }
}
