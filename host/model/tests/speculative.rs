//! The NextN/MTP block as a drafter, and speculative greedy decoding with it.
//!
//! * The oracle's MTP head against PyTorch's on the trained model (`trained-rust-std/mtp-ref.tsv`,
//!   made by `scripts/train/mtp_ref.py` from the same Q8_0-grid weights), and the CPU backend's
//!   against the oracle's.
//! * Greedy output with drafts (k = 1, 2, 3) equals greedy without, token for token, on the trained
//!   model (whose drafts are often right: the accepting path) and tiny-glm (random weights: drafts
//!   almost always wrong, the rewinding path), on the oracle and the CPU backend.
//! * The drafts themselves: with k = 1 the accepted count equals what a teacher-forced pass of the
//!   MTP block over the final sequence predicts, which fails if a rewound MTP row were left stale.

mod common;

use common::argmax;
use ingot_gguf::GgufFile;
use ingot_model::speculative::{greedy_drafted, greedy_plain, Drafts, SpecStats, Speculative};
use ingot_model::{CpuBackend, Decoder, Oracle, Rows, Sampler, SamplerConfig};

const TRAINED: &str = "trained-rust-std";
const CTX: usize = 256;

fn open(model: &str) -> GgufFile {
    let path = ingot_testdata::golden_model(model);
    GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One row of `mtp-ref.tsv`: PyTorch's MTP head at position `pos` of a held-out window.
struct MtpRow {
    window: usize,
    pos: usize,
    next: u32,
    target: u32,
    nll: f64,
    top1: u32,
    margin: f64,
}

fn mtp_reference() -> Vec<MtpRow> {
    let path = ingot_testdata::golden(&format!("{TRAINED}/mtp-ref.tsv"));
    let text = std::fs::read_to_string(&path).expect("reading mtp-ref.tsv");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 7, "row {l:?}");
            MtpRow {
                window: f[0].parse().unwrap(),
                pos: f[1].parse().unwrap(),
                next: f[2].parse().unwrap(),
                target: f[3].parse().unwrap(),
                nll: f[4].parse().unwrap(),
                top1: f[5].parse().unwrap(),
                margin: f[6].parse().unwrap(),
            }
        })
        .collect()
}

/// Window 0's ids: BOS, then the held-out ids the reference rows name (`next` at i is id i + 1).
fn window0(rows: &[MtpRow]) -> Vec<u32> {
    let rows: Vec<&MtpRow> = rows.iter().filter(|r| r.window == 0).collect();
    assert!(rows.iter().enumerate().all(|(i, r)| r.pos == i));
    let mut ids = vec![1022];
    ids.extend(rows.iter().map(|r| r.next));
    ids.push(rows.last().unwrap().target);
    ids
}

/// Teacher-forced over `ids[..=last + 1]`: the MTP logits at positions `0..=last`.
fn mtp_logits(dec: &mut dyn Decoder, ids: &[u32], last: usize) -> Vec<Vec<f32>> {
    (0..=last)
        .map(|i| {
            dec.decode(ids[i], i).unwrap();
            let h = dec.hidden().unwrap().to_vec();
            dec.mtp_step(&h, ids[i + 1], i).unwrap();
            dec.mtp_logits().unwrap().to_vec()
        })
        .collect()
}

fn nll(logits: &[f32], target: u32) -> f64 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
    let sum: f64 = logits.iter().map(|&v| (v as f64 - max).exp()).sum();
    max + sum.ln() - logits[target as usize] as f64
}

/// Positions of window 0 the MTP checks run over (of 254): enough for hundreds of confident
/// positions, small enough for a debug build.
const POSITIONS: usize = 160;
/// PyTorch's top-1 must beat its top-2 by this many logits for the top-1 to have to agree: the
/// oracle (f64 sums of the same f32 weights) differs from PyTorch's f32 by ~1e-4, the CPU backend
/// (8-bit activations) from the oracle by ~1e-2.
const MARGIN: f64 = 0.5;

#[test]
fn oracle_mtp_head_matches_pytorch() {
    let rows = mtp_reference();
    let ids = window0(&rows);
    let file = open(TRAINED);
    let mut oracle = Oracle::load(&file, CTX).unwrap();
    let got = mtp_logits(&mut oracle, &ids, POSITIONS - 1);
    let (mut confident, mut worst_nll, mut sum_ours, mut sum_ref) = (0, 0.0f64, 0.0, 0.0);
    for (r, l) in rows.iter().zip(&got) {
        let ours = nll(l, r.target);
        worst_nll = worst_nll.max((ours - r.nll).abs());
        sum_ours += ours;
        sum_ref += r.nll;
        if r.margin > MARGIN {
            confident += 1;
            assert_eq!(argmax(l) as u32, r.top1, "MTP top-1 at position {}", r.pos);
        }
    }
    // Per-position nll within 2e-3 nats: f64 against f32 accumulation of the same weights (measured
    // worst 2e-4); a wrong input order, norm or hidden state moves it by nats.
    assert!(
        worst_nll < 2e-3,
        "worst per-position MTP nll difference {worst_nll}"
    );
    assert!(confident >= 40, "only {confident} confident positions");
    eprintln!(
        "oracle MTP over {POSITIONS} positions: mean nll {:.4} (PyTorch {:.4}), worst |diff| {worst_nll:.2e}, {confident} confident top-1 agree",
        sum_ours / POSITIONS as f64,
        sum_ref / POSITIONS as f64
    );
}

