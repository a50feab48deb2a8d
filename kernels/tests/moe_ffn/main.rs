//! `moe_gate_up_*` and `moe_down_*` against a CPU reference built from ingot-quant's CUDA-style
//! dot oracle (`vec_dot_q8_1`) and the SwiGLU / weighted-sum math of docs/decode-math.md#moe-ffn.
//!
//! Weights are random bytes with random f16 scales of a sensible size, so every quant, scale
//! and high-bit pattern occurs. The stacked expert tensors are allocated whole, but only the
//! selected experts' slabs hold weights: the others are 0xFF, whose f16 scales are NaN, so a
//! kernel that reads the wrong expert produces NaN. The kernels read the experts through expert
//! tables, in both addressing modes: the identity table over the stacked tensor, and scattered
//! (the selected experts' slabs in a separate pool in reverse order, as an expert cache's VRAM
//! slots, and 0xFF in their stacked places). Outputs are poisoned (0xFF) before each
//! launch. The down kernel is checked against the reference evaluated on the activations the
//! gate/up kernel actually wrote, so each kernel's tolerance covers only its own rounding.
//! The launch checks (refused shapes and buffers, V2-Lite's grids) are in `launches`.

#[path = "../quant_blocks/mod.rs"]
mod quant_blocks;
#[path = "../support/mod.rs"]
mod support;

mod launches;
mod tables;

use half::f16;
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::{ExpertSelection, MAX_EXPERTS_USED};
use ingot_kernels::ops::gemv::GemvType;
use ingot_kernels::ops::moe::{
    moe_down, moe_gate_up, moe_gate_up_mixed, moe_route, DownBufs, DownNorm, FfnShape, GateUpBufs,
    Gating, RouteParams,
};
use ingot_kernels::{Accelerator, KernelError};
use rand::rngs::StdRng;
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use support::gemv_type::ggml;
use support::recorder::Recorder;
use support::{download, f32_bytes, poisoned, upload};
use tables::{experts, Tables};

/// f32 unit roundoff.
const EPS: f64 = 1.0 / (1u64 << 24) as f64;

/// The f16 scales of one block of `t` (`quant_blocks::Layout::scales`: `d`, then the min where
/// the type has one), each with the magnitude that makes a typical weight about 0.02 through
/// that scale alone (measured on random blocks by the oracle's dequantizer, the other scales 0),
/// so a 2048-wide dot of activations in ±1 lands around ±1, where silu is far from linear.
fn scale_magnitudes(t: GemvType) -> Vec<f32> {
    let n = quant_blocks::layout(ggml(t)).scales;
    let mut rng = StdRng::seed_from_u64(0x5CA1E);
    let mut out = vec![0f32; t.block_elems()];
    (0..n)
        .map(|k| {
            let mut sum = 0.0f64;
            for _ in 0..16 {
                let mut b = vec![0u8; t.block_bytes()];
                rng.fill(&mut b[..]);
                for j in 0..n {
                    quant_blocks::put_scale(ggml(t), &mut b, j, if j == k { 1.0 } else { 0.0 });
                }
                ingot_quant::dequantize_row(ggml(t), &b, &mut out).expect("dequantize");
                sum += out.iter().map(|v| f64::from(v.abs())).sum::<f64>();
            }
            let mean = sum / (16 * t.block_elems()) as f64;
            (0.02 / mean) as f32
        })
        .collect()
}

/// Fills `out` (whole blocks of `t`) with random quants and random scales.
fn random_blocks(rng: &mut StdRng, t: GemvType, out: &mut [u8]) {
    if t.is_float() {
        // Weights of about 0.02 (see `scale_magnitudes`), finite, of either sign.
        let n = out.len() / t.block_bytes() * t.block_elems();
        out.copy_from_slice(&quant_blocks::random_floats(rng, ggml(t), n, 0.01, 0.03));
        return;
    }
    rng.fill(out);
    let mags = scale_magnitudes(t);
    for block in out.chunks_exact_mut(t.block_bytes()) {
        for (k, &mag) in mags.iter().enumerate() {
            let mut v = mag * rng.random_range(0.5f32..1.5);
            if rng.random() {
                v = -v;
            }
            quant_blocks::put_scale(ggml(t), block, k, v);
        }
    }
}

fn row_bytes(t: GemvType, cols: usize) -> usize {
    cols / t.block_elems() * t.block_bytes()
}

