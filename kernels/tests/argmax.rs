//! `argmax_step`: exact argmax with planted ties, NaNs and signed zeros, and the step-state
//! advance.

mod quant_blocks;
mod support;

use ingot_abi::blocks::QK8_1;
use ingot_abi::step::StepState;
use ingot_gguf::GgmlType;
use ingot_kernels::ops::gemv::GemvType;
use ingot_kernels::ops::head::{argmax_step, gemv_argmax_q8_1};
use ingot_kernels::Accelerator;
use rand::Rng;
use support::{download, f32_bytes, upload};

/// The reference: largest value, lowest index on ties, NaN never chosen unless all are NaN.
fn reference(v: &[f32]) -> u32 {
    let mut best: Option<(f32, usize)> = None;
    for (i, &x) in v.iter().enumerate() {
        if x.is_nan() {
            continue;
        }
        if best.is_none_or(|(b, _)| x > b) {
            best = Some((x, i));
        }
    }
    best.map_or(0, |(_, i)| i as u32)
}

fn run<B: Accelerator>(b: &mut B, logits: &[f32], start: StepState) -> StepState {
    let lb = upload(b, &f32_bytes(logits));
    let sb = upload(b, bytemuck::bytes_of(&start));
    argmax_step(b, &lb, &sb, logits.len()).expect("launch");
    *bytemuck::from_bytes(&download(b, &sb))
}

fn check<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("argmax_step");
    // 102400: the V2-Lite vocabulary; 102403: a scalar tail; 5: fewer values than threads.
    for n in [102_400usize, 102_403, 5] {
        for case in 0..6 {
            let mut v: Vec<f32> = (0..n).map(|_| rng.random_range(-30.0f32..30.0)).collect();
            let top = 40.0f32;
            match case {
                // A tie planted at two random indices (and a third, larger index).
                0 | 1 => {
                    let mut idx: Vec<usize> = (0..3).map(|_| rng.random_range(0..n)).collect();
                    idx.sort();
                    for &i in &idx {
                        v[i] = top;
                    }
                }
                // The maximum at the very first and the very last index.
                2 => {
                    v[0] = top;
                    v[n - 1] = top;
                }
                // NaNs everywhere around a unique maximum, and +0/−0 ties below it.
                3 => {
                    for x in v.iter_mut().step_by(3) {
                        *x = f32::NAN;
                    }
                    let i = rng.random_range(0..n);
                    v[i] = top;
                }
                // All values ≤ 0 with a −0 before a +0: equal, so the −0 (lower index) wins.
                4 => {
                    for x in v.iter_mut() {
                        *x = -x.abs() - 1.0;
                    }
                    let i = rng.random_range(0..n - 1);
                    v[i] = -0.0;
                    v[n - 1] = 0.0;
                }
                // All NaN: token 0.
                _ => v.iter_mut().for_each(|x| *x = f32::NAN),
            }
            let want = reference(&v);
            let start = StepState {
                token: rng.random_range(0..1000),
                pos: rng.random_range(0..4096),
                next_token: 0xFFFF_FFFF,
                steps_done: rng.random_range(0..100),
            };
            let got = run(b, &v, start);
            assert_eq!(
                got,
                StepState {
                    token: want,
                    pos: start.pos + 1,
                    next_token: want,
                    steps_done: start.steps_done + 1,
                },
                "{}: n={n} case {case}",
                b.name()
            );
        }
        eprintln!("{}: argmax_step n={n}: 6 cases exact", b.name());
    }
}

#[test]
fn argmax_is_exact_and_advances_the_state() {
    on_every_backend!(check);
}

