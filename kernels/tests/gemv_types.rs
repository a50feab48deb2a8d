//! Every gemv kernel of the weight-type registry (plain and grouped) against the CPU oracle
//! (`support::gemv_type::oracle_dot`: ggml's CUDA formula where `ingot_quant::vec_dot_q8_1` has
//! it, else an f64 dot of the dequantized weights), and `gemv_f32` against an f64 dot product.
//!
//! Weights are random bytes in valid blocks (every quant, scale, min and high-bit pattern
//! occurs) with random non-zero f16 scales; activations are random non-zero floats quantized by
//! the CPU q8_1 oracle, so these tests do not depend on the quantize kernel. Outputs are
//! poisoned (0xFF = NaN) and followed by a poisoned guard region that must stay untouched.

mod quant_blocks;
mod support;

use half::f16;
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_kernels::ops::gemv::{
    gemv2_q8_1, gemv_f32, gemv_grouped_q8_1, gemv_grouped_q8_1_out, gemv_q8_1, GemvType, Grouping,
};
use ingot_kernels::Accelerator;
use quant_blocks::{layout, put_scale, random_blocks, scale};
use rand::rngs::StdRng;
use rand::Rng;
use support::gemv_type::{ggml, oracle_dot};
use support::{download, download_f32, f32_bytes, poisoned, upload, Agree, SameLaunch};

/// Floats after `y` that the kernel must not write.
const GUARD: usize = 64;

/// The constant the 32-element kernels subtract from every unsigned quant through `s8`
/// (Q4_0: 8, Q5_0: 16); it enters the rounding-error scale below.
fn offset(ty: GemvType) -> f64 {
    match ty {
        GemvType::Q4_0 => 8.0,
        GemvType::Q5_0 => 16.0,
        _ => 0.0,
    }
}

/// `Σ |term|` over the terms the kernel and the oracle add (`|d|·|q-part|·|a|` and
/// `|m|·|min-part|·|a|` per element, plus the `s8` offset terms): the scale of their f32
/// rounding error. The q- and min-parts come from dequantizing the block with `d = 1, m = 0`
/// and with `d = 0, m = 1`.
fn magnitude(ty: GemvType, row: &[u8], act: &[BlockQ8_1]) -> f64 {
    let (bb, be) = (ty.block_bytes(), ty.block_elems());
    if ty.is_float() {
        let mut w = vec![0f32; act.len() * QK8_1];
        ingot_quant::dequantize_row(ggml(ty), row, &mut w).expect("dequantize");
        return w
            .iter()
            .enumerate()
            .map(|(e, &x)| {
                let a = &act[e / QK8_1];
                let av = f16::from_bits(a.d).to_f64().abs() * f64::from(a.qs[e % QK8_1]).abs();
                f64::from(x).abs() * av
            })
            .sum();
    }
    let (g, has_m) = (ggml(ty), layout(ggml(ty)).scales > 1);
    let deq = |block: &[u8], d: f32, m: f32| {
        let mut b = block.to_vec();
        put_scale(g, &mut b, 0, d);
        if has_m {
            put_scale(g, &mut b, 1, m);
        }
        let mut out = vec![0f32; be];
        ingot_quant::dequantize_row(g, &b, &mut out).expect("dequantize");
        out
    };
    let mut mag = 0.0;
    for (i, block) in row.chunks_exact(bb).enumerate() {
        let d = scale(g, block, 0).abs();
        let m = if has_m { scale(g, block, 1).abs() } else { 0.0 };
        let qpart = deq(block, 1.0, 0.0);
        let mpart = if has_m {
            deq(block, 0.0, 1.0)
        } else {
            vec![0.0; be]
        };
        for e in 0..be {
            let a = &act[(i * be + e) / QK8_1];
            let av = f16::from_bits(a.d).to_f64().abs() * f64::from(a.qs[e % QK8_1]).abs();
            mag +=
                (d * (f64::from(qpart[e]).abs() + offset(ty)) + m * f64::from(mpart[e]).abs()) * av;
        }
        for a in &act[i * be / QK8_1..(i + 1) * be / QK8_1] {
            mag += d * offset(ty) * f16::from_bits(a.s).to_f64().abs();
        }
    }
    mag
}

