//! The CPU backend's parallel and SIMD paths against its serial and scalar ones. Per output row the
//! computation is the same whichever thread runs it and whichever kernel set is used, so every comparison
//! here is bit-exact.

use ingot_gguf::GgufFile;
use ingot_quant::cpu_dot::Isa;

use super::batch::{self, Product};
use super::matmul::{Activation, QMatrix};
use super::CpuBackend;
use crate::error::ModelError;

use ingot_testdata::golden_dir;

fn open_tiny() -> GgufFile {
    let path = golden_dir().join("tiny-mla-q4_k_m/model.gguf");
    GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

/// Deterministic inputs in [−1, 1).
fn input(n: usize, seed: usize) -> Activation {
    let x: Vec<f32> = (0..n)
        .map(|i| ((i * 7919 + seed * 104_729) % 2000) as f32 / 1000.0 - 1.0)
        .collect();
    let mut a = Activation::new(n);
    a.load(&x);
    a
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Products of every activation kind (q8_0 for Q5_0, q8_K for Q4_K, f32 for the F32 router) and row counts
/// that are not multiples of the chunk size, so chunks straddle product boundaries.
fn mixed_products(file: &GgufFile) -> Vec<Product<'_>> {
    let m = |name: &str| QMatrix::from_tensor(file, name, Isa::detect()).unwrap();
    vec![
        Product {
            m: m("blk.1.attn_q.weight").row_range(0, 191),
            input: 0,
        },
        Product {
            m: m("blk.1.ffn_gate_exps.weight").row_range(5, 1013),
            input: 0,
        },
        Product {
            m: m("blk.0.ffn_down.weight"),
            input: 1,
        },
        Product {
            m: m("blk.1.ffn_gate_inp.weight").row_range(0, 13),
            input: 0,
        },
        Product {
            m: m("blk.1.ffn_up_exps.weight").row_range(3, 1021),
            input: 0,
        },
    ]
}

#[test]
fn a_parallel_batch_equals_its_products_one_by_one() {
    let file = open_tiny();
    let products = mixed_products(&file);
    let mut want = Vec::new();
    for p in &products {
        let mut x = input(p.m.cols(), p.input);
        let mut out = vec![0.0f32; p.m.rows()];
        p.m.matvec_serial(&mut x, &mut out).unwrap();
        want.extend(out);
    }
    for threads in [1, 2, 3] {
        let mut inputs = [input(128, 0), input(256, 1)];
        let mut got = vec![f32::NAN; want.len() + 7];
        pool(threads)
            .install(|| batch::run(&products, &mut inputs, &mut got))
            .unwrap();
        assert_eq!(bits(&got[..want.len()]), bits(&want), "{threads} threads");
        assert!(
            got[want.len()..].iter().all(|v| v.is_nan()),
            "rows past the batch were written"
        );
    }
}

#[test]
fn a_malformed_batch_is_refused() {
    let file = open_tiny();
    let products = mixed_products(&file);
    let rows: usize = products.iter().map(|p| p.m.rows()).sum();
    let run = |inputs: &mut [Activation], out_len: usize| {
        batch::run(&products, inputs, &mut vec![0.0; out_len])
    };
    let quant_error = |r: Result<(), ModelError>| matches!(r, Err(ModelError::Quant { .. }));
    assert!(quant_error(run(
        &mut [input(128, 0), input(256, 1)],
        rows - 1
    )));
    assert!(quant_error(run(&mut [input(128, 0)], rows)));
    assert!(quant_error(run(&mut [input(128, 0), input(128, 1)], rows)));
    assert!(run(&mut [input(128, 0), input(256, 1)], rows).is_ok());
}

/// Teacher-forced logits of `tokens` from a backend on `isa`, run on a pool of `threads`.
fn logits(file: &GgufFile, isa: Isa, threads: usize, tokens: &[u32]) -> Vec<Vec<u32>> {
    pool(threads).install(|| {
        let mut cpu = CpuBackend::load_with_isa(file, tokens.len(), isa).unwrap();
        cpu.prefill(tokens, 0)
            .unwrap()
            .iter()
            .map(|l| bits(l))
            .collect()
    })
}

#[test]
fn every_isa_and_thread_count_decodes_the_same_bits() {
    let file = open_tiny();
    let tokens: Vec<u32> = (0..12).map(|i| (i * 37 + 5) % 512).collect();
    let want = logits(&file, Isa::Scalar, 1, &tokens);
    for isa in [Isa::Scalar, Isa::Avx2, Isa::AvxVnni, Isa::Avx512] {
        if !isa.is_available() {
            eprintln!("note: this CPU lacks {isa:?}; not compared");
            continue;
        }
        for threads in [1, 2, 3] {
            assert!(
                logits(&file, isa, threads, &tokens) == want,
                "{isa:?} on {threads} threads differs from Scalar on 1"
            );
        }
    }
}

#[test]
fn an_unavailable_isa_is_refused() {
    let file = open_tiny();
    if !Isa::Avx2.is_available() {
        assert!(matches!(
            CpuBackend::load_with_isa(&file, 4, Isa::Avx2),
            Err(ModelError::Unsupported(_))
        ));
    }
    assert!(CpuBackend::load_with_isa(&file, 4, Isa::Scalar).is_ok());
}

/// The chunked prefill leaves the cache and the last logits exactly as feeding the tokens one by one: on
/// both attention layouts, the low-rank query and sigmoid/group routing of tiny-v3, for chunk sizes that
/// split the prompt unevenly, after a rewind, and continuing after earlier positions.
#[test]
fn chunked_prefill_equals_stepwise_bit_for_bit() {
    use ingot_synth::{synthesize, Layout, Preset, QuantMix, SynthOptions};
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (Preset::Tiny, Layout::Mla, QuantMix::Q4KM),
        (Preset::Tiny, Layout::Legacy, QuantMix::Q3KM),
        (Preset::TinyV3, Layout::Mla, QuantMix::Q4KM),
        (Preset::TinyGlm, Layout::Mla, QuantMix::Q8_0),
    ];
    let prompt: Vec<u32> = (0..23).map(|i| (i * 37 + 11) % 300).collect();
    for (preset, layout, mix) in cases {
        let opts = SynthOptions {
            preset,
            layout,
            mix,
            seed: 9,
        };
        let path = dir.path().join(format!("{}.gguf", opts.model_name()));
        synthesize(&opts, &path, false).unwrap();
        let file = GgufFile::open(&path).unwrap();
        let mut step = CpuBackend::load(&file, 64).unwrap();
        // Two positions decoded first, so the chunks continue a cache (start_pos = 2).
        let mut want = Vec::new();
        for (pos, &t) in [5u32, 6].iter().chain(&prompt).enumerate() {
            want = step.decode(t, pos).unwrap().to_vec();
        }
        for ubatch in [1, 4, 7, 23, 512] {
            let mut chunked = CpuBackend::load(&file, 64).unwrap();
            // A rewind first: positions 0..5 are written, then 2.. is prefilled again over them.
            chunked.decode(5, 0).unwrap();
            chunked.decode(6, 1).unwrap();
            chunked.prefill_chunked(&[1, 2, 3], 2, ubatch).unwrap();
            let got = chunked.prefill_chunked(&prompt, 2, ubatch).unwrap();
            let case = format!("{preset:?} {layout:?} {mix:?} ubatch {ubatch}");
            assert!(bits(&got) == bits(&want), "{case}: last logits differ");
            let filled = 2 + prompt.len();
            let row = step.config.cache_row();
            for (il, (a, b)) in chunked.cache.iter().zip(&step.cache).enumerate() {
                let same = bits(&a.rows[..filled * row]) == bits(&b.rows[..filled * row]);
                assert!(same, "{case}: cache of layer {il} differs");
            }
            assert_eq!(chunked.filled, filled);
        }
    }
}

#[test]
fn chunked_prefill_refuses_what_decode_refuses_and_changes_nothing() {
    let file = open_tiny();
    let mut dec = CpuBackend::load(&file, 8).unwrap();
    dec.decode(1, 0).unwrap();
    let before = dec.cache.clone();
    for (tokens, start, want) in [
        (vec![1u32, 2], 2usize, "skips positions"),
        (vec![1; 8], 1, "outside the context"),
        (vec![1, 999_999], 1, "outside the vocabulary"),
        (vec![], 1, "prompt is empty"),
    ] {
        let err = dec
            .prefill_chunked(&tokens, start, 4)
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{tokens:?} at {start}: {err}");
        assert!(
            dec.cache == before,
            "{tokens:?} at {start}: the cache changed"
        );
        assert_eq!(dec.filled, 1);
    }
}
