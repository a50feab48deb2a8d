//! The prefill chunk plans on the PTX simulator against the decode plan run token by token and
//! against the CPU backend's chunked prefill, on a small model with 16 heads.

mod support;

use ingot_gguf::GgufFile;
use ingot_graph::exec::sim::SimExecutor;
use ingot_graph::PlanOptions;
use ingot_model::{CpuBackend, Decoder};
use ingot_synth::{Dims, Layout, Preset, QuantMix};
use ingot_testdata::Lcg;

/// [`support::tiny64`] with 16 heads: one whole head group of the flash kernels.
fn tiny16() -> Dims {
    Dims {
        n_head: 16,
        ..support::tiny64()
    }
}

fn model(dir: &std::path::Path, layout: Layout, mix: QuantMix) -> GgufFile {
    let path = dir.join("model.gguf");
    support::write_model(&path, &tiny16(), layout, mix, 11);
    GgufFile::open(&path).expect("open")
}

fn std_dev(v: &[f32]) -> f32 {
    let n = v.len() as f64;
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    (v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n).sqrt() as f32
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    ingot_testdata::max_abs_diff(a, b)
}

fn argmax(v: &[f32]) -> usize {
    v.iter()
        .enumerate()
        .fold(
            (0, f32::NEG_INFINITY),
            |m, (i, &x)| if x > m.1 { (i, x) } else { m },
        )
        .0
}

/// How far the chunked and the token-by-token runs of the simulator may be apart, in standard
/// deviations of the logits. They compute the same math with other f32 summation orders (`mmq`
/// against the gemvs, one attention pass against split-K segments and a merge, `moe_combine`
/// against `moe_down`'s sum), each of which can flip a q8_1 rounding downstream; on this random
/// 3-layer model such flips grow to the same distance that separates either run from the CPU
/// backend. Measured (2026-12-02, 21 tokens): chunk vs stepwise 0.21 σ, chunk vs CPU 0.19 σ,
/// stepwise vs CPU 0.22 σ. Wiring defects injected into the plan gave 3.3 σ (the last token's
/// cache row not written) and 5.1 σ (heads and tokens interchanged in the per-head products).
/// The bound is the gate's logit band, 0.5 σ.
const CHUNK_VS_STEPWISE_SIGMAS: f32 = 0.5;

#[test]
fn chunks_match_the_stepwise_decode_and_continue_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = model(dir.path(), Layout::Mla, QuantMix::Q4KM);
    let opts = PlanOptions::for_ctx(64);
    let mut chunked = SimExecutor::load(&file, opts).expect("load");
    assert_eq!(chunked.prefill_unavailable(), None);
    let mut stepwise = SimExecutor::load(&file, opts).expect("load");
    let vocab = chunked.config().vocab;

    // 21 tokens from 0 (one chunk of the 64 bucket), then 9 from 21 (the 16 bucket: its rows
    // attend the first chunk's cache rows), then one decode step after them.
    let first = Lcg(1).tokens(21, vocab);
    let second = Lcg(2).tokens(9, vocab);
    let check = |label: &str, a: &[f32], b: &[f32]| {
        let sigma = std_dev(b);
        let d = max_abs_diff(a, b);
        println!("{label}: max |Δlogit| {d:.5} = {:.4} σ", d / sigma);
        assert!(
            d <= CHUNK_VS_STEPWISE_SIGMAS * sigma,
            "{label}: {d} > {CHUNK_VS_STEPWISE_SIGMAS} σ ({sigma})"
        );
        // Top-1 must agree where the reference's margin is outside the band (the gate's
        // near-tie rule).
        if margin(b) > CHUNK_VS_STEPWISE_SIGMAS * sigma {
            assert_eq!(argmax(a), argmax(b), "{label}: top-1");
        }
    };
    let a = chunked.prefill_last(&first, 0).expect("chunked prefill");
    let mut b = Vec::new();
    for (i, &t) in first.iter().enumerate() {
        b = stepwise.decode(t, i).expect("step").to_vec();
    }
    let mut cpu = CpuBackend::load(&file, 64).expect("cpu backend");
    let c = cpu.prefill_last(&first, 0).expect("cpu prefill");
    check("21 tokens at 0, chunk vs cpu", &a, &c);
    check("21 tokens at 0", &a, &b);
    let a = chunked.prefill_last(&second, 21).expect("chunked prefill");
    for (i, &t) in second.iter().enumerate() {
        b = stepwise.decode(t, 21 + i).expect("step").to_vec();
    }
    check("9 tokens at 21", &a, &b);
    let a = chunked
        .decode(7, 30)
        .expect("decode after prefill")
        .to_vec();
    let b = stepwise.decode(7, 30).expect("decode").to_vec();
    check("decode at 30", &a, &b);

    // Both plans' counters: every prefill node of the two buckets used ran instructions.
    let used: Vec<usize> = chunked
        .prefill_stats()
        .iter()
        .filter(|(_, s)| s.iter().any(|s| s.warp_instructions > 0))
        .map(|(p, s)| {
            for (n, s) in p.plan.nodes.iter().zip(*s) {
                assert!(
                    s.warp_instructions > 0,
                    "bucket {}: {} ran nothing",
                    p.ntok,
                    n.label
                );
            }
            p.ntok
        })
        .collect();
    assert_eq!(used, [16, 64]);
}