/// One launch: `nrows × ncols`, optionally grouped `(rows_per_group, x_group_stride)`.
#[derive(Clone, Copy, Debug)]
struct Case {
    nrows: usize,
    ncols: usize,
    group: Option<(usize, usize)>,
    what: &'static str,
}

const fn case(nrows: usize, ncols: usize, what: &'static str) -> Case {
    Case {
        nrows,
        ncols,
        group: None,
        what,
    }
}

/// Small shapes every type runs (in units of the type's row multiple `m`), then the V2-Lite
/// shapes the type has in the Q4_K_M / Q3_K_M mixes (docs/deepseek2-model.md#tensors,
/// docs/deepseek2-model.md#quant-mixes).
fn cases(ty: GemvType) -> Vec<Case> {
    let m = ty.row_multiple();
    let mut v = vec![
        // One unit per row: the fewest lanes per row, many rows per warp, a partial last warp.
        case(45, m, "1 unit/row"),
        // An odd unit count: the unrolled loop's tail; 37 rows: a partial last block.
        case(37, 5 * m, "5 units/row"),
        case(9, 12 * m, "12 units/row"),
    ];
    let real: &[Case] = match ty {
        GemvType::Q4K => &[
            case(3072, 2048, "attn_q"),
            case(576, 2048, "attn_kv_a_mqa"),
            case(256, 2816, "ffn_down_shexp rows (2816 cols)"),
            Case {
                nrows: 16 * 128,
                ncols: 512,
                group: Some((128, 16)),
                what: "attn_v_b grouped",
            },
        ],
        GemvType::Q6K => &[
            case(1024, 2048, "output (lm_head) rows"),
            case(512, 2816, "ffn_down_shexp rows (2-byte aligned rows)"),
        ],
        GemvType::Q5_0 => &[
            Case {
                nrows: 16 * 512,
                ncols: 128,
                group: Some((512, 6)),
                what: "attn_k_b grouped",
            },
            case(2048, 1408, "ffn_down_exps expert"),
        ],
        GemvType::Q8_0 => &[
            case(256, 10944, "ffn_down rows (10944 cols)"),
            case(2048, 1408, "ffn_down_exps expert"),
        ],
        GemvType::Q3K => &[case(3072, 2048, "attn_q"), case(576, 2048, "attn_kv_a_mqa")],
        GemvType::Iq4Nl => &[Case {
            nrows: 16 * 512,
            ncols: 128,
            group: Some((512, 6)),
            what: "attn_k_b grouped",
        }],
        // Every other type: the expert rows its unit can hold.
        _ if m == 256 => &[case(1408, 2048, "ffn_gate_exps expert")],
        _ => &[case(2048, 1408, "ffn_down_exps expert")],
    };
    v.extend_from_slice(real);
    if ty.block_elems() == QK8_1 {
        // Odd block counts (the tiny synthetic and golden models): a trailing unpaired block,
        // and for 2-mod-4-byte blocks odd rows that start 2 bytes off a word. An even row
        // count makes the last row a shifted one that ends exactly at the buffer's end.
        v.push(case(45, 32, "32 cols: the unpaired block only"));
        v.push(case(38, 96, "96 cols: 1 unit + tail, last row shifted"));
        v.push(case(21, 160, "160 cols: 2 units + tail"));
        v.push(Case {
            nrows: 40,
            ncols: 96,
            group: Some((8, 5)),
            what: "96 cols grouped",
        });
        v.push(case(6, 2080, "2080 cols: a full warp per row + tail"));
    }
    // A grouped launch at a small shape for every type, with a stride larger than a slice.
    v.push(Case {
        nrows: 24,
        ncols: 2 * m,
        group: Some((5, 3 * m / QK8_1)),
        what: "grouped small",
    });
    v
}

fn check_case<B: Accelerator>(b: &mut B, rng: &mut StdRng, ty: GemvType, c: Case) {
    let w = random_blocks(rng, ggml(ty), c.nrows * c.ncols / ty.block_elems());
    check_weights(b, rng, ty, c, &w);
}

