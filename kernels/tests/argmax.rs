//! `argmax_step`: exact argmax with planted ties, NaNs and signed zeros, and the step-state
//! advance; the fused lm_head argmax, alone and on the columns of a speculative verify.

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

/// The fused head on the columns of a speculative verify: `m` = 2, 3, 4 columns of random
/// activations, each column's copy of every buffer `stride` bytes after the previous one with
/// poisoned padding between them, against the one-column kernel run on each column alone: every
/// logit and the step state bit for bit (the kernel's claim: the same arithmetic per column), the
/// padding untouched, the keys and counter reset; then a replay.
fn check_fused_cols<B: Accelerator>(b: &mut B) {
    use ingot_kernels::ops::head::{gemv_argmax_cols_q8_1, ColumnStrides};
    let mut rng = support::rng("gemv_argmax_cols");
    for (ty, gg, nrows, ncols) in [
        (GemvType::Q6K, GgmlType::Q6K, 600usize, 2048usize),
        (GemvType::Q8_0, GgmlType::Q8_0, 333, 512),
    ] {
        let w = quant_blocks::random_blocks(&mut rng, gg, nrows * ncols / ty.block_elems());
        let wb = upload(b, &w);
        let q8_len = ncols / QK8_1 * 36;
        // Strides past each column's length (with a poisoned gap) and 256-aligned as a verify plan
        // lays them out.
        let s = ColumnStrides {
            x: q8_len.next_multiple_of(256) + 256,
            y: (nrows * 4).next_multiple_of(256) + 256,
            acc: 256,
            state: 256,
        };
        for m in 2..=4usize {
            let start = |c: usize| StepState {
                token: 3 + c as u32,
                pos: 10 + c as u32,
                next_token: 0,
                steps_done: 7,
            };
            let mut x = vec![0xA5u8; s.x * m];
            let mut states = vec![0x5Au8; s.state * m];
            let mut want = Vec::new();
            for c in 0..m {
                let xf: Vec<f32> = (0..ncols).map(|_| rng.random_range(-2.0f32..2.0)).collect();
                let act = ingot_quant::quantize_q8_1(&xf);
                let bytes: &[u8] = bytemuck::cast_slice(&act);
                x[c * s.x..][..q8_len].copy_from_slice(bytes);
                let st = start(c);
                states[c * s.state..][..16].copy_from_slice(bytemuck::bytes_of(&st));
                // The one-column kernel on this column alone.
                let (xb, yb) = (upload(b, bytes), upload(b, &vec![0xFF; nrows * 4]));
                let (acc, count) = (upload(b, &[0u8; 8]), upload(b, &[0u8; 4]));
                let sb = upload(b, bytemuck::bytes_of(&st));
                gemv_argmax_q8_1(b, ty, (&wb, &xb, &yb), (&acc, &sb, &count), nrows, ncols)
                    .expect("one column");
                want.push((download(b, &yb), download(b, &sb)));
            }
            let xb = upload(b, &x);
            let y_init = vec![0xFFu8; s.y * m];
            let yb = upload(b, &y_init);
            let mut acc_init = vec![0x77u8; s.acc * m];
            for c in 0..m {
                acc_init[c * s.acc..][..8].fill(0);
            }
            let acc = upload(b, &acc_init);
            let sb = upload(b, &states);
            let count = upload(b, &[0u8; 4]);
            let bufs = ((&wb, &xb, &yb), (&acc, &sb, &count));
            gemv_argmax_cols_q8_1(b, ty, m, bufs.0, bufs.1, s, (nrows, ncols)).expect("columns");
            let (y, st, keys) = (download(b, &yb), download(b, &sb), download(b, &acc));
            for (c, (wy, ws)) in want.iter().enumerate() {
                let what = format!("{}: {ty:?} {nrows}x{ncols}, column {c} of {m}", b.name());
                assert!(y[c * s.y..][..nrows * 4] == wy[..], "{what}: logits differ");
                assert_eq!(st[c * s.state..][..16], ws[..], "{what}: step state");
                assert!(y[c * s.y + nrows * 4..][..s.y - nrows * 4]
                    .iter()
                    .all(|&v| v == 0xFF));
                assert!(st[c * s.state + 16..][..s.state - 16]
                    .iter()
                    .all(|&v| v == 0x5A));
                assert_eq!(keys[c * s.acc..][..8], [0u8; 8], "{what}: key not reset");
                assert!(keys[c * s.acc + 8..][..s.acc - 8]
                    .iter()
                    .all(|&v| v == 0x77));
            }
            assert_eq!(download(b, &count), [0u8; 4], "counter not reset");
            // A replay from the advanced states advances them once more.
            gemv_argmax_cols_q8_1(b, ty, m, bufs.0, bufs.1, s, (nrows, ncols)).expect("replay");
            let again = download(b, &sb);
            for (c, (_, ws)) in want.iter().enumerate() {
                let mut s1: StepState = *bytemuck::from_bytes(&ws[..16]);
                s1.pos += 1;
                s1.steps_done += 1;
                assert_eq!(
                    again[c * s.state..][..16],
                    *bytemuck::bytes_of(&s1),
                    "replay"
                );
            }
        }
        eprintln!(
            "{}: gemv_argmax_cols {ty:?} {nrows}x{ncols}: 2-4 columns",
            b.name()
        );
    }
    // Refusals: a type without the kernel, one or five columns, a stride shorter than a column.
    let one = upload(b, &[0u8; 4096]);
    let ok = ColumnStrides {
        x: 256,
        y: 256,
        acc: 256,
        state: 256,
    };
    let run = |b: &mut B, ty, m, st| {
        gemv_argmax_cols_q8_1(
            b,
            ty,
            m,
            (&one, &one, &one),
            (&one, &one, &one),
            st,
            (4, 256),
        )
    };
    assert!(run(b, GemvType::Q4K, 2, ok).is_err());
    assert!(run(b, GemvType::Q8_0, 1, ok).is_err());
    assert!(run(b, GemvType::Q8_0, 5, ok).is_err());
    let short = ColumnStrides { x: 36, ..ok };
    let err = run(b, GemvType::Q8_0, 2, short).expect_err("short stride");
    assert!(err.to_string().contains("x stride 36"), "{err}");
}

#[test]
fn fused_lm_head_on_verify_columns_equals_one_column() {
    on_every_backend!(check_fused_cols);
}