/// The CPU backend's MTP block against the oracle's on the same inputs (the oracle's hidden states,
/// so the main models' own differences stay out: at a routing near-tie of a main layer those reach
/// whole logits, as the gates excuse).
#[test]
fn cpu_mtp_block_matches_oracle() {
    let rows = mtp_reference();
    let ids = window0(&rows);
    let file = open(TRAINED);
    let mut oracle = Oracle::load(&file, CTX).unwrap();
    let mut cpu = CpuBackend::load(&file, CTX).unwrap();
    let mut worst = 0.0f32;
    let (mut sum_w, mut sum_g) = (0.0, 0.0);
    for (i, r) in rows.iter().take(POSITIONS).enumerate() {
        oracle.decode(ids[i], i).unwrap();
        let h = oracle.hidden().unwrap().to_vec();
        oracle.mtp_step(&h, ids[i + 1], i).unwrap();
        cpu.mtp_step(&h, ids[i + 1], i).unwrap();
        let w = oracle.mtp_logits().unwrap();
        let g = cpu.mtp_logits().unwrap();
        worst = worst.max(common::max_abs_diff(w, g));
        sum_w += nll(w, r.target);
        sum_g += nll(g, r.target);
        if r.margin > MARGIN {
            assert_eq!(argmax(g), argmax(w), "CPU MTP top-1 at position {i}");
        }
    }
    let mean_diff = (sum_w - sum_g).abs() / POSITIONS as f64;
    // Q8_0 activations (the CPU backend's, as llama.cpp's) through eh_proj, one MoE layer and the
    // head move logits by about a tenth here (measured worst 0.14 over these positions, as the main
    // model's layers move its logits); a wrong norm, concatenation order or cache row moves them by
    // whole units.
    assert!(
        worst < 0.3,
        "CPU MTP logits differ from the oracle's by {worst}"
    );
    assert!(mean_diff < 0.01, "mean MTP nll differs by {mean_diff}");
    eprintln!(
        "cpu MTP block vs oracle: worst |logit diff| {worst:.4}, mean nll diff {mean_diff:.5}"
    );
}

/// The prompt: the first `len` ids of held-out window 0.
fn trained_prompt(len: usize) -> Vec<u32> {
    window0(&mtp_reference())[..len].to_vec()
}

fn plain_greedy(dec: &mut dyn Decoder, prompt: &[u32], n: usize) -> Vec<u32> {
    greedy_plain(dec, prompt, n, || ()).unwrap()
}

fn spec_greedy(dec: &mut dyn Decoder, prompt: &[u32], n: usize, k: usize) -> (Vec<u32>, SpecStats) {
    spec_greedy_in(dec, prompt, n, k, CTX)
}

fn spec_greedy_in(
    dec: &mut dyn Decoder,
    prompt: &[u32],
    n: usize,
    k: usize,
    ctx: usize,
) -> (Vec<u32>, SpecStats) {
    let (out, stats) = greedy_drafted(dec, prompt, (n, Drafts::new(k), ctx), || ()).unwrap();
    assert_eq!(out.len(), n, "a step handed out more than asked");
    (out, stats)
}

/// With k = 1 each step's draft is the MTP block's guess from the verified sequence; replays the
/// steps on a teacher-forced pass over the output and counts the drafts that were right.
fn expected_accepted(dec: &mut dyn Decoder, prompt: &[u32], out: &[u32]) -> usize {
    dec.reset();
    let seq: Vec<u32> = prompt.iter().chain(out).copied().collect();
    // guess[j]: the block's guess at the token at j + 2, from (h_j, seq[j + 1]).
    let guess: Vec<u32> = mtp_logits(dec, &seq, seq.len() - 2)
        .iter()
        .map(|l| argmax(l) as u32)
        .collect();
    let (mut n, mut accepted) = (prompt.len(), 0);
    // A step at n (seq[n] chosen) drafts guess[n − 1] for seq[n + 1] when two or more tokens are
    // wanted.
    while n < seq.len() {
        let want = seq.len() - n;
        let a = usize::from(want >= 2 && guess[n - 1] == seq[n + 1]);
        accepted += a;
        n += a + 1;
    }
    accepted
}

