//! [`RowDot`] against the one-row scalar reference, on every instruction set this CPU has:
//! the results must be bit-identical (all the kernels differ in is the order of exact integer
//! additions), on real quantized rows, on random block bytes and on saturating extremes.

use bytemuck::{Pod, Zeroable};
use ingot_abi::blocks::{
    iq1m_d, iq1m_set_d, BlockIq1M, BlockIq1S, BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S,
    BlockIq3Xxs, BlockIq4Nl, BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ5K,
    BlockQ5_0, BlockQ6K, BlockQ8K, BlockQ8_0, QK_K,
};
use ingot_gguf::GgmlType;
use rand::{rngs::StdRng, Rng, SeedableRng};
use rand_distr::{Distribution, Normal};

use super::{Isa, RowDot};
use crate::round::f32_to_f16;
use crate::{
    can_quantize, quantize_q8_0, quantize_q8_k, quantize_row, vec_dot_q8_0, vec_dot_q8_k,
    QuantError,
};

/// The Q8_K-activation types: k-quants, IQ4_XS and the grid types.
fn q8k_types() -> impl Iterator<Item = GgmlType> {
    [
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
        GgmlType::Iq4Xs,
    ]
    .into_iter()
    .chain(crate::GRID_TYPES)
}
const Q8_0_TYPES: [GgmlType; 4] = [
    GgmlType::Q4_0,
    GgmlType::Q5_0,
    GgmlType::Q8_0,
    GgmlType::Iq4Nl,
];

/// Row widths of the tests: 5 super-blocks, or 37 legacy blocks (not a multiple of the 4 blocks
/// the AVX2 legacy kernels take at a time, so their tail runs too).
const COLS_K: usize = 5 * QK_K;
const COLS_0: usize = 37 * 32;
const ROWS: usize = 8;

fn cols(ty: GgmlType) -> usize {
    if ty.block_size() as usize == QK_K {
        COLS_K
    } else {
        COLS_0
    }
}

fn gaussian(rng: &mut StdRng, n: usize) -> Vec<f32> {
    let normal = Normal::new(0.0f32, 1.0).unwrap();
    (0..n).map(|_| normal.sample(rng)).collect()
}

pub(super) fn isas() -> Vec<Isa> {
    let all = [Isa::Scalar, Isa::Avx2, Isa::AvxVnni, Isa::Avx512];
    let have: Vec<Isa> = all.into_iter().filter(|i| i.is_available()).collect();
    if have.len() < all.len() {
        eprintln!("note: this CPU runs only {have:?}; the other kernels are not compared");
    }
    have
}

/// Rows of `ty` quantized from Gaussian weights (realistic levels and scales).
fn quantized_rows(rng: &mut StdRng, ty: GgmlType) -> Vec<u8> {
    let x = gaussian(rng, ROWS * cols(ty));
    let bytes = ROWS * cols(ty) / ty.block_size() as usize * ty.type_size() as usize;
    let mut q = vec![0u8; bytes];
    quantize_row(ty, &x, &mut q).unwrap();
    q
}

/// A finite f16 scale of magnitude about 1e-2.
fn random_scale(rng: &mut StdRng) -> u16 {
    f32_to_f16(gaussian(rng, 1)[0] * 1e-2)
}

/// Random block bytes of `ty` (every level, scale and high bit pattern; for the grid types every
/// grid index and sign), with finite f16 scales so that results are comparable numbers.
fn random_rows(rng: &mut StdRng, ty: GgmlType) -> Vec<u8> {
    let n = ROWS * cols(ty) / ty.block_size() as usize;
    random_blocks(rng, ty, n, random_scale)
}