/// Random blocks whose scales span f16's range, one magnitude per row: row `r` of `nrows` has
/// every scale at `±2^e·[1, 1.99)`, `e` from −24 (the smallest subnormal) up to 15 (below
/// f16's largest finite value), so both ends of the range reach the kernel's f16 widening
/// and its f32 scale products.
fn extreme_scale_blocks(rng: &mut StdRng, ty: GemvType, nrows: usize, ncols: usize) -> Vec<u8> {
    let g = ggml(ty);
    let mut w = random_blocks(rng, g, nrows * ncols / ty.block_elems());
    let row_bytes = ncols / ty.block_elems() * ty.block_bytes();
    for (r, row) in w.chunks_exact_mut(row_bytes).enumerate() {
        let e = -24.0 + 39.0 * r as f32 / (nrows - 1) as f32;
        for block in row.chunks_exact_mut(ty.block_bytes()) {
            for k in 0..layout(g).scales {
                let v = e.floor().exp2() * rng.random_range(1.0f32..1.99);
                put_scale(g, block, k, if rng.random() { v } else { -v });
            }
        }
    }
    w
}

/// One launch of `c` on the weights `w` (whole rows of `ty`), checked row by row.
fn check_weights<B: Accelerator>(b: &mut B, rng: &mut StdRng, ty: GemvType, c: Case, w: &[u8]) {
    let (nrows, ncols) = (c.nrows, c.ncols);
    let nb = ncols / ty.block_elems();
    let (rpg, stride) = c.group.unwrap_or((nrows, 0));
    let ngroups = nrows.div_ceil(rpg);
    let x_blocks = (ngroups - 1) * stride + ncols / QK8_1;
    let xf: Vec<f32> = (0..x_blocks * QK8_1)
        .map(|_| {
            let v = rng.random_range(0.01f32..2.0);
            if rng.random() {
                v
            } else {
                -v
            }
        })
        .collect();
    let act = ingot_quant::quantize_q8_1(&xf);
    let wb = upload(b, w);
    let xb = upload(b, bytemuck::cast_slice(&act));
    let yb = poisoned(b, (nrows + GUARD) * 4);
    let bufs = (&wb, &xb, &yb);
    match c.group {
        None => gemv_q8_1(b, ty, bufs, nrows, ncols),
        Some((rows_per_group, x_group_stride)) => gemv_grouped_q8_1(
            b,
            ty,
            bufs,
            nrows,
            ncols,
            Grouping {
                rows_per_group,
                x_group_stride,
            },
        ),
    }
    .expect("launch");
    let y = download_f32(b, &yb, nrows);
    let tail = download(b, &yb);
    assert!(
        tail[nrows * 4..].iter().all(|&v| v == 0xFF),
        "{}: {ty:?} {c:?}: wrote past y[nrows]",
        b.name()
    );
    let row_bytes = nb * ty.block_bytes();
    let mut worst = 0.0f64;
    for r in 0..nrows {
        let row = &w[r * row_bytes..(r + 1) * row_bytes];
        let a0 = (r / rpg) * stride;
        let a = &act[a0..a0 + ncols / QK8_1];
        let want = oracle_dot(ty, row, a);
        // Integer dot products are exact on both sides; the f32 scale products and sums differ
        // in order (and in FMA contraction). Each side rounds along chains of fewer than
        // nb32 + 64 operations (nb32 = 32-element blocks per row: per-lane sequential adds,
        // per-unit scale arithmetic, 5 shuffle levels), each within 2^-24·Σ|term|; the bound
        // is twice that.
        let mag = magnitude(ty, row, a);
        let tol = 2.0 * (ncols / QK8_1 + 64) as f64 * f64::from(f32::EPSILON) / 2.0 * mag;
        let err = (f64::from(y[r]) - f64::from(want)).abs();
        assert!(
            err <= tol,
            "{}: {ty:?} {c:?} row {r}: got {}, oracle {want}, |err| {err:e} > tol {tol:e}",
            b.name(),
            y[r]
        );
        worst = worst.max(err / mag.max(f64::MIN_POSITIVE));
    }
    eprintln!(
        "{}: {ty:?} {nrows}x{ncols} ({}): max |err|/Σ|term| = {worst:.2e}",
        b.name(),
        c.what
    );
}

