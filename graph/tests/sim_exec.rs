//! The sim executor on a small model: per-node counters and the Decoder argument checks.

mod support;

use ingot_abi::hash::Fnv1a;
use ingot_gguf::GgufFile;
use ingot_graph::exec::sim::SimExecutor;
use ingot_graph::{BufferKind, NodeArg, PlanOptions};
use ingot_model::{Decoder, ModelError};
use ingot_synth::{Layout, Preset, QuantMix};

fn model(dir: &std::path::Path) -> GgufFile {
    let path = dir.join("model.gguf");
    support::write_model(&path, &support::tiny64(), Layout::Mla, QuantMix::Q4KM, 3);
    GgufFile::open(&path).expect("open")
}

#[test]
fn counters_and_argument_checks() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = model(dir.path());
    let mut exec = SimExecutor::load(&file, PlanOptions::for_ctx(8)).expect("load");
    exec.step(510, 0).expect("step 0");
    let plan = exec.plan().clone();
    let stats = exec.node_stats();
    assert_eq!(stats.len(), plan.nodes.len());
    let mut checked = 0;
    for (n, s) in plan.nodes.iter().zip(stats) {
        assert!(s.warp_instructions > 0, "{} ran no instruction", n.label);
        // A plain, grouped, paired or lm_head gemv reads each of its weights at least once; so
        // does a MoE FFN joined with the next projections (its routed experts come through
        // expert tables, not weight arguments).
        let gemv = n.kernel.starts_with("gemv") && n.kernel != "gemv_f32";
        if gemv || n.kernel.starts_with("moe_ffn_rope_kb_") {
            let weights: u64 = n
                .args
                .iter()
                .filter_map(|a| match a {
                    NodeArg::Buf(r) => Some(plan.buffer(r.buf)),
                    _ => None,
                })
                .filter(|d| matches!(d.kind, BufferKind::Weight { .. }))
                .map(|d| d.bytes)
                .sum();
            assert!(weights > 0, "{}: no weight argument", n.label);
            assert!(
                s.global_bytes_read >= weights,
                "{}: read {} bytes of {} weight bytes",
                n.label,
                s.global_bytes_read,
                weights
            );
            checked += 1;
        }
    }
    // Per layer attn_q (with attn_kv_a_mqa when paired, and attn_k_b chained in:
    // `gemv2_rope_kb_*`, or joined to the FFN before: `moe_ffn_rope_kb_*`), attn_v_b; and
    // lm_head.
    let expected = 3 * 2 + 1;
    assert!(checked >= expected, "{checked} gemv nodes checked");

    let vocab = exec.config().vocab as u32;
    assert!(matches!(
        exec.decode(vocab, 1),
        Err(ModelError::TokenOutOfRange { .. })
    ));
    assert!(matches!(
        exec.decode(1, 2),
        Err(ModelError::PositionGap { pos: 2, filled: 1 })
    ));
    assert!(matches!(
        exec.decode(1, 8),
        Err(ModelError::PositionOutOfRange { .. })
    ));
    // Rewinding is allowed: position 0 again gives the first step's logits bit for bit.
    let first = exec.logits().to_vec();
    exec.decode(84, 1).expect("step 1");
    let again = exec.decode(510, 0).expect("rewind").to_vec();
    assert_eq!(first, again);
}

/// The index of the largest logit, lowest index on ties (the device argmax's rule).
fn host_argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

#[test]
fn greedy_on_the_device_follows_the_host_argmax() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = model(dir.path());
    let opts = PlanOptions::for_ctx(8);
    let mut exec = SimExecutor::load(&file, opts).expect("load");
    assert!(exec.plan().device_argmax, "the plan ends in an argmax node");
    let steps = 4;
    let device = exec.generate_greedy(510, 0, steps).expect("greedy");
    let state = exec.step_state().expect("state");
    assert_eq!(state.pos as usize, steps, "each step advances pos by one");
    assert_eq!(state.token, *device.last().expect("tokens"));

    // The same tokens step by step with the host choosing from the logits. Bit-identical
    // logits (same nodes, same order) make the choice exact, so no tolerance is involved.
    let mut host = SimExecutor::load(&file, opts).expect("load");
    let mut token = 510;
    for (pos, &d) in device.iter().enumerate() {
        host.step(token, pos).expect("step");
        token = host_argmax(host.logits());
        assert_eq!(token, d, "step {pos}");
        assert_eq!(host.step_state().expect("state").next_token, d);
    }
    assert_eq!(exec.logits(), host.logits());
}

