//! Packed Q4_K rows against the one-row scalar reference on the rows they were packed from, on
//! every instruction set this CPU has: bit for bit, for every activation count that selects a
//! different step shape, on random blocks, saturated ones and extreme scales.

use bytemuck::Zeroable;
use ingot_abi::blocks::{BlockQ4K, BlockQ8K, QK_K};
use ingot_gguf::GgmlType;
use rand::{rngs::StdRng, Rng, SeedableRng};

use super::{pack_q4k, BlockQ4Kx8, ROWS_PER_GROUP};
use crate::cpu_dot::tests::isas;
use crate::cpu_dot::{Isa, RowDot};
use crate::round::f32_to_f16;
use crate::{q4_k, vec_dot_q8_k};

const NB: usize = 3;

/// `n` rows of `NB` random Q4_K blocks (every level, scale and min pattern) whose f16 fields come
/// from `scale`; with `fill`, every other byte is that value.
fn rows(
    rng: &mut StdRng,
    n: usize,
    fill: Option<u8>,
    scale: impl Fn(&mut StdRng) -> u16,
) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..n * NB {
        let mut b = BlockQ4K::zeroed();
        match fill {
            Some(v) => (b.scales, b.qs) = ([v; 12], [v; QK_K / 2]),
            None => (rng.fill(&mut b.scales), rng.fill(&mut b.qs[..])).1,
        }
        (b.d, b.dmin) = (scale(rng), scale(rng));
        out.extend_from_slice(bytemuck::bytes_of(&b));
    }
    out
}

/// Q8_K activations with arbitrary quants (−128 included), consistent `bsums`, scale `d`.
fn acts(rng: &mut StdRng, n: usize, d: impl Fn(&mut StdRng) -> f32) -> Vec<Vec<BlockQ8K>> {
    (0..n)
        .map(|_| {
            (0..NB)
                .map(|_| {
                    let mut b = BlockQ8K::zeroed();
                    rng.fill(bytemuck::cast_slice_mut::<i8, u8>(&mut b.qs));
                    for (s, g) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
                        *s = g.iter().map(|&q| i16::from(q)).sum();
                    }
                    b.d = d(rng);
                    b
                })
                .collect()
        })
        .collect()
}

fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Every output of `q8_k_x8` on the packed `rows` is the scalar dot of its row, bit for bit.
fn check(what: &str, rows: &[u8], n: usize, acts: &[Vec<BlockQ8K>]) {
    let packed = pack_q4k(rows, n).unwrap();
    let row_bytes = rows.len() / n;
    let refs: Vec<&[BlockQ8K]> = acts.iter().map(Vec::as_slice).collect();
    for isa in isas() {
        let dot = RowDot::with_isa(GgmlType::Q4K, isa).unwrap();
        let mut out = vec![f32::NAN; n * acts.len()];
        dot.q8_k_x8(&packed, &refs, &mut out).unwrap();
        for (t, a) in acts.iter().enumerate() {
            for r in 0..n {
                let row = &rows[r * row_bytes..(r + 1) * row_bytes];
                let want = vec_dot_q8_k(GgmlType::Q4K, row, a).unwrap();
                let got = out[t * n + r];
                assert!(
                    same(got, want),
                    "{what}, {isa:?}: row {r} of {n}, activation {t} of {}: {got} vs {want}",
                    acts.len()
                );
            }
        }
    }
}

fn gaussian_scale(rng: &mut StdRng) -> u16 {
    f32_to_f16((rng.random::<f32>() - 0.5) * 2e-2)
}

#[test]
fn packed_rows_give_the_scalar_bits_for_every_step_shape() {
    let mut rng = StdRng::seed_from_u64(71);
    for n in [8, 16, 40] {
        for count in (1..=10).chain([13, 17]) {
            let r = rows(&mut rng, n, None, gaussian_scale);
            let a = acts(&mut rng, count, |_| 1e-2);
            check(&format!("random, {count} activations"), &r, n, &a);
        }
    }
}

/// All-ones and alternating bytes (the largest levels, scales and mins) against −128/127-filled
/// activations, and the f16/f32 scale extremes (±inf and NaN where the scalar dot makes them).
#[test]
fn packed_rows_give_the_scalar_bits_on_extremes() {
    const F16: [u16; 7] = [0x7BFF, 0xFBFF, 0x0400, 0x0001, 0x0000, 0x8000, 0x3C00];
    const F32: [f32; 6] = [1e-45, 1.2e-38, 1e-2, 3e38, -3e38, -1e-30];
    let mut rng = StdRng::seed_from_u64(72);
    for byte in [0xFFu8, 0x00, 0xAA, 0x3F] {
        for fill in [-128i8, 127] {
            let r = rows(&mut rng, 16, Some(byte), gaussian_scale);
            let mut a = acts(&mut rng, 11, |_| 1e-2);
            for b in a.iter_mut().flatten() {
                b.qs = [fill; QK_K];
                b.bsums = [16 * i16::from(fill); 16];
            }
            check(&format!("bytes {byte:#04x}, quants {fill}"), &r, 16, &a);
        }
    }
    let pick16 = |rng: &mut StdRng| F16[rng.random_range(0..F16.len())];
    let r = rows(&mut rng, 24, None, pick16);
    for count in [7, 12] {
        let a = acts(&mut rng, count, |rng| F32[rng.random_range(0..F32.len())]);
        check("extreme scales", &r, 24, &a);
    }
}

