//! `moe_route` against ingot-model's oracle router (`ingot_model::routing::Router`,
//! docs/decode-math.md#moe-ffn).
//!
//! Logits and biases are drawn from coarse grids, so equal inputs (exact ties, which the tie
//! rule must settle: lower index first) are common, while distinct inputs give scores far apart
//! compared with the kernel's approximation band. Draws where two distinct inputs still land
//! within that band of each other are rejected and redrawn: with such a near-tie the kernel's
//! `ex2.approx` rounding may legitimately order them differently from the f64 oracle.

mod support;

use ingot_abi::launch::{ExpertSelection, MAX_EXPERTS_USED};
use ingot_kernels::ops::moe::{moe_route, moe_router_f32, Gating, RouteParams};
use ingot_kernels::Accelerator;
use ingot_model::routing::{Router, RouterParams};
use ingot_model::GatingFunc;
use rand::rngs::StdRng;
use rand::Rng;
use support::{download, download_f32, f32_bytes, poisoned, upload};

/// Relative band between the kernel's and the oracle's gating scores. The kernel computes
/// `exp` as `ex2.approx(x·log2 e)` (relative error 2^-22.5 ≈ 1.7e-7, plus about 1e-6 from
/// rounding the product for |x| ≤ 16), sums at most 512 terms in f32 (16 per lane in a row,
/// then a 5-level shuffle tree: depth 21, ≤ 21·2^-24 ≈ 1.3e-6 relative) and divides once: a
/// few 1e-6 in all. 1e-5 leaves margin.
const SCORE_BAND: f64 = 1e-5;
/// Weights after renormalization: the weight's own error plus its sum's, whose relative error
/// is at most the largest of its (up to 16) terms': twice the band.
const WEIGHT_BAND: f64 = 2.0 * SCORE_BAND;
/// Distinct inputs must give scores at least this far apart (relative), so that kernel and
/// oracle, each within `SCORE_BAND` of the exact value, order them alike.
const MIN_GAP: f64 = 10.0 * SCORE_BAND;

struct Case {
    name: &'static str,
    p: RouteParams,
    /// Logits are `k / 16` for integer `k` in `-span..=span`.
    span: i32,
    with_bias: bool,
}

fn cases() -> Vec<Case> {
    let v2 = RouteParams {
        gating: Gating::Softmax,
        n_expert: 64,
        n_used: 6,
        n_group: 1,
        n_group_used: 1,
        normalize: false,
        scale: 1.0,
    };
    vec![
        // DeepSeek-V2-Lite: 64 experts, top-6, softmax, no renormalization.
        Case {
            name: "v2-lite",
            p: v2,
            span: 40,
            with_bias: false,
        },
        // Very few distinct logits: ties at the top-k boundary in almost every draw.
        Case {
            name: "v2-lite-ties",
            p: v2,
            span: 3,
            with_bias: false,
        },
        // DeepSeek-V3: 256 experts, sigmoid, selection bias, 8 groups keep 4, top-8,
        // renormalized and scaled by 2.5.
        Case {
            name: "v3",
            p: RouteParams {
                gating: Gating::Sigmoid,
                n_expert: 256,
                n_used: 8,
                n_group: 8,
                n_group_used: 4,
                normalize: true,
                scale: 2.5,
            },
            span: 48,
            with_bias: true,
        },
        // DeepSeek-V2 (full): 160 experts (5 of the 8 score slots), softmax, 8 groups keep 3,
        // top-6, scaled by 16 without renormalization.
        Case {
            name: "v2",
            p: RouteParams {
                gating: Gating::Softmax,
                n_expert: 160,
                n_used: 6,
                n_group: 8,
                n_group_used: 3,
                normalize: false,
                scale: 16.0,
            },
            span: 48,
            with_bias: false,
        },
        // 128 experts (the 4-slot routing), sigmoid with bias, top-8, renormalized.
        Case {
            name: "128-sigmoid",
            p: RouteParams {
                gating: Gating::Sigmoid,
                n_expert: 128,
                n_used: 8,
                n_group: 1,
                n_group_used: 1,
                normalize: true,
                scale: 1.0,
            },
            span: 48,
            with_bias: true,
        },
        // Kimi-K2: 384 experts, sigmoid, selection bias, no groups, top-8, scale 2.827.
        Case {
            name: "k2",
            p: RouteParams {
                gating: Gating::Sigmoid,
                n_expert: 384,
                n_used: 8,
                n_group: 1,
                n_group_used: 1,
                normalize: true,
                scale: 2.827,
            },
            span: 48,
            with_bias: true,
        },
        // 384 experts in 8 groups of 48 (4 kept), top-8, sigmoid with bias.
        Case {
            name: "384-groups",
            p: RouteParams {
                gating: Gating::Sigmoid,
                n_expert: 384,
                n_used: 8,
                n_group: 8,
                n_group_used: 4,
                normalize: true,
                scale: 2.5,
            },
            span: 48,
            with_bias: true,
        },
        // The limits: 512 experts in 32 groups of 16 (8 kept), 16 used, sigmoid with bias.
        Case {
            name: "512-16",
            p: RouteParams {
                gating: Gating::Sigmoid,
                n_expert: 512,
                n_used: 16,
                n_group: 32,
                n_group_used: 8,
                normalize: true,
                scale: 1.8,
            },
            span: 48,
            with_bias: true,
        },
        // Small grouped softmax with ties, and an expert count that is not a multiple of 32.
        Case {
            name: "groups-ties",
            p: RouteParams {
                gating: Gating::Softmax,
                n_expert: 48,
                n_used: 5,
                n_group: 6,
                n_group_used: 2,
                normalize: true,
                scale: 1.0,
            },
            span: 4,
            with_bias: false,
        },
        Case {
            name: "odd-count",
            p: RouteParams {
                n_expert: 37,
                n_used: 3,
                ..v2
            },
            span: 20,
            with_bias: false,
        },
    ]
}