/// A stacked `[n_expert][rows][cols]` tensor whose `filled` experts hold random weights and
/// whose other experts are 0xFF (NaN scales).
fn stacked(
    rng: &mut StdRng,
    t: GemvType,
    n_expert: usize,
    rows: usize,
    cols: usize,
    filled: &[usize],
) -> Vec<u8> {
    let slab = rows * row_bytes(t, cols);
    let mut w = vec![0xFF; n_expert * slab];
    for &e in filled {
        random_blocks(rng, t, &mut w[e * slab..(e + 1) * slab]);
    }
    w
}

fn dense(rng: &mut StdRng, t: GemvType, rows: usize, cols: usize) -> Vec<u8> {
    let mut w = vec![0u8; rows * row_bytes(t, cols)];
    random_blocks(rng, t, &mut w);
    w
}

/// |a_i| of dequantized q8_1 activations (`d·q`, d as stored in f16).
fn act_abs(act: &[BlockQ8_1]) -> Vec<f64> {
    act.iter()
        .flat_map(|b| {
            let d = f16::from_bits(b.d).to_f64().abs();
            b.qs.iter().map(move |&q| d * f64::from(q).abs())
        })
        .collect()
}

/// A row's dot product per the oracle, and the bound on a kernel's deviation from it.
struct Dot {
    value: f64,
    tol: f64,
}

/// The oracle dot of one weight row with `act`, and how far a kernel may be from it.
///
/// Kernel and oracle form the same integer dp4a sums and scale products; they differ only in
/// f32 rounding. The kernel adds its per-unit results in f32 (a lane's units, 5 shuffle
/// levels, at most 8 weighted expert terms): fewer than `units + 16` additions, and each
/// unit's own float arithmetic rounds about 8 times, so the kernel is within
/// `(units + 16)·EPS` times the sum of the magnitudes involved. Those are bounded by
/// `Σ|w_i·a_i|` times the ratio between the offset form a type computes and its dequantized
/// values (Q4_0's `d·(Σq·a − 8·Σa)` has parts up to (15 + 8)/4 ≈ 6 times `Σ|d(q−8)a|` for
/// uniform quants; the k-quant min terms about 2 with the scales drawn here): factor 8.
fn oracle_dot(
    t: GemvType,
    row: &[u8],
    act: &[BlockQ8_1],
    abs_a: &[f64],
    scratch: &mut [f32],
) -> Dot {
    let value = f64::from(support::gemv_type::oracle_dot(t, row, act));
    ingot_quant::dequantize_row(ggml(t), row, scratch).expect("dequantize");
    let mag: f64 = scratch
        .iter()
        .zip(abs_a)
        .map(|(&w, &a)| f64::from(w).abs() * a)
        .sum();
    let adds = (scratch.len() / t.row_multiple() + 16) as f64;
    // The oracle's own f32 result is one more rounding.
    Dot {
        value,
        tol: 8.0 * adds * EPS * mag + EPS * value.abs(),
    }
}

/// `silu(z) = z/(1 + e^−z)` in f64.
fn silu(z: f64) -> f64 {
    z / (1.0 + (-z).exp())
}

#[derive(Clone, Copy, Debug)]
struct Types {
    /// Routed and shared gate/up weights (different types: a `mixed_gate_up` row).
    gate_up: GemvType,
    gate_up_sh: GemvType,
    down: GemvType,
    down_sh: GemvType,
}

struct Case {
    name: String,
    types: Types,
    shape: FfnShape,
    /// Route on the device from random logits (softmax top-k) instead of uploading a selection.
    route: bool,
    /// Write the new residual over the old one (`y` = `resid`).
    in_place: bool,
}

/// Weight tensors of one FFN.
struct Weights {
    gate: Vec<u8>,
    up: Vec<u8>,
    gate_sh: Vec<u8>,
    up_sh: Vec<u8>,
    down: Vec<u8>,
    down_sh: Vec<u8>,
}

fn weights(rng: &mut StdRng, c: &Case, ids: &[usize]) -> Weights {
    let s = &c.shape;
    let t = c.types;
    let (e, n) = (s.n_expert, s.n_embd);
    Weights {
        gate: stacked(rng, t.gate_up, e, s.ff, n, ids),
        up: stacked(rng, t.gate_up, e, s.ff, n, ids),
        gate_sh: dense(rng, t.gate_up_sh, s.ff_sh, n),
        up_sh: dense(rng, t.gate_up_sh, s.ff_sh, n),
        down: stacked(rng, t.down, e, n, s.ff, ids),
        down_sh: dense(rng, t.down_sh, n, s.ff_sh),
    }
}

