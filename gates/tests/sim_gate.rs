//! `ingot gate --backend sim` on the tiny synthetic models: the plan run in ptx-sim must pick
//! the oracle's tokens (near-ties excepted) for 16 greedy steps after a short prompt.

#[path = "../../graph/tests/support/mod.rs"]
mod support;

use std::path::Path;

use ingot_gates::{run_gate, Band, GateBackend, GateOptions, GateReport, Reference, Verdict};
use ingot_gguf::{GgufFile, MetaValue};
use ingot_model::CacheType;
use ingot_synth::variant::{merge_gate_up, tensors_of, write_variant};
use ingot_synth::{synthesize, Layout, Preset, QuantMix, SynthOptions};

/// BOS then "The quick" in the tiny vocabulary's byte-level tokens (ids below 256 are bytes).
const PROMPT: &[u32] = &[510, 84, 104, 101, 32, 113];
const STEPS: usize = 16;

fn gate(layout: Layout, mix: QuantMix) {
    gate_preset(Preset::Tiny, layout, mix);
}

fn gate_preset(preset: Preset, layout: Layout, mix: QuantMix) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("model.gguf");
    let name = support::write_preset(&path, preset, layout, mix);
    check(&path, &name);
}

/// A tiny model whose rows are all multiples of 64 (`support::tiny64`: the gemv kernels'
/// paired-block path throughout; the preset has `attn_k_b` rows of one block).
fn gate64(layout: Layout, mix: QuantMix) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("model.gguf");
    support::write_model(&path, &support::tiny64(), layout, mix, 7);
    check(&path, &format!("tiny64-{layout:?}-{mix}"));
}