fn oracle_params(p: &RouteParams) -> RouterParams {
    RouterParams {
        gating: match p.gating {
            Gating::Softmax => GatingFunc::Softmax,
            Gating::Sigmoid => GatingFunc::Sigmoid,
        },
        n_expert: p.n_expert,
        n_used: p.n_used,
        n_group: p.n_group,
        n_group_used: p.n_group_used,
        normalize: p.normalize,
        scale: p.scale,
    }
}

/// Gating scores and selection scores exactly as the oracle forms them (f64 math, f32 result).
fn scores(p: &RouteParams, logits: &[f32], bias: Option<&[f32]>) -> (Vec<f64>, Vec<f64>) {
    let probs: Vec<f64> = match p.gating {
        Gating::Softmax => {
            let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let z: f64 = logits.iter().map(|&l| f64::from(l - max).exp()).sum();
            logits
                .iter()
                .map(|&l| f64::from(l - max).exp() / z)
                .collect()
        }
        Gating::Sigmoid => logits
            .iter()
            .map(|&l| 1.0 / (1.0 + (-f64::from(l)).exp()))
            .collect(),
    };
    let sel = probs
        .iter()
        .enumerate()
        .map(|(e, &pr)| pr + bias.map_or(0.0, |b| f64::from(b[e])))
        .collect();
    (probs, sel)
}

/// Whether two values that come from different inputs are closer than the kernel can resolve.
fn near_tie(values: &mut [(f64, Vec<i64>)]) -> bool {
    values.sort_by(|a, b| a.0.total_cmp(&b.0));
    values.windows(2).any(|w| {
        w[0].1 != w[1].1 && (w[1].0 - w[0].0).abs() <= MIN_GAP * w[1].0.abs().max(w[0].0.abs())
    })
}

/// Draws grid logits (and biases) without near-ties among experts or group scores, with the
/// integer grid values `(k, b)` of each expert.
#[allow(clippy::type_complexity)]
fn draw_keyed(rng: &mut StdRng, c: &Case) -> (Vec<f32>, Option<Vec<f32>>, Vec<Vec<i64>>) {
    let n = c.p.n_expert;
    for _ in 0..1000 {
        let ks: Vec<i32> = (0..n).map(|_| rng.random_range(-c.span..=c.span)).collect();
        let bs: Vec<i32> = (0..n).map(|_| rng.random_range(-2..=2)).collect();
        let logits: Vec<f32> = ks.iter().map(|&k| k as f32 / 16.0).collect();
        let bias: Option<Vec<f32>> = c
            .with_bias
            .then(|| bs.iter().map(|&b| b as f32 / 8.0).collect());
        let keys: Vec<Vec<i64>> = (0..n)
            .map(|e| {
                vec![
                    i64::from(ks[e]),
                    i64::from(if c.with_bias { bs[e] } else { 0 }),
                ]
            })
            .collect();
        if tie_free(c, &logits, bias.as_deref(), &keys) {
            return (logits, bias, keys);
        }
    }
    panic!("{}: could not draw inputs without near-ties", c.name);
}