/// The selection: routed on the device from random logits, or random distinct experts with
/// random weights uploaded directly.
fn selection<B: Accelerator>(b: &mut B, rng: &mut StdRng, c: &Case) -> (B::Buf, ExpertSelection) {
    let s = &c.shape;
    let buf = poisoned(b, std::mem::size_of::<ExpertSelection>());
    if s.n_used == 0 {
        return (buf, bytemuck::Zeroable::zeroed());
    }
    if c.route {
        let logits: Vec<f32> = (0..s.n_expert)
            .map(|_| rng.random_range(-3.0f32..3.0))
            .collect();
        let lb = upload(b, &f32_bytes(&logits));
        let p = RouteParams {
            gating: Gating::Softmax,
            n_expert: s.n_expert,
            n_used: s.n_used,
            n_group: 1,
            n_group_used: 1,
            normalize: false,
            scale: 1.0,
        };
        moe_route(b, &lb, None, &buf, &p).expect("launch moe_route");
        let sel: ExpertSelection = bytemuck::pod_read_unaligned(&download(b, &buf));
        return (buf, sel);
    }
    let mut sel = ExpertSelection {
        ids: [u32::MAX; MAX_EXPERTS_USED],
        weights: [f32::NAN; MAX_EXPERTS_USED],
    };
    for (k, e) in sample(rng, s.n_expert, s.n_used).into_iter().enumerate() {
        sel.ids[k] = e as u32;
        sel.weights[k] = rng.random_range(0.05f32..0.5);
    }
    b.upload(&buf, bytemuck::bytes_of(&sel)).expect("upload");
    (buf, sel)
}

