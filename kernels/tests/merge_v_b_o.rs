//! `attn_merge_v_b_o_*` (the merge with `attn_v_b`, and `attn_output` with its residual add and
//! norm tail, in one chained launch) against the two launches it replaces, for every weight
//! type: `attn_merge_v_b_*` then the down kernel of the type with no routed slots.
//!
//! Each part runs its unfused kernel's code, so every output must be the unfused launches'
//! bits: the merge's q8_1 output, the updated residual stream, the norm tail's q8_1 and f32
//! outputs. Inputs are random and non-zero (partials, `(m, l)` pairs, valid weight blocks with
//! random scales, the residual, the norm weights); every output is poisoned. The fused launch
//! runs twice on the same control words: they, the pairs' and the tail's counters must be 0
//! again after each launch. The simulator backend race-checks every launch under random
//! schedules (`Sim::set_race_check`), so a read of the merge's output before it is published
//! would show as a schedule-dependent result.

mod quant_blocks;
mod support;

use ingot_abi::launch::{merge_v_b_pairs, CHAIN_CTL_DONE, CHAIN_CTL_WORDS};
use ingot_kernels::ops::attention::{
    attn_merge_v_b, attn_merge_v_b_o, attn_merge_v_b_o_cols, AttnShape, CacheType, MergeOutStrides,
    MergeVbBufs, OutputBufs,
};
use ingot_kernels::ops::gemv::GemvType;
use ingot_kernels::ops::moe::{moe_down, DownBufs, DownNorm, FfnShape};
use ingot_kernels::Accelerator;
use quant_blocks::random_blocks;
use rand::rngs::StdRng;
use support::attention::{merge_partials, rand_nonzero, step_state};
use support::gemv_type::ggml;
use support::{download, f32_bytes, poisoned, upload};

#[derive(Debug)]
struct Case {
    ty: GemvType,
    n_head: usize,
    d_v: usize,
    pos: usize,
    max_segments: usize,
    n_embd: usize,
    norm: bool,
}

/// What both paths write, downloaded.
#[derive(PartialEq)]
struct Outputs {
    y: Vec<u8>,
    out: Vec<u8>,
    norm_q8: Vec<u8>,
    norm_f32: Vec<u8>,
}

