//! `ingot gate --backend cuda`: the captured CUDA graph must pick the reference's tokens
//! (near-ties excepted) on tiny models of both layouts against the oracle, and on lite-4l
//! (DeepSeek-V2-Lite's real dimensions, 16 heads, so attention takes the `flash_latent_mma`
//! path that only 16-head models use) against the CPU backend.
//!
//! The batched prefill is gated on a 16-head tiny model: the GPU's prefill chunks
//! against the CPU backend's chunked prefill, then a decode step after them. The NextN/MTP block
//! against the oracle, and greedy output with drafts against greedy without, on the trained model
//! and tiny-glm; the speculative verify graph against decode steps, bit for bit, on lite-4l.
//!
//! Without a GPU each test says so and passes; with `INGOT_REQUIRE_GPU=1` (set by
//! `scripts/device-check.sh`) it fails instead, before any model is made. The lite-4l model is
//! read from `INGOT_LITE4L_GGUF` when that names a file (the device script makes it once with
//! `ingot synth --preset lite-4l --quant q4_k_m`) and synthesized into a temporary folder
//! otherwise.

#[path = "../../graph/tests/support/mod.rs"]
mod support;

#[path = "../../graph/tests/support/drafting.rs"]
mod drafting;

use std::path::PathBuf;

use ingot_gates::{run_gate_against, Band, GateBackend, GateOptions, Reference};
use ingot_gguf::GgufFile;
use ingot_graph::exec::cuda::CudaExecutor;
use ingot_model::{CpuBackend, Decoder};
use ingot_synth::{synthesize, Dims, Layout, Preset, QuantMix, SynthOptions};
use ingot_testdata::Lcg;

/// BOS then "The quick" in the synthetic vocabularies' byte-level tokens.
const PROMPT: &[u32] = &[510, 84, 104, 101, 32, 113];

/// Whether GPU 0 opens; without one, prints why and returns false, or fails the test when
/// `INGOT_REQUIRE_GPU=1`.
fn gpu_present(what: &str) -> bool {
    use ingot_cuda::CudaError;
    match ingot_cuda::Gpu::new(0) {
        Ok(_) => true,
        Err(e @ (CudaError::NoDriver | CudaError::NoDevice { .. })) => {
            let msg = ingot_cuda::no_gpu_message(what, &e);
            assert!(!ingot_cuda::gpu_required(), "{msg}");
            eprintln!("{msg}");
            false
        }
        Err(e) => panic!("{what}: the CUDA driver failed to open GPU 0: {e}"),
    }
}

fn gate(path: &std::path::Path, name: &str, reference: Reference, steps: usize) {
    gate_within(path, name, reference, steps, None);
}

fn gate_within(
    path: &std::path::Path,
    name: &str,
    reference: Reference,
    steps: usize,
    vram: Option<ingot_engine::VramBudget>,
) {
    let file = GgufFile::open(path).expect("open");
    let opts = GateOptions {
        backend: GateBackend::Cuda,
        prompt: PROMPT.to_vec(),
        steps,
        band: Band::default(),
        vram,
        cache_type: Default::default(),
    };
    let report = run_gate_against(&file, &opts, reference)
        .unwrap_or_else(|e| panic!("{name}: cuda gate could not run: {e}"));
    println!("{name} on the GPU vs {reference:?}\n{report}");
    assert!(report.passed(), "{name}: cuda gate failed");
}

