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

/// Dot product in f32 with eight independent accumulators (lets the compiler vectorise).
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
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
    fn dot_f32_matches_f64() {
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.25 - 3.0).collect();
        let b: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.125).collect();
        // Inputs are exact binary fractions with small magnitude: f32 partial sums round by < 1e-5 in total.
        assert!((dot_f32(&a, &b) as f64 - dot_f64(&a, &b)).abs() < 1e-4);
    }
}