/// `n` blocks of random bytes of `ty` whose f16 scale fields (`d`, and `dmin` where the type has
/// one) are drawn from `scale`.
fn random_blocks(
    rng: &mut StdRng,
    ty: GgmlType,
    n: usize,
    scale: fn(&mut StdRng) -> u16,
) -> Vec<u8> {
    fn blocks<B: Pod>(
        rng: &mut StdRng,
        n: usize,
        scale: fn(&mut StdRng) -> u16,
        fix: fn(&mut B, u16, u16),
    ) -> Vec<u8> {
        let mut out = Vec::new();
        for _ in 0..n {
            let mut b = B::zeroed();
            rng.fill(bytemuck::bytes_of_mut(&mut b));
            let (d, dmin) = (scale(rng), scale(rng));
            fix(&mut b, d, dmin);
            out.extend_from_slice(bytemuck::bytes_of(&b));
        }
        out
    }
    let s = scale;
    match ty {
        GgmlType::Q2K => blocks::<BlockQ2K>(rng, n, s, |b, d, m| (b.d, b.dmin) = (d, m)),
        GgmlType::Q3K => blocks::<BlockQ3K>(rng, n, s, |b, d, _| b.d = d),
        GgmlType::Q4K => blocks::<BlockQ4K>(rng, n, s, |b, d, m| (b.d, b.dmin) = (d, m)),
        GgmlType::Q5K => blocks::<BlockQ5K>(rng, n, s, |b, d, m| (b.d, b.dmin) = (d, m)),
        GgmlType::Q6K => blocks::<BlockQ6K>(rng, n, s, |b, d, _| b.d = d),
        GgmlType::Iq4Xs => blocks::<BlockIq4Xs>(rng, n, s, |b, d, _| b.d = d),
        GgmlType::Q4_0 => blocks::<BlockQ4_0>(rng, n, s, |b, d, _| b.d = d),
        GgmlType::Q5_0 => blocks::<BlockQ5_0>(rng, n, s, |b, d, _| b.d = d),
        GgmlType::Q8_0 => blocks::<BlockQ8_0>(rng, n, s, |b, d, _| b.d = d),
        GgmlType::Iq4Nl => blocks::<BlockIq4Nl>(rng, n, s, |b, d, _| b.d = d),
        GgmlType::Iq2Xxs => blocks::<BlockIq2Xxs>(rng, n, s, |b, d, _| b.d = d),
        GgmlType::Iq2Xs => blocks::<BlockIq2Xs>(rng, n, s, |b, d, _| b.d = d),
        GgmlType::Iq2S => blocks::<BlockIq2S>(rng, n, s, |b, d, _| b.d = d),
        GgmlType::Iq3Xxs => blocks::<BlockIq3Xxs>(rng, n, s, |b, d, _| b.d = d),
        GgmlType::Iq3S => blocks::<BlockIq3S>(rng, n, s, |b, d, _| b.d = d),
        GgmlType::Iq1S => blocks::<BlockIq1S>(rng, n, s, |b, d, _| b.d = d),
        GgmlType::Iq1M => blocks::<BlockIq1M>(rng, n, s, |b, d, _| iq1m_set_d(&mut b.scales, d)),
        _ => unreachable!("not a CPU dot type: {ty}"),
    }
}

/// Q8_K activations with arbitrary quants (−128 included) and consistent `bsums`.
fn raw_q8_k(rng: &mut StdRng, fill: Option<i8>) -> Vec<BlockQ8K> {
    (0..COLS_K / QK_K)
        .map(|_| {
            let mut b = BlockQ8K::zeroed();
            match fill {
                Some(v) => b.qs = [v; QK_K],
                None => rng.fill(bytemuck::cast_slice_mut::<i8, u8>(&mut b.qs)),
            }
            for (s, g) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
                *s = g.iter().map(|&q| i16::from(q)).sum();
            }
            b.d = 1e-2;
            b
        })
        .collect()
}

/// Q8_0 activations with arbitrary quants (−128 included).
fn raw_q8_0(rng: &mut StdRng, fill: Option<i8>) -> Vec<BlockQ8_0> {
    (0..COLS_0 / 32)
        .map(|_| {
            let mut b = BlockQ8_0::zeroed();
            match fill {
                Some(v) => b.qs = [v; 32],
                None => rng.fill(bytemuck::cast_slice_mut::<i8, u8>(&mut b.qs)),
            }
            b.d = random_scale(rng);
            b
        })
        .collect()
}