fn check_equal(model: &str, dec: &mut dyn Decoder, prompt: &[u32], n: usize) -> SpecStats {
    let plain = plain_greedy(dec, prompt, n);
    let mut total = SpecStats::default();
    for k in 1..=3 {
        let (spec, stats) = spec_greedy(dec, prompt, n, k);
        assert_eq!(
            spec, plain,
            "{model}: greedy with {k} drafts differs from plain greedy"
        );
        if k == 1 {
            let want = expected_accepted(dec, prompt, &spec);
            assert_eq!(stats.accepted, want, "{model}: accepted drafts with k = 1");
        }
        eprintln!(
            "{model} k={k}: {} steps, acceptance {:.3}, {:.2} tokens/step",
            stats.steps,
            stats.acceptance(),
            stats.tokens_per_step()
        );
        total.drafted += stats.drafted;
        total.accepted += stats.accepted;
    }
    total
}

#[test]
fn drafted_greedy_equals_plain_greedy_on_the_trained_model() {
    let file = open(TRAINED);
    let prompt = trained_prompt(24);
    for (name, mut dec) in [
        (
            "oracle",
            Box::new(Oracle::load(&file, CTX).unwrap()) as Box<dyn Decoder>,
        ),
        ("cpu", Box::new(CpuBackend::load(&file, CTX).unwrap())),
    ] {
        let total = check_equal(name, dec.as_mut(), &prompt, 48);
        // Both paths must have run: accepted drafts (the trained block guesses well) and rejected
        // ones.
        assert!(
            total.accepted > 0 && total.accepted < total.drafted,
            "{name}: {total:?}"
        );
    }
}

/// Drafts among a prefix of the vocabulary (a pruned draft head) leave greedy output unchanged;
/// a draft can only be accepted as an id below the prefix, so with a prefix of one id (token 0)
/// no more drafts are accepted than the output has zeros. A prefix of 0 or past the vocabulary is
/// refused.
#[test]
fn a_draft_vocabulary_prefix_changes_acceptance_only() {
    let file = open(TRAINED);
    let prompt = trained_prompt(24);
    let mut cpu = CpuBackend::load(&file, CTX).unwrap();
    let plain = plain_greedy(&mut cpu, &prompt, 48);
    let vocab = cpu.config().vocab;
    for n in [1, 256, vocab / 2, vocab] {
        for k in [1, 3] {
            let drafts = Drafts { k, vocab: Some(n) };
            let (out, stats) = greedy_drafted(&mut cpu, &prompt, (48, drafts, CTX), || ()).unwrap();
            assert_eq!(out, plain, "k {k}, draft vocabulary {n}");
            let below = out.iter().filter(|&&t| (t as usize) < n).count();
            assert!(stats.accepted <= below, "k {k}, {n}: {stats:?}");
            if n == vocab {
                let (_, full) = spec_greedy(&mut cpu, &prompt, 48, k);
                assert_eq!(stats, full, "a prefix of the whole vocabulary is no prefix");
            }
        }
    }
    for n in [0, vocab + 1] {
        let mut sampler = Sampler::new(SamplerConfig::greedy());
        let drafts = Drafts {
            k: 1,
            vocab: Some(n),
        };
        let err = Speculative::start_with(&mut cpu, &mut sampler, &prompt, drafts, CTX)
            .err()
            .expect("an empty or too large draft vocabulary");
        assert!(err.to_string().contains("draft vocabulary of"), "{err}");
    }
}

#[test]
fn drafted_greedy_equals_plain_greedy_on_tiny_glm() {
    let file = open("tiny-glm-f32");
    let prompt: Vec<u32> = vec![510, 72, 101, 108, 108, 111, 44, 32, 119];
    for (name, mut dec) in [
        (
            "oracle",
            Box::new(Oracle::load(&file, CTX).unwrap()) as Box<dyn Decoder>,
        ),
        ("cpu", Box::new(CpuBackend::load(&file, CTX).unwrap())),
    ] {
        let total = check_equal(name, dec.as_mut(), &prompt, 32);
        assert!(total.drafted > total.accepted, "{name}: {total:?}");
    }
}