fn check_case<B: Accelerator>(b: &mut B, rng: &mut StdRng, c: &Case, tables: Tables) {
    let s = c.shape;
    let t = c.types;
    let n = s.n_embd;
    let name = format!("{} ({tables:?} tables)", c.name);
    let c = &Case {
        name,
        types: c.types,
        shape: c.shape,
        route: c.route,
        in_place: c.in_place,
    };
    let (sel_buf, sel) = selection(b, rng, c);
    let ids: Vec<usize> = sel.ids[..s.n_used].iter().map(|&e| e as usize).collect();
    for &e in &ids {
        assert!(e < s.n_expert, "{}: router chose expert {e}", c.name);
    }
    let w = weights(rng, c, &ids);

    // Gate/up.
    let h2: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let x = ingot_quant::quantize_q8_1(&h2);
    let xb = upload(b, bytemuck::cast_slice(&x));
    let routed = s.n_used > 0;
    let shared = s.ff_sh > 0;
    let opt = |b: &mut B, used: bool, data: &[u8]| used.then(|| upload(b, data));
    let table = |b: &mut B, data: &[u8]| routed.then(|| experts(b, data, s.n_expert, &ids, tables));
    let gate = table(b, &w.gate);
    let up = table(b, &w.up);
    let gate_sh = opt(b, shared, &w.gate_sh);
    let up_sh = opt(b, shared, &w.up_sh);
    let act_len = s.act_bytes().expect("act size");
    let act_buf = poisoned(b, act_len);
    moe_gate_up_mixed(
        b,
        t.gate_up,
        t.gate_up_sh,
        &s,
        &GateUpBufs {
            x: &xb,
            sel: routed.then_some(&sel_buf),
            gate: gate.as_ref().map(|e| &e.table),
            up: up.as_ref().map(|e| &e.table),
            merged: false,
            gate_sh: gate_sh.as_ref(),
            up_sh: up_sh.as_ref(),
            act: &act_buf,
        },
    )
    .expect("launch moe_gate_up");
    let act: Vec<BlockQ8_1> = download(b, &act_buf)
        .chunks_exact(std::mem::size_of::<BlockQ8_1>())
        .map(bytemuck::pod_read_unaligned)
        .collect();

    // The same experts as one merged tensor (each expert's gate rows, then its up rows): the
    // kernel must read the same rows, so the output is bit-equal.
    if routed {
        let slab = s.ff * row_bytes(t.gate_up, n);
        let merged: Vec<u8> = (0..s.n_expert)
            .flat_map(|e| {
                let r = e * slab..(e + 1) * slab;
                w.gate[r.clone()].iter().chain(&w.up[r]).copied()
            })
            .collect();
        let merged = experts(b, &merged, s.n_expert, &ids, tables);
        let merged_act = poisoned(b, act_len);
        moe_gate_up_mixed(
            b,
            t.gate_up,
            t.gate_up_sh,
            &s,
            &GateUpBufs {
                x: &xb,
                sel: Some(&sel_buf),
                gate: Some(&merged.table),
                up: None,
                merged: true,
                gate_sh: gate_sh.as_ref(),
                up_sh: up_sh.as_ref(),
                act: &merged_act,
            },
        )
        .expect("launch moe_gate_up (merged)");
        assert!(
            download(b, &merged_act) == download(b, &act_buf),
            "{}: {}: merged gate/up tensor gives another output",
            b.name(),
            c.name
        );
    }

    // Reference SwiGLU rows: routed slot k's rows, then the shared rows.
    let abs_x = act_abs(&x);
    let mut scratch = vec![0.0f32; n];
    let rb = row_bytes(t.gate_up, n);
    let mut rows: Vec<(GemvType, &[u8], &[u8])> = Vec::new();
    for &e in &ids {
        let slab = e * s.ff * rb;
        for r in 0..s.ff {
            let o = slab + r * rb;
            rows.push((t.gate_up, &w.gate[o..o + rb], &w.up[o..o + rb]));
        }
    }
    let rb_sh = row_bytes(t.gate_up_sh, n);
    for r in 0..s.ff_sh {
        rows.push((
            t.gate_up_sh,
            &w.gate_sh[r * rb_sh..(r + 1) * rb_sh],
            &w.up_sh[r * rb_sh..(r + 1) * rb_sh],
        ));
    }
    let mut worst_h = 0.0f64;
    for (blk, chunk) in rows.chunks(QK8_1).enumerate() {
        let mut h = [0.0f64; QK8_1];
        let mut dh = [0.0f64; QK8_1];
        for (i, &(ty, g_row, u_row)) in chunk.iter().enumerate() {
            let g = oracle_dot(ty, g_row, &x, &abs_x, &mut scratch);
            let u = oracle_dot(ty, u_row, &x, &abs_x, &mut scratch);
            h[i] = silu(g.value) * u.value;
            // silu' ≤ 1.1; the kernel's silu (ex2.approx of a rounded product, one add, one
            // division) is within 1e-6·(1 + |g|) relative; the product adds one rounding.
            dh[i] = 1.1 * g.tol * (u.value.abs() + u.tol)
                + silu(g.value).abs() * u.tol
                + (1e-6 * (1.0 + g.value.abs()) + EPS) * h[i].abs();
        }
        let got = &act[blk];
        let d16 = f64::from(f16::from_bits(got.d).to_f32());
        for i in 0..QK8_1 {
            // q = roundf(h'/d) is within d/2 of h'; storing d as f16 moves q·d by at most
            // 127·2^-11·d = 0.062·d: 0.57·d in all, plus the deviation dh of h' from h.
            let deq = d16 * f64::from(got.qs[i]);
            let err = (deq - h[i]).abs();
            let tol = 0.57 * d16.abs() + dh[i];
            assert!(
                err <= tol,
                "{}: {}: act block {blk} element {i}: dequantized {deq}, reference {}, \
                 |err| {err:e} > tol {tol:e} (d {d16})",
                b.name(),
                c.name,
                h[i]
            );
            worst_h = worst_h.max(err / d16.abs().max(f64::MIN_POSITIVE));
        }
        // s = Σh' rounded to f16, Σh' within Σdh plus 32 f32 additions of Σh.
        let sum: f64 = h.iter().sum();
        let s16 = f64::from(f16::from_bits(got.s).to_f32());
        let abs_sum: f64 = h.iter().map(|v| v.abs()).sum();
        let tol = 2f64.powi(-11) * (sum.abs() + dh.iter().sum::<f64>())
            + dh.iter().sum::<f64>()
            + 32.0 * EPS * abs_sum
            + f64::from(f16::MIN_POSITIVE_SUBNORMAL.to_f32());
        assert!(
            (s16 - sum).abs() <= tol,
            "{}: {}: act block {blk}: s {s16}, reference Σh {sum}, tol {tol:e}",
            b.name(),
            c.name
        );
    }

    // Down, on the activations the kernel wrote.
    let resid: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let rbuf = upload(b, &f32_bytes(&resid));
    let down = table(b, &w.down);
    let down_sh = opt(b, shared, &w.down_sh);
    let fresh_y = (!c.in_place).then(|| poisoned(b, n * 4));
    let y = fresh_y.as_ref().unwrap_or(&rbuf);
    // The norm tail on every case, into poisoned outputs with one extra poisoned block / float
    // to catch overruns.
    let norm_w: Vec<f32> = (0..n).map(|_| rng.random_range(0.5f32..1.5)).collect();
    let norm_wb = upload(b, &f32_bytes(&norm_w));
    let q8_len = n / QK8_1 * std::mem::size_of::<BlockQ8_1>();
    let norm_q8 = poisoned(b, q8_len + std::mem::size_of::<BlockQ8_1>());
    let norm_f32 = poisoned(b, (n + 1) * 4);
    let count = upload(b, &[0; 4]);
    moe_down(
        b,
        t.down,
        t.down_sh,
        &s,
        &DownBufs {
            act: &act_buf,
            sel: routed.then_some(&sel_buf),
            down: down.as_ref().map(|e| &e.table),
            down_sh: down_sh.as_ref(),
            resid: &rbuf,
            y,
            norm: Some(DownNorm {
                w: &norm_wb,
                q8: &norm_q8,
                f32: &norm_f32,
                count: &count,
                eps: NORM_EPS,
            }),
        },
    )
    .expect("launch moe_down");
    let got = support::download_f32(b, y, n);
    check_norm_tail(b, c, (&got, &norm_w), (&norm_q8, &norm_f32, &count));

    let per_slot = s.ff / QK8_1;
    let slot_act: Vec<&[BlockQ8_1]> = (0..s.n_used)
        .map(|k| &act[k * per_slot..(k + 1) * per_slot])
        .collect();
    let sh_act = &act[s.n_used * per_slot..];
    let slot_abs: Vec<Vec<f64>> = slot_act.iter().map(|a| act_abs(a)).collect();
    let sh_abs = act_abs(sh_act);
    let (rbr, rbs) = (row_bytes(t.down, s.ff), row_bytes(t.down_sh, s.ff_sh));
    let mut scratch_r = vec![0.0f32; s.ff];
    let mut scratch_s = vec![0.0f32; s.ff_sh];
    let mut worst = 0.0f64;
    for r in 0..n {
        let mut want = f64::from(resid[r]);
        let mut tol = EPS * want.abs();
        let mut mag = want.abs();
        for (k, &e) in ids.iter().enumerate() {
            let o = (e * n + r) * rbr;
            let d = oracle_dot(
                t.down,
                &w.down[o..o + rbr],
                slot_act[k],
                &slot_abs[k],
                &mut scratch_r,
            );
            let wk = f64::from(sel.weights[k]);
            want += wk * d.value;
            tol += wk.abs() * d.tol;
            mag += (wk * d.value).abs();
        }
        if s.ff_sh > 0 {
            let d = oracle_dot(
                t.down_sh,
                &w.down_sh[r * rbs..(r + 1) * rbs],
                sh_act,
                &sh_abs,
                &mut scratch_s,
            );
            want += d.value;
            tol += d.tol;
            mag += d.value.abs();
        }
        // The weighted terms, the shared term and the residual: 10 more f32 roundings.
        tol += 10.0 * EPS * mag;
        let err = (f64::from(got[r]) - want).abs();
        assert!(
            err <= tol,
            "{}: {}: y[{r}] = {}, reference {want}, |err| {err:e} > tol {tol:e}",
            b.name(),
            c.name,
            got[r]
        );
        worst = worst.max(err / tol);
    }
    eprintln!(
        "{}: {}: act max |err|/d {worst_h:.3}, y max err/tol {worst:.2e}",
        b.name(),
        c.name
    );
}

