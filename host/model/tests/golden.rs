//! The oracle and the CPU backend against llama.cpp's logits for the golden models
//! (golden/README.md): V2 in both attention layouts, a V3-style model (low-rank query, sigmoid
//! routing with bias and groups) and a GLM-4.7-Flash-style model (20 heads, sigmoid routing, one
//! NextN/MTP block that decoding must skip).
//!
//! Band for f32 weights: an independent f64 reimplementation matched these files to 3.6e-6 (logit
//! std ~2). The oracle (f32 with f64 reductions) and the CPU backend (f32 weights take f32
//! activations and f32 accumulation, no quantization) are expected within 1e-4 max abs, with the
//! same argmax at every position.

mod common;

use common::*;
use ingot_gguf::GgufFile;
use ingot_model::{CpuBackend, Decoder, Oracle};

/// Max |backend − llama.cpp| over a whole logits matrix of an f32 model (README band).
const BAND: f32 = 1e-4;

/// llama.cpp's plain files of a q4_k_m model include its q8 activation quantization, which the
/// README measures moving logits by up to ~0.25 from the f32 computation on the same weights.
const QUANTIZED_ACTIVATION_BAND: f32 = 0.3;

#[derive(Clone, Copy, Debug)]
enum Backend {
    Oracle,
    Cpu,
}