fn check<B: Accelerator>(b: &mut B, rng: &mut StdRng, c: &Case, ctl: &B::Buf) {
    let ty = c.ty;
    let s = AttnShape {
        n_head: c.n_head,
        d_nope: 128,
        kv_lora: 512,
        n_rope: 64,
        ctx: c.pos + 2,
        cache: CacheType::F16,
    };
    let ncols = c.n_head * c.d_v;
    let (o, ml) = merge_partials(rng, &s, c.pos, c.max_segments);
    let part_o = upload(b, &o);
    let part_ml = upload(b, &f32_bytes(&ml));
    let state = upload(b, &step_state(c.pos as u32));
    let w = upload(
        b,
        &random_blocks(rng, ggml(ty), ncols * 512 / ty.block_elems()),
    );
    let w_o = upload(
        b,
        &random_blocks(rng, ggml(ty), c.n_embd * ncols / ty.block_elems()),
    );
    let resid = upload(b, &f32_bytes(&rand_nonzero(rng, c.n_embd, -2.0, 2.0)));
    let norm_w = upload(b, &f32_bytes(&rand_nonzero(rng, c.n_embd, 0.5, 1.5)));
    let pairs = merge_v_b_pairs(c.n_head as u32, c.d_v as u32) as usize;
    let pair_count = upload(b, &vec![0u8; pairs * 4]);
    let count = upload(b, &[0u8; 4]);
    let (y_bytes, f_bytes) = (ncols / 32 * 36, c.n_embd * 4);

    // Fresh poisoned outputs and scratch; `unfused` picks the two launches.
    let run = |b: &mut B, unfused: bool| -> Outputs {
        let y = poisoned(b, y_bytes);
        let scratch = poisoned(b, ncols * 2 * 4);
        let out = poisoned(b, f_bytes);
        let (norm_q8, norm_f32) = (poisoned(b, c.n_embd / 32 * 36), poisoned(b, f_bytes));
        let merge = MergeVbBufs {
            part_o: &part_o,
            part_ml: &part_ml,
            state: &state,
            w: &w,
            y: &y,
            scratch: &scratch,
            pair_count: &pair_count,
        };
        let norm = c.norm.then_some(DownNorm {
            w: &norm_w,
            q8: &norm_q8,
            f32: &norm_f32,
            count: &count,
            eps: 1e-6,
        });
        if unfused {
            attn_merge_v_b(b, ty, &s, c.d_v, &merge, c.max_segments).expect("attn_merge_v_b");
            let shape = FfnShape {
                n_embd: c.n_embd,
                n_expert: 1,
                n_used: 0,
                ff: ncols,
                ff_sh: ncols,
            };
            let bufs = DownBufs {
                act: &y,
                sel: None,
                down: None,
                down_sh: Some(&w_o),
                resid: &resid,
                y: &out,
                norm,
            };
            moe_down(b, ty, ty, &shape, &bufs).expect("moe_down");
        } else {
            let o = OutputBufs {
                w_o: &w_o,
                resid: &resid,
                out: &out,
                norm,
                chain_ctl: ctl,
            };
            let shape = (&s, c.d_v, c.max_segments);
            attn_merge_v_b_o(b, ty, shape, &merge, c.n_embd, &o).expect("attn_merge_v_b_o");
        }
        let counters = [("pair", &pair_count), ("tail", &count), ("chain", ctl)];
        for (what, buf) in &counters[..if unfused { 2 } else { 3 }] {
            let words = download(b, buf);
            assert!(
                words.iter().all(|&v| v == 0),
                "{}: {} {c:?}: the {what} counters were left {words:?}",
                b.name(),
                ty.merge_v_b_o().name
            );
        }
        Outputs {
            y: download(b, &y),
            out: download(b, &out),
            norm_q8: download(b, &norm_q8),
            norm_f32: download(b, &norm_f32),
        }
    };
    let want = run(b, true);
    let name = ty.merge_v_b_o().name;
    for launch in 0..2 {
        let got = run(b, false);
        for (what, g, w) in [
            ("y", &got.y, &want.y),
            ("out", &got.out, &want.out),
            ("norm_q8", &got.norm_q8, &want.norm_q8),
            ("norm_f32", &got.norm_f32, &want.norm_f32),
        ] {
            if let Some(i) = (0..w.len()).find(|&i| g[i] != w[i]) {
                panic!(
                    "{}: {name} {c:?} launch {launch}: {what} byte {i}: {:#04x} vs the two \
                     launches' {:#04x}",
                    b.name(),
                    g[i],
                    w[i]
                );
            }
        }
    }
    assert!(
        want.out.chunks_exact(4).all(|v| v != [0xFF; 4]),
        "{name}: a row left unwritten"
    );
    eprintln!("{}: {name} {c:?}: the bits of the two launches", b.name());
}

fn cases<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("merge_v_b_o");
    let ctl = upload(b, &[0u8; CHAIN_CTL_WORDS as usize * 4]);
    let case = |ty, n_head, d_v, n_embd, norm| Case {
        ty,
        n_head,
        d_v,
        pos: 300,
        max_segments: 4,
        n_embd,
        norm,
    };
    for ty in GemvType::ALL {
        // Two heads of V2-Lite's d_v; 20 row blocks for attn_output (the last one partial
        // without the norm tail, which needs whole q8_1 blocks).
        let n_embd = if ty.block_elems() == 256 { 160 } else { 152 };
        check(
            b,
            &mut rng,
            &case(ty, 2, 128, n_embd, n_embd % 32 == 0),
            &ctl,
        );
    }
    // V2-Lite's attention (16 heads, 2,048 rows) with its norm tail; GLM-4.7-Flash's 20 heads of
    // 256 value dims (64-row merge blocks).
    check(b, &mut rng, &case(GemvType::Q4K, 16, 128, 2048, true), &ctl);
    check(b, &mut rng, &case(GemvType::Q8_0, 20, 256, 256, true), &ctl);
}

#[test]
fn chained_launch_gives_the_bits_of_the_two_launches() {
    on_every_backend!(cases);
}

/// Bytes of a column's copy in the multi-column test: its `len` bytes and at least 16 poisoned
/// ones after them, 256-aligned as the verify plan aligns them.
fn column_stride(len: usize) -> usize {
    (len + 16).next_multiple_of(256)
}

