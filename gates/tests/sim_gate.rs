//! `ingot gate --backend sim` on the tiny synthetic models: the plan run in ptx-sim must pick
//! the oracle's tokens (near-ties excepted) for 16 greedy steps after a short prompt.

#[path = "../../graph/tests/support/mod.rs"]
mod support;

use std::path::Path;

use ingot_gates::{run_gate, Band, GateBackend, GateOptions, Verdict};
use ingot_gguf::GgufFile;
use ingot_synth::{synthesize, Layout, Preset, QuantMix, SynthOptions};

/// BOS then "The quick" in the tiny vocabulary's byte-level tokens (ids below 256 are bytes).
const PROMPT: &[u32] = &[510, 84, 104, 101, 32, 113];
const STEPS: usize = 16;

fn gate(layout: Layout, mix: QuantMix) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("model.gguf");
    let opts = SynthOptions {
        preset: Preset::Tiny,
        layout,
        mix,
        seed: 42,
    };
    synthesize(&opts, &path, false).expect("synthesize");
    check(&path, &opts.model_name());
}

/// A tiny model whose rows are all multiples of 64 (`support::tiny64`: the gemv kernels'
/// paired-block path throughout; the preset has `attn_k_b` rows of one block).
fn gate64(layout: Layout, mix: QuantMix) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("model.gguf");
    support::write_model(&path, &support::tiny64(), layout, mix, 7);
    check(&path, &format!("tiny64-{layout:?}-{mix}"));
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

fn check(path: &Path, name: &str) {
    let opts_name = name;
    let file = GgufFile::open(path).expect("open");
    let report = run_gate(
        &file,
        &GateOptions {
            backend: GateBackend::Sim,
            prompt: PROMPT.to_vec(),
            steps: STEPS,
            band: Band::default(),
        },
    )
    .unwrap_or_else(|e| panic!("{opts_name}: {e}"));
    println!("{opts_name}\n{report}");
    assert_eq!(report.steps.len(), PROMPT.len() + STEPS - 1);
    assert!(report.passed(), "{opts_name}: gate failed");
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
