//! `gemv_q4k_q8_1` / `gemv_q3k_q8_1` against the CPU oracle `ingot_quant::vec_dot_q8_1`, and
//! the `m`-column Q4_K gemv (a speculative verify's) against the plain one, bit for bit.
//!
//! Weights are random bytes in valid blocks (every scale/min/high-bit pattern occurs), with
//! random f16 super-block scales; activations are random floats quantized by the CPU q8_1
//! oracle, so this test does not depend on the quantize kernel.

mod support;

use half::f16;
use ingot_abi::blocks::{get_scale_min_k4, q3k_scale, BlockQ3K, BlockQ4K, BlockQ8_1, QK8_1, QK_K};
use ingot_gguf::GgmlType;
use ingot_kernels::{ops, Accelerator, KernelError};
use rand::Rng;
use support::{download_f32, poisoned, upload};

/// Row shapes `(nrows, ncols)`: a partial last thread block (37 rows), super-block counts that
/// leave an odd tail after the unrolled loop (5, 12), a single super-block per row (Q3_K rows
/// of 110 bytes then start at every 2-byte alignment), and the model width 2048.
const SHAPES: [(usize, usize); 4] = [(37, 2048), (5, 1280), (6, 256), (9, 3072)];

fn f16_bits(v: f32) -> u16 {
    f16::from_f32(v).to_bits()
}

fn random_q4k(rng: &mut impl Rng) -> BlockQ4K {
    let mut b = BlockQ4K {
        d: f16_bits(rng.random_range(1e-3f32..1e-2)),
        dmin: f16_bits(rng.random_range(1e-3f32..1e-2)),
        scales: [0; 12],
        qs: [0; 128],
    };
    rng.fill(&mut b.scales[..]);
    rng.fill(&mut b.qs[..]);
    b
}

fn random_q3k(rng: &mut impl Rng) -> BlockQ3K {
    let d = rng.random_range(1e-3f32..1e-2);
    let mut b = BlockQ3K {
        hmask: [0; 32],
        qs: [0; 64],
        scales: [0; 12],
        d: f16_bits(if rng.random() { d } else { -d }),
    };
    rng.fill(&mut b.hmask[..]);
    rng.fill(&mut b.qs[..]);
    rng.fill(&mut b.scales[..]);
    b
}

/// `Σ |term|` over every product the dot product adds, i.e. the scale of its rounding error.
fn magnitude_q4k(row: &[BlockQ4K], act: &[BlockQ8_1]) -> f64 {
    let mut mag = 0.0;
    for (s, b) in row.iter().enumerate() {
        let (d, dmin) = (
            f16::from_bits(b.d).to_f64().abs(),
            f16::from_bits(b.dmin).to_f64(),
        );
        for j in 0..8 {
            let (sc, m) = get_scale_min_k4(j, &b.scales);
            let a = &act[s * QK_K / QK8_1 + j];
            let d8 = f16::from_bits(a.d).to_f64().abs();
            for i in 0..32 {
                let byte = b.qs[32 * (j / 2) + i];
                let q = if j % 2 == 0 { byte & 0xF } else { byte >> 4 };
                let w = d * f64::from(sc) * f64::from(q) + dmin.abs() * f64::from(m);
                mag += w * d8 * f64::from(a.qs[i].unsigned_abs());
            }
        }
    }
    mag
}

fn magnitude_q3k(row: &[BlockQ3K], act: &[BlockQ8_1]) -> f64 {
    let mut mag = 0.0;
    for (s, b) in row.iter().enumerate() {
        let d = f16::from_bits(b.d).to_f64().abs();
        for e in 0..QK_K {
            let (n, l) = (e / 128, e % 32);
            let low2 = (b.qs[32 * n + l] >> (2 * ((e % 128) / 32))) & 3;
            let hbit = (b.hmask[l] >> (e / 32)) & 1;
            let q = i32::from(low2) - if hbit == 1 { 0 } else { 4 };
            let a = &act[s * QK_K / QK8_1 + e / QK8_1];
            let d8 = f16::from_bits(a.d).to_f64().abs();
            let w = d * f64::from(q3k_scale(&b.scales, e / 16).abs()) * f64::from(q.abs());
            mag += w * d8 * f64::from(a.qs[e % QK8_1].unsigned_abs());
        }
    }
    mag
}

fn check_gemv<B: Accelerator, T: bytemuck::Pod>(
    b: &mut B,
    kernel: &str,
    ty: GgmlType,
    make: impl Fn(&mut rand::rngs::StdRng) -> T,
    magnitude: impl Fn(&[T], &[BlockQ8_1]) -> f64,
    launch: impl Fn(&mut B, &B::Buf, &B::Buf, &B::Buf, usize, usize) -> ingot_kernels::Result<()>,
) {
    let mut rng = support::rng(kernel);
    for (nrows, ncols) in SHAPES {
        let nsb = ncols / QK_K;
        let w: Vec<T> = (0..nrows * nsb).map(|_| make(&mut rng)).collect();
        let xf: Vec<f32> = (0..ncols).map(|_| rng.random_range(-2.0f32..2.0)).collect();
        let act = ingot_quant::quantize_q8_1(&xf);
        let wb = upload(b, bytemuck::cast_slice(&w));
        let xb = upload(b, bytemuck::cast_slice(&act));
        let yb = poisoned(b, nrows * 4);
        launch(b, &wb, &xb, &yb, nrows, ncols).expect("launch");
        let y = download_f32(b, &yb, nrows);
        let mut worst = 0.0f64;
        for r in 0..nrows {
            let row = &w[r * nsb..(r + 1) * nsb];
            let want = ingot_quant::vec_dot_q8_1(ty, bytemuck::cast_slice(row), &act)
                .expect("oracle vec_dot");
            // Integer dot products and their scale products are exact on both sides; only
            // the order of the f32 additions differs. Each side adds fewer than
            // 16·nsb + 64 rounded terms, so each is within (16·nsb + 64)·2^-24·Σ|term| of the
            // exact value; the bound below is twice that.
            let mag = magnitude(row, &act);
            let tol = 2.0 * (16 * nsb + 64) as f64 * f64::from(f32::EPSILON) / 2.0 * mag;
            let err = (f64::from(y[r]) - f64::from(want)).abs();
            assert!(
                err <= tol,
                "{}: {kernel} {nrows}x{ncols} row {r}: got {}, oracle {want}, |err| {err:e} > \
                 tol {tol:e}",
                b.name(),
                y[r]
            );
            worst = worst.max(err / mag.max(f64::MIN_POSITIVE));
        }
        eprintln!(
            "{}: {kernel} {nrows}x{ncols}: max |err|/Σ|term| = {worst:.2e}",
            b.name()
        );
    }
}