fn open(model: &str) -> GgufFile {
    let path = ingot_testdata::golden_model(model);
    GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs `f` on a freshly loaded `backend` for `model` (64 positions of cache).
fn with_decoder<R>(model: &str, backend: Backend, f: impl FnOnce(&mut dyn Decoder) -> R) -> R {
    let file = open(model);
    match backend {
        Backend::Oracle => f(&mut Oracle::load(&file, 64).expect("golden model loads")),
        Backend::Cpu => f(&mut CpuBackend::load(&file, 64).expect("golden model loads")),
    }
}

fn check_rows(what: &str, got: &[Vec<f32>], want: &Npy) {
    assert_eq!(got.len(), want.rows, "{what}: row count");
    let mut worst = 0.0f32;
    for (r, row) in got.iter().enumerate() {
        worst = worst.max(max_abs_diff(row, want.row(r)));
        assert_eq!(
            argmax(row),
            argmax(want.row(r)),
            "{what}: argmax of row {r}"
        );
    }
    println!("{what}: max |diff| = {worst:.3e} over {} rows", want.rows);
    assert!(worst < BAND, "{what}: max |diff| {worst} exceeds {BAND}");
}

/// A NaN in one logit fails the comparison every golden test uses (`f32::max` alone drops a NaN
/// and reports the rest as in band).
#[test]
#[should_panic(expected = "exceeds")]
fn a_nan_logit_fails_the_golden_comparison() {
    let want = read_npy(&golden_dir().join("tiny-mla-f32/prefill16.npy"));
    let mut got: Vec<Vec<f32>> = (0..want.rows).map(|r| want.row(r).to_vec()).collect();
    // Not the row's top-1, so the argmax check passes and the band check is what must fail.
    let row = &mut got[5];
    let not_top = (argmax(row) + 1) % row.len();
    row[not_top] = f32::NAN;
    check_rows("one NaN logit", &got, &want);
}

/// Prefill and stepwise decode of the 16-token prompt against `prefill_file` and `stepwise_file`.
fn check_prompt16(model: &str, backend: Backend, prefill_file: &str, stepwise_file: Option<&str>) {
    let got = with_decoder(model, backend, |d| d.prefill(&PROMPT16, 0).unwrap());
    let dir = golden_dir().join(model);
    let what = |file: &str| format!("{model}/{file} ({backend:?})");
    check_rows(
        &what(prefill_file),
        &got,
        &read_npy(&dir.join(prefill_file)),
    );
    if let Some(step) = stepwise_file {
        check_rows(&what(step), &got, &read_npy(&dir.join(step)));
    }
}

/// Greedy generation: same ids, and each step's logits within the band.
fn check_greedy(model: &str, backend: Backend, stem: &str) {
    let dir = golden_dir().join(model);
    let (prompt, want_ids) = read_ids(&dir.join(format!("{stem}.ids.txt")));
    let want = read_npy(&dir.join(format!("{stem}.npy")));
    let got = with_decoder(model, backend, |d| {
        let mut logits = d.prefill(&prompt, 0).unwrap().pop().unwrap();
        let mut got = Vec::new();
        for (step, &want_id) in want_ids.iter().enumerate() {
            let id = argmax(&logits) as u32;
            assert_eq!(
                id, want_id,
                "{model}/{stem} ({backend:?}): greedy id at step {step}"
            );
            got.push(logits);
            logits = d.decode(id, prompt.len() + step).unwrap().to_vec();
        }
        got
    });
    check_rows(&format!("{model}/{stem} ({backend:?})"), &got, &want);
}

/// prefill16, stepwise16 and greedy32 of an f32 golden model.
fn check_f32_model(model: &str, backend: Backend) {
    check_prompt16(model, backend, "prefill16.npy", Some("stepwise16.npy"));
    check_greedy(model, backend, "greedy32");
}

#[test]
fn mla_f32_oracle() {
    check_f32_model("tiny-mla-f32", Backend::Oracle);
}

#[test]
fn mla_f32_cpu() {
    check_f32_model("tiny-mla-f32", Backend::Cpu);
}

#[test]
fn legacy_f32_oracle() {
    check_f32_model("tiny-legacy-f32", Backend::Oracle);
}

#[test]
fn legacy_f32_cpu() {
    check_f32_model("tiny-legacy-f32", Backend::Cpu);
}

#[test]
fn v3_f32_oracle() {
    check_f32_model("tiny-v3-f32", Backend::Oracle);
}

#[test]
fn v3_f32_cpu() {
    check_f32_model("tiny-v3-f32", Backend::Cpu);
}

/// The MTP block (`blk.3`, `nextn_predict_layers` 1) is mapped but never run: llama.cpp's logits
/// come from blocks 0-2 alone.
#[test]
fn glm_f32_oracle() {
    check_f32_model("tiny-glm-f32", Backend::Oracle);
}

#[test]
fn glm_f32_cpu() {
    check_f32_model("tiny-glm-f32", Backend::Cpu);
}

#[test]
fn glm_mtp_block_is_mapped_not_run() {
    let file = open("tiny-glm-f32");
    let o = Oracle::load(&file, 8).unwrap();
    let c = o.config();
    assert_eq!((c.n_layer, c.n_nextn, c.block_count()), (3, 1, 4));
    let mut o = o;
    assert_eq!(o.decode_with_trace(PROMPT16[0], 0).unwrap().layers.len(), 3);
}

#[test]
fn mla_q4_k_m_against_dequantized_reference() {
    check_prompt16(
        "tiny-mla-q4_k_m",
        Backend::Oracle,
        "prefill16_deqf32.npy",
        None,
    );
    check_greedy("tiny-mla-q4_k_m", Backend::Oracle, "greedy32_deqf32");
}

/// The V3 q4_k_m twin has no dequantized-reference files, and llama.cpp's plain files include its
/// q8 activation quantization, which moves logits by up to ~0.25 and can flip near-tied expert
/// choices (sigmoid scores with groups): teacher-forced on llama.cpp's greedy ids, the oracle is
/// within 0.19 of the files at 31 of 32 positions and 2.49 off at one where a choice flipped
/// (measured 2026-11-30). The oracle is therefore held to the 16-token prompt files, where no
/// choice flips, within the quantization band; the CPU backend, which quantizes activations as
/// llama.cpp does, is held to all of this model's files to f32 rounding (`cpu_backend.rs`).
#[test]
fn v3_q4_k_m_prompt_within_activation_quantization() {
    let model = "tiny-v3-q4_k_m";
    let dir = golden_dir().join(model);
    let got = with_decoder(model, Backend::Oracle, |d| d.prefill(&PROMPT16, 0).unwrap());
    let band = QUANTIZED_ACTIVATION_BAND;
    for file in ["prefill16.npy", "stepwise16.npy"] {
        let want = read_npy(&dir.join(file));
        let want: Vec<Vec<f32>> = (0..want.rows).map(|r| want.row(r).to_vec()).collect();
        assert_eq!(want.len(), got.len(), "{model}/{file}: row count");
        let seen = compare_logits(&want, &got, band, |pos| format!("{model}/{file} row {pos}"));
        println!(
            "{model}/{file} (oracle): max |diff| = {:.3e} (band {band}), same top-1 at {}/{} rows, required at {}",
            seen.worst,
            seen.agree,
            want.len(),
            seen.clear
        );
        assert!(
            seen.worst < band,
            "{model}/{file}: max |diff| {} exceeds {band}",
            seen.worst
        );
    }
}

#[test]
fn rewinding_reproduces_logits() {
    with_decoder("tiny-mla-f32", Backend::Oracle, |o| {
        let first = o.prefill(&PROMPT16[..6], 0).unwrap();
        // Overwrite positions 3.. with other tokens, then rewind to 3 and replay the original ones.
        o.prefill(&[7, 8, 9], 3).unwrap();
        let again = o.prefill(&PROMPT16[3..6], 3).unwrap();
        assert_eq!(&first[3..], &again[..]);
    });
}

#[test]
fn trace_ends_in_the_same_logits() {
    let file = open("tiny-mla-f32");
    let mut o = Oracle::load(&file, 64).unwrap();
    o.prefill(&PROMPT16[..4], 0).unwrap();
    let plain = o.decode(PROMPT16[4], 4).unwrap().to_vec();
    let trace = o.decode_with_trace(PROMPT16[4], 4).unwrap();
    assert_eq!(trace.layers.len(), o.config().n_layer);
    assert_eq!(trace.logits, plain);
    assert_ne!(trace.layers[0], trace.embedding);
}
