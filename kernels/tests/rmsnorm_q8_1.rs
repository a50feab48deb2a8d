//! `rmsnorm_q8_1` against an f64 rmsnorm followed by the CPU q8_1 quantizer.

mod support;

use half::f16;
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_kernels::ops::norm::rmsnorm_q8_1;
use ingot_kernels::Backend;
use rand::Rng;
use support::{download, f32_bytes, poisoned, upload};

fn check<B: Backend>(b: &mut B) {
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