fn draw(rng: &mut StdRng, c: &Case) -> (Vec<f32>, Option<Vec<f32>>) {
    let (logits, bias, _) = draw_keyed(rng, c);
    (logits, bias)
}

/// Whether scores of experts (and group scores) with different input keys are all far enough
/// apart for kernel and oracle to order them alike (equal keys: equal logits, exact ties).
fn tie_free(c: &Case, logits: &[f32], bias: Option<&[f32]>, keys: &[Vec<i64>]) -> bool {
    let n = c.p.n_expert;
    let (_, sel) = scores(&c.p, logits, bias);
    let mut experts: Vec<(f64, Vec<i64>)> = (0..n).map(|e| (sel[e], keys[e].clone())).collect();
    if near_tie(&mut experts) {
        return false;
    }
    if c.p.n_group > 1 {
        let per = n / c.p.n_group;
        let mut groups: Vec<(f64, Vec<i64>)> = (0..c.p.n_group)
            .map(|g| {
                let mut m: Vec<(f64, Vec<i64>)> = (g * per..(g + 1) * per)
                    .map(|e| (sel[e], keys[e].clone()))
                    .collect();
                m.sort_by(|a, b| b.0.total_cmp(&a.0));
                let top2 = m[0].0 + m.get(1).map_or(f64::NEG_INFINITY, |x| x.0);
                let mut key = m[0].1.clone();
                key.extend(m.get(1).map_or(vec![], |x| x.1.clone()));
                (top2, key)
            })
            .collect();
        if near_tie(&mut groups) {
            return false;
        }
    }
    true
}

/// Checks a kernel's selection against the oracle's `(expert, weight)` list: the same expert ids in
/// order, weights within [`WEIGHT_BAND`], and slots past `n_used` still poisoned (0xFFFFFFFF ids,
/// NaN weights). Returns the worst relative weight error.
fn check_selection(got: &ExpertSelection, want: &[(usize, f32)], n_used: usize, what: &str) -> f64 {
    let ids: Vec<usize> = got.ids[..n_used].iter().map(|&e| e as usize).collect();
    let want_ids: Vec<usize> = want.iter().map(|&(e, _)| e).collect();
    assert_eq!(ids, want_ids, "{what}: expert ids");
    let mut worst = 0.0f64;
    for (i, &(_, w)) in want.iter().enumerate() {
        let g = got.weights[i];
        let err = (f64::from(g) - f64::from(w)).abs() / f64::from(w).abs();
        assert!(
            err <= WEIGHT_BAND,
            "{what}: weight {i} of expert {}: got {g}, oracle {w}, rel err {err:e}",
            ids[i]
        );
        worst = worst.max(err);
    }
    for i in n_used..MAX_EXPERTS_USED {
        assert_eq!(got.ids[i], u32::MAX, "{what}: id slot {i} written");
        assert!(got.weights[i].is_nan(), "{what}: weight slot {i} written");
    }
    worst
}

fn check_route<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("moe_route");
    for c in cases() {
        let mut worst = 0.0f64;
        let mut ties_at_boundary = 0;
        for _ in 0..12 {
            let (logits, bias) = draw(&mut rng, &c);
            let mut want = vec![(0usize, 0.0f32); c.p.n_used];
            Router::new(oracle_params(&c.p)).route(&logits, bias.as_deref(), &mut want);

            let lb = upload(b, &f32_bytes(&logits));
            let bb = bias.as_ref().map(|v| upload(b, &f32_bytes(v)));
            let sb = poisoned(b, std::mem::size_of::<ExpertSelection>());
            moe_route(b, &lb, bb.as_ref(), &sb, &c.p).expect("launch moe_route");
            let got: ExpertSelection = bytemuck::pod_read_unaligned(&download(b, &sb));

            let what = format!(
                "{}: {} (logits {logits:?}, bias {bias:?})",
                b.name(),
                c.name
            );
            worst = worst.max(check_selection(&got, &want, c.p.n_used, &what));
            let want_ids: Vec<usize> = want.iter().map(|&(e, _)| e).collect();
            let (_, sel) = scores(&c.p, &logits, bias.as_deref());
            let last = sel[want_ids[c.p.n_used - 1]];
            if sel
                .iter()
                .enumerate()
                .any(|(e, &s)| s == last && !want_ids.contains(&e))
            {
                ties_at_boundary += 1;
            }
        }
        eprintln!(
            "{}: moe_route {}: 12 tokens, ids exact, max weight rel err {worst:.2e}, \
             {ties_at_boundary} with a tie at the top-k boundary",
            b.name(),
            c.name
        );
    }
}

