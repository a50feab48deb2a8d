//! The oracle against llama.cpp's logits for the tiny golden models (golden/README.md).
//!
//! Band: an independent f64 reimplementation matched these files to 3.6e-6 (logit std ~2); an f32 oracle with f64
//! reductions is expected within 1e-4 max abs, with the same argmax at every position.

mod common;

use common::*;
use ingot_gguf::GgufFile;
use ingot_model::Oracle;

/// Max |oracle − llama.cpp| over a whole logits matrix (README band for an f32 oracle).
const BAND: f32 = 1e-4;

fn oracle(model: &str) -> Oracle {
    let path = golden_dir().join(model).join("model.gguf");
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Oracle::load(&file, 64).expect("golden model loads")
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

/// Prefill and stepwise decode of the 16-token prompt against `prefill16*.npy` and `stepwise16.npy`.
fn check_prompt16(model: &str, prefill_file: &str, stepwise_file: Option<&str>) {
    let mut o = oracle(model);
    let got = o.prefill(&PROMPT16, 0).unwrap();
    let dir = golden_dir().join(model);
    check_rows(
        &format!("{model}/{prefill_file}"),
        &got,
        &read_npy(&dir.join(prefill_file)),
    );
    if let Some(step) = stepwise_file {
        check_rows(&format!("{model}/{step}"), &got, &read_npy(&dir.join(step)));
    }
}

/// Greedy generation: same ids, and each step's logits within the band.
fn check_greedy(model: &str, stem: &str) {
    let dir = golden_dir().join(model);
    let (prompt, want_ids) = read_ids(&dir.join(format!("{stem}.ids.txt")));
    let want = read_npy(&dir.join(format!("{stem}.npy")));
    let mut o = oracle(model);
    let mut logits = o.prefill(&prompt, 0).unwrap().pop().unwrap();
    let mut got = Vec::new();
    for (step, &want_id) in want_ids.iter().enumerate() {
        let id = argmax(&logits) as u32;
        assert_eq!(id, want_id, "{model}/{stem}: greedy id at step {step}");
        got.push(logits);
        logits = o.decode(id, prompt.len() + step).unwrap().to_vec();
    }
    check_rows(&format!("{model}/{stem}"), &got, &want);
}

#[test]
fn mla_f32_prompt16() {
    check_prompt16("tiny-mla-f32", "prefill16.npy", Some("stepwise16.npy"));
}

#[test]
fn mla_f32_greedy32() {
    check_greedy("tiny-mla-f32", "greedy32");
}

#[test]
fn legacy_f32_prompt16() {
    check_prompt16("tiny-legacy-f32", "prefill16.npy", Some("stepwise16.npy"));
}

#[test]
fn legacy_f32_greedy32() {
    check_greedy("tiny-legacy-f32", "greedy32");
}

#[test]
fn mla_q4_k_m_against_dequantized_reference() {
    check_prompt16("tiny-mla-q4_k_m", "prefill16_deqf32.npy", None);
    check_greedy("tiny-mla-q4_k_m", "greedy32_deqf32");
}

#[test]
fn rewinding_reproduces_logits() {
    let mut o = oracle("tiny-mla-f32");
    let first = o.prefill(&PROMPT16[..6], 0).unwrap();
    // Overwrite positions 3.. with other tokens, then rewind to 3 and replay the original ones.
    o.prefill(&[7, 8, 9], 3).unwrap();
    let again = o.prefill(&PROMPT16[3..6], 3).unwrap();
    assert_eq!(&first[3..], &again[..]);
}

#[test]
fn trace_ends_in_the_same_logits() {
    let mut o = oracle("tiny-mla-f32");
    o.prefill(&PROMPT16[..4], 0).unwrap();
    let plain = o.decode(PROMPT16[4], 4).unwrap().to_vec();
    let trace = o.decode_with_trace(PROMPT16[4], 4).unwrap();
    assert_eq!(trace.layers.len(), o.config().n_layer);
    assert_eq!(trace.logits, plain);
    assert_ne!(trace.layers[0], trace.embedding);
}