fn tiny64(layout: Layout, mix: QuantMix) {
    let name = format!("tiny64 {layout:?} {mix}");
    if !gpu_present(&name) {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("model.gguf");
    support::write_model(&path, &support::tiny64(), layout, mix, 7);
    gate(&path, &name, Reference::Oracle, 16);
}

#[test]
fn tiny64_mla_q4_k_m_cuda() {
    tiny64(Layout::Mla, QuantMix::Q4KM);
}

#[test]
fn tiny64_legacy_q4_k_m_cuda() {
    tiny64(Layout::Legacy, QuantMix::Q4KM);
}

#[test]
fn tiny64_mla_q3_k_m_cuda() {
    tiny64(Layout::Mla, QuantMix::Q3KM);
}

/// Experts beyond VRAM on the GPU: a 2.2 MiB budget keeps 10 of the tiny model's 16
/// experts per layer in VRAM slots, the rest in host-mapped memory read over the link, the LRU
/// cache refilled between replays. Proven in ptx-sim (`ingot-bench`'s `expert_cache` test); this
/// runs the same plan through the CUDA executor's host-mapped path.
#[test]
fn tiny_experts_beyond_vram_cuda() {
    let name = "tiny mla q4_k_m, experts beyond VRAM";
    if !gpu_present(name) {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("model.gguf");
    let opts = SynthOptions::q4_k_m(Preset::Tiny);
    synthesize(&opts, &path, false).expect("synthesize");
    let budget = ingot_engine::VramBudget {
        bytes: 2_300_000,
        policy: ingot_engine::Policy::Lru,
        route_bonus: 0.0,
    };
    gate_within(&path, name, Reference::Oracle, 16, Some(budget));
}

/// lite-4l q4_k_m: `INGOT_LITE4L_GGUF` when it names a file, else synthesized into the returned
/// temporary folder (kept alive by the caller).
fn lite4l() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let given = std::env::var_os("INGOT_LITE4L_GGUF")
        .map(PathBuf::from)
        .filter(|p| p.is_file());
    let path = match given {
        Some(p) => p,
        None => {
            let p = dir.path().join("lite-4l.gguf");
            let opts = SynthOptions::q4_k_m(Preset::Lite4l);
            synthesize(&opts, &p, false).expect("synthesize lite-4l");
            p
        }
    };
    (dir, path)
}

/// 16 heads: the plan launches `flash_latent_mma`; judged against the CPU backend because the
/// oracle's f32 copy of lite-4l's weights would need about 10 GB and minutes per step.
#[test]
fn lite4l_mla_q4_k_m_cuda_vs_cpu() {
    let name = "lite-4l mla q4_k_m";
    if !gpu_present(name) {
        return;
    }
    let (_dir, path) = lite4l();
    let file = GgufFile::open(&path).expect("open lite-4l");
    let plan = ingot_graph::build_plan(
        file.header(),
        ingot_graph::PlanOptions::for_ctx(PROMPT.len() + 8),
    )
    .expect("plan");
    assert!(
        plan.nodes.iter().any(|n| n.kernel == "flash_latent_mma"),
        "lite-4l must take the mma flash path"
    );
    gate(&path, name, Reference::Cpu, 8);
}

/// [`support::tiny64`] with 16 heads: one whole head group of the flash kernels
/// (`graph/tests/sim_prefill.rs` uses the same).
fn tiny16() -> Dims {
    Dims {
        n_head: 16,
        ..support::tiny64()
    }
}

/// `max |Δlogit|` between `gpu` and the CPU's `cpu` within the gate's band (half the CPU
/// logits' standard deviation, at least 0.5: gates/src/band.rs), and the same top-1 where the
/// CPU's margin (top-1 minus top-2) is wider than the band.
fn check_against_cpu(label: &str, gpu: &[f32], cpu: &[f32]) {
    assert_eq!(gpu.len(), cpu.len(), "{label}: vocabulary");
    let band = Band::default().logit_band(cpu);
    let d = ingot_testdata::max_abs_diff(gpu, cpu);
    let argmax = |v: &[f32]| {
        v.iter()
            .enumerate()
            .fold(
                (0, f32::NEG_INFINITY),
                |m, (i, &x)| if x > m.1 { (i, x) } else { m },
            )
            .0
    };
    let mut sorted = cpu.to_vec();
    sorted.sort_by(|x, y| y.total_cmp(x));
    let margin = sorted[0] - sorted[1];
    let (top_gpu, top_cpu) = (argmax(gpu), argmax(cpu));
    println!(
        "{label}: GPU vs CPU max |Δlogit| {d:.4} (band {band:.4}); top-1 {top_gpu} vs {top_cpu} \
         (CPU margin {margin:.4})"
    );
    assert!(
        d <= band,
        "{label}: max |Δlogit| {d} outside the band {band}"
    );
    if margin > band {
        assert_eq!(top_gpu, top_cpu, "{label}: top-1 (CPU margin {margin})");
    }
}

/// The GPU's prefill chunks against the CPU backend's chunked prefill: 21 tokens at 0 (one
/// chunk of the 64-token plan), 9 at 21 (the 16-token plan, whose rows attend the first
/// chunk's cache rows), then one decode step at 30 through the decode graph, which reads every
/// cache row the chunks wrote. Each within the gate's logit band, same top-1 where the CPU's
/// margin is clear.
#[test]
fn tiny16_prefill_chunks_cuda_vs_cpu() {
    for (layout, mix) in [
        (Layout::Mla, QuantMix::Q4KM),
        (Layout::Legacy, QuantMix::Q8_0),
    ] {
        let name = format!("tiny16 {layout:?} {mix}, batched prefill");
        if !gpu_present(&name) {
            return;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("model.gguf");
        support::write_model(&path, &tiny16(), layout, mix, 11);
        let file = GgufFile::open(&path).expect("open");
        let opts = ingot_graph::PlanOptions::for_ctx(64);
        let (mut gpu, info) = CudaExecutor::load(&file, opts, false)
            .unwrap_or_else(|e| panic!("{name}: cuda load: {e}"));
        assert_eq!(gpu.prefill_unavailable(), None, "{name}");
        assert_eq!(gpu.prefill_buckets(), [16, 64], "{name}");
        println!(
            "{name}: {} (eager {}), prefill plans {:?}, {} bytes of their activations",
            info.device, info.eager, info.prefill, info.prefill_bytes
        );
        let mut cpu = CpuBackend::load(&file, 64).expect("cpu backend");
        let vocab = cpu.config().vocab;
        let first = Lcg(1).tokens(21, vocab);
        let second = Lcg(2).tokens(9, vocab);
        let a = gpu
            .prefill_last(&first, 0)
            .unwrap_or_else(|e| panic!("{name}: GPU prefill of 21 at 0: {e}"));
        let b = cpu.prefill_last(&first, 0).expect("cpu prefill");
        check_against_cpu(&format!("{name}: 21 tokens at 0"), &a, &b);
        let a = gpu
            .prefill_last(&second, 21)
            .unwrap_or_else(|e| panic!("{name}: GPU prefill of 9 at 21: {e}"));
        let b = cpu.prefill_last(&second, 21).expect("cpu prefill");
        check_against_cpu(&format!("{name}: 9 tokens at 21"), &a, &b);
        let a = gpu
            .decode(7, 30)
            .unwrap_or_else(|e| panic!("{name}: GPU decode at 30: {e}"))
            .to_vec();
        let b = cpu.decode(7, 30).expect("cpu decode").to_vec();
        check_against_cpu(&format!("{name}: decode at 30"), &a, &b);
    }
}

/// The prefill chunk graphs at the largest buckets, at V2-Lite's real dimensions (lite-4l: 16
/// heads, 64 experts): 200 tokens at 0 (a chunk of the 256-token plan), 600 at 200 (a full
/// 512-token chunk, then 88 tokens in a 256 one), then a decode step at 800, each against the CPU
/// backend's chunked prefill within the gate's band.
#[test]
fn lite4l_prefill_chunks_256_512_cuda_vs_cpu() {
    let name = "lite-4l q4_k_m, batched prefill at 256 and 512";
    if !gpu_present(name) {
        return;
    }
    let (_dir, path) = lite4l();
    let file = GgufFile::open(&path).expect("open lite-4l");
    let ctx = 1024;
    let (mut gpu, info) = CudaExecutor::load(&file, ingot_graph::PlanOptions::for_ctx(ctx), false)
        .unwrap_or_else(|e| panic!("{name}: cuda load: {e}"));
    assert_eq!(gpu.prefill_unavailable(), None, "{name}");
    assert_eq!(gpu.prefill_buckets(), [16, 64, 256, 512], "{name}");
    let buckets = |len, pos| -> Vec<Option<usize>> {
        ingot_graph::prefill_chunks(len, pos, ctx, &gpu.prefill_buckets())
            .iter()
            .map(|c| c.bucket)
            .collect()
    };
    assert_eq!(buckets(200, 0), [Some(256)], "{name}: chunking of 200 at 0");
    assert_eq!(
        buckets(600, 200),
        [Some(512), Some(256)],
        "{name}: chunking of 600 at 200"
    );
    println!(
        "{name}: {} (eager {}), {:?}",
        info.device, info.eager, info.prefill
    );
    let mut cpu = CpuBackend::load(&file, ctx).expect("cpu backend");
    let vocab = cpu.config().vocab;
    let first = Lcg(3).tokens(200, vocab);
    let second = Lcg(4).tokens(600, vocab);
    for (tokens, pos) in [(&first, 0), (&second, 200)] {
        let label = format!("{name}: {} tokens at {pos}", tokens.len());
        let a = gpu
            .prefill_last(tokens, pos)
            .unwrap_or_else(|e| panic!("{label}: GPU prefill: {e}"));
        let b = cpu.prefill_last(tokens, pos).expect("cpu prefill");
        check_against_cpu(&label, &a, &b);
    }
    let a = gpu
        .decode(7, 800)
        .unwrap_or_else(|e| panic!("{name}: GPU decode at 800: {e}"))
        .to_vec();
    let b = cpu.decode(7, 800).expect("cpu decode").to_vec();
    check_against_cpu(&format!("{name}: decode at 800"), &a, &b);
}

/// Replays: one whole decode step of lite-4l (every last-block tail of the plan inside it:
/// router, rope, norms, merge_v_b, argmax-free logits) run 500 times at the same position over
/// the same cache, every logit bit-identical to the first run. A missing fence or barrier, or a
/// reduction whose order depends on timing, shows as a replay that differs.
#[test]
fn lite4l_step_replays_are_bit_identical() {
    const REPLAYS: usize = 500;
    let name = "lite-4l q4_k_m, one step replayed";
    if !gpu_present(name) {
        return;
    }
    let (_dir, path) = lite4l();
    let file = GgufFile::open(&path).expect("open lite-4l");
    let (mut gpu, _) = CudaExecutor::load(&file, ingot_graph::PlanOptions::for_ctx(64), false)
        .unwrap_or_else(|e| panic!("{name}: cuda load: {e}"));
    let pos = PROMPT.len();
    gpu.prefill_last(PROMPT, 0)
        .unwrap_or_else(|e| panic!("{name}: prefill: {e}"));
    let first: Vec<u32> = gpu
        .decode(7, pos)
        .unwrap_or_else(|e| panic!("{name}: decode: {e}"))
        .iter()
        .map(|x| x.to_bits())
        .collect();
    for replay in 1..REPLAYS {
        // Decoding at `pos` again rewinds to it: the step rewrites the same cache row.
        let logits = gpu
            .decode(7, pos)
            .unwrap_or_else(|e| panic!("{name}: replay {replay}: {e}"));
        if let Some(i) = (0..first.len()).find(|&i| logits[i].to_bits() != first[i]) {
            panic!(
                "{name}: replay {replay} differs from the first run at logit {i}: {} vs {}",
                logits[i],
                f32::from_bits(first[i])
            );
        }
    }
    println!("{name}: {REPLAYS} runs of the step at position {pos}: every logit bit-identical");
}

/// Programmatic dependent launch (Hopper): the decode graph with every node after the first
/// launched early (each kernel waits on its predecessor, `ingot_kernels::grid_dep`) gives the
/// same logits, bit for bit, as the graph with plain launches, over a prompt and 16 greedy steps
/// of lite-4l. On a card before sm_90 nothing launches early and the test says so.
#[test]
fn lite4l_early_launches_give_the_logits_of_plain_launches() {
    let name = "lite-4l q4_k_m, early vs plain launches";
    if !gpu_present(name) {
        return;
    }
    let (_dir, path) = lite4l();
    let file = GgufFile::open(&path).expect("open lite-4l");
    let (mut gpu, _) = CudaExecutor::load(&file, ingot_graph::PlanOptions::for_ctx(64), false)
        .unwrap_or_else(|e| panic!("{name}: cuda load: {e}"));
    let run = |gpu: &mut CudaExecutor, early: bool| -> Vec<Vec<u32>> {
        let on = gpu
            .set_early_launch(early)
            .unwrap_or_else(|e| panic!("{name}: recapture: {e}"));
        assert!(!on || early, "{name}: early launches on when asked off");
        let mut out = vec![gpu.prefill_last(PROMPT, 0).expect("prefill")];
        for pos in PROMPT.len()..PROMPT.len() + 16 {
            let token = ingot_model::math::argmax(out.last().unwrap()) as u32;
            out.push(gpu.decode(token, pos).expect("decode").to_vec());
        }
        out.iter()
            .map(|l| l.iter().map(|x| x.to_bits()).collect())
            .collect()
    };
    let early = run(&mut gpu, true);
    if !gpu.early_launch() {
        println!(
            "{name}: this card launches no kernel early (sm_90 and later do): nothing to compare"
        );
        return;
    }
    let plain = run(&mut gpu, false);
    for (i, (a, b)) in early.iter().zip(&plain).enumerate() {
        if let Some(j) = (0..a.len()).find(|&j| a[j] != b[j]) {
            panic!(
                "{name}: step {i}, logit {j}: early {} vs plain {}",
                f32::from_bits(a[j]),
                f32::from_bits(b[j])
            );
        }
    }
    println!("{name}: {} steps, every logit bit-identical", early.len());
}

/// The NextN/MTP block on the GPU (`graph/src/exec/cuda/mtp.rs`), on the trained model (Q8_0, an
/// MoE block that drafts well) and tiny-glm (f32, 20 heads, random drafts): the block against
/// the oracle on the oracle's hidden states within the simulator's bands (the GPU runs the same
/// PTX; `drafting::check_bands` says why they hold), then greedy with k = 1, 2, 3 drafts equal
/// to greedy without, token for token, on the GPU.
#[test]
fn cuda_mtp_drafts_change_no_token() {
    let name = "the NextN/MTP block on the GPU";
    if !gpu_present(name) {
        return;
    }
    let trained = drafting::trained_ids(18);
    mtp_case("trained-rust-std", &trained, 15, &trained[..12], 16);
    let tiny_glm = [&drafting::TINY_GLM_PROMPT[..], &[33]].concat();
    mtp_case("tiny-glm-f32", &tiny_glm, 8, &drafting::TINY_GLM_PROMPT, 8);
}

/// The block against the oracle over `ids[..=last + 1]`, then `n` greedy tokens after `prompt`
/// with and without drafts.
fn mtp_case(model: &str, ids: &[u32], last: usize, prompt: &[u32], n: usize) {
    let file = drafting::open(model);
    let opts = ingot_graph::PlanOptions::for_ctx(drafting::CTX);
    let (mut gpu, _) = CudaExecutor::load(&file, opts, false)
        .unwrap_or_else(|e| panic!("{model}: cuda load: {e}"));
    // The comparison reads each decode step's hidden state, which drafting alone turns on.
    gpu.keep_hidden();
    drafting::check_bands(model, drafting::compare(model, &mut gpu, ids, last));
    let total = drafting::check_equal(model, "the GPU", &mut gpu, prompt, n);
    assert!(total.drafted > 0, "{model}: {total:?}");
}

/// The speculative verify graph (`graph/src/exec/cuda/verify.rs`): on lite-4l (the mma flash,
/// the chained MoE-and-projections launches), verifies of 2, 3 and 4 positions give every
/// position's logits and hidden state bit for bit as decode steps of the same tokens at the same
/// positions over the same cache (the steps run second and rewrite the rows the verify wrote),
/// as `graph/tests/sim_verify.rs` proves in the simulator; an argmax verify's tokens are the
/// host's argmax of those logits.
#[test]
fn lite4l_verify_graph_equals_decode_steps() {
    let name = "lite-4l q4_k_m, verify graph vs decode steps";
    if !gpu_present(name) {
        return;
    }
    let (_dir, path) = lite4l();
    let file = GgufFile::open(&path).expect("open lite-4l");
    let (mut gpu, _) = CudaExecutor::load(&file, ingot_graph::PlanOptions::for_ctx(64), false)
        .unwrap_or_else(|e| panic!("{name}: cuda load: {e}"));
    gpu.prefill_last(PROMPT, 0)
        .unwrap_or_else(|e| panic!("{name}: prefill: {e}"));
    let tokens = [7u32, 300, 42, 1000];
    // Each verify starts one row after the previous one's first: a rewind over its rows.
    for (pos, m) in (PROMPT.len()..).zip(2..=4) {
        let t = &tokens[..m];
        let verify = gpu
            .forward_rows(t, pos, ingot_model::Rows::All)
            .unwrap_or_else(|e| panic!("{name}: verify of {m}: {e}"));
        let steps = ingot_model::forward_by_decode(&mut gpu, t, pos, ingot_model::Rows::All)
            .unwrap_or_else(|e| panic!("{name}: steps of {m}: {e}"));
        for (what, a, b) in [
            ("logits", &verify.logits, &steps.logits),
            ("hidden", &verify.hidden, &steps.hidden),
        ] {
            assert_eq!(a.len(), b.len(), "{name}: {m} positions, {what}");
            if let Some(i) = (0..a.len()).find(|&i| a[i].to_bits() != b[i].to_bits()) {
                panic!(
                    "{name}: {m} positions at {pos}, {what} {i}: {} vs {}",
                    a[i], b[i]
                );
            }
        }
        // Each position's argmax copied back from the device (its step state) is the host's.
        let a = gpu
            .forward_rows(t, pos, ingot_model::Rows::Argmax)
            .unwrap_or_else(|e| panic!("{name}: argmax verify of {m}: {e}"));
        let vocab = steps.logits.len() / m;
        let want: Vec<u32> = steps
            .logits
            .chunks_exact(vocab)
            .map(ingot_model::argmax)
            .collect();
        assert_eq!(a.argmax, want, "{name}: {m} positions at {pos}, argmax");
    }
    println!("{name}: verifies of 2, 3 and 4 positions bit-identical to decode steps");
}
