//! The speculative verify plan (`planner::verify`, run by `SimExecutor::forward_rows`) against
//! decode steps, bit for bit: the logits and final hidden state of every position of a verify of
//! 2, 3 and 4 positions equal those of decoding the same tokens one by one, and the cache rows
//! it writes equal theirs (the decode after it, and a verify that rewinds over its last row,
//! still agree). On the Q4_K_M tiny-glm synth (the chained MoE-and-projections launches, the
//! argmax gemv), tiny64 (one expert group, the paired projections) and the trained model
//! (Q8_0), whose heads (Q6_K, Q8_0) run as one multi-column launch (`gemv_argmax_colsM_*`). The
//! argmax verify's tokens (each position's step state, written by the plan's argmax
//! kernel) equal the host's argmax of the decode steps' logits. Exact equality is the claim:
//! each column runs the decode plan's kernels on the same bytes, so no tolerance applies.

mod support;

use ingot_gguf::GgufFile;
use ingot_graph::exec::sim::SimExecutor;
use ingot_graph::PlanOptions;
use ingot_model::{argmax, forward_by_decode, Decoder, Forward, ModelConfig, Rows};
use ingot_synth::{Layout, Preset, QuantMix};

const CTX: usize = 16;

/// Bits of `a` and `b` equal, or a message naming the first difference.
fn same_bits(what: &str, a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    if let Some(i) = (0..a.len()).find(|&i| a[i].to_bits() != b[i].to_bits()) {
        panic!(
            "{what}: element {i} is {} by the verify, {} by decode steps",
            a[i], b[i]
        );
    }
}

fn file_vocab(file: &GgufFile) -> usize {
    ModelConfig::from_gguf(file.header()).expect("config").vocab
}

fn same_forward(what: &str, verify: &Forward, steps: &Forward) {
    assert_eq!(verify.n, steps.n, "{what}");
    same_bits(&format!("{what} logits"), &verify.logits, &steps.logits);
    same_bits(&format!("{what} hidden"), &verify.hidden, &steps.hidden);
}

/// A prompt decoded on two executors, then verifies of 2, 3 and 4 tokens on one against decode
/// steps on the other, each starting on the previous one's last row (a rewind), then one more
/// decode on both. `fused`: beside the head, the `(one-column, multi-column)` kernel name
/// prefixes whose every node the verify plan must run as one launch.
fn check(name: &str, file: &GgufFile, vocab_ids: &[u32], fused: &[(&str, &str)]) {
    let load = || SimExecutor::load(file, PlanOptions::for_ctx(CTX)).expect("sim load");
    let (mut batched, mut steps) = (load(), load());
    // Each model's plan takes the argmax on the device, so the argmax verify reads step states.
    assert!(batched.plan().device_argmax, "{name}: no device argmax");
    let mut ids = vocab_ids.iter().copied().cycle();
    let mut pos = 0;
    for _ in 0..2 {
        let t = ids.next().unwrap();
        batched.decode(t, pos).expect("prompt");
        steps.decode(t, pos).expect("prompt");
        pos += 1;
    }
    for m in 2..=4 {
        let tokens: Vec<u32> = ids.by_ref().take(m).collect();
        let v = batched
            .forward_rows(&tokens, pos, Rows::All)
            .expect("verify");
        let s = forward_by_decode(&mut steps, &tokens, pos, Rows::All).expect("steps");
        same_forward(&format!("{name}, {m} positions at {pos}"), &v, &s);
        // The device's argmax of each position (its step state's next_token) is the host's on
        // the same logits, and the hidden states come with it.
        let a = batched
            .forward_rows(&tokens, pos, Rows::Argmax)
            .expect("argmax verify");
        let want: Vec<u32> = s
            .logits
            .chunks_exact(file_vocab(file))
            .map(argmax)
            .collect();
        assert_eq!(a.argmax, want, "{name}: {m} positions at {pos}, argmax");
        assert!(
            a.logits.is_empty(),
            "{name}: an argmax verify returns no logits"
        );
        same_bits(
            &format!("{name} argmax-verify hidden"),
            &a.hidden,
            &s.hidden,
        );
        same_bits(
            &format!("{name} hidden()"),
            batched.hidden().unwrap(),
            steps.hidden().unwrap(),
        );
        let (plan, stats) = batched.verify_stats(m).expect("verify plan");
        assert_eq!(plan.plan.nodes.len(), stats.len());
        // The head, and each family in `fused` with its layers, run as one launch over the
        // columns; every other node once per column.
        let heads: Vec<&str> = (plan.plan.nodes.iter())
            .filter(|n| n.kernel.starts_with("gemv_argmax"))
            .map(|n| n.kernel.as_str())
            .collect();
        assert_eq!(heads.len(), 1, "{name}: {heads:?}");
        assert!(
            heads[0].starts_with(&format!("gemv_argmax_cols{m}_")),
            "{name}: {heads:?}"
        );
        let mut want_fused = 1;
        for (one, cols) in fused {
            let unfused = (batched.plan().nodes.iter())
                .filter(|n| n.kernel.starts_with(one))
                .count();
            let cols = format!("{cols}{m}_");
            let launches: Vec<_> = (plan.plan.nodes.iter())
                .filter(|n| n.kernel.starts_with(&cols))
                .collect();
            // Its columns read the weights of its streaming hint again.
            assert!(
                launches.iter().all(|n| n.l2_streaming.is_none()),
                "{name}: {cols} streams a weight its columns re-read"
            );
            let launches = launches.len();
            assert!(unfused > 0, "{name}: no {one} node to fuse");
            assert_eq!(launches, unfused, "{name}: {cols} launches");
            want_fused += unfused;
        }
        assert_eq!(plan.fused.len(), want_fused, "{name}: fused nodes");
        let others = batched.plan().nodes.len() - want_fused;
        assert_eq!(plan.plan.nodes.len(), others * m + want_fused, "{name}");
        for (n, st) in plan.plan.nodes.iter().zip(stats) {
            assert!(st.warp_instructions > 0, "{name}: {} never ran", n.label);
        }
        pos += m - 1;
    }
    let t = ids.next().unwrap();
    let a = batched.decode(t, pos).expect("decode after").to_vec();
    same_bits(
        &format!("{name}, decode after the verifies"),
        &a,
        steps.decode(t, pos).unwrap(),
    );
}

