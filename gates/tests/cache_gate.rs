//! The q8_0 latent cache against the full-precision cache on the tiny synthetic models (CPU
//! backend on both sides, `ingot_gates::run_cache_gate`): the same tokens (near-ties excepted)
//! within the default band, for 16 greedy steps after a short prompt. Each report is printed:
//! its largest logit difference is the measured cost of the narrower cache.

#[path = "../../graph/tests/support/mod.rs"]
mod support;

use ingot_gates::{run_cache_gate, run_cache_gate_on, Band};
use ingot_gguf::GgufFile;
use ingot_model::CacheType;
use ingot_synth::{Layout, Preset, QuantMix};

/// BOS then "The quick" in the tiny vocabulary's byte-level tokens, as the sim gate.
const PROMPT: &[u32] = &[510, 84, 104, 101, 32, 113];
const STEPS: usize = 16;

fn check(path: &std::path::Path, name: &str) {
    let file = GgufFile::open(path).expect("open");
    let r = run_cache_gate(&file, PROMPT, STEPS, &Band::default(), CacheType::Q8_0)
        .expect("cache gate");
    eprintln!("{name}: {r}");
    assert!(r.passed(), "{name}: {r}");
    // The q8_0 rows must differ from the f16 ones somewhere: a cache type that changed nothing
    // would pass trivially.
    assert!(
        r.max_abs_diff() > 0.0,
        "{name}: q8_0 cache changed no logit"
    );
}

fn synth(preset: Preset, layout: Layout, mix: QuantMix) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("model.gguf");
    let name = support::write_preset(&path, preset, layout, mix);
    check(&path, &name);
}

#[test]
fn q8_0_cache_tiny_mla_q4_k_m() {
    synth(Preset::Tiny, Layout::Mla, QuantMix::Q4KM);
}

#[test]
fn q8_0_cache_tiny_v3_q4_k_m() {
    synth(Preset::TinyV3, Layout::Mla, QuantMix::Q4KM);
}

/// kv_lora = 512 and a 64-dim rope: V2-Lite's cache row of 576 values, 18 q8_0 blocks.
#[test]
fn q8_0_cache_tiny512_mla_q4_k_m() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("model.gguf");
    support::write_model(&path, &support::tiny512(), Layout::Mla, QuantMix::Q4KM, 11);
    check(&path, "tiny512-mla-q4_k_m");
}

/// Mutation: a q8_0 writer one step late (each step's own cache row not yet written when its
/// attention reads it) must fail the gate that covers the q8_0 cache.
#[test]
fn a_q8_0_writer_one_step_late_fails_the_cache_gate() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("model.gguf");
    let name = support::write_preset(&path, Preset::Tiny, Layout::Mla, QuantMix::Q4KM);
    let file = GgufFile::open(&path).expect("open");
    let r = run_cache_gate_on(
        &file,
        PROMPT,
        STEPS,
        &Band::default(),
        CacheType::Q8_0,
        |b| b.inject_cache_write_skew(1),
    )
    .expect("cache gate");
    eprintln!("{name}, q8_0 writer one step late: {r}");
    assert!(
        !r.passed(),
        "{name}: a q8_0 writer one step late passed the cache gate: {r}"
    );
}
