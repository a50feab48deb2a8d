//! `rmsnorm_q8_1` against an f64 rmsnorm followed by the CPU q8_1 quantizer, and
//! `rmsnorm_q8_1_f32` against `rmsnorm_q8_1` and the CPU quantizer of its own f32 output.

mod support;

use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_kernels::ops::norm::{rmsnorm_q8_1, rmsnorm_q8_1_f32};
use ingot_kernels::Accelerator;
use rand::rngs::StdRng;
use rand::Rng;
use support::{download, download_f32, f32_bytes, poisoned, upload, Agree, SameLaunch};

fn check<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("rmsnorm_q8_1");
    let eps = 1e-6f32;
    // 2048: attn_norm / ffn_norm / output_norm width; 2 rows × 4096: two passes per thread
    // with a second row; 96: fewer chunks than threads (most lanes idle).
    for (rows, n) in [(1usize, 2048usize), (2, 4096), (3, 96)] {
        let x: Vec<f32> = (0..rows * n)
            .map(|_| {
                let v = rng.random_range(0.01f32..3.0);
                if rng.random() {
                    v
                } else {
                    -v
                }
            })
            .collect();
        let w: Vec<f32> = (0..n).map(|_| rng.random_range(0.5f32..1.5)).collect();
        let (xb, wb) = (upload(b, &f32_bytes(&x)), upload(b, &f32_bytes(&w)));
        let nblk = n / QK8_1;
        let yb = poisoned(b, (rows * nblk + 1) * 36);
        rmsnorm_q8_1(b, (&xb, &wb, &yb), rows, n, eps).expect("launch");
        let bytes = download(b, &yb);
        assert!(
            bytes[rows * nblk * 36..].iter().all(|&v| v == 0xFF),
            "{}: wrote past the last block",
            b.name()
        );
        let got: &[BlockQ8_1] = bytemuck::cast_slice(&bytes[..rows * nblk * 36]);
        let mut worst_q = 0;
        for r in 0..rows {
            let who = format!("{}: rows={rows} n={n} row {r}", b.name());
            worst_q = worst_q.max(support::rmsnorm::check_q8_1(
                &who,
                &x[r * n..(r + 1) * n],
                &w,
                eps,
                &got[r * nblk..(r + 1) * nblk],
            ));
        }
        eprintln!(
            "{}: rmsnorm_q8_1 rows={rows} n={n}: max quant difference from the oracle {worst_q}",
            b.name()
        );
    }
}

#[test]
fn rmsnorm_q8_1_matches_f64_then_quantize() {
    on_every_backend!(check);
}

/// Random non-zero inputs of `rows × n` and a weight vector.
fn inputs(rng: &mut StdRng, rows: usize, n: usize) -> (Vec<f32>, Vec<f32>) {
    let x = (0..rows * n)
        .map(|_| {
            let v = rng.random_range(0.01f32..3.0);
            if rng.random() {
                v
            } else {
                -v
            }
        })
        .collect();
    let w = (0..n).map(|_| rng.random_range(0.5f32..1.5)).collect();
    (x, w)
}

/// One `rmsnorm_q8_1_f32` launch; returns (q8_1 bytes, f32 row) after checking the guards.
struct WithF32 {
    x: Vec<f32>,
    w: Vec<f32>,
    rows: usize,
    n: usize,
}

const EPS: f32 = 1e-6;

impl WithF32 {
    fn launch<B: Accelerator>(&self, b: &mut B) -> (Vec<u8>, Vec<f32>) {
        let (rows, n) = (self.rows, self.n);
        let (xb, wb) = (
            upload(b, &f32_bytes(&self.x)),
            upload(b, &f32_bytes(&self.w)),
        );
        let q8 = rows * n / QK8_1 * 36;
        let (yb, fb) = (poisoned(b, q8 + 36), poisoned(b, (rows * n + 16) * 4));
        rmsnorm_q8_1_f32(b, (&xb, &wb, &yb, &fb), rows, n, EPS).expect("launch");
        let (y, f) = (download(b, &yb), download(b, &fb));
        assert!(
            y[q8..].iter().all(|&v| v == 0xFF),
            "{}: q8_1 overrun",
            b.name()
        );
        assert!(
            f[rows * n * 4..].iter().all(|&v| v == 0xFF),
            "{}: f32 overrun",
            b.name()
        );
        (y[..q8].to_vec(), download_f32(b, &fb, rows * n))
    }
}

impl SameLaunch for WithF32 {
    fn run<B: Accelerator>(&self, b: &mut B) -> Vec<u8> {
        let (q8, f) = self.launch(b);
        [q8, f32_bytes(&f)].concat()
    }
}

fn check_f32<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("rmsnorm_q8_1_f32");
    for (rows, n) in [(1usize, 2048usize), (2, 4096), (3, 96)] {
        let (x, w) = inputs(&mut rng, rows, n);
        let l = WithF32 { x, w, rows, n };
        let (q8, f) = l.launch(b);
        // The q8_1 half is the plain kernel's: same code path, same bits.
        let (xb, wb) = (upload(b, &f32_bytes(&l.x)), upload(b, &f32_bytes(&l.w)));
        let yb = poisoned(b, q8.len());
        rmsnorm_q8_1(b, (&xb, &wb, &yb), rows, n, EPS).expect("launch");
        assert_eq!(
            download(b, &yb),
            q8,
            "{}: q8_1 output differs from rmsnorm_q8_1",
            b.name()
        );
        // The f32 half is exactly what was quantized: the CPU quantizer of it gives the bits.
        let requant: Vec<u8> = bytemuck::cast_slice(&ingot_quant::quantize_q8_1(&f)).to_vec();
        assert_eq!(
            requant,
            q8,
            "{}: quantize_q8_1(y_f32) differs from y",
            b.name()
        );
        let mut worst = 0.0f64;
        for r in 0..rows {
            let who = format!("{}: row {r}", b.name());
            let (xr, fr) = (&l.x[r * n..(r + 1) * n], &f[r * n..(r + 1) * n]);
            worst = worst.max(support::rmsnorm::check_f32(&who, xr, &l.w, EPS, fr));
        }
        eprintln!(
            "{}: rmsnorm_q8_1_f32 rows={rows} n={n}: q8_1 bit-exact, f32 max rel err {worst:.1e}",
            b.name()
        );
    }
}

#[test]
fn rmsnorm_q8_1_f32_writes_what_it_quantizes() {
    on_every_backend!(check_f32);
}

/// Simulator against GPU (skipped without a GPU): bit-exact, every f32 operation is `.rn`
/// in a fixed order except the `sqrt`/division, which PTX defines as correctly rounded.
#[test]
fn rmsnorm_q8_1_f32_sim_matches_gpu() {
    let mut rng = support::rng("rmsnorm_q8_1_f32 sim-vs-GPU");
    let (x, w) = inputs(&mut rng, 2, 2048);
    let l = WithF32 {
        x,
        w,
        rows: 2,
        n: 2048,
    };
    support::sim_matches_gpu("rmsnorm_q8_1_f32 2x2048", &l, Agree::Bits);
}