/// `cols` laid out one per `stride` bytes, the gaps poisoned.
fn columns(cols: &[Vec<u8>], stride: usize) -> Vec<u8> {
    let mut v = vec![0xFF; stride * cols.len()];
    for (c, col) in cols.iter().enumerate() {
        v[c * stride..c * stride + col.len()].copy_from_slice(col);
    }
    v
}

/// One launch's per-position buffers: one column's, or `m` columns' laid end to end.
struct PerPosition<T> {
    part_o: T,
    part_ml: T,
    state: T,
    resid: T,
    y: T,
    scratch: T,
    out: T,
    norm_q8: T,
    norm_f32: T,
    pair_count: T,
}

/// The weights, the norm tail's counter and the control words every launch of a case shares.
struct Shared<'a, T> {
    w: &'a T,
    w_o: &'a T,
    norm_w: &'a T,
    count: &'a T,
    ctl: &'a T,
}

/// `attn_merge_v_b_o` on `p` alone (`cols` `None`), or its `m`-column launch at `strides`.
fn launch_on<B: Accelerator>(
    b: &mut B,
    c: &Case,
    s: &AttnShape,
    sh: &Shared<'_, B::Buf>,
    p: &PerPosition<B::Buf>,
    cols: Option<(usize, MergeOutStrides)>,
) -> ingot_kernels::Result<()> {
    let merge = MergeVbBufs {
        part_o: &p.part_o,
        part_ml: &p.part_ml,
        state: &p.state,
        w: sh.w,
        y: &p.y,
        scratch: &p.scratch,
        pair_count: &p.pair_count,
    };
    let norm = c.norm.then_some(DownNorm {
        w: sh.norm_w,
        q8: &p.norm_q8,
        f32: &p.norm_f32,
        count: sh.count,
        eps: 1e-6,
    });
    let o = OutputBufs {
        w_o: sh.w_o,
        resid: &p.resid,
        out: &p.out,
        norm,
        chain_ctl: sh.ctl,
    };
    let shape = (s, c.d_v, c.max_segments);
    match cols {
        None => attn_merge_v_b_o(b, c.ty, shape, &merge, c.n_embd, &o),
        Some((m, strides)) => {
            attn_merge_v_b_o_cols(b, c.ty, m, shape, &merge, c.n_embd, &o, strides)
        }
    }
}

