//! Small numeric kernels shared by the oracle and the CPU backend.

/// `out = x · w / sqrt(mean(x²) + eps)`, the sum of squares accumulated in f64 (as ggml's CPU rms_norm does).
pub fn rmsnorm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    debug_assert!(x.len() == w.len() && x.len() == out.len());
    let sum: f64 = x.iter().map(|&v| v as f64 * v as f64).sum();
    let scale = 1.0 / (sum / x.len() as f64 + eps as f64).sqrt();
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
        *o = (v as f64 * scale * g as f64) as f32;
    }
}

/// In-place [`rmsnorm`].
pub fn rmsnorm_in_place(x: &mut [f32], w: &[f32], eps: f32) {
    let sum: f64 = x.iter().map(|&v| v as f64 * v as f64).sum();
    let scale = 1.0 / (sum / x.len() as f64 + eps as f64).sqrt();
    for (v, &g) in x.iter_mut().zip(w) {
        *v = (*v as f64 * scale * g as f64) as f32;
    }
}

/// Numerically stable softmax over f64 scores, in place.
pub fn softmax_f64(s: &mut [f64]) {
    let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut sum = 0.0;
    for v in s.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in s.iter_mut() {
        *v /= sum;
    }
}

/// `z / (1 + e^-z)`.
pub fn silu(z: f32) -> f32 {
    z / (1.0 + (-z).exp())
}

/// `gate[i] = silu(gate[i]) · up[i]`, the SwiGLU combination of the FFN.
pub fn swiglu_in_place(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = silu(*g) * u;
    }
}

/// Dot product accumulated in f64.
pub fn dot_f64(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum()
}

/// Dot product in f32 with eight independent accumulators (lets the compiler vectorise), summed in
/// order at the end. The same operations on every instruction set (on AVX2 as 256-bit vectors), so
/// the result does not depend on it.
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked on the line above).
        return unsafe { dot_f32_avx2(a, b) };
    }
    dot_f32_body(a, b)
}

/// [`dot_f32_body`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dot_f32_avx2(a: &[f32], b: &[f32]) -> f32 {
    dot_f32_body(a, b)
}

#[inline(always)]
fn dot_f32_body(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `out[i·out_stride + j] = dot_f32(a_i, b_j)` bit for bit, where `a_i = a[i·a_stride..][..k]` for
/// `i < m` and `b_j = b[j·b_stride..][..k]` for `j < n`: the f32 product `A·Bᵀ` of row-major matrices
/// with strides. On AVX2, tiles of 4 × 2 rows keep each operand vector in a register for several dot
/// products; every product still sums its eight lanes in [`dot_f32`]'s order, so the result does not
/// depend on the tiling or on the instruction set it runs on (Rust never fuses the multiply and add).
#[allow(clippy::too_many_arguments)]
pub fn gemm_nt(
    a: &[f32],
    a_stride: usize,
    m: usize,
    b: &[f32],
    b_stride: usize,
    n: usize,
    k: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    let row_a = |i: usize| &a[i * a_stride..][..k];
    let row_b = |j: usize| &b[j * b_stride..][..k];
    #[cfg(target_arch = "x86_64")]
    let done = if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked on the line above).
        unsafe { gemm_nt_avx2(&row_a, &row_b, (m, n), out, out_stride) }
    } else {
        0
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    // Rows the tiles did not cover, or every row without AVX2.
    for i in done..m {
        for j in 0..n {
            out[i * out_stride + j] = dot_f32(row_a(i), row_b(j));
        }
    }
}

/// Rows of `a` per AVX2 tile of [`gemm_nt`] (and of `b`: 8 accumulator vectors plus 6 operand
/// vectors fit the 16 AVX2 registers).
#[cfg(target_arch = "x86_64")]
const TILE_A: usize = 4;
#[cfg(target_arch = "x86_64")]
const TILE_B: usize = 2;

/// The rows of [`gemm_nt`] that fill whole `TILE_A`-row tiles, on AVX2 ([`dot_tile_avx2`] for
/// each full `TILE_A × TILE_B` block, [`dot_f32`] for the columns past the last one); returns how
/// many rows it wrote.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn gemm_nt_avx2<'r>(
    row_a: &impl Fn(usize) -> &'r [f32],
    row_b: &impl Fn(usize) -> &'r [f32],
    (m, n): (usize, usize),
    out: &mut [f32],
    out_stride: usize,
) -> usize {
    let (m_tiles, n_tiles) = (m / TILE_A * TILE_A, n / TILE_B * TILE_B);
    for i0 in (0..m_tiles).step_by(TILE_A) {
        for j0 in (0..n_tiles).step_by(TILE_B) {
            let t = dot_tile_avx2(
                std::array::from_fn(|i| row_a(i0 + i)),
                std::array::from_fn(|j| row_b(j0 + j)),
            );
            for (i, t) in t.iter().enumerate() {
                out[(i0 + i) * out_stride + j0..][..TILE_B].copy_from_slice(t);
            }
        }
        for j in n_tiles..n {
            for i in i0..i0 + TILE_A {
                out[i * out_stride + j] = dot_f32(row_a(i), row_b(j));
            }
        }
    }
    m_tiles
}