/// Whether the committed (sm_86) text of `kernel` marks where its wait goes: a kernel that
/// prefetches its weights before waiting (`kernels/device/src/prefetch.rs`).
fn prefetches_before_its_wait(kernel: &str) -> bool {
    let ptx = ingot_kernels::PTX;
    let start = ptx
        .find(&format!(".entry {kernel}("))
        .unwrap_or_else(|| panic!("{kernel} is not in the PTX"));
    let end = ptx[start..].find("\n}\n").map_or(ptx.len(), |e| start + e);
    ptx[start..end]
        .lines()
        .any(|l| l.trim() == ingot_kernels::grid_dep::WAIT_MARKER)
}

/// The decode step with the kernels a Hopper card runs under programmatic dependent launch (each
/// waits on its predecessor; `ingot_kernels::grid_dep`) gives the same logits, bit for bit, as the
/// sm_86 kernels, on a dense + MoE model (softmax routing), on tiny-v3 (sigmoid routing with
/// groups, low-rank query) and on the tiny preset (a MoE FFN joined with the next layer's
/// projections), and no kernel touches global memory before its wait (the simulator
/// faults if one does). The plans include every family that prefetches its weights before the
/// wait (the attention projections with their rope tail, the attention output and FFN down
/// projections, the gate/up of the shared experts and dense FFNs, the lm_head), so those
/// prefetches run here too, and any that named memory outside the launch's buffers would fault.
#[test]
fn hopper_kernels_waiting_on_their_predecessor_give_the_same_logits() {
    let dir = tempfile::tempdir().expect("temp dir");
    let tiny = model(dir.path());
    let v3_path = dir.path().join("tiny-v3.gguf");
    support::write_preset(
        &v3_path,
        ingot_synth::Preset::TinyV3,
        Layout::Mla,
        QuantMix::Q4KM,
    );
    let v3 = GgufFile::open(&v3_path).expect("open");
    // The tiny preset: a MoE FFN joined with the next layer's projections.
    let joined_path = dir.path().join("tiny.gguf");
    support::write_preset(&joined_path, Preset::Tiny, Layout::Mla, QuantMix::Q4KM);
    let joined = GgufFile::open(&joined_path).expect("open");
    let mut prefetching = std::collections::BTreeSet::new();
    for (name, file) in [("tiny64", &tiny), ("tiny-v3", &v3), ("tiny", &joined)] {
        let mut plain = SimExecutor::load(file, PlanOptions::for_ctx(8)).expect("load");
        let mut hopper = SimExecutor::load(file, PlanOptions::for_ctx(8)).expect("load");
        hopper.use_hopper_kernels().expect("sm_90 module");
        prefetching.extend(
            hopper
                .plan()
                .nodes
                .iter()
                .map(|n| n.kernel.clone())
                .filter(|k| prefetches_before_its_wait(k)),
        );
        for (pos, token) in [11u32, 200, 7, 300].into_iter().enumerate() {
            let a = plain.decode(token, pos).expect("sm_86 step").to_vec();
            let b = hopper
                .decode(token, pos)
                .unwrap_or_else(|e| panic!("{name}: sm_90 step: {e}"));
            let same = a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(same, "{name}: position {pos}: logits differ");
        }
    }
    // No plain gemv (`gemv_q*`, `gemv2_q*`) is a node of these plans (a low-rank query's
    // attn_q_a carries its norm, `gemv2_norm_*`, and attn_q_b the rope, `gemv2_rope_*` with no
    // second matrix; tiny64's projections take attn_k_b in, `gemv2_rope_kb_*`);
    // kernels/tests/grid_dep.rs runs their prefetch before the wait.
    for family in [
        "gemv2_rope_",
        "gemv2_rope_kb_",
        "gemv2_norm_",
        "gemv_grouped_",
        "moe_gate_up_",
        "moe_down_",
        "gemv_argmax_",
        "moe_ffn_rope_kb_",
    ] {
        assert!(
            prefetching.iter().any(|k| k.starts_with(family)),
            "no prefetching {family}* node in {prefetching:?}"
        );
    }
}

