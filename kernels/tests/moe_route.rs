//! `moe_route` against ingot-model's oracle router (`ingot_model::routing::Router`, spec §5.4).
//!
//! Logits and biases are drawn from coarse grids, so equal inputs (exact ties, which the tie
//! rule must settle: lower index first) are common, while distinct inputs give scores far apart
//! compared with the kernel's approximation band. Draws where two distinct inputs still land
//! within that band of each other are rejected and redrawn: with such a near-tie the kernel's
//! `ex2.approx` rounding may legitimately order them differently from the f64 oracle.

mod support;

use ingot_abi::launch::{ExpertSelection, MAX_EXPERTS_USED};
use ingot_kernels::ops::moe::{moe_route, Gating, RouteParams};
use ingot_kernels::Accelerator;
use ingot_model::routing::{Router, RouterParams};
use ingot_model::GatingFunc;
use rand::rngs::StdRng;
use rand::Rng;
use support::{download, f32_bytes, poisoned, upload};

/// Relative band between the kernel's and the oracle's gating scores. The kernel computes
/// `exp` as `ex2.approx(x·log2 e)` (relative error 2^-22.5 ≈ 1.7e-7, plus about 1e-6 from
/// rounding the product for |x| ≤ 16), sums at most 256 terms in f32 in a tree of depth 13
/// (≤ 13·2^-24 ≈ 8e-7 relative) and divides once: a few 1e-6 in all. 1e-5 leaves margin.
const SCORE_BAND: f64 = 1e-5;
/// Weights after renormalization add the errors of up to 8 weights in the sum: twice the band.
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

/// Draws grid logits (and biases) without near-ties among experts or group scores.
fn draw(rng: &mut StdRng, c: &Case) -> (Vec<f32>, Option<Vec<f32>>) {
    let n = c.p.n_expert;
    for _ in 0..1000 {
        let ks: Vec<i32> = (0..n).map(|_| rng.random_range(-c.span..=c.span)).collect();
        let bs: Vec<i32> = (0..n).map(|_| rng.random_range(-2..=2)).collect();
        let logits: Vec<f32> = ks.iter().map(|&k| k as f32 / 16.0).collect();
        let bias: Option<Vec<f32>> = c
            .with_bias
            .then(|| bs.iter().map(|&b| b as f32 / 8.0).collect());
        let (_, sel) = scores(&c.p, &logits, bias.as_deref());
        let input = |e: usize| {
            vec![
                i64::from(ks[e]),
                i64::from(if c.with_bias { bs[e] } else { 0 }),
            ]
        };
        let mut experts: Vec<(f64, Vec<i64>)> = (0..n).map(|e| (sel[e], input(e))).collect();
        if near_tie(&mut experts) {
            continue;
        }
        if c.p.n_group > 1 {
            let per = n / c.p.n_group;
            let mut groups: Vec<(f64, Vec<i64>)> = (0..c.p.n_group)
                .map(|g| {
                    let mut m: Vec<(f64, Vec<i64>)> = (g * per..(g + 1) * per)
                        .map(|e| (sel[e], input(e)))
                        .collect();
                    m.sort_by(|a, b| b.0.total_cmp(&a.0));
                    let top2 = m[0].0 + m.get(1).map_or(f64::NEG_INFINITY, |x| x.0);
                    let mut key = m[0].1.clone();
                    key.extend(m.get(1).map_or(vec![], |x| x.1.clone()));
                    (top2, key)
                })
                .collect();
            if near_tie(&mut groups) {
                continue;
            }
        }
        return (logits, bias);
    }
    panic!("{}: could not draw inputs without near-ties", c.name);
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

            let ids: Vec<usize> = got.ids[..c.p.n_used].iter().map(|&e| e as usize).collect();
            let want_ids: Vec<usize> = want.iter().map(|&(e, _)| e).collect();
            assert_eq!(
                ids,
                want_ids,
                "{}: {}: expert ids (logits {logits:?}, bias {bias:?})",
                b.name(),
                c.name
            );
            for (i, &(_, w)) in want.iter().enumerate() {
                let g = got.weights[i];
                let err = (f64::from(g) - f64::from(w)).abs() / f64::from(w).abs();
                assert!(
                    err <= WEIGHT_BAND,
                    "{}: {}: weight {i} of expert {}: got {g}, oracle {w}, rel err {err:e}",
                    b.name(),
                    c.name,
                    ids[i]
                );
                worst = worst.max(err);
            }
            // Slots past n_used keep the poison (0xFFFFFFFF ids, NaN weights).
            for i in c.p.n_used..MAX_EXPERTS_USED {
                assert_eq!(got.ids[i], u32::MAX, "{}: id slot {i} written", c.name);
                assert!(
                    got.weights[i].is_nan(),
                    "{}: weight slot {i} written",
                    c.name
                );
            }
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
        let lb = upload(&mut b, &[0u8; 1024]);
        let sb = poisoned(&mut b, 64);
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
            RouteParams { n_used: 9, ..base },
            RouteParams { n_used: 0, ..base },
            RouteParams {
                n_expert: 257,
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