/// The norm tail's eps (V2-Lite's `attention.layer_norm_rms_epsilon`).
const NORM_EPS: f32 = 1e-6;

/// The norm tail of one `moe_down` launch against the f64 rmsnorm of the `y` it wrote (the
/// tolerances of `rmsnorm_q8_1`'s test, whose code the tail runs), no byte past the outputs,
/// and the done counter back at 0 for the next launch.
fn check_norm_tail<B: Accelerator>(
    b: &mut B,
    c: &Case,
    (y, w): (&[f32], &[f32]),
    (q8, f32_out, count): (&B::Buf, &B::Buf, &B::Buf),
) {
    let n = y.len();
    let who = format!("{}: {}: norm tail", b.name(), c.name);
    let q8_len = n / QK8_1 * std::mem::size_of::<BlockQ8_1>();
    let bytes = download(b, q8);
    assert!(
        bytes[q8_len..].iter().all(|&v| v == 0xFF),
        "{who}: q8_1 overrun"
    );
    let got: &[BlockQ8_1] = bytemuck::cast_slice(&bytes[..q8_len]);
    let worst_q = support::rmsnorm::check_q8_1(&who, y, w, NORM_EPS, got);
    let all = download(b, f32_out);
    assert!(
        all[n * 4..].iter().all(|&v| v == 0xFF),
        "{who}: f32 overrun"
    );
    let f = support::download_f32(b, f32_out, n);
    support::rmsnorm::check_f32(&who, y, w, NORM_EPS, &f);
    // What was quantized is what was stored: the CPU quantizer of it gives the bits.
    let requant: Vec<u8> = bytemuck::cast_slice(&ingot_quant::quantize_q8_1(&f)).to_vec();
    assert_eq!(
        requant,
        bytes[..q8_len],
        "{who}: quantize_q8_1(norm_f32) differs"
    );
    assert_eq!(download(b, count), [0; 4], "{who}: done counter not reset");
    eprintln!("{who}: max quant difference from the oracle {worst_q}");
}

