//! The fast CPU backend against the oracle on the project's own synthetic models: both attention
//! layouts and every quant mix `ingot synth` makes (f32, q8_0, q4_k_m, q3_k_m), and the deepseek2
//! family's tiny presets, teacher-forced on the oracle's greedy run.

mod common;

use common::{compare_logits, oracle_and_cpu, std_dev};
use ingot_gguf::GgufFile;
use ingot_synth::{synthesize, Layout, Preset, QuantMix, SynthOptions};

const PROMPT: [u32; 6] = [510, 84, 104, 101, 32, 113];
const STEPS: usize = 16;

/// Standard deviation of `v` (the "spread" the bands below are relative to). Synthesizes `preset`
/// in `layout`/`mix`, runs the oracle greedily from [`PROMPT`] for [`STEPS`] tokens and the CPU
/// backend teacher-forced on the same tokens, and holds them to the band below.
fn check_cpu_against_oracle(dir: &std::path::Path, preset: Preset, layout: Layout, mix: QuantMix) {
    let opts = SynthOptions {
        preset,
        layout,
        mix,
        seed: 11,
    };
    let path = dir.join(format!("{}.gguf", opts.model_name()));
    synthesize(&opts, &path, false).unwrap();
    let file = GgufFile::open(&path).unwrap();

    let (want, got) = oracle_and_cpu(&file, &PROMPT, STEPS);

    // Band, relative to the spread of the logits: f32 weights differ from the oracle only by f32 vs
    // f64 rounding (1e-4 of the spread is ~40x the observed error); quantized mixes also quantize
    // every activation to 8 bits per 32 (q8_0) or 256 (q8_K) values, and near-tied router
    // probabilities can then pick a different expert. The golden README measures llama.cpp's
    // identical scheme at up to ~0.25 logits on a spread of ~2 (12%); on these 256-wide synthetic
    // models it measures 12-21% of the spread (2026-11-29), so the band is 30% of the spread. The
    // top-1 must agree where the oracle's margin is clear of twice the band; elsewhere agreement is
    // counted and printed.
    let spread = std_dev(&want.concat());
    let band = if mix == QuantMix::F32 { 1e-4 } else { 0.3 } * spread;
    // Sigmoid routing (the V3 family) scores experts independently, so near ties between experts
    // are common, and 8-bit activations can flip one: that position's logits then move by up to
    // ~2.5 (measured against llama.cpp itself on golden tiny-v3-q4_k_m, where the CPU backend
    // reproduces llama.cpp to 1e-6 and the oracle is off at 1 of 32 positions). On these presets'
    // q4_k_m files 2-5 of 22 positions flip (tiny-k2, top-8 of 32 experts, the most; measured
    // 2026-11-30). So there at most half the positions may leave the band, each one such a flip; a
    // systematic error moves every position. The exact check of these presets is their f32 run.
    let flips_allowed = if mix != QuantMix::F32 && preset.dims().routing.sigmoid {
        want.len() / 2
    } else {
        0
    };
    let what = format!("{preset} {layout} {mix}");
    let (inside, outside): (Vec<_>, Vec<_>) = want
        .iter()
        .zip(&got)
        .enumerate()
        .partition(|(_, (w, g))| common::max_abs_diff(w, g) < band);
    let outside: Vec<usize> = outside.into_iter().map(|(pos, _)| pos).collect();
    let (w_in, g_in): (Vec<Vec<f32>>, Vec<Vec<f32>>) = inside
        .into_iter()
        .map(|(_, (w, g))| (w.clone(), g.clone()))
        .unzip();
    let seen = compare_logits(&w_in, &g_in, band, |_| what.clone());
    let worst = ingot_testdata::worst(
        want.iter()
            .zip(&got)
            .map(|(w, g)| common::max_abs_diff(w, g)),
    );
    println!(
        "{what}: {} positions, max |cpu - oracle| {worst:.3e} (band {band:.3e}, logit spread {spread:.2}), \
         outside the band at {outside:?} (allowed {flips_allowed}), same top-1 at {} of the {} inside, required at {}",
        want.len(),
        seen.agree,
        w_in.len(),
        seen.clear
    );
    assert!(
        outside.len() <= flips_allowed,
        "{what}: positions {outside:?} exceed band {band} (max |diff| {worst})"
    );
}

#[test]
fn cpu_backend_matches_oracle_on_every_layout_and_mix() {
    let dir = tempfile::tempdir().unwrap();
    for layout in [Layout::Mla, Layout::Legacy] {
        for mix in QuantMix::ALL {
            check_cpu_against_oracle(dir.path(), Preset::Tiny, layout, mix);
        }
    }
}

/// The family's tiny presets (V3, Moonlight, Kimi-K2, GLM-4.7-Flash with its MTP block) load and
/// decode on both backends, in f32 and in the q4_k_m mix.
#[test]
fn family_presets_decode_on_oracle_and_cpu() {
    let dir = tempfile::tempdir().unwrap();
    for preset in [
        Preset::TinyV3,
        Preset::TinyMoonlight,
        Preset::TinyK2,
        Preset::TinyGlm,
    ] {
        for mix in [QuantMix::F32, QuantMix::Q4KM] {
            check_cpu_against_oracle(dir.path(), preset, Layout::Mla, mix);
        }
    }
}