/// `attn_merge_v_b_o_colsM_q4k` on `m` columns against the one-column launch on each column
/// alone: every column's merge output, residual stream and norm tail outputs must be that
/// launch's bits, and every byte between columns must stay poisoned. Each column has its own
/// partials, position and residual, so a column that reads another's input, or writes into
/// another's copy, fails. The launch runs twice on the same control words and norm-tail counter;
/// they and the pairs' counters must be 0 after each.
fn check_columns<B: Accelerator>(b: &mut B, rng: &mut StdRng, c: &Case, m: usize, ctl: &B::Buf) {
    let ty = c.ty;
    let s = AttnShape {
        n_head: c.n_head,
        d_nope: 128,
        kv_lora: 512,
        n_rope: 64,
        ctx: c.pos + m + 2,
        cache: CacheType::F16,
    };
    let ncols = c.n_head * c.d_v;
    let w = upload(
        b,
        &random_blocks(rng, ggml(ty), ncols * 512 / ty.block_elems()),
    );
    let w_o = upload(
        b,
        &random_blocks(rng, ggml(ty), c.n_embd * ncols / ty.block_elems()),
    );
    let norm_w = upload(b, &f32_bytes(&rand_nonzero(rng, c.n_embd, 0.5, 1.5)));
    // Per column: partials of its own length, its position, its residual.
    let (mut part_o, mut part_ml, mut state, mut resid) = (vec![], vec![], vec![], vec![]);
    for col in 0..m {
        let pos = c.pos + col;
        let (o, ml) = merge_partials(rng, &s, pos, c.max_segments);
        part_o.push(o);
        part_ml.push(f32_bytes(&ml));
        state.push(step_state(pos as u32));
        resid.push(f32_bytes(&rand_nonzero(rng, c.n_embd, -2.0, 2.0)));
    }
    let pairs = merge_v_b_pairs(c.n_head as u32, c.d_v as u32) as usize;
    let (y_bytes, f_bytes, q8_bytes) = (ncols / 32 * 36, c.n_embd * 4, c.n_embd / 32 * 36);
    let scratch_bytes = ncols * 2 * 4;
    let count = upload(b, &[0u8; 4]);
    let shared = Shared {
        w: &w,
        w_o: &w_o,
        norm_w: &norm_w,
        count: &count,
        ctl,
    };

    // The one-column launch on each column alone.
    let mut want: Vec<Outputs> = Vec::new();
    for col in 0..m {
        let p = PerPosition {
            part_o: upload(b, &part_o[col]),
            part_ml: upload(b, &part_ml[col]),
            state: upload(b, &state[col]),
            resid: upload(b, &resid[col]),
            y: poisoned(b, y_bytes),
            scratch: poisoned(b, scratch_bytes),
            out: poisoned(b, f_bytes),
            norm_q8: poisoned(b, q8_bytes),
            norm_f32: poisoned(b, f_bytes),
            pair_count: upload(b, &vec![0u8; pairs * 4]),
        };
        launch_on(b, c, &s, &shared, &p, None).expect("attn_merge_v_b_o");
        want.push(Outputs {
            y: download(b, &p.y),
            out: download(b, &p.out),
            norm_q8: download(b, &p.norm_q8),
            norm_f32: download(b, &p.norm_f32),
        });
    }

    let strides = MergeOutStrides {
        part_o: column_stride(part_o[m - 1].len()),
        part_ml: column_stride(part_ml[m - 1].len()),
        state: column_stride(state[0].len()),
        y: column_stride(y_bytes),
        scratch: column_stride(scratch_bytes),
        pair_count: column_stride(pairs * 4),
        resid: column_stride(f_bytes),
        out: column_stride(f_bytes),
        norm_q8: column_stride(q8_bytes),
        norm_f32: column_stride(f_bytes),
    };
    let (po, pm) = (
        columns(&part_o, strides.part_o),
        columns(&part_ml, strides.part_ml),
    );
    let (st, rs) = (
        columns(&state, strides.state),
        columns(&resid, strides.resid),
    );
    let name = ty.merge_v_b_o_cols(m).expect("kernel").name;
    for launch in 0..2 {
        let p = PerPosition {
            part_o: upload(b, &po),
            part_ml: upload(b, &pm),
            state: upload(b, &st),
            resid: upload(b, &rs),
            y: poisoned(b, strides.y * m),
            scratch: poisoned(b, strides.scratch * m),
            out: poisoned(b, strides.out * m),
            norm_q8: poisoned(b, strides.norm_q8 * m),
            norm_f32: poisoned(b, strides.norm_f32 * m),
            pair_count: upload(b, &vec![0u8; strides.pair_count * m]),
        };
        launch_on(b, c, &s, &shared, &p, Some((m, strides))).expect("attn_merge_v_b_o_cols");
        let (y, out, norm_q8, norm_f32, pair_count) =
            (&p.y, &p.out, &p.norm_q8, &p.norm_f32, &p.pair_count);
        for (what, buf) in [("pair", pair_count), ("tail", &count), ("chain", ctl)] {
            let words = download(b, buf);
            assert!(
                words.iter().all(|&v| v == 0),
                "{}: {name} {c:?}: the {what} counters were left {words:?}",
                b.name()
            );
        }
        let mut outputs = vec![
            (
                "y",
                download(b, y),
                strides.y,
                want.iter().map(|w| &w.y).collect::<Vec<_>>(),
            ),
            (
                "out",
                download(b, out),
                strides.out,
                want.iter().map(|w| &w.out).collect::<Vec<_>>(),
            ),
        ];
        if c.norm {
            outputs.push((
                "norm_q8",
                download(b, norm_q8),
                strides.norm_q8,
                want.iter().map(|w| &w.norm_q8).collect::<Vec<_>>(),
            ));
            outputs.push((
                "norm_f32",
                download(b, norm_f32),
                strides.norm_f32,
                want.iter().map(|w| &w.norm_f32).collect::<Vec<_>>(),
            ));
        }
        for (what, got, stride, wants) in outputs {
            for (col, w) in wants.into_iter().enumerate() {
                let g = &got[col * stride..(col + 1) * stride];
                if let Some(i) = (0..w.len()).find(|&i| g[i] != w[i]) {
                    panic!(
                        "{}: {name} {c:?} launch {launch}: column {col} {what} byte {i}: \
                         {:#04x} vs the one-column launch's {:#04x}",
                        b.name(),
                        g[i],
                        w[i]
                    );
                }
                assert!(
                    g[w.len()..].iter().all(|&v| v == 0xFF),
                    "{}: {name} {c:?}: written past column {col}'s {what}",
                    b.name()
                );
            }
        }
    }
    eprintln!(
        "{}: {name} {c:?}: each column the one-column launch's bits",
        b.name()
    );
}