fn check_all_types<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("gemv_types");
    for ty in GemvType::ALL {
        for c in cases(ty) {
            check_case(b, &mut rng, ty, c);
        }
        if !ty.is_float() {
            let m = ty.row_multiple();
            let w = extreme_scale_blocks(&mut rng, ty, 16, 2 * m);
            let c = case(16, 2 * m, "scales 2^-24 .. 2^15, one magnitude per row");
            check_weights(b, &mut rng, ty, c, &w);
        }
    }
}

/// Random rows and activations, the two-matrix launch, and each output row against the oracle
/// (same error bound as [`check_case`]).
fn check_pair<B: Accelerator>(
    b: &mut B,
    rng: &mut StdRng,
    ty: GemvType,
    (n0, n1): (usize, usize),
    ncols: usize,
) {
    let nb = ncols / ty.block_elems();
    let row_bytes = nb * ty.block_bytes();
    let w0 = random_blocks(rng, ggml(ty), n0 * nb);
    let w1 = random_blocks(rng, ggml(ty), n1 * nb);
    let xf: Vec<f32> = (0..ncols).map(|_| rng.random_range(0.01f32..2.0)).collect();
    let act = ingot_quant::quantize_q8_1(&xf);
    let (w0b, w1b) = (upload(b, &w0), upload(b, &w1));
    let xb = upload(b, bytemuck::cast_slice(&act));
    let (y0b, y1b) = (poisoned(b, (n0 + GUARD) * 4), poisoned(b, (n1 + GUARD) * 4));
    gemv2_q8_1(b, ty, (&w0b, &w1b), &xb, (&y0b, &y1b), (n0, n1), ncols).expect("launch");
    for (w, yb, n) in [(&w0, &y0b, n0), (&w1, &y1b, n1)] {
        let y = download_f32(b, yb, n);
        assert!(
            download(b, yb)[n * 4..].iter().all(|&v| v == 0xFF),
            "{}: gemv2 {ty:?}: wrote past y[{n}]",
            b.name()
        );
        for r in 0..n {
            let row = &w[r * row_bytes..(r + 1) * row_bytes];
            let want = oracle_dot(ty, row, &act);
            let mag = magnitude(ty, row, &act);
            let tol = 2.0 * (ncols / QK8_1 + 64) as f64 * f64::from(f32::EPSILON) / 2.0 * mag;
            let err = (f64::from(y[r]) - f64::from(want)).abs();
            assert!(
                err <= tol,
                "{}: gemv2 {ty:?} {n0}+{n1}x{ncols} row {r} of {n}: got {}, oracle {want}, \
                 |err| {err:e} > tol {tol:e}",
                b.name(),
                y[r]
            );
        }
    }
    eprintln!("{}: gemv2 {ty:?} {n0}+{n1}x{ncols} ok", b.name());
}

fn check_pairs<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("gemv2");
    for ty in GemvType::ALL {
        // Row counts that split a warp between the two matrices at one unit per row.
        check_pair(b, &mut rng, ty, (5, 7), ty.row_multiple());
        check_pair(b, &mut rng, ty, (37, 9), 4 * ty.row_multiple());
        if ty.block_elems() == QK8_1 {
            check_pair(b, &mut rng, ty, (6, 9), 96);
            check_pair(b, &mut rng, ty, (3, 4), 160);
        }
    }
    // attn_q and attn_kv_a_mqa of V2-Lite.
    check_pair(b, &mut rng, GemvType::Q4K, (3072, 576), 2048);
    check_pair(b, &mut rng, GemvType::Q3K, (3072, 576), 2048);
}

#[test]
fn two_matrix_gemvs_match_oracle() {
    on_every_backend!(check_pairs);
}

#[test]
fn quantized_gemvs_match_oracle() {
    on_every_backend!(check_all_types);
}