fn check_q4k<B: Accelerator>(b: &mut B) {
    check_gemv(
        b,
        "gemv_q4k_q8_1",
        GgmlType::Q4K,
        random_q4k,
        magnitude_q4k,
        |b, w, x, y, r, c| ops::gemv_q4k_q8_1(b, w, x, y, r, c),
    );
}

fn check_q3k<B: Accelerator>(b: &mut B) {
    check_gemv(
        b,
        "gemv_q3k_q8_1",
        GgmlType::Q3K,
        random_q3k,
        magnitude_q3k,
        |b, w, x, y, r, c| ops::gemv_q3k_q8_1(b, w, x, y, r, c),
    );
}

#[test]
fn gemv_q4k_matches_oracle() {
    on_every_backend!(check_q4k);
}

#[test]
fn gemv_q3k_matches_oracle() {
    on_every_backend!(check_q3k);
}

/// `gemv_colsM_q4k` (M = 2, 3, 4 activation columns against one Q4_K weight stream) against
/// the plain Q4_K gemv run on each column alone, bit for bit (so the oracle check above carries
/// over), at shapes `(nrows, ncols)`: a partial last thread block (37 rows), a row of 5
/// super-blocks (an odd tail after the two-unit loop), one super-block per row (4 rows per warp
/// pass), the model width and a wider row.
const COLUMN_SHAPES: [(usize, usize); 5] = [(37, 2048), (5, 1280), (6, 256), (40, 2048), (9, 3072)];

fn check_columns<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("gemv_cols_q4k");
    for (nrows, ncols) in COLUMN_SHAPES {
        let w: Vec<BlockQ4K> = (0..nrows * ncols / QK_K)
            .map(|_| random_q4k(&mut rng))
            .collect();
        let wb = upload(b, bytemuck::cast_slice(&w));
        for m in 2..=4 {
            // Each column's own activations, and the m of them one after the other.
            let mut all = Vec::new();
            let mut want = Vec::new();
            for _ in 0..m {
                let xf: Vec<f32> = (0..ncols).map(|_| rng.random_range(-2.0f32..2.0)).collect();
                let act = ingot_quant::quantize_q8_1(&xf);
                let xb = upload(b, bytemuck::cast_slice(&act));
                let yb = poisoned(b, nrows * 4);
                ops::gemv_q4k_q8_1(b, &wb, &xb, &yb, nrows, ncols).expect("plain gemv");
                want.extend(download_f32(b, &yb, nrows));
                all.extend_from_slice(&act);
            }
            let xb = upload(b, bytemuck::cast_slice(&all));
            let yb = poisoned(b, m * nrows * 4);
            ops::gemv::gemv_cols_q4k(b, m, (&wb, &xb, &yb), nrows, ncols).expect("columns");
            let got = download_f32(b, &yb, m * nrows);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "{}: {m} columns {nrows}x{ncols}: column {} row {}: {g} against the plain \
                     gemv's {w}",
                    b.name(),
                    i / nrows,
                    i % nrows
                );
            }
        }
        eprintln!(
            "{}: gemv_cols_q4k {nrows}x{ncols}: 2-4 columns equal the plain gemv's",
            b.name()
        );
    }
}

#[test]
fn columns_equal_the_plain_gemv_bit_for_bit() {
    on_every_backend!(check_columns);
}

/// Refused before any launch, each naming the problem: one or five columns, and four columns of
/// 4,352 weights (544 staged blocks, over the 512 a block stages).
#[test]
fn bad_column_counts_and_stage_overflows_are_refused() {
    let mut rec = support::recorder::Recorder::default();
    let (nrows, ncols) = (8, 4352);
    let w = rec.alloc(nrows * ncols / QK_K * 144).unwrap();
    let x = rec.alloc(4 * ncols / QK8_1 * 36).unwrap();
    let y = rec.alloc(4 * nrows * 4).unwrap();
    for (m, ncols, want) in [
        (1, 256, "1 columns: the kernels take 2 to 4"),
        (5, 256, "5 columns: the kernels take 2 to 4"),
        (4, 4352, "a block stages at most 512 q8_1 blocks"),
    ] {
        let err =
            ops::gemv::gemv_cols_q4k(&mut rec, m, (&w, &x, &y), nrows, ncols).expect_err("refused");
        assert!(matches!(err, KernelError::Shape { .. }), "{err}");
        assert!(err.to_string().contains(want), "{m}, {ncols}: {err}");
    }
    assert!(
        rec.launches.is_empty(),
        "a refused launch reached the backend"
    );
}