/// `[dot_f32(a_i, b_j)]` for 4 × 2 rows of equal length on AVX2 registers: 8 accumulators, each lane `l` summing the products
/// of elements `8c + l` in order, then the lanes summed in order, as [`dot_f32`] does.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dot_tile_avx2(a: [&[f32]; TILE_A], b: [&[f32]; TILE_B]) -> [[f32; TILE_B]; TILE_A] {
    use std::arch::x86_64::{
        __m256, _mm256_add_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_setzero_ps, _mm256_storeu_ps,
    };
    let k = a[0].len();
    let body = k / 8 * 8;
    assert!(a.iter().chain(&b).all(|r| r.len() == k));
    let mut acc: [[__m256; TILE_B]; TILE_A] = [[_mm256_setzero_ps(); TILE_B]; TILE_A];
    for c in (0..body).step_by(8) {
        // SAFETY: every row has `k ≥ c + 8` elements (asserted above).
        let av: [__m256; TILE_A] =
            std::array::from_fn(|i| unsafe { _mm256_loadu_ps(a[i].as_ptr().add(c)) });
        let bv: [__m256; TILE_B] =
            std::array::from_fn(|j| unsafe { _mm256_loadu_ps(b[j].as_ptr().add(c)) });
        for i in 0..TILE_A {
            for j in 0..TILE_B {
                acc[i][j] = _mm256_add_ps(acc[i][j], _mm256_mul_ps(av[i], bv[j]));
            }
        }
    }
    std::array::from_fn(|i| {
        std::array::from_fn(|j| {
            let mut lanes = [0.0f32; 8];
            // SAFETY: `lanes` holds 8 floats.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc[i][j]) };
            let tail: f32 = a[i][body..]
                .iter()
                .zip(&b[j][body..])
                .map(|(x, y)| x * y)
                .sum();
            lanes.iter().sum::<f32>() + tail
        })
    })
}

/// Index of the largest value; the lowest index wins ties and NaN never wins.
pub fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] || v[best].is_nan() {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rmsnorm_unit_rms() {
        let x = [3.0, -4.0];
        let mut out = [0.0; 2];
        rmsnorm(&x, &[1.0, 2.0], 0.0, &mut out);
        // rms = sqrt((9 + 16) / 2) = 3.5355339
        let rms = (12.5f64).sqrt();
        assert!((out[0] as f64 - 3.0 / rms).abs() < 1e-6);
        assert!((out[1] as f64 - 2.0 * -4.0 / rms).abs() < 1e-6);
    }

    #[test]
    fn softmax_sums_to_one_and_survives_large_scores() {
        let mut s = [1000.0, 1000.0 + 2f64.ln()];
        softmax_f64(&mut s);
        assert!((s[0] - 1.0 / 3.0).abs() < 1e-12 && (s[1] - 2.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn argmax_prefers_lowest_index() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(argmax(&[f32::NAN, 0.5, 0.5]), 1);
    }

    #[test]
    fn gemm_nt_equals_dot_f32_bit_for_bit() {
        // Shapes with tile remainders on both sides and a k that is not a multiple of 8; strides wider
        // than k so a read past a row's k would take another row's values.
        let (m, n, k, sa, sb, so) = (7, 5, 21, 24, 23, 9);
        let a: Vec<f32> = (0..m * sa)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let b: Vec<f32> = (0..n * sb)
            .map(|i| ((i * 53 % 97) as f32 - 48.0) / 11.0)
            .collect();
        let mut out = vec![f32::NAN; m * so];
        gemm_nt(&a, sa, m, &b, sb, n, k, &mut out, so);
        for i in 0..m {
            for j in 0..n {
                let want = dot_f32(&a[i * sa..][..k], &b[j * sb..][..k]);
                assert_eq!(out[i * so + j].to_bits(), want.to_bits(), "({i}, {j})");
            }
            assert!(
                out[i * so + n..(i + 1) * so].iter().all(|v| v.is_nan()),
                "row {i}: wrote past n"
            );
        }
    }

    #[test]
    fn dot_f32_matches_f64() {
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.25 - 3.0).collect();
        let b: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.125).collect();
        // Inputs are exact binary fractions with small magnitude: f32 partial sums round by < 1e-5 in total.
        assert!((dot_f32(&a, &b) as f64 - dot_f64(&a, &b)).abs() < 1e-4);
    }
}