/// A MoE layer's FFN and the next layer's projections in one launch (`moe_ffn_rope_kb_*`,
/// `PlanOptions::chain_layers`) give the logits and every layer's residual stream of the plan
/// with the two launches, bit for bit, on the tiny model at each mix whose types have the
/// kernel (one join per plan: layer 1's FFN with layer 2's projections).
#[test]
fn ffn_and_next_projections_in_one_launch_give_the_same_bits() {
    let dir = tempfile::tempdir().expect("temp dir");
    for mix in [QuantMix::Q4KM, QuantMix::Q3KM, QuantMix::Q8_0] {
        let path = dir.path().join(format!("tiny-{mix}.gguf"));
        support::write_preset(&path, Preset::Tiny, Layout::Mla, mix);
        let file = GgufFile::open(&path).expect("open");
        let two = PlanOptions {
            chain_layers: false,
            ..PlanOptions::for_ctx(8)
        };
        let mut joined = SimExecutor::load(&file, PlanOptions::for_ctx(8)).expect("load");
        let mut apart = SimExecutor::load(&file, two).expect("load");
        let count = |e: &SimExecutor| {
            e.plan()
                .nodes
                .iter()
                .filter(|n| n.kernel.starts_with("moe_ffn_rope_kb_"))
                .count()
        };
        assert_eq!((count(&joined), count(&apart)), (1, 0), "{mix}: joins");
        assert_eq!(
            joined.plan().nodes.len() + 1,
            apart.plan().nodes.len(),
            "{mix}: a node less"
        );
        for (pos, token) in [11u32, 200, 7, 300].into_iter().enumerate() {
            let a = apart.step_with_trace(token, pos).expect("two launches");
            let j = joined.step_with_trace(token, pos).expect("one launch");
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            for (l, (x, y)) in a.layers.iter().zip(&j.layers).enumerate() {
                assert_eq!(
                    bits(x),
                    bits(y),
                    "{mix}: position {pos}: layer {l}'s residual"
                );
            }
            assert_eq!(a.layers.len(), j.layers.len());
            assert_eq!(
                bits(&a.logits),
                bits(&j.logits),
                "{mix}: position {pos}: logits"
            );
        }
    }
}

/// FNV-1a of the bits of the residual stream after every layer and of the logits, over 4 greedy
/// steps of `ingot synth --preset tiny-glm --quant q4_k_m` (seed 42) from token 5, taken
/// 2026-12-06 when the flash's per-segment outputs became f16, normalized (`part_o`: one more
/// rounding, half an f16 ulp of each segment's output): meant to move bits.
const TINY_GLM_TRACE_DIGEST: u64 = 0x6a82_8db2_0508_ea21;

/// The decode's bits against a pin: the kernel changes of the bandwidth work (thread mappings,
/// staged loads, integer tricks) must leave every bit alone, and this holds them to it without a
/// second build to compare with. The residual stream is hashed too: the 8-bit activations
/// between layers absorb most one-ulp changes before they reach the logits. tiny-glm runs the
/// MoE down kernels of three type pairs (Q5_0, Q8_0, Q4_K, their unit stage and norm tails), the
/// pair, grouped and argmax gemvs, the router and the rope tail. A change meant to move bits
/// re-pins the digest and says why in its commit.
#[test]
fn tiny_glm_decode_matches_its_pinned_bits() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tiny-glm.gguf");
    support::write_preset(&path, Preset::TinyGlm, Layout::Mla, QuantMix::Q4KM);
    let file = GgufFile::open(&path).expect("open");
    let mut exec = SimExecutor::load(&file, PlanOptions::for_ctx(16)).expect("load");
    let mut digest = Fnv1a::new();
    let mut token = 5u32;
    for pos in 0..4 {
        let trace = exec.step_with_trace(token, pos).expect("decode");
        for v in trace.layers.iter().flatten().chain(&trace.logits) {
            digest = digest.bytes(&v.to_bits().to_le_bytes());
        }
        token = trace
            .logits
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(i, _)| i as u32)
            .expect("a vocabulary");
    }
    assert_eq!(
        digest.finish(),
        TINY_GLM_TRACE_DIGEST,
        "the sim decode's bits changed: if a kernel change means to, re-pin the digest and say why"
    );
}