/// All logits equal: every expert ties, so the lowest indices win in order.
fn check_all_equal<B: Accelerator>(b: &mut B) {
    let p = RouteParams {
        gating: Gating::Softmax,
        n_expert: 64,
        n_used: 6,
        n_group: 1,
        n_group_used: 1,
        normalize: false,
        scale: 1.0,
    };
    let lb = upload(b, &f32_bytes(&[0.75f32; 64]));
    let sb = poisoned(b, std::mem::size_of::<ExpertSelection>());
    moe_route(b, &lb, None, &sb, &p).expect("launch moe_route");
    let got: ExpertSelection = bytemuck::pod_read_unaligned(&download(b, &sb));
    assert_eq!(&got.ids[..6], &[0, 1, 2, 3, 4, 5], "{}", b.name());
    for &w in &got.weights[..6] {
        // 1/64 exactly: every exp(0) is 1 and the sum 64 is exact.
        assert_eq!(w, 1.0 / 64.0, "{}", b.name());
    }
}

#[test]
fn moe_route_matches_oracle() {
    on_every_backend!(check_route);
}

#[test]
fn moe_route_ties_go_to_lower_index() {
    on_every_backend!(check_all_equal);
}

#[test]
fn moe_route_rejects_bad_params() {
    use ingot_kernels::KernelError;
    #[cfg(feature = "sim")]
    {
        let mut b = ingot_kernels::backend::sim::SimAccelerator::new().expect("sim");
        let lb = upload(&mut b, &[0u8; 4096]);
        let sb = poisoned(&mut b, std::mem::size_of::<ExpertSelection>());
        let base = RouteParams {
            gating: Gating::Softmax,
            n_expert: 64,
            n_used: 6,
            n_group: 1,
            n_group_used: 1,
            normalize: false,
            scale: 1.0,
        };
        let bad = [
            RouteParams { n_used: 17, ..base },
            RouteParams { n_used: 0, ..base },
            RouteParams {
                n_expert: 513,
                ..base
            },
            RouteParams {
                n_expert: 4,
                n_used: 5,
                ..base
            },
            RouteParams {
                n_group: 5,
                n_group_used: 2,
                ..base
            },
            RouteParams {
                n_group: 8,
                n_group_used: 9,
                ..base
            },
            RouteParams {
                scale: f32::NAN,
                ..base
            },
        ];
        for p in bad {
            let e = moe_route(&mut b, &lb, None, &sb, &p).expect_err("bad params accepted");
            assert!(matches!(e, KernelError::Shape { .. }), "{p:?}: {e}");
        }
        let small = upload(&mut b, &[0u8; 64]);
        let e = moe_route(&mut b, &small, None, &sb, &base).expect_err("short logits accepted");
        assert!(matches!(e, KernelError::BufferTooSmall { .. }), "{e}");
    }
}

/// `W·x` in the order of the f32 gemv thread mapping (`gemv_f32`, `moe_router_f32`): lane `l`
/// adds the float4 dot products of chunks `l, l + 32, …` (each `((a0·b0 + a1·b1) + a2·b2) +
/// a3·b3`), then the warp's xor butterfly (16, 8, 4, 2, 1). Every step is one f32 `.rn`
/// operation, so the kernel's logits equal these bit for bit.
fn gemv_f32_kernel_order(w: &[f32], x: &[f32], nrows: usize) -> Vec<f32> {
    let ncols = x.len();
    (0..nrows)
        .map(|r| {
            let row = &w[r * ncols..(r + 1) * ncols];
            let mut v: Vec<f32> = (0..32)
                .map(|lane| {
                    let mut acc = 0.0f32;
                    let mut c = lane;
                    while c < ncols / 4 {
                        let (a, b) = (&row[4 * c..4 * c + 4], &x[4 * c..4 * c + 4]);
                        acc += a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3];
                        c += 32;
                    }
                    acc
                })
                .collect();
            for m in [16, 8, 4, 2, 1] {
                v = (0..32).map(|l| v[l] + v[l ^ m]).collect();
            }
            v[0]
        })
        .collect()
}