#[test]
fn verify_equals_decode_steps_on_tiny_glm_q4km() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tiny-glm.gguf");
    support::write_preset(&path, Preset::TinyGlm, Layout::Mla, QuantMix::Q4KM);
    let file = GgufFile::open(&path).expect("open");
    check(
        "tiny-glm q4_k_m",
        &file,
        &[5, 300, 17, 100, 42, 7, 511, 90, 3, 64],
        &[],
    );
}

#[test]
fn verify_equals_decode_steps_on_tiny64_q4km() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tiny64.gguf");
    support::write_model(&path, &support::tiny64(), Layout::Mla, QuantMix::Q4KM, 3);
    let file = GgufFile::open(&path).expect("open");
    check("tiny64", &file, &[510, 3, 77, 12, 200, 9, 31, 450], &[]);
}

#[test]
fn verify_equals_decode_steps_on_the_trained_model() {
    let path = ingot_testdata::golden_model("trained-rust-std");
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    check(
        "trained-rust-std",
        &file,
        &[1022, 40, 600, 13, 255, 801, 7, 99],
        &[],
    );
}

/// tiny64 at V2-Lite's latent width (`kv_lora` = 512): its chained merge and `attn_output`
/// (`attn_merge_v_b_o_q4k`) run as one launch over the columns.
#[test]
fn verify_equals_decode_steps_on_tiny512_q4km() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tiny512.gguf");
    support::write_model(&path, &support::tiny512(), Layout::Mla, QuantMix::Q4KM, 3);
    let file = GgufFile::open(&path).expect("open");
    check(
        "tiny512",
        &file,
        &[77, 510, 12, 3, 450, 31, 200, 9],
        &[("attn_merge_v_b_o_q4k", "attn_merge_v_b_o_cols")],
    );
}

/// A verify whose first position leaves a gap in the cache, or whose last falls past the
/// context, is refused before anything runs, and the executor still decodes.
#[test]
fn verify_refuses_positions_the_cache_cannot_take() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tiny64.gguf");
    support::write_model(&path, &support::tiny64(), Layout::Mla, QuantMix::Q4KM, 3);
    let file = GgufFile::open(&path).expect("open");
    let mut dec = SimExecutor::load(&file, PlanOptions::for_ctx(CTX)).expect("sim load");
    dec.decode(5, 0).expect("decode");
    let gap = dec.forward_rows(&[1, 2], 2, Rows::All).expect_err("a gap");
    assert!(gap.to_string().contains("position"), "{gap}");
    let past = dec
        .forward_rows(&[1, 2, 3], CTX - 2, Rows::All)
        .expect_err("past the end");
    assert!(past.to_string().contains("position"), "{past}");
    dec.decode(6, 1).expect("still decodes");
}