fn check_f32<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("gemv_f32");
    // 64 × 2048: the V2-Lite router; 5 × 132: a chunk count that is not a multiple of 32.
    for (nrows, ncols) in [(64usize, 2048usize), (5, 132)] {
        let w: Vec<f32> = (0..nrows * ncols)
            .map(|_| rng.random_range(-1.0f32..1.0))
            .collect();
        let x: Vec<f32> = (0..ncols).map(|_| rng.random_range(-3.0f32..3.0)).collect();
        let (wb, xb) = (upload(b, &f32_bytes(&w)), upload(b, &f32_bytes(&x)));
        let yb = poisoned(b, (nrows + GUARD) * 4);
        gemv_f32(b, (&wb, &xb, &yb), nrows, ncols).expect("launch");
        let y = download_f32(b, &yb, nrows);
        assert!(download(b, &yb)[nrows * 4..].iter().all(|&v| v == 0xFF));
        for r in 0..nrows {
            let row = &w[r * ncols..(r + 1) * ncols];
            let want: f64 = row
                .iter()
                .zip(&x)
                .map(|(&a, &c)| f64::from(a) * f64::from(c))
                .sum();
            let mag: f64 = row
                .iter()
                .zip(&x)
                .map(|(&a, &c)| (f64::from(a) * f64::from(c)).abs())
                .sum();
            // f32 products and sums: a lane adds ncols/128 float4 dot products (4 terms each)
            // sequentially, then 5 shuffle levels: chains of < ncols/128 + 12 roundings.
            let tol = (ncols / 128 + 12) as f64 * f64::from(f32::EPSILON) / 2.0 * mag;
            let err = (f64::from(y[r]) - want).abs();
            assert!(
                err <= tol,
                "{}: gemv_f32 {nrows}x{ncols} row {r}: got {}, want {want}, |err| {err:e} > {tol:e}",
                b.name(),
                y[r]
            );
        }
        eprintln!("{}: gemv_f32 {nrows}x{ncols} ok", b.name());
    }
}

#[test]
fn f32_gemv_matches_f64_reference() {
    on_every_backend!(check_f32);
}

/// Random weights and activations for one grouped launch (`rows_per_group`, `x_group_stride`).
struct Grouped {
    ty: GemvType,
    nrows: usize,
    ncols: usize,
    g: Grouping,
    w: Vec<u8>,
    act: Vec<BlockQ8_1>,
}

impl Grouped {
    fn new(rng: &mut StdRng, ty: GemvType, (nrows, ncols): (usize, usize), g: Grouping) -> Self {
        let w = random_blocks(rng, ggml(ty), nrows * ncols / ty.block_elems());
        let x_blocks = (nrows - 1) / g.rows_per_group * g.x_group_stride + ncols / QK8_1;
        let xf: Vec<f32> = (0..x_blocks * QK8_1)
            .map(|_| rng.random_range(-2.0f32..2.0))
            .map(|v| if v.abs() < 0.01 { 0.5 } else { v })
            .collect();
        let act = ingot_quant::quantize_q8_1(&xf);
        Self {
            ty,
            nrows,
            ncols,
            g,
            w,
            act,
        }
    }

    /// The f32 grouped gemv's output.
    fn f32_out<B: Accelerator>(&self, b: &mut B) -> Vec<f32> {
        let (wb, xb) = (
            upload(b, &self.w),
            upload(b, bytemuck::cast_slice(&self.act)),
        );
        let yb = poisoned(b, self.nrows * 4);
        gemv_grouped_q8_1(b, self.ty, (&wb, &xb, &yb), self.nrows, self.ncols, self.g)
            .expect("launch");
        download_f32(b, &yb, self.nrows)
    }

    /// The q8_1-epilogue kernel's output bytes, plus a poisoned guard block that must stay.
    fn q8_out<B: Accelerator>(&self, b: &mut B) -> Vec<u8> {
        let (wb, xb) = (
            upload(b, &self.w),
            upload(b, bytemuck::cast_slice(&self.act)),
        );
        let out = self.nrows / QK8_1 * 36;
        let yb = poisoned(b, out + 36);
        gemv_grouped_q8_1_out(b, self.ty, (&wb, &xb, &yb), self.nrows, self.ncols, self.g)
            .expect("launch");
        let bytes = download(b, &yb);
        assert!(
            bytes[out..].iter().all(|&v| v == 0xFF),
            "{}: {:?}: wrote past the last block",
            b.name(),
            self.ty
        );
        bytes[..out].to_vec()
    }
}