/// The tiny model at `kv_lora` = 512: its plan takes `attn_merge_v_b_*` (checked here, so the
/// gate cannot pass on the two-node path by accident).
#[test]
fn tiny512_mla_q4_k_m() {
    let (layout, mix) = (Layout::Mla, QuantMix::Q4KM);
    let d = support::tiny512();
    let plan = ingot_graph::build_plan(
        &support::header_for(&d, layout, mix),
        ingot_graph::PlanOptions::for_ctx(64),
    )
    .expect("tiny512 plan");
    let fused = plan
        .nodes
        .iter()
        .filter(|n| n.kernel.starts_with("attn_merge_v_b_"))
        .count();
    assert_eq!(
        fused, d.n_layer as usize,
        "one attn_merge_v_b node per layer"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("model.gguf");
    support::write_model(&path, &d, layout, mix, 11);
    check(&path, "tiny512-mla-q4_k_m");
}

#[test]
fn tiny64_mla_q4_k_m() {
    gate64(Layout::Mla, QuantMix::Q4KM);
}

#[test]
fn tiny64_legacy_q4_k_m() {
    gate64(Layout::Legacy, QuantMix::Q4KM);
}

#[test]
fn tiny64_mla_q3_k_m() {
    gate64(Layout::Mla, QuantMix::Q3KM);
}

#[test]
fn tiny64_legacy_q3_k_m() {
    gate64(Layout::Legacy, QuantMix::Q3KM);
}

/// The sim gate's report on `file` (the prompt, then `STEPS` greedy steps), within `vram` if given.
fn gate_report(file: &GgufFile, name: &str, vram: Option<ingot_engine::VramBudget>) -> GateReport {
    run_gate(file, &sim_options(vram)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The sim gate's options: the prompt, then `STEPS` greedy steps, within `vram` if given.
fn sim_options(vram: Option<ingot_engine::VramBudget>) -> GateOptions {
    GateOptions {
        backend: GateBackend::Sim,
        prompt: PROMPT.to_vec(),
        steps: STEPS,
        band: Band::default(),
        vram,
        cache_type: Default::default(),
    }
}

/// The q8_0 latent cache in the simulator (`--backend sim --cache-type q8_0`): the plan writes
/// q8_0 rows and reads them with `flash_latent_mma_q8_0`; judged against the CPU backend with the
/// same q8_0 cache. The tiny model's 144-value rows end in a block with 16 values of padding.
#[test]
fn tiny_mla_q4_k_m_q8_0_cache() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("model.gguf");
    let name = support::write_preset(&path, Preset::Tiny, Layout::Mla, QuantMix::Q4KM);
    let file = GgufFile::open(&path).expect("open");
    let opts = ingot_graph::PlanOptions {
        cache_type: CacheType::Q8_0,
        ..ingot_graph::PlanOptions::for_ctx(64)
    };
    let plan = ingot_graph::build_plan(file.header(), opts).expect("plan");
    assert!(
        plan.nodes
            .iter()
            .any(|n| n.kernel == "flash_latent_mma_q8_0")
            && !plan.nodes.iter().any(|n| n.kernel == "flash_latent_mma"),
        "{name}: the q8_0 plan reads its cache with flash_latent_mma_q8_0"
    );
    let opts = GateOptions {
        backend: GateBackend::Sim,
        prompt: PROMPT.to_vec(),
        steps: STEPS,
        band: Band::default(),
        vram: None,
        cache_type: CacheType::Q8_0,
    };
    let report = run_gate(&file, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
    println!("{name} q8_0 cache\n{report}");
    assert_eq!(report.reference, Reference::Cpu);
    assert_eq!(report.steps.len(), PROMPT.len() + STEPS - 1);
    assert!(report.passed(), "{name} q8_0 cache: gate failed");
}

fn check(path: &Path, name: &str) {
    let opts_name = name;
    let file = GgufFile::open(path).expect("open");
    let report = gate_report(&file, name, None);
    println!("{opts_name}\n{report}");
    assert_eq!(report.steps.len(), PROMPT.len() + STEPS - 1);
    assert!(report.passed(), "{opts_name}: gate failed");
    // Routing near-ties are excused one step at a time; a router that chose wrongly would fail
    // at the many steps whose margins are clear, so they stay a small minority.
    assert!(
        report.count(Verdict::RouteTie) * 4 <= report.steps.len(),
        "{opts_name}: routing near-ties at {} of {} steps",
        report.count(Verdict::RouteTie),
        report.steps.len()
    );
    // Steps that agree must really agree: the same top-1 token.
    for s in report.steps.iter().filter(|s| s.verdict == Verdict::Match) {
        assert_eq!(s.oracle_top1, s.backend_top1);
    }
}

#[test]
fn tiny_mla_q4_k_m() {
    gate(Layout::Mla, QuantMix::Q4KM);
}

#[test]
fn tiny_legacy_q4_k_m() {
    gate(Layout::Legacy, QuantMix::Q4KM);
}

#[test]
fn tiny_mla_q3_k_m() {
    gate(Layout::Mla, QuantMix::Q3KM);
}

#[test]
fn tiny_legacy_q3_k_m() {
    gate(Layout::Legacy, QuantMix::Q3KM);
}

/// A mix whose own types must reach the GPU plan: the gate runs the tiny model only after
/// checking that the plan launches each of `kernels`, so it cannot pass on fallback types alone.
fn gate_mix_kernels(mix: QuantMix, kernels: &[&str]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("model.gguf");
    let name = support::write_preset(&path, Preset::Tiny, Layout::Mla, mix);
    let file = GgufFile::open(&path).expect("open");
    let plan = ingot_graph::build_plan(file.header(), ingot_graph::PlanOptions::for_ctx(64))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    for kernel in kernels {
        assert!(
            plan.nodes.iter().any(|n| n.kernel == *kernel),
            "{name}: the plan has no {kernel} node"
        );
    }
    check(&path, &name);
}

/// Q2_K in `attn_q` + `attn_kv_a_mqa` and in the experts' gate/up.
#[test]
fn tiny_mla_q2_k() {
    gate_mix_kernels(QuantMix::Q2K, &["gemv2_rope_q2k_q8_1", "moe_gate_up_q2k"]);
}

#[test]
fn tiny_mla_iq4_xs() {
    gate_mix_kernels(
        QuantMix::Iq4Xs,
        &["gemv2_rope_iq4_xs_q8_1", "moe_gate_up_iq4_xs"],
    );
}

/// The unsloth-style dynamic mixes: the grid type in the routed experts' gate/up beside Q6_K
/// shared experts (the mixed gate/up kernel, with the router in its launch at the tiny model's
/// expert count), and the tiny model's 128-wide routed down rows (IQ4_NL, the fallback) beside
/// Q6_K shared ones. IQ2_XXS's four types have a chained FFN kernel (`moe_ffn_*`), which runs
/// both; the other two mixes run the two launches.
#[test]
fn tiny_mla_iq2_xxs() {
    gate_mix_kernels(QuantMix::Iq2Xxs, &["moe_ffn_iq2_xxs_q6k_iq4_nl_q6k"]);
}

#[test]
fn tiny_mla_iq1_s() {
    gate_mix_kernels(
        QuantMix::Iq1S,
        &["moe_gate_up_router_iq1_s_q6k", "moe_down_iq4_nl_q6k"],
    );
}

/// The IQ3_XXS mix: unlike the two above, its routed weights are quantized by the reference
/// quantizer (ggml's IQ3_XXS, byte for byte), not stand-in blocks.
#[test]
fn tiny_mla_iq3_xxs() {
    gate_mix_kernels(
        QuantMix::Iq3Xxs,
        &["moe_gate_up_router_iq3_xxs_q6k", "moe_down_iq4_nl_q6k"],
    );
}

/// The golden DeepSeek-V3-style twin (`testdata/golden/tiny-v3-q4_k_m`, quantized by
/// llama.cpp's `llama-quantize`): low-rank query, sigmoid gating with the `exp_probs_b`
/// selection bias, 4 expert groups of which 2 are used, normalized weights scaled by 2.5.
#[test]
fn golden_tiny_v3_q4_k_m() {
    check(
        &ingot_testdata::golden("tiny-v3-q4_k_m/model.gguf"),
        "tiny-v3-q4_k_m",
    );
}

/// The golden f32 models (written by the `gguf` Python package; every projection F32): the plan
/// reads them with the float gemv and MoE kernels (`*_f32`), checked before the gate.
fn golden_f32(name: &str) {
    let path = ingot_testdata::golden(&format!("{name}/model.gguf"));
    let file = GgufFile::open(&path).expect("open");
    let plan = ingot_graph::build_plan(file.header(), ingot_graph::PlanOptions::for_ctx(64))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(
        plan.nodes.iter().any(|n| n.kernel == "moe_gate_up_f32")
            && plan
                .nodes
                .iter()
                .any(|n| n.kernel.starts_with("gemv2_rope_f32") || n.kernel == "gemv_f32_q8_1"),
        "{name}: the plan reads the F32 projections with the float kernels"
    );
    check(&path, name);
}

#[test]
fn golden_tiny_mla_f32() {
    golden_f32("tiny-mla-f32");
}

#[test]
fn golden_tiny_legacy_f32() {
    golden_f32("tiny-legacy-f32");
}

#[test]
fn golden_tiny_v3_f32() {
    golden_f32("tiny-v3-f32");
}

#[test]
fn golden_tiny_glm_f32() {
    golden_f32("tiny-glm-f32");
}

/// Synthetic twins of the rest of the family (`ingot synth` presets, Q4_K_M): DeepSeek-V3
/// (low-rank query, sigmoid + bias, 4 groups keep 2, scale 2.5), Kimi-K2 (32 heads: two head
/// groups on the tensor-core flash kernel; 32 experts, 8 used) and GLM-4.7-Flash (20 heads: a
/// partial second head group on the scalar flash kernel; an MTP block that is never run).
#[test]
fn tiny_v3_q4_k_m() {
    gate_preset(Preset::TinyV3, Layout::Mla, QuantMix::Q4KM);
}

#[test]
fn tiny_k2_q4_k_m() {
    gate_preset(Preset::TinyK2, Layout::Mla, QuantMix::Q4KM);
}

#[test]
fn tiny_glm_q4_k_m() {
    gate_preset(Preset::TinyGlm, Layout::Mla, QuantMix::Q4KM);
}

/// Arrangements of the golden V3 twin that only some files of the family use, each against the
/// oracle on the same file: the experts' gate and up rows merged into one `ffn_gate_up_exps`
/// tensor (read through the gate pointer with a doubled expert stride), and Mistral Large 3's
/// attention temperature with a period of 4 positions, so that 18 of the 22 positions run with a
/// factor above 1 (up to 1.54 at the last one) from the plan's per-position table.
fn golden_v3_variant(name: &str, set: &[(&str, MetaValue)], merge: bool) {
    let src = GgufFile::open(&ingot_testdata::golden("tiny-v3-q4_k_m/model.gguf")).expect("open");
    let mut tensors = tensors_of(&src);
    if merge {
        tensors = merge_gate_up(&tensors).expect("merge gate/up");
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("model.gguf");
    write_variant(&path, &src, set, &tensors).expect("write variant");
    check(&path, name);
}

#[test]
fn golden_tiny_v3_q4_k_m_merged_gate_up() {
    golden_v3_variant("tiny-v3-q4_k_m merged gate/up", &[], true);
}

#[test]
fn golden_tiny_v3_q4_k_m_attention_temperature() {
    golden_v3_variant(
        "tiny-v3-q4_k_m attention temperature",
        &[
            ("deepseek2.attention.temperature_scale", MetaValue::F32(0.3)),
            ("deepseek2.attention.temperature_length", MetaValue::U32(4)),
        ],
        false,
    );
}

/// Cache-aware routing: with 10 of the tiny model's 16 experts per layer in VRAM (a
/// 2.2 MiB budget) the router's selection score of each cached expert gets a bonus. Its cost is
/// what the gate measures against the oracle, which routes by the model alone: without a bonus
/// the plan is the all-in-VRAM one (it must pass as every gate does); a large bonus overrides
/// the model's choices and moves the logits further from the oracle's.
#[test]
fn cache_aware_routing_cost() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("model.gguf");
    let opts = SynthOptions::q4_k_m(Preset::Tiny);
    synthesize(&opts, &path, false).expect("synthesize");
    let file = GgufFile::open(&path).expect("open");
    let worst = |bonus: f32| {
        let budget = ingot_engine::VramBudget {
            bytes: 2_300_000,
            policy: ingot_engine::Policy::Lru,
            route_bonus: bonus,
        };
        let report = gate_report(&file, "tiny with a routing bonus", Some(budget));
        let worst = ingot_testdata::worst(report.steps.iter().map(|s| s.max_abs_diff));
        println!(
            "route bonus {bonus}: {} of {} steps match the oracle's top-1, {} mismatch; largest logit \
             difference {worst:.4}",
            report.count(Verdict::Match),
            report.steps.len(),
            report.count(Verdict::Mismatch)
        );
        (report.passed(), worst)
    };
    let (exact_passed, exact) = worst(0.0);
    assert!(exact_passed, "without a bonus the cached plan must pass");
    let (_, large) = worst(0.5);
    assert!(
        large > exact,
        "a bonus of 0.5 left the logits as close to the oracle's ({large} vs {exact})"
    );
}

/// Mutation: the backend reads a copy of the model whose layer-1 attention output projection is
/// scaled by 1.5 (every Q8_0 block scale), the oracle the original. That layer's residual leaves
/// the hidden band and the gate must fail, naming the layer: a residual out of its band is a
/// failure whatever the logits do, and no routing excuse may cover a step without a near-tie.
#[test]
fn a_scaled_residual_in_one_layer_fails_the_sim_gate() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("model.gguf");
    support::write_preset(&path, Preset::Tiny, Layout::Mla, QuantMix::Q8_0);
    let src = GgufFile::open(&path).expect("open");
    let mut tensors = tensors_of(&src);
    let t = tensors
        .iter_mut()
        .find(|t| t.name == "blk.1.attn_output.weight")
        .expect("blk.1.attn_output.weight");
    assert_eq!(
        t.ty,
        ingot_gguf::GgmlType::Q8_0,
        "the mutation scales Q8_0 block scales"
    );
    for block in t.data.chunks_exact_mut(34) {
        let d = half::f16::from_le_bytes([block[0], block[1]]).to_f32();
        block[..2].copy_from_slice(&half::f16::from_f32(1.5 * d).to_le_bytes());
    }
    let mutated_path = dir.path().join("mutated.gguf");
    write_variant(&mutated_path, &src, &[], &tensors).expect("write the mutated copy");
    let mutated = GgufFile::open(&mutated_path).expect("open the mutated copy");
    let report = ingot_gates::run_gate_files(&mutated, &src, &sim_options(None), Reference::Oracle)
        .expect("gate run");
    println!("{report}");
    assert!(!report.passed(), "a scaled layer passed the gate");
    assert!(
        report
            .steps
            .iter()
            .filter(|s| s.verdict == Verdict::Mismatch)
            .any(|s| s.first_drift.as_ref().is_some_and(|d| d.layer == Some(1))),
        "no failing step names blk.1"
    );
}