/// The top-1 logit minus the runner-up.
fn margin(v: &[f32]) -> f32 {
    let mut sorted = v.to_vec();
    sorted.sort_by(|x, y| y.total_cmp(x));
    sorted[0] - sorted[1]
}

/// The CPU backend's chunked prefill is its stepwise path bit for bit; the simulator's chunk
/// must then sit within the band the gate allows a GPU backend (half the logits' standard
/// deviation, measured sim-vs-oracle distances are 0.12-0.29 at σ ≈ 1; gates/src/band.rs),
/// with the same top-1 where the CPU's margin is clear.
#[test]
fn chunks_agree_with_the_cpu_backend_on_the_mixes_and_layouts() {
    // Kimi-K2's structure at tiny dims: 32 heads (two groups of 16), a low-rank query, sigmoid
    // routing with a selection bias; GLM-4.7-Flash's: 20 heads (a group of 16 and a partial one
    // of 4).
    for (preset, layout, mix) in [
        (None, Layout::Mla, QuantMix::Q8_0),
        (None, Layout::Legacy, QuantMix::Q4KM),
        (Some(Preset::TinyK2), Layout::Mla, QuantMix::Q4KM),
        (Some(Preset::TinyGlm), Layout::Mla, QuantMix::Q4KM),
        // Q3_K, and Q4_0 and Q5_0 where rows do not split into 256-blocks.
        (None, Layout::Mla, QuantMix::Q3KM),
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = match preset {
            None => model(dir.path(), layout, mix),
            Some(p) => {
                let path = dir.path().join("model.gguf");
                support::write_preset(&path, p, layout, mix);
                GgufFile::open(&path).expect("open")
            }
        };
        let heads = preset.map_or(16, |p| p.dims().n_head);
        let mut sim = SimExecutor::load(&file, PlanOptions::for_ctx(32)).expect("load");
        assert_eq!(sim.prefill_unavailable(), None, "{layout:?} {mix:?}");
        let mut cpu = CpuBackend::load(&file, 32).expect("cpu backend");
        let tokens = Lcg(3).tokens(13, sim.config().vocab);
        let a = sim.prefill_last(&tokens, 0).expect("sim prefill");
        let b = cpu.prefill_last(&tokens, 0).expect("cpu prefill");
        let sigma = std_dev(&b);
        let d = max_abs_diff(&a, &b);
        println!(
            "{heads} heads {layout:?} {mix:?}: sim chunk vs cpu max |Δlogit| {d:.4} = {:.3} σ",
            d / sigma
        );
        assert!(
            d <= 0.5 * sigma.max(1.0),
            "{layout:?} {mix:?}: {d} (σ {sigma})"
        );
        if margin(&b) > 0.5 * sigma.max(1.0) {
            assert_eq!(argmax(&a), argmax(&b), "{layout:?} {mix:?}: top-1");
        }
    }
}

/// A prompt longer than the context is refused before anything runs, and the cache is as
/// before (the next step at 0 gives the same logits as a fresh executor's).
#[test]
fn a_prompt_past_the_context_changes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = model(dir.path(), Layout::Mla, QuantMix::Q4KM);
    let mut sim = SimExecutor::load(&file, PlanOptions::for_ctx(16)).expect("load");
    let tokens = Lcg(4).tokens(17, sim.config().vocab);
    assert!(matches!(
        sim.prefill_last(&tokens, 0),
        Err(ingot_model::ModelError::PositionOutOfRange { .. })
    ));
    assert!(matches!(
        sim.prefill_last(&[], 0),
        Err(ingot_model::ModelError::EmptyPrompt)
    ));
    // 16 tokens fill the context exactly: the 16 bucket at 0.
    let a = sim.prefill_last(&tokens[..16], 0).expect("16 tokens");
    assert!(a.iter().all(|v| v.is_finite()));
}