/// The fused lm_head: random weight rows with the best row copied to a lower index (a planted
/// exact tie: identical bytes give identical bits), replayed twice on the same accumulator and
/// counter (its last block advances the state and resets both).
fn check_fused<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("gemv_argmax");
    for (ty, gg, nrows, ncols) in [
        (GemvType::Q6K, GgmlType::Q6K, 4099usize, 2048usize),
        (GemvType::Q8_0, GgmlType::Q8_0, 1000, 2048),
        (GemvType::Q4K, GgmlType::Q4K, 777, 512),
        (GemvType::Q5K, GgmlType::Q5K, 333, 256),
    ] {
        let row_bytes = ncols / ty.block_elems() * ty.block_bytes();
        let mut w = quant_blocks::random_blocks(&mut rng, gg, nrows * ncols / ty.block_elems());
        let xf: Vec<f32> = (0..ncols).map(|_| rng.random_range(-2.0f32..2.0)).collect();
        let act = ingot_quant::quantize_q8_1(&xf);
        assert_eq!(act.len(), ncols / QK8_1);
        let oracle: Vec<f32> = (0..nrows)
            .map(|r| {
                ingot_quant::vec_dot_q8_1(gg, &w[r * row_bytes..(r + 1) * row_bytes], &act)
                    .expect("oracle")
            })
            .collect();
        let best = reference(&oracle) as usize;
        let low = rng.random_range(0..best.max(1));
        if low < best {
            w.copy_within(best * row_bytes..(best + 1) * row_bytes, low * row_bytes);
        }
        let wb = upload(b, &w);
        let xb = upload(b, bytemuck::cast_slice(&act));
        let yb = upload(b, &vec![0xFF; nrows * 4]);
        let acc = upload(b, &[0u8; 8]);
        let start = StepState {
            token: 1,
            pos: 10,
            next_token: 0,
            steps_done: 4,
        };
        let sb = upload(b, bytemuck::bytes_of(&start));
        let count = upload(b, &[0u8; 4]);
        for replay in 0..2u32 {
            gemv_argmax_q8_1(b, ty, (&wb, &xb, &yb), (&acc, &sb, &count), nrows, ncols)
                .expect("gemv");
            let y: Vec<f32> = download(b, &yb)
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            // Exact: the token is the argmax of the logits the kernel wrote, lowest index on
            // ties; the planted copy has the very same bits, so the higher copy never wins.
            let want = reference(&y);
            assert_eq!(
                y[low].to_bits(),
                y[best].to_bits(),
                "{}: {ty:?} copy",
                b.name()
            );
            if low < best {
                assert_ne!(
                    want as usize,
                    best,
                    "{}: {ty:?} tie to the higher index",
                    b.name()
                );
            }
            // And it is the oracle's best row up to the kernel's rounding: y[want] ≥ y[best]
            // means oracle[want] ≥ oracle[best] − 2·max|y − oracle|.
            let oracle_now = |r: usize| f64::from(if r == low { oracle[best] } else { oracle[r] });
            let err = ingot_testdata::worst_f64(
                (0..nrows).map(|r| (f64::from(y[r]) - oracle_now(r)).abs()),
            );
            assert!(
                oracle_now(want as usize) >= oracle_now(best) - 2.0 * err,
                "{}: {ty:?} token {want} is not the oracle's best {best} within 2·{err:e}",
                b.name()
            );
            let got: StepState = *bytemuck::from_bytes(&download(b, &sb));
            assert_eq!(
                got,
                StepState {
                    token: want,
                    pos: start.pos + 1 + replay,
                    next_token: want,
                    steps_done: start.steps_done + 1 + replay,
                },
                "{}: {ty:?} {nrows}x{ncols} replay {replay}",
                b.name()
            );
            assert_eq!(download(b, &acc), [0u8; 8], "{}: acc not reset", b.name());
            assert_eq!(
                download(b, &count),
                [0u8; 4],
                "{}: counter not reset",
                b.name()
            );
        }
        eprintln!(
            "{}: gemv_argmax {ty:?} {nrows}x{ncols}: best row {best} copied to {low}, 2 replays",
            b.name()
        );
    }
}

#[test]
fn fused_lm_head_argmax_is_exact_and_replays() {
    on_every_backend!(check_fused);
}