/// The packed quants hold each row's levels where the GGUF block holds them, and a packed row
/// dequantizes to the unpacked row's values, bit for bit.
#[test]
fn packing_keeps_every_level() {
    let mut rng = StdRng::seed_from_u64(73);
    let r = rows(&mut rng, 8, None, gaussian_scale);
    let packed = pack_q4k(&r, 8).unwrap();
    let blocks: Vec<BlockQ4K> = r
        .chunks_exact(144)
        .map(bytemuck::pod_read_unaligned)
        .collect();
    for row in 0..ROWS_PER_GROUP {
        for b in 0..NB {
            let mut want = [0u8; QK_K];
            q4_k::unpack_levels(&blocks[row * NB + b].qs, &mut want);
            assert_eq!(super::levels(&packed[b], row), want, "row {row}, block {b}");
        }
        let mut got = vec![f32::NAN; NB * QK_K];
        super::dequantize_row(&packed, row, &mut got);
        for b in 0..NB {
            let mut want = [0f32; QK_K];
            q4_k::dequantize(&blocks[row * NB + b], &mut want);
            let got = &got[b * QK_K..(b + 1) * QK_K];
            assert!(
                got.iter().zip(want).all(|(g, w)| same(*g, w)),
                "row {row}, block {b}"
            );
        }
    }
}

/// A layout broken on purpose (two rows' scales swapped, one quant vector's lanes rotated) no
/// longer gives the scalar bits: the comparison can fail.
#[test]
fn a_broken_packing_is_caught() {
    let mut rng = StdRng::seed_from_u64(74);
    let r = rows(&mut rng, 8, None, gaussian_scale);
    let breaks: [fn(&mut BlockQ4Kx8); 3] = [
        |p| p.scales[2].swap(0, 5),
        |p| p.qs[9].rotate_left(4),
        |p| p.scales[1][6] ^= 0x0100,
    ];
    // Four activations read the packed blocks directly, ten through their unpacked form.
    for count in [4, 10] {
        let a = acts(&mut rng, count, |_| 1e-2);
        let refs: Vec<&[BlockQ8K]> = a.iter().map(Vec::as_slice).collect();
        for (i, broken) in breaks.iter().enumerate() {
            let mut packed = pack_q4k(&r, 8).unwrap();
            broken(&mut packed[1]);
            for isa in isas() {
                let dot = RowDot::with_isa(GgmlType::Q4K, isa).unwrap();
                let mut out = vec![0.0; 8 * count];
                dot.q8_k_x8(&packed, &refs, &mut out).unwrap();
                let differs = (0..8 * count).any(|i| {
                    let (t, row) = (i / 8, i % 8);
                    let row = &r[row * 432..(row + 1) * 432];
                    !same(out[i], vec_dot_q8_k(GgmlType::Q4K, row, &a[t]).unwrap())
                });
                assert!(
                    differs,
                    "break {i} on {isa:?}, {count} activations, went unnoticed"
                );
            }
        }
    }
}

#[test]
fn bad_arguments_are_refused() {
    let mut rng = StdRng::seed_from_u64(75);
    let r = rows(&mut rng, 16, None, gaussian_scale);
    assert!(
        pack_q4k(&r[..r.len() / 16 * 12], 12).is_err(),
        "12 rows are not whole groups"
    );
    assert!(pack_q4k(&r[..r.len() - 1], 16).is_err(), "a torn block");
    assert!(pack_q4k(&[], 0).is_err(), "no rows");
    let packed = pack_q4k(&r, 16).unwrap();
    let a = acts(&mut rng, 2, |_| 1e-2);
    let refs: Vec<&[BlockQ8K]> = a.iter().map(Vec::as_slice).collect();
    let dot = RowDot::with_isa(GgmlType::Q4K, Isa::Scalar).unwrap();
    let mut out = vec![0.0; 32];
    assert!(
        dot.q8_k_x8(&packed[..NB], &refs, &mut out).is_err(),
        "one group for two"
    );
    assert!(
        dot.q8_k_x8(&packed, &refs, &mut out[..30]).is_err(),
        "rows not whole groups"
    );
    let short = [&a[0][..NB - 1], &a[1][..]];
    assert!(
        dot.q8_k_x8(&packed, &short, &mut out).is_err(),
        "activations of two lengths"
    );
    let q5 = RowDot::with_isa(GgmlType::Q5K, Isa::Scalar).unwrap();
    assert!(
        q5.q8_k_x8(&packed, &refs, &mut out).is_err(),
        "not a Q4_K product"
    );
    dot.q8_k_x8(&packed, &refs, &mut out).unwrap();
}