impl SameLaunch for Grouped {
    fn run<B: Accelerator>(&self, b: &mut B) -> Vec<u8> {
        f32_bytes(&self.f32_out(b))
    }
}

fn check_q8_1_out<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("gemv_grouped_q8_1_out");
    let g = |rows_per_group, x_group_stride| Grouping {
        rows_per_group,
        x_group_stride,
    };
    for ty in GemvType::ALL {
        let m = ty.gemv_row_multiple();
        let mut shapes = vec![
            // One output block; short rows put many rows in a warp and idle whole warps.
            ((32, m), g(5, 3 * m / QK8_1)),
            // Several passes of the block's warps per group, 4 output blocks.
            ((128, 4 * ty.row_multiple()), g(32, 0)),
        ];
        if m == QK8_1 {
            shapes.push(((64, 96), g(16, 3)));
        }
        if matches!(ty, GemvType::Q4K | GemvType::Q5_0 | GemvType::Q8_0) {
            // V2-Lite attn_v_b: 16 heads × 128 rows against each head's 512 latent values.
            shapes.push(((16 * 128, 512), g(128, 16)));
        }
        for (shape, grouping) in shapes {
            let l = Grouped::new(&mut rng, ty, shape, grouping);
            let f = l.f32_out(b);
            let want: Vec<u8> = bytemuck::cast_slice(&ingot_quant::quantize_q8_1(&f)).to_vec();
            let got = l.q8_out(b);
            // The epilogue kernel computes each row with the same lanes and reduction order as
            // the f32 kernel (same bits), then quantizes as quantize_q8_1: bit-exact.
            if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
                panic!(
                    "{}: {ty:?} {shape:?}: q8_1 output differs from quantize_q8_1(f32 gemv) at \
                     byte {i} (block {}): {:#04x} vs {:#04x}",
                    b.name(),
                    i / 36,
                    got[i],
                    want[i]
                );
            }
            eprintln!(
                "{}: {} {shape:?}: {} bytes bit-exact",
                b.name(),
                ty.grouped_q8_1_out().name,
                got.len()
            );
        }
    }
}

#[test]
fn grouped_q8_1_out_is_quantize_of_f32_gemv() {
    on_every_backend!(check_q8_1_out);
}

/// The simulator against the GPU on the same launches (skipped without a GPU): the kernels fix
/// every f32 operation's order and rounding (`.rn`, no contraction), so the bits must agree.
/// Five model-sized launches, then one launch of every weight type at the shape
/// `grouped_q8_1_out_is_quantize_of_f32_gemv` runs in the simulator in CI (several warps per
/// group, 4 output blocks).
#[test]
fn gemv_sim_matches_gpu() {
    let mut rng = support::rng("gemv_sim_vs_gpu");
    let g = |rows_per_group, x_group_stride| Grouping {
        rows_per_group,
        x_group_stride,
    };
    let launches = [
        (GemvType::Q4K, (3072, 2048), g(3072, 0)),
        (GemvType::Q5_0, (16 * 512, 128), g(512, 6)),
        (GemvType::Q6K, (512, 2816), g(512, 0)),
        (GemvType::Q4_0, (38, 96), g(38, 0)),
        (GemvType::Q8_0, (21, 160), g(21, 0)),
    ];
    let every_type = GemvType::ALL
        .into_iter()
        .map(|ty| (ty, (128, 4 * ty.row_multiple()), g(32, 0)));
    for (ty, shape, grouping) in launches.into_iter().chain(every_type) {
        let l = Grouped::new(&mut rng, ty, shape, grouping);
        if !support::sim_matches_gpu(&format!("{ty:?} {shape:?}"), &l, Agree::Bits) {
            // No GPU (said by sim_matches_gpu): nothing further can be compared.
            return;
        }
    }
}