/// Asserts every instruction set reproduces the one-row reference bit for bit on `rows`,
/// read both in place and from a misaligned copy.
fn check_rows(ty: GgmlType, what: &str, rows: &[u8], act: Act<'_>) {
    let row_bytes = rows.len() / ROWS;
    let want: Vec<f32> = rows
        .chunks_exact(row_bytes)
        .map(|r| match act {
            Act::Q8K(a) => vec_dot_q8_k(ty, r, a).unwrap(),
            Act::Q8_0(a) => vec_dot_q8_0(ty, r, a).unwrap(),
        })
        .collect();
    let mut shifted = vec![0u8; rows.len() + 1];
    shifted[1..].copy_from_slice(rows);
    for isa in isas() {
        let dot = RowDot::with_isa(ty, isa).unwrap();
        for (layout, data) in [("aligned", rows), ("misaligned", &shifted[1..])] {
            let mut got = vec![f32::NAN; ROWS];
            match act {
                Act::Q8K(a) => dot.q8_k(data, a, &mut got).unwrap(),
                Act::Q8_0(a) => dot.q8_0(data, a, &mut got).unwrap(),
            }
            for (r, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    g.to_bits() == w.to_bits(),
                    "{ty} {what} {isa:?} {layout} row {r}: {g:e} vs reference {w:e}"
                );
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Act<'a> {
    Q8K(&'a [BlockQ8K]),
    Q8_0(&'a [BlockQ8_0]),
}

#[test]
fn every_isa_matches_the_reference_on_quantized_rows() {
    let mut rng = StdRng::seed_from_u64(7);
    let q8k = quantize_q8_k(&gaussian(&mut rng, COLS_K));
    let q80 = quantize_q8_0(&gaussian(&mut rng, COLS_0));
    for ty in q8k_types().filter(|&t| can_quantize(t)) {
        check_rows(
            ty,
            "quantized",
            &quantized_rows(&mut rng, ty),
            Act::Q8K(&q8k),
        );
    }
    for ty in Q8_0_TYPES {
        check_rows(
            ty,
            "quantized",
            &quantized_rows(&mut rng, ty),
            Act::Q8_0(&q80),
        );
    }
}

#[test]
fn every_isa_matches_the_reference_on_random_blocks() {
    let mut rng = StdRng::seed_from_u64(8);
    for trial in 0..20 {
        let (q8k, q80) = (raw_q8_k(&mut rng, None), raw_q8_0(&mut rng, None));
        for ty in q8k_types() {
            let rows = random_rows(&mut rng, ty);
            check_rows(ty, &format!("random #{trial}"), &rows, Act::Q8K(&q8k));
        }
        for ty in Q8_0_TYPES {
            let rows = random_rows(&mut rng, ty);
            check_rows(ty, &format!("random #{trial}"), &rows, Act::Q8_0(&q80));
        }
    }
}

/// Random rows of `ty` with every byte set to `byte` except each block's f16 scale fields, which
/// stay finite: the largest levels, scales and high bits for `0xFF`.
fn saturated_rows(rng: &mut StdRng, ty: GgmlType, byte: u8) -> Vec<u8> {
    let mut rows = random_rows(rng, ty);
    let block = ty.type_size() as usize;
    // Keep each block's f16 fields (finite) and saturate everything else. The f16 fields sit at
    // offset 0 (d, dmin) except for Q2_K/Q3_K/Q6_K (at the end).
    let scale_bytes = match ty {
        GgmlType::Q2K | GgmlType::Q4K | GgmlType::Q5K => 4,
        _ => 2,
    };
    let at_end = matches!(ty, GgmlType::Q2K | GgmlType::Q3K | GgmlType::Q6K);
    for b in rows.chunks_exact_mut(block) {
        if ty == GgmlType::Iq1M {
            // IQ1_M keeps its f16 `d` in the top nibbles of its last 8 bytes.
            let scales = |b: &[u8]| -> [u8; 8] { b[48..56].try_into().unwrap() };
            let d = iq1m_d(&scales(b));
            b.fill(byte);
            let mut sc = scales(b);
            iq1m_set_d(&mut sc, d);
            b[48..56].copy_from_slice(&sc);
            continue;
        }
        let body = if at_end {
            0..block - scale_bytes
        } else {
            scale_bytes..block
        };
        b[body].fill(byte);
    }
    rows
}

/// All-ones weight bytes (largest levels, scales and high bits) against ±127 and −128
/// activations: the bounds under which the SIMD products must not saturate.
#[test]
fn every_isa_matches_the_reference_on_extremes() {
    let mut rng = StdRng::seed_from_u64(9);
    for fill in [-128i8, 127, -127] {
        let q8k = raw_q8_k(&mut rng, Some(fill));
        let q80 = raw_q8_0(&mut rng, Some(fill));
        for byte in [0xFFu8, 0x00, 0xAA] {
            let what = format!("bytes {byte:#04x}, activations {fill}");
            for ty in q8k_types().chain(Q8_0_TYPES) {
                let rows = saturated_rows(&mut rng, ty, byte);
                match ty.block_size() {
                    256 => check_rows(ty, &what, &rows, Act::Q8K(&q8k)),
                    _ => check_rows(ty, &what, &rows, Act::Q8_0(&q80)),
                }
            }
        }
    }
}

#[test]
fn bad_arguments_are_refused() {
    let q8k = vec![BlockQ8K::zeroed(); 2];
    let q80 = vec![BlockQ8_0::zeroed(); 2];
    let dot = RowDot::new(GgmlType::Q4K).unwrap();
    let mut out = [0.0f32; 3];
    // 3 rows of 2 blocks of 144 bytes are 864 bytes, not 863.
    assert_eq!(
        dot.q8_k(&[0u8; 863], &q8k, &mut out),
        Err(QuantError::ByteLength {
            ty: GgmlType::Q4K,
            elements: 3 * 512,
            expected: 864,
            actual: 863
        })
    );
    assert!(dot.q8_k(&[0u8; 864], &q8k, &mut out).is_ok());
    assert!(matches!(
        dot.q8_0(&[0u8; 864], &q80, &mut out),
        Err(QuantError::Unsupported { .. })
    ));
    assert!(matches!(
        RowDot::new(GgmlType::Q4_1),
        Err(QuantError::Unsupported { .. })
    ));
    assert!(matches!(
        RowDot::new(GgmlType::F32),
        Err(QuantError::Unsupported { .. })
    ));
    // No activation blocks: empty rows, whose dot product is 0.
    let mut out = [f32::NAN; 2];
    dot.q8_k(&[], &[], &mut out).unwrap();
    assert_eq!(out, [0.0, 0.0]);
}

#[test]
fn isa_reports_what_it_runs_on() {
    let dot = RowDot::with_isa(GgmlType::Q6K, Isa::Scalar).unwrap();
    assert_eq!((dot.ty(), dot.isa()), (GgmlType::Q6K, Isa::Scalar));
    assert_eq!(dot.act_type(), GgmlType::Q8K);
    assert_eq!(
        RowDot::new(GgmlType::Q5_0).unwrap().act_type(),
        GgmlType::Q8_0
    );
    assert_eq!(RowDot::new(GgmlType::Q4K).unwrap().isa(), Isa::detect());
    if !Isa::Avx2.is_available() {
        assert!(RowDot::with_isa(GgmlType::Q4K, Isa::Avx2).is_err());
    }
}

/// Activations for the multi-activation products: one list per activation type.
enum Acts {
    Q8K(Vec<Vec<BlockQ8K>>),
    Q8_0(Vec<Vec<BlockQ8_0>>),
}

impl Acts {
    /// `count` activations for `ty`'s activation type, each `blocks` blocks: random quants
    /// (−128 included), or, for `fill`, every quant `fill` in the even-numbered activations and
    /// random ones in the others (so that the activations of one group differ).
    fn new(rng: &mut StdRng, ty: GgmlType, count: usize, blocks: usize, fill: Option<i8>) -> Acts {
        let pick = |t: usize| if t.is_multiple_of(2) { fill } else { None };
        if ty.block_size() as usize == QK_K {
            Acts::Q8K(
                (0..count)
                    .map(|t| raw_q8_k(rng, pick(t))[..blocks].to_vec())
                    .collect(),
            )
        } else {
            Acts::Q8_0(
                (0..count)
                    .map(|t| raw_q8_0(rng, pick(t))[..blocks].to_vec())
                    .collect(),
            )
        }
    }

    fn len(&self) -> usize {
        match self {
            Acts::Q8K(a) => a.len(),
            Acts::Q8_0(a) => a.len(),
        }
    }
}

/// Asserts that the multi-activation product of `nrows` rows (`rows`) against every activation
/// equals the one-row scalar reference ([`vec_dot_q8_k`] / [`vec_dot_q8_0`]) of each (row,
/// activation) pair bit for bit, on every instruction set, read in place and from a misaligned
/// copy.
fn check_multi(ty: GgmlType, what: &str, rows: &[u8], nrows: usize, acts: &Acts) {
    let row_bytes = rows.len() / nrows;
    let count = acts.len();
    let mut want = Vec::with_capacity(count * nrows);
    for t in 0..count {
        for r in rows.chunks_exact(row_bytes) {
            want.push(match acts {
                Acts::Q8K(a) => vec_dot_q8_k(ty, r, &a[t]).unwrap(),
                Acts::Q8_0(a) => vec_dot_q8_0(ty, r, &a[t]).unwrap(),
            });
        }
    }
    let mut shifted = vec![0u8; rows.len() + 1];
    shifted[1..].copy_from_slice(rows);
    for isa in isas() {
        let dot = RowDot::with_isa(ty, isa).unwrap();
        for (layout, data) in [("aligned", rows), ("misaligned", &shifted[1..])] {
            let mut got = vec![f32::NAN; count * nrows];
            match acts {
                Acts::Q8K(a) => {
                    let views: Vec<&[BlockQ8K]> = a.iter().map(Vec::as_slice).collect();
                    dot.q8_k_multi(data, &views, &mut got).unwrap();
                }
                Acts::Q8_0(a) => {
                    let views: Vec<&[BlockQ8_0]> = a.iter().map(Vec::as_slice).collect();
                    dot.q8_0_multi(data, &views, &mut got).unwrap();
                }
            }
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    g.to_bits() == w.to_bits(),
                    "{ty} {what} {isa:?} {layout}: input {} of {count}, row {}: {g:e} vs \
                     reference {w:e}",
                    i / nrows,
                    i % nrows
                );
            }
        }
    }
}

/// Input counts around the AVX2 kernels' group of four: one short group, whole groups, and whole
/// groups with a partial last one.
const COUNTS: [usize; 8] = [1, 3, 4, 5, 7, 8, 9, 13];

/// Several activations at once give each one's single-activation scalar result, bit for bit,
/// for every weight type (Q2_K…Q6_K, Q4_0, Q5_0, Q8_0 and IQ4_NL through their
/// shared-unpacking AVX2 kernels, the others through the per-input fallback), every input count
/// in [`COUNTS`], on random blocks and random activations (−128 included), in place and
/// misaligned.
#[test]
fn multi_activation_rows_equal_one_activation_at_a_time() {
    let mut rng = StdRng::seed_from_u64(41);
    for trial in 0..3 {
        for ty in q8k_types().chain(Q8_0_TYPES) {
            let rows = random_rows(&mut rng, ty);
            let blocks = cols(ty) / ty.block_size() as usize;
            for count in COUNTS {
                let acts = Acts::new(&mut rng, ty, count, blocks, None);
                check_multi(ty, &format!("random #{trial}"), &rows, ROWS, &acts);
            }
        }
    }
    // 33 rows: two groups of sixteen (AVX-512) or four of eight interleaved rows, and one left
    // over.
    for ty in q8k_types().chain(Q8_0_TYPES) {
        let blocks = cols(ty) / ty.block_size() as usize;
        let rows = random_blocks(&mut rng, ty, 33 * blocks, random_scale);
        for count in COUNTS {
            let acts = Acts::new(&mut rng, ty, count, blocks, None);
            check_multi(ty, "random, 33 rows", &rows, 33, &acts);
        }
    }
}

/// Rows of 1 to 9 blocks (1 to 5 super-blocks): the legacy kernels' groups of four blocks with
/// every tail length, including rows shorter than one group, against several input counts.
#[test]
fn multi_activation_rows_of_every_width() {
    let mut rng = StdRng::seed_from_u64(42);
    for ty in q8k_types().chain(Q8_0_TYPES) {
        let all = random_rows(&mut rng, ty);
        let max = if ty.block_size() as usize == QK_K {
            5
        } else {
            9
        };
        for blocks in 1..=max {
            let nrows = 3;
            let rows = &all[..nrows * blocks * ty.type_size() as usize];
            for count in [4, 6] {
                let acts = Acts::new(&mut rng, ty, count, blocks, None);
                check_multi(ty, &format!("{blocks} blocks"), rows, nrows, &acts);
            }
        }
    }
}

/// Saturated weight bytes (all-0xFF, all-0x00, 0xAA, scales kept finite) against activations
/// that are all −128, 127 or −127 (every other input; the others random): the bounds under which
/// the shared-unpacking products must not saturate, for every input count in [`COUNTS`].
#[test]
fn multi_activation_rows_on_extremes() {
    let mut rng = StdRng::seed_from_u64(43);
    for fill in [-128i8, 127, -127] {
        for byte in [0xFFu8, 0x00, 0xAA] {
            let what = format!("bytes {byte:#04x}, activations {fill}");
            for ty in q8k_types().chain(Q8_0_TYPES) {
                let rows = saturated_rows(&mut rng, ty, byte);
                let blocks = cols(ty) / ty.block_size() as usize;
                for count in COUNTS {
                    let acts = Acts::new(&mut rng, ty, count, blocks, Some(fill));
                    check_multi(ty, &what, &rows, ROWS, &acts);
                }
            }
        }
    }
}

/// The multi-activation products refuse what the one-activation ones refuse: a mismatched
/// activation type, an activation of another width, and an output that is not a whole number of
/// rows per input; no inputs writes nothing.
#[test]
fn multi_activation_bad_arguments_are_refused() {
    let q80 = [BlockQ8_0::zeroed(); 2];
    let short = [BlockQ8_0::zeroed(); 1];
    let dot = RowDot::new(GgmlType::Q5_0).unwrap();
    // 3 rows of 2 blocks of 22 bytes.
    let rows = [0u8; 3 * 2 * 22];
    let mut out = [0.0f32; 6];
    dot.q8_0_multi(&rows, &[&q80[..], &q80[..]], &mut out)
        .unwrap();
    assert_eq!(out, [0.0; 6]);
    assert!(matches!(
        dot.q8_0_multi(&rows, &[&q80[..], &short[..]], &mut out),
        Err(QuantError::ByteLength { .. })
    ));
    assert!(matches!(
        dot.q8_0_multi(&rows, &[&q80[..], &q80[..]], &mut out[..5]),
        Err(QuantError::ByteLength { .. })
    ));
    let q8k = [BlockQ8K::zeroed(); 2];
    assert!(matches!(
        dot.q8_k_multi(&rows, &[&q8k[..]], &mut out[..3]),
        Err(QuantError::Unsupported { .. })
    ));
    let mut none = [f32::NAN; 0];
    dot.q8_0_multi(&rows, &[], &mut none).unwrap();
}

/// f16 scales at the edges of the format: the largest finite magnitude, the smallest normal and
/// subnormal ones, both zeros, and ±1.
const EXTREME_F16: [u16; 8] = [
    0x7BFF, 0xFBFF, 0x0400, 0x0001, 0x8001, 0x0000, 0x8000, 0x3C00,
];

/// Q8_K activation scales from subnormal to near the f32 limit, both signs.
const EXTREME_F32: [f32; 7] = [1e-45, 1.2e-38, 1e-2, 1.0, 3e38, -3e38, -1e-30];

fn extreme_f16(rng: &mut StdRng) -> u16 {
    EXTREME_F16[rng.random_range(0..EXTREME_F16.len())]
}

impl Acts {
    /// Every activation block's scale replaced by an extreme one.
    fn with_extreme_scales(mut self, rng: &mut StdRng) -> Acts {
        match &mut self {
            Acts::Q8K(a) => a
                .iter_mut()
                .flatten()
                .for_each(|b| b.d = EXTREME_F32[rng.random_range(0..EXTREME_F32.len())]),
            Acts::Q8_0(a) => a.iter_mut().flatten().for_each(|b| b.d = extreme_f16(rng)),
        }
        self
    }
}

/// The register-blocked products (steps of 2 or 4 rows by 4 or 2 activations; groups of eight
/// or sixteen interleaved rows) against every (row count, activation count) from 1 to 10 rows
/// (and 15 to 17, 31 to 33) and 1 to 10 activations, so that every step shape and every remainder
/// of rows and of activations runs, on random blocks whose scales are
/// the f16 extremes and activations whose scales reach the f32 extremes (overflowing to ±inf and
/// NaN in places, as the scalar dot does): every output is the scalar reference's, bit for bit.
#[test]
fn multi_activation_tiles_of_every_shape_on_extreme_scales() {
    let mut rng = StdRng::seed_from_u64(44);
    for ty in q8k_types().chain(Q8_0_TYPES) {
        let blocks = if ty.block_size() as usize == QK_K {
            2
        } else {
            5
        };
        for nrows in (1..=10).chain(15..=17).chain(31..=33) {
            let rows = random_blocks(&mut rng, ty, nrows * blocks, extreme_f16);
            for count in 1..=10 {
                let acts =
                    Acts::new(&mut rng, ty, count, blocks, None).with_extreme_scales(&mut rng);
                let what = format!("{nrows} rows, extreme scales");
                check_multi(ty, &what, &rows, nrows, &acts);
            }
        }
    }
}

/// `INGOT_CPU_ISA`: unset or empty takes the fastest; a name takes that set where the CPU has it
/// (scalar always); an unknown name or one the CPU lacks takes the fastest and says why.
#[test]
fn a_named_instruction_set_is_chosen_when_available() {
    let fastest = Isa::fastest();
    assert_eq!(Isa::choose(None), (fastest, None));
    assert_eq!(Isa::choose(Some(" ")), (fastest, None));
    assert_eq!(Isa::choose(Some("Scalar")), (Isa::Scalar, None));
    for isa in Isa::ALL {
        let (got, why) = Isa::choose(Some(isa.name()));
        if isa.is_available() {
            assert_eq!((got, why), (isa, None));
        } else {
            assert_eq!(got, fastest);
            assert!(why.unwrap().contains("this CPU has no"));
        }
    }
    let (got, why) = Isa::choose(Some("avx1024"));
    assert_eq!(got, fastest);
    assert!(why
        .unwrap()
        .contains("is not one of scalar, avx2, avx-vnni, avx512"));
}

/// One activation against rows of 1 to 17 super-blocks: the AVX2 row kernels of Q4_K, Q5_K and Q6_K
/// finish eight blocks at a time, so every count of whole groups and every tail runs; activation
/// scales differ per block, so each lane of a group gets its own. Bit for bit against the
/// reference, on every instruction set, for every Q8_K type.
#[test]
fn one_activation_rows_of_every_width() {
    let mut rng = StdRng::seed_from_u64(44);
    for ty in q8k_types() {
        for blocks in 1..=17 {
            let nrows = 3;
            let rows = random_blocks(&mut rng, ty, nrows * blocks, random_scale);
            let mut act: Vec<BlockQ8K> = (0..4).flat_map(|_| raw_q8_k(&mut rng, None)).collect();
            act.truncate(blocks);
            for (i, b) in act.iter_mut().enumerate() {
                b.d = 1e-3 * (i as f32 + 1.0) * if i % 3 == 0 { -1.0 } else { 1.0 };
            }
            let row_bytes = rows.len() / nrows;
            let want: Vec<f32> = rows
                .chunks_exact(row_bytes)
                .map(|r| vec_dot_q8_k(ty, r, &act).unwrap())
                .collect();
            for isa in isas() {
                let mut got = vec![f32::NAN; nrows];
                RowDot::with_isa(ty, isa)
                    .unwrap()
                    .q8_k(&rows, &act, &mut got)
                    .unwrap();
                for (r, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        g.to_bits() == w.to_bits(),
                        "{ty} {blocks} blocks {isa:?} row {r}: {g:e} vs reference {w:e}"
                    );
                }
            }
        }
    }
}