fn v2_lite(name: &str, down: GemvType, down_sh: GemvType, route: bool) -> Case {
    Case {
        name: name.into(),
        types: Types {
            gate_up: GemvType::Q4K,
            gate_up_sh: GemvType::Q4K,
            down,
            down_sh,
        },
        shape: FfnShape {
            n_embd: 2048,
            n_expert: 64,
            n_used: 6,
            ff: 1408,
            ff_sh: 2816,
        },
        route,
        in_place: false,
    }
}

/// Every case in each addressing mode of `tables`, on fresh random inputs each time.
fn run_cases<B: Accelerator>(b: &mut B, test: &str, cases: &[Case], tables: &[Tables]) {
    let mut rng = support::rng(test);
    for c in cases {
        for &t in tables {
            check_case(b, &mut rng, c, t);
        }
    }
}

/// Every gate/up type with the same down type, small shapes exercising one routed slot, an odd
/// count (the single-expert tail of the down kernel), the maximum of 8, and no shared experts;
/// then the registry's mixed routed/shared down and gate/up kernels: every MoE kernel, each in
/// both addressing modes.
fn small_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (i, &t) in GemvType::ALL.iter().enumerate() {
        let k = t.row_multiple();
        let (n_used, ff_sh) = match i % 4 {
            0 => (3, 2 * k),
            1 => (1, k),
            // The most slots a selection holds (Kimi-K2 and V3 use 8).
            2 => (MAX_EXPERTS_USED, 0),
            _ => (2, k),
        };
        cases.push(Case {
            name: format!(
                "{t:?} small n_used {n_used} ff_sh {ff_sh}{}",
                if i == 3 { " in place" } else { "" }
            ),
            types: Types {
                gate_up: t,
                gate_up_sh: t,
                down: t,
                down_sh: t,
            },
            shape: FfnShape {
                n_embd: 512,
                n_expert: MAX_EXPERTS_USED + 1,
                n_used,
                ff: 2 * k,
                ff_sh,
            },
            route: false,
            // The in-place residual update on one case.
            in_place: i == 3,
        });
    }
    for &(down, down_sh) in GemvType::MIXED_DOWN {
        cases.push(Case {
            name: format!("{down:?}+{down_sh:?} small"),
            types: Types {
                gate_up: GemvType::Q4K,
                gate_up_sh: GemvType::Q4K,
                down,
                down_sh,
            },
            shape: FfnShape {
                n_embd: 256,
                n_expert: 5,
                n_used: 3,
                // Routed down rows of whole units (192 takes the 32-weight types' pairs and
                // an odd count of them).
                ff: if down.row_multiple() == 256 { 256 } else { 192 },
                ff_sh: 512,
            },
            route: false,
            in_place: false,
        });
    }
    for &(gate_up, gate_up_sh) in GemvType::MIXED_GATE_UP {
        cases.push(Case {
            name: format!("{gate_up:?}+{gate_up_sh:?} gate/up small"),
            types: Types {
                gate_up,
                gate_up_sh,
                down: GemvType::Q8_0,
                down_sh: GemvType::Q8_0,
            },
            shape: FfnShape {
                n_embd: 512,
                n_expert: 5,
                n_used: 3,
                ff: 64,
                ff_sh: 128,
            },
            route: false,
            in_place: false,
        });
    }
    cases
}