fn column_cases<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("merge_v_b_o_cols");
    let ctl = upload(b, &[0u8; CHAIN_CTL_WORDS as usize * 4]);
    let case = |n_head, d_v, n_embd, norm| Case {
        ty: GemvType::Q4K,
        n_head,
        d_v,
        pos: 300,
        max_segments: 4,
        n_embd,
        norm,
    };
    // V2-Lite's attention with its norm tail on 2, 3 and 4 positions; GLM-4.7-Flash's 20 heads
    // of 256 value dims on 3 (4 columns of 5,120 overflow the stage); two heads with a partial
    // last row block and no tail.
    for m in 2..=4 {
        check_columns(b, &mut rng, &case(16, 128, 2048, true), m, &ctl);
    }
    check_columns(b, &mut rng, &case(20, 256, 256, true), 3, &ctl);
    check_columns(b, &mut rng, &case(2, 128, 152, false), 2, &ctl);
}

#[test]
fn columns_launch_gives_each_column_the_one_column_bits() {
    on_every_backend!(column_cases);
}

/// What the multi-column launch cannot take is refused before anything runs: a type without
/// the kernel, 4 columns of GLM-4.7-Flash's 5,120 (past the stage), a stride shorter than its
/// column.
#[test]
fn columns_launch_refuses_what_it_cannot_take() {
    assert!(GemvType::Q8_0.merge_v_b_o_cols(2).is_none());
    assert!(GemvType::Q4K.merge_v_b_o_cols(1).is_none());
    assert!(GemvType::Q4K.merge_v_b_o_cols(5).is_none());
    assert!(!ingot_abi::launch::merge_v_b_o_cols_fit(4, 20 * 256));
    assert!(ingot_abi::launch::merge_v_b_o_cols_fit(3, 20 * 256));
    assert!(ingot_abi::launch::merge_v_b_o_cols_fit(4, 16 * 128));
}

/// The control words must be 0 before a launch: with the done word already past the merge's
/// item count the waiters never see the count they wait for, and the simulator ends the launch
/// in a step-limit fault rather than hanging (on a GPU it would hang; a word between 0 and the
/// count would let a waiter pass early instead). The invariant is the planner's: it zeroes the
/// words once, and no two launches in flight share them.
#[test]
fn a_dirty_done_word_is_a_fault_not_a_hang() {
    #[cfg(feature = "sim")]
    {
        let mut b = ingot_kernels::backend::sim::SimAccelerator::new().expect("ptx-sim backend");
        b.sim_mut().set_step_limit(200_000);
        let mut rng = support::rng("merge_v_b_o_dirty");
        let mut words = [0u8; CHAIN_CTL_WORDS as usize * 4];
        words[4 * CHAIN_CTL_DONE as usize] = 200;
        let ctl = upload(&mut b, &words);
        let c = Case {
            ty: GemvType::Q8_0,
            n_head: 2,
            d_v: 32,
            pos: 5,
            max_segments: 2,
            n_embd: 64,
            norm: false,
        };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check(&mut b, &mut rng, &c, &ctl)
        }));
        let msg = match r {
            Ok(()) => panic!("a launch whose done word started at 1 completed"),
            Err(e) => e.downcast_ref::<String>().cloned().unwrap_or_default(),
        };
        assert!(
            msg.contains("step limit") || msg.contains("StepLimit"),
            "{msg}"
        );
    }
    #[cfg(not(feature = "sim"))]
    eprintln!("skipped: ingot-kernels built without feature `sim`");
}