/// Generating until the context is full: the last steps draft fewer than k (no position past the
/// cache), and the step after the last position is refused, not run.
#[test]
fn drafting_stops_at_the_end_of_the_context() {
    let file = open(TRAINED);
    let prompt = trained_prompt(24);
    let ctx = 40;
    let mut cpu = CpuBackend::load(&file, ctx).unwrap();
    // As `ingot run` budgets: every position up to ctx − 1 decoded, ctx − prompt tokens handed out.
    let n = ctx - prompt.len();
    let plain = plain_greedy(&mut cpu, &prompt, n);
    for k in 1..=3 {
        let (spec, _) = spec_greedy_in(&mut cpu, &prompt, n, k, ctx);
        assert_eq!(spec, plain, "{k} drafts up to the end of the context");
    }
    cpu.reset();
    let mut sampler = Sampler::new(SamplerConfig::greedy());
    let mut spec = Speculative::start(&mut cpu, &mut sampler, &prompt, 3, ctx).unwrap();
    let mut handed = 1;
    while spec.next_pos() < ctx {
        handed += spec.step(usize::MAX).unwrap().len();
    }
    assert_eq!(
        handed,
        n + 1,
        "every position decoded once, plus the token chosen at the last"
    );
    let err = spec.step(1).expect_err("no position left");
    assert!(err.to_string().contains("outside the context"), "{err}");
}

#[test]
fn cpu_verify_rows_are_the_decode_steps_bit_for_bit() {
    let file = open(TRAINED);
    let prompt = trained_prompt(20);
    let mut cpu = CpuBackend::load(&file, CTX).unwrap();
    let vocab = cpu.config().vocab;
    let mut want = Vec::new();
    for (i, &t) in prompt.iter().enumerate() {
        let l = cpu.decode(t, i).unwrap().to_vec();
        want.push((l, cpu.hidden().unwrap().to_vec()));
    }
    // Rewind to 16 and verify the last four positions in one chunk.
    let fwd = cpu.forward_rows(&prompt[16..], 16, Rows::All).unwrap();
    for j in 0..4 {
        assert_eq!(
            fwd.logits_at(j, vocab),
            want[16 + j].0.as_slice(),
            "logits of row {j}"
        );
        assert_eq!(
            fwd.hidden_at(j),
            want[16 + j].1.as_slice(),
            "hidden state of row {j}"
        );
    }
    // The argmax rows: each position's pick, the same hidden states, no logits.
    let am = cpu.forward_rows(&prompt[16..], 16, Rows::Argmax).unwrap();
    let picks: Vec<u32> = want[16..]
        .iter()
        .map(|(l, _)| ingot_model::argmax(l))
        .collect();
    assert_eq!(am.argmax, picks);
    assert!(am.logits.is_empty());
    assert_eq!(am.hidden, fwd.hidden);
}

#[test]
fn a_model_without_an_mtp_block_or_too_many_drafts_are_refused() {
    let file = open("tiny-mla-f32");
    let mut cpu = CpuBackend::load(&file, 64).unwrap();
    let mut sampler = Sampler::new(SamplerConfig::greedy());
    let err = Speculative::start(&mut cpu, &mut sampler, &[1, 2, 3], 1, 64)
        .err()
        .expect("a model without a NextN block drafts nothing");
    assert!(err.to_string().contains("no NextN/MTP block"), "{err}");

    let file = open(TRAINED);
    let mut cpu = CpuBackend::load(&file, 64).unwrap();
    let mut sampler = Sampler::new(SamplerConfig::greedy());
    let err = Speculative::start(&mut cpu, &mut sampler, &[1, 2, 3], 4, 64)
        .err()
        .expect("four drafts");
    assert!(err.to_string().contains("1 to 3"), "{err}");
}

/// Greedy with penalties: the verify returns every position's logits (the penalties need them;
/// `Rows::Argmax` is only for plain greedy), and the drafted tokens are still the plain loop's.
#[test]
fn greedy_with_penalties_drafted_equals_plain() {
    let file = open(TRAINED);
    let prompt = trained_prompt(12);
    let cfg = SamplerConfig {
        repeat_penalty: 1.3,
        frequency_penalty: 0.2,
        ..SamplerConfig::greedy()
    };
    assert!(cfg.has_penalties());
    let n = 24;
    let mut cpu = CpuBackend::load(&file, CTX).unwrap();
    let mut plain = Sampler::new(cfg);
    let mut history = prompt.clone();
    let last = cpu.prefill_last(&prompt, 0).unwrap();
    history.push(plain.sample(&last, &history));
    while history.len() < prompt.len() + n {
        let pos = history.len() - 1;
        let logits = cpu.decode(history[pos], pos).unwrap().to_vec();
        let next = plain.sample(&logits, &history);
        history.push(next);
    }
    cpu.reset();
    let mut sampler = Sampler::new(cfg);
    let mut spec = Speculative::start(&mut cpu, &mut sampler, &prompt, 2, CTX).unwrap();
    let mut out = spec.fresh().to_vec();
    while out.len() < n {
        out.extend_from_slice(spec.step(n - out.len()).unwrap());
    }
    assert_eq!(out, history[prompt.len()..]);
    assert!(spec.stats().accepted > 0, "{:?}", spec.stats());
}
