//! quantize → dequantize on seeded Gaussian data: relative RMSE per type against a bound
//! derived from the format's step size (stated next to each bound).

use ingot_gguf::GgmlType;
use ingot_quant::{dequantize_row, quantize_row};
use rand::{rngs::StdRng, SeedableRng};
use rand_distr::{Distribution, Normal};

/// `n` standard-normal values from a fixed seed.
fn gaussian(seed: u64, n: usize) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    let normal = Normal::new(0.0f32, 1.0).unwrap();
    (0..n).map(|_| normal.sample(&mut rng)).collect()
}

/// rms(dequantize(quantize(x)) − x) / rms(x).
fn relative_rmse(ty: GgmlType, x: &[f32]) -> f64 {
    let bytes = x.len() / ty.block_size() as usize * ty.type_size() as usize;
    let mut q = vec![0u8; bytes];
    quantize_row(ty, x, &mut q).unwrap();
    let mut y = vec![0.0f32; x.len()];
    dequantize_row(ty, &q, &mut y).unwrap();
    let err: f64 = x
        .iter()
        .zip(&y)
        .map(|(a, b)| f64::from(a - b).powi(2))
        .sum();
    let sig: f64 = x.iter().map(|a| f64::from(*a).powi(2)).sum();
    (err / sig).sqrt()
}

// Bounds. For a uniform quantizer with step Δ the rounding error is ~U(−Δ/2, Δ/2), RMS Δ/√12.
// In a block of 32 standard normals E[max|x|] ≈ 2.1 (in 16: ≈ 1.8), which sets Δ.
// Each bound is that estimate times 1.5, so a layout or rounding bug (which costs far more
// than 50 %) fails while the seed-to-seed spread (a few %) does not.
const BOUNDS: &[(GgmlType, f64, &str)] = &[
    // Exact to binary16: relative error ≤ 2⁻¹¹ per element → RMSE ≤ 2⁻¹¹ ≈ 4.9e-4.
    (GgmlType::F16, 4.9e-4, "2^-11 per element"),
    // bfloat16 keeps 8 bits: ≤ 2⁻⁸ ≈ 3.9e-3 per element.
    (GgmlType::Bf16, 3.9e-3, "2^-8 per element"),
    (GgmlType::F32, 0.0, "lossless"),
    // Δ = amax/127 ≈ 0.0165 → Δ/√12 ≈ 0.0048.
    (GgmlType::Q8_0, 0.0072, "amax/127/sqrt(12)"),
    // Δ = amax/16 ≈ 0.13 → 0.038; the positive side can clip at +15/16·amax.
    (GgmlType::Q5_0, 0.06, "amax/16/sqrt(12)"),
    // Δ = (max−min)/31 ≈ 4.2/31 → 0.039.
    (GgmlType::Q5_1, 0.06, "range/31/sqrt(12)"),
    // Δ = amax/8 ≈ 0.26 → 0.076.
    (GgmlType::Q4_0, 0.115, "amax/8/sqrt(12)"),
    // Δ = (max−min)/15 ≈ 0.28 → 0.081.
    (GgmlType::Q4_1, 0.12, "range/15/sqrt(12)"),
    // Non-linear 16-level book scaled to amax: between Q4_0 and Q4_1 (measured ≈ 0.07).
    (GgmlType::Iq4Nl, 0.11, "4-bit code book"),
    (GgmlType::Iq4Xs, 0.11, "4-bit code book, 6-bit sub-scales"),
    // k-quants (the scale search only lowers the error below the plain step estimate):
    // Q6_K Δ ≈ amax₁₆/32 ≈ 1.8/32 → 0.016.
    (GgmlType::Q6K, 0.025, "amax16/32/sqrt(12)"),
    // Q5_K Δ ≈ range₃₂/31 ≈ 4.2/31 → 0.039.
    (GgmlType::Q5K, 0.06, "range32/31/sqrt(12)"),
    // Q4_K Δ ≈ range₃₂/15 → 0.081.
    (GgmlType::Q4K, 0.12, "range32/15/sqrt(12)"),
    // Q3_K Δ ≈ amax₁₆/4 ≈ 0.45 → 0.13.
    (GgmlType::Q3K, 0.2, "amax16/4/sqrt(12)"),
    // Q2_K Δ ≈ range₁₆/3 ≈ 3.5/3 → 0.34.
    (GgmlType::Q2K, 0.5, "range16/3/sqrt(12)"),
];

#[test]
fn gaussian_round_trip_error_is_bounded() {
    let x = gaussian(0x5eed, 64 * 256);
    let mut failures = Vec::new();
    for &(ty, bound, why) in BOUNDS {
        let e = relative_rmse(ty, &x);
        eprintln!("{ty:>6}: relative RMSE {e:.5} (bound {bound}, {why})");
        if e > bound {
            failures.push(format!("{ty}: {e} > {bound}"));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}

#[test]
fn more_bits_means_less_error() {
    // The format ladder must be monotone on the same data; a broken scale fit shows up here
    // even when it stays inside its absolute bound.
    let x = gaussian(42, 32 * 256);
    let ladder = [
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
        GgmlType::Q8_0,
        GgmlType::F16,
    ];
    let errs: Vec<f64> = ladder.iter().map(|&t| relative_rmse(t, &x)).collect();
    for w in errs.windows(2) {
        assert!(w[1] < w[0], "{ladder:?}: {errs:?}");
    }
}

#[test]
fn zero_blocks_are_exact() {
    // All-zero input must come back as exact zeros: every quantizer special-cases amax = 0
    // (a 1/0 scale there would turn into NaN or garbage levels).
    for &(ty, _, _) in BOUNDS {
        let n = 256;
        let bytes = n / ty.block_size() as usize * ty.type_size() as usize;
        let mut q = vec![0u8; bytes];
        let mut y = vec![f32::NAN; n];
        quantize_row(ty, &vec![0.0; n], &mut q).unwrap();
        dequantize_row(ty, &q, &mut y).unwrap();
        assert!(y.iter().all(|&v| v == 0.0), "{ty}: zeros → {:?}", &y[..4]);
    }
}
