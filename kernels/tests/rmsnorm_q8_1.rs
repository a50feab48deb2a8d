//! `rmsnorm_q8_1` against an f64 rmsnorm followed by the CPU q8_1 quantizer, and
//! `rmsnorm_q8_1_f32` against `rmsnorm_q8_1` and the CPU quantizer of its own f32 output.

mod support;

use half::f16;
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
            let xr = &x[r * n..(r + 1) * n];
            let ms = xr.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / n as f64;
            let scale = 1.0 / (ms + f64::from(eps)).sqrt();
            let y64: Vec<f64> = (0..n)
                .map(|c| f64::from(xr[c]) * scale * f64::from(w[c]))
                .collect();
            let y32: Vec<f32> = y64.iter().map(|&v| v as f32).collect();
            let want = ingot_quant::quantize_q8_1(&y32);
            for k in 0..nblk {
                let (g, o) = (&got[r * nblk + k], &want[k]);
                let yk = &y64[k * QK8_1..(k + 1) * QK8_1];
                let amax = yk.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                let (dg, dw) = (f16::from_bits(g.d).to_f64(), f16::from_bits(o.d).to_f64());
                // The kernel's normalized values differ from the f64 ones by < 1e-5 relative
                // (f32 Σx² over a tree of depth < 30, one sqrt, a division, two products), so
                // amax/127 can cross at most one f16 rounding boundary: d within one f16 ulp
                // (2^-10 relative).
                assert!(
                    (dg - dw).abs() <= dw.abs() * 2f64.powi(-10),
                    "{}: rows={rows} n={n} row {r} block {k}: d {dg} vs oracle {dw}",
                    b.name()
                );
                let sum: f64 = yk.iter().sum();
                let sg = f16::from_bits(g.s).to_f64();
                // s = Σ of 32 f32 values (each within 1e-5·amax of y64), rounded to f16.
                assert!(
                    (sg - sum).abs() <= sum.abs() * 2f64.powi(-11) + 32.0 * 1e-5 * amax,
                    "{}: rows={rows} n={n} row {r} block {k}: s {sg} vs Σ {sum}",
                    b.name()
                );
                for (i, &exact) in yk.iter().enumerate() {
                    // roundf(v/d) with v and d within 1e-5 relative of the oracle's: a quant
                    // differs by at most one step, and only next to a rounding boundary. q is
                    // rounded against the f32 d while the block stores d rounded to f16
                    // (2^-11 relative), so d16·q is within d/2 + |q|·d·2^-11 of v, and v within
                    // 1e-5·amax of the exact value.
                    let (qg, qo) = (i32::from(g.qs[i]), i32::from(o.qs[i]));
                    assert!(
                        (qg - qo).abs() <= 1,
                        "{}: row {r} block {k} quant {i}: {qg} vs oracle {qo}",
                        b.name()
                    );
                    let deq = dg * f64::from(qg);
                    assert!(
                        (deq - exact).abs()
                            <= dg * (0.5 + 2f64.powi(-10) + f64::from(qg.abs()) * 2f64.powi(-11))
                                + 1e-5 * amax,
                        "{}: row {r} block {k} value {i}: {deq} vs exact {} (q {qg} oracle {qo}, d {dg}, amax {amax})",
                        b.name(),
                        exact
                    );
                    worst_q = worst_q.max((qg - qo).abs());
                }
            }
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
            let xr = &l.x[r * n..(r + 1) * n];
            let ms = xr.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / n as f64;
            let scale = 1.0 / (ms + f64::from(EPS)).sqrt();
            for c in 0..n {
                let exact = f64::from(xr[c]) * scale * f64::from(l.w[c]);
                let got = f64::from(f[r * n + c]);
                // f32 Σx² over a tree of depth < 30, one sqrt, a division and two products:
                // < 1e-5 relative (as in the test above).
                let rel = (got - exact).abs() / exact.abs();
                assert!(
                    rel <= 1e-5,
                    "{}: row {r} col {c}: {got} vs {exact}",
                    b.name()
                );
                worst = worst.max(rel);
            }
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
