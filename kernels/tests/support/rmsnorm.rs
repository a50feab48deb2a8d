//! The rmsnorm + q8_1 check shared by the standalone norm kernels and the norm tail of
//! `moe_down`: an f64 rmsnorm of the row, then ggml's q8_1 quantizer, with the tolerances
//! argued below.

use half::f16;
use ingot_abi::blocks::{BlockQ8_1, QK8_1};

/// `rmsnorm(x)·w` in f64.
pub fn exact(x: &[f32], w: &[f32], eps: f32) -> Vec<f64> {
    let ms = x.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / x.len() as f64;
    let scale = 1.0 / (ms + f64::from(eps)).sqrt();
    x.iter()
        .zip(w)
        .map(|(&v, &g)| f64::from(v) * scale * f64::from(g))
        .collect()
}

/// Asserts that `got` (`x.len()/32` blocks) is the q8_1 quantization of `rmsnorm(x)·w` up to
/// the kernel's f32 rounding; returns the largest quant difference from the oracle's.
pub fn check_q8_1(who: &str, x: &[f32], w: &[f32], eps: f32, got: &[BlockQ8_1]) -> i32 {
    let y64 = exact(x, w, eps);
    let y32: Vec<f32> = y64.iter().map(|&v| v as f32).collect();
    let want = ingot_quant::quantize_q8_1(&y32);
    assert_eq!(got.len(), want.len(), "{who}: block count");
    let mut worst_q = 0;
    for (k, (g, o)) in got.iter().zip(&want).enumerate() {
        let yk = &y64[k * QK8_1..(k + 1) * QK8_1];
        let amax = yk.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let (dg, dw) = (f16::from_bits(g.d).to_f64(), f16::from_bits(o.d).to_f64());
        // The kernel's normalized values differ from the f64 ones by < 1e-5 relative (f32 Σx²
        // over a tree of depth < 30, one sqrt, a division, two products), so amax/127 can
        // cross at most one f16 rounding boundary: d within one f16 ulp (2^-10 relative).
        assert!(
            (dg - dw).abs() <= dw.abs() * 2f64.powi(-10),
            "{who}: block {k}: d {dg} vs oracle {dw}"
        );
        let sum: f64 = yk.iter().sum();
        let sg = f16::from_bits(g.s).to_f64();
        // s = Σ of 32 f32 values (each within 1e-5·amax of y64), rounded to f16.
        assert!(
            (sg - sum).abs() <= sum.abs() * 2f64.powi(-11) + 32.0 * 1e-5 * amax,
            "{who}: block {k}: s {sg} vs Σ {sum}"
        );
        for (i, &exact) in yk.iter().enumerate() {
            // roundf(v/d) with v and d within 1e-5 relative of the oracle's: a quant differs
            // by at most one step, and only next to a rounding boundary. q is rounded against
            // the f32 d while the block stores d rounded to f16 (2^-11 relative), so d16·q is
            // within d/2 + |q|·d·2^-11 of v, and v within 1e-5·amax of the exact value.
            let (qg, qo) = (i32::from(g.qs[i]), i32::from(o.qs[i]));
            assert!(
                (qg - qo).abs() <= 1,
                "{who}: block {k} quant {i}: {qg} vs oracle {qo}"
            );
            let deq = dg * f64::from(qg);
            assert!(
                (deq - exact).abs()
                    <= dg * (0.5 + 2f64.powi(-10) + f64::from(qg.abs()) * 2f64.powi(-11))
                        + 1e-5 * amax,
                "{who}: block {k} value {i}: {deq} vs exact {exact} (q {qg} oracle {qo}, d {dg}, amax {amax})"
            );
            worst_q = worst_q.max((qg - qo).abs());
        }
    }
    worst_q
}

/// Asserts that `got` is `rmsnorm(x)·w` within 1e-5 relative per value (f32 Σx² over a tree
/// of depth < 30, one sqrt, a division and two products); returns the largest relative error.
pub fn check_f32(who: &str, x: &[f32], w: &[f32], eps: f32, got: &[f32]) -> f64 {
    let mut worst = 0.0f64;
    for (c, (&e, &g)) in exact(x, w, eps).iter().zip(got).enumerate() {
        let rel = (f64::from(g) - e).abs() / e.abs();
        assert!(rel <= 1e-5, "{who}: col {c}: {g} vs {e}");
        worst = worst.max(rel);
    }
    worst
}
