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
    attn_merge_v_b, attn_merge_v_b_o, AttnShape, CacheType, MergeVbBufs, OutputBufs,
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