/// Router weights and input whose product is close to grid logits `want`: random rows (the
/// same row for experts with equal grid keys, so exact ties stay exact) with the first column
/// solved for, and a random input with no zero.
fn router_inputs(
    rng: &mut StdRng,
    want: &[f32],
    keys: &[Vec<i64>],
    ncols: usize,
) -> (Vec<f32>, Vec<f32>) {
    let x: Vec<f32> = (0..ncols)
        .map(|_| {
            let m = rng.random_range(0.5f32..2.0);
            if rng.random_bool(0.5) {
                m
            } else {
                -m
            }
        })
        .collect();
    let mut rows: std::collections::HashMap<&[i64], Vec<f32>> = Default::default();
    let mut w = Vec::with_capacity(want.len() * ncols);
    for (e, key) in keys.iter().enumerate() {
        let row = rows.entry(key.as_slice()).or_insert_with(|| {
            let mut row: Vec<f32> = (0..ncols)
                .map(|_| rng.random_range(-0.01f32..0.01))
                .collect();
            let rest: f64 = (1..ncols)
                .map(|c| f64::from(row[c]) * f64::from(x[c]))
                .sum();
            row[0] = ((f64::from(want[e]) - rest) / f64::from(x[0])) as f32;
            row
        });
        w.extend_from_slice(row);
    }
    (w, x)
}

/// `moe_router_f32` (router gemv + routing in one launch) against the CPU gemv in the kernel's
/// summation order and the oracle router, on fresh random inputs per launch with the logits
/// and the selection poisoned. One counter buffer, zeroed once, serves every launch (three per
/// case, back to back): it must read 0 after each, and the routing must be right each time,
/// which it is only if the last warp (and only it) saw the count reach the warp total.
fn check_fused<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("moe_router_f32");
    let count = upload(b, &[0u8; 4]);
    for c in cases() {
        // The V2-Lite router width for the model cases; 132 (33 float4 chunks) elsewhere.
        let ncols = if c.p.n_expert >= 64 { 2048 } else { 132 };
        let n = c.p.n_expert;
        for launch in 0..3 {
            let (logits, bias, w, x) = loop {
                let (grid, bias, keys) = draw_keyed(&mut rng, &c);
                let (w, x) = router_inputs(&mut rng, &grid, &keys, ncols);
                let logits = gemv_f32_kernel_order(&w, &x, n);
                if tie_free(&c, &logits, bias.as_deref(), &keys) {
                    break (logits, bias, w, x);
                }
            };
            let mut want = vec![(0usize, 0.0f32); c.p.n_used];
            Router::new(oracle_params(&c.p)).route(&logits, bias.as_deref(), &mut want);

            let (wb, xb) = (upload(b, &f32_bytes(&w)), upload(b, &f32_bytes(&x)));
            let lb = poisoned(b, n * 4);
            let bb = bias.as_ref().map(|v| upload(b, &f32_bytes(v)));
            let sb = poisoned(b, std::mem::size_of::<ExpertSelection>());
            moe_router_f32(b, (&wb, &xb, &lb), bb.as_ref(), &sb, &count, ncols, &c.p)
                .expect("launch moe_router_f32");
            let got_logits = download_f32(b, &lb, n);
            for e in 0..n {
                assert_eq!(
                    got_logits[e].to_bits(),
                    logits[e].to_bits(),
                    "{}: {} launch {launch}: logit {e}: got {}, want {}",
                    b.name(),
                    c.name,
                    got_logits[e],
                    logits[e]
                );
            }
            assert_eq!(
                download(b, &count),
                [0u8; 4],
                "{}: {} launch {launch}: counter not reset",
                b.name(),
                c.name
            );
            let got: ExpertSelection = bytemuck::pod_read_unaligned(&download(b, &sb));
            let what = format!("{}: {} launch {launch}", b.name(), c.name);
            check_selection(&got, &want, c.p.n_used, &what);
        }
        eprintln!(
            "{}: moe_router_f32 {}: {n} x {ncols}, 3 launches on one counter, logits \
             bit-exact, ids exact",
            b.name(),
            c.name
        );
    }
}

#[test]
fn moe_router_f32_matches_gemv_and_oracle() {
    on_every_backend!(check_fused);
}
