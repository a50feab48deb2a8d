//! `rmsnorm_f32` against an f64 evaluation of `x·w / sqrt(mean(x²) + eps)`.

mod support;

use ingot_kernels::{ops, Accelerator};
use rand::Rng;
use support::{download_f32, f32_bytes, poisoned, upload};

fn check<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("rmsnorm_f32");
    let eps = 1e-6f32;
    // 2048: the model width; 2052: a chunk count that is not a multiple of the block size.
    for (rows, n) in [(1usize, 2048usize), (3, 2052), (2, 4)] {
        let x: Vec<f32> = (0..rows * n)
            .map(|_| rng.random_range(-3.0f32..3.0))
            .collect();
        let w: Vec<f32> = (0..n).map(|_| rng.random_range(0.5f32..1.5)).collect();
        let (xb, wb) = (upload(b, &f32_bytes(&x)), upload(b, &f32_bytes(&w)));
        let yb = poisoned(b, rows * n * 4);
        ops::rmsnorm_f32(b, &xb, &wb, &yb, rows, n, eps).expect("launch");
        let y = download_f32(b, &yb, rows * n);
        let mut worst = 0.0f64;
        for r in 0..rows {
            let xr = &x[r * n..(r + 1) * n];
            let ms = xr.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / n as f64;
            let scale = 1.0 / (ms + f64::from(eps)).sqrt();
            for c in 0..n {
                let want = f64::from(xr[c]) * scale * f64::from(w[c]);
                let got = f64::from(y[r * n + c]);
                // The kernel sums x² in f32 along a tree of depth < 30 (per-thread chunks,
                // 5 shuffle steps, 8 warp partials), relative error < 30·2^-24 ≈ 1.8e-6; the
                // scale inherits half of it and the two products add 2 roundings. 1e-5 leaves a
                // 4x margin. NaN (an unwritten poisoned output) fails the comparison.
                let err = (got - want).abs() / want.abs().max(1e-30);
                assert!(
                    err <= 1e-5,
                    "{}: rows={rows} n={n} y[{r}][{c}] = {got}, expected {want} (rel err {err:e})",
                    b.name()
                );
                worst = worst.max(err);
            }
        }
        eprintln!(
            "{}: rmsnorm rows={rows} n={n}: max rel err {worst:.2e}",
            b.name()
        );
    }
}

#[test]
fn rmsnorm_matches_f64_reference() {
    on_every_backend!(check);
}