fn check_small<B: Accelerator>(b: &mut B) {
    run_cases(
        b,
        "moe_ffn small",
        &small_cases(),
        &[Tables::Identity, Tables::Scattered],
    );
}

/// DeepSeek-V2-Lite Q4_K_M MoE layers: routed on the device, normal (Q5_0 + Q4_K down) and
/// more-bits (Q8_0 + Q6_K down) layers.
fn check_v2_lite<B: Accelerator>(b: &mut B) {
    run_cases(
        b,
        "moe_ffn v2-lite",
        &[
            v2_lite(
                "v2-lite Q4_K/Q5_0+Q4_K routed",
                GemvType::Q5_0,
                GemvType::Q4K,
                true,
            ),
            v2_lite(
                "v2-lite Q4_K/Q8_0+Q6_K",
                GemvType::Q8_0,
                GemvType::Q6K,
                false,
            ),
        ],
        &[Tables::Identity],
    );
}

/// DeepSeek-V2-Lite's dense layer 0 (Q4_K_M: gate/up Q4_K 10944 × 2048, down Q8_0) as the
/// shared-only form of the same kernels.
fn check_dense<B: Accelerator>(b: &mut B) {
    run_cases(
        b,
        "moe_ffn dense",
        &[
            Case {
                name: "v2-lite dense layer 0".into(),
                types: Types {
                    gate_up: GemvType::Q4K,
                    gate_up_sh: GemvType::Q4K,
                    down: GemvType::Q8_0,
                    down_sh: GemvType::Q8_0,
                },
                shape: FfnShape {
                    n_embd: 2048,
                    n_expert: 1,
                    n_used: 0,
                    ff: 0,
                    ff_sh: 10944,
                },
                route: false,
                in_place: false,
            },
            Case {
                // DeepSeek-V2's width: 1280 float4 chunks, so the norm tail's 128 threads take
                // three rounds of four chunks, the last one half past the row.
                name: "dense 5120 wide".into(),
                types: Types {
                    gate_up: GemvType::Q4K,
                    gate_up_sh: GemvType::Q4K,
                    down: GemvType::Q8_0,
                    down_sh: GemvType::Q8_0,
                },
                shape: FfnShape {
                    n_embd: 5120,
                    n_expert: 1,
                    n_used: 0,
                    ff: 0,
                    ff_sh: 256,
                },
                route: false,
                in_place: true,
            },
        ],
        &[Tables::Identity],
    );
}

/// The down kernel's activation stage at its edges: 7 slots of 2048 and 320 shared columns are
/// 458 q8_1 blocks (16,488 bytes), which take two rounds of a block's 16-byte copies (1,024
/// vectors a round) and end in two single words; the odd slot count runs the single-expert
/// path, whose slot sits at the end of the routed span. A stage of the wrong span or stride
/// gives some slot another slot's activations, or none.
fn check_stage_edges<B: Accelerator>(b: &mut B) {
    let q8 = GemvType::Q8_0;
    run_cases(
        b,
        "moe_ffn stage edges",
        &[Case {
            name: "Q8_0 7 slots of 2048 + 320 shared".into(),
            types: Types {
                gate_up: q8,
                gate_up_sh: q8,
                down: q8,
                down_sh: q8,
            },
            shape: FfnShape {
                n_embd: 128,
                n_expert: 9,
                n_used: 7,
                ff: 2048,
                ff_sh: 320,
            },
            route: false,
            in_place: false,
        }],
        &[Tables::Scattered],
    );
}

#[test]
fn moe_ffn_down_stage_edges() {
    on_every_backend!(check_stage_edges);
}

#[test]
fn moe_ffn_small_shapes_every_type() {
    on_every_backend!(check_small);
}

#[test]
fn moe_ffn_v2_lite_layers() {
    on_every_backend!(check_v2_lite);
}

#[test]
fn moe_ffn_dense_layer() {
    on_every_backend!(check_dense);
}
