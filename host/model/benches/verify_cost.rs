//! What one speculative step costs on the CPU backend, against one decode step: the verify of `k +
//! 1` positions ([`Decoder::forward_rows`] with every position's logits, one absorbed chunk) and
//! the MTP block's step and head. Drafting pays only when a verify of `k + 1` positions costs well
//! under `k + 1` decode steps (a bandwidth-bound model); a model whose weights sit in cache pays
//! per token.
//!
//! `cargo bench -p ingot-model --bench verify_cost [-- MODEL.gguf]`: without a model, the trained
//! demo model (`testdata/golden/trained-rust-std`, 1 M parameters). Each figure is the best of
//! `REPS` runs of up to `ITERS` calls at depth 64, in wall microseconds per call.

use std::time::Instant;

use ingot_gguf::GgufFile;
use ingot_model::{CpuBackend, Decoder, Rows};

const REPS: usize = 5;
/// Most calls per run; fewer for slow calls, so each run takes about [`RUN_S`] (at least 3 calls).
const ITERS: usize = 100;
const RUN_S: f64 = 0.3;
const DEPTH: usize = 64;

fn best(mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    f();
    let once = t.elapsed().as_secs_f64();
    let iters = ((RUN_S / once) as usize).clamp(3, ITERS);
    (0..REPS)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_secs_f64() * 1e6 / iters as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let path = match std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        Some(p) => std::path::PathBuf::from(p),
        None => ingot_testdata::golden_model("trained-rust-std"),
    };
    let file = GgufFile::open(&path).expect("open the model");
    let mut cpu = CpuBackend::load(&file, DEPTH + 8).expect("load");
    let vocab = cpu.config().vocab as u32;
    let tokens: Vec<u32> = (0..DEPTH as u32 + 8)
        .map(|i| (i * 7919 + 1000) % vocab)
        .collect();
    cpu.prefill_last(&tokens[..DEPTH], 0).expect("fill");
    let decode = best(|| {
        cpu.decode(tokens[DEPTH], DEPTH).unwrap();
    });
    println!(
        "model {}, {} threads",
        path.display(),
        rayon::current_num_threads()
    );
    println!("decode step: {decode:.1} us");
    for n in 2..=4 {
        let t = best(|| {
            cpu.forward_rows(&tokens[DEPTH..DEPTH + n], DEPTH, Rows::All)
                .unwrap();
        });
        println!(
            "verify of {n} positions (k = {}): {t:.1} us = {:.2} decode steps",
            n - 1,
            t / decode
        );
    }
    if cpu.mtp_ready().is_ok() {
        let h = cpu.hidden().unwrap().to_vec();
        for (i, &t) in tokens[..DEPTH].iter().enumerate() {
            cpu.mtp_step(&h, t, i).unwrap();
        }
        let step = best(|| cpu.mtp_step(&h, tokens[DEPTH], DEPTH).unwrap());
        let head = best(|| {
            cpu.mtp_logits().unwrap();
        });
        println!(
            "MTP step: {step:.1} us = {:.2} decode steps; MTP head: {head:.1} us = {:.2}",
            step / decode,
            head / decode
        );
    }
}
