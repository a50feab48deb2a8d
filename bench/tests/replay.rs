//! The expert-cache replay on hand-made routing traces whose answers are known, and on random
//! traces where Belady's MIN must bound every online policy.

use ingot_bench::predict::card_named;
use ingot_bench::replay::{replay, Policy, ReplayOptions};
use ingot_model::trace::{Phase, Trace, TraceHeader, TraceRecord, TraceWriter};
use rand::{Rng, SeedableRng};

const EXPERT_BYTES: u64 = 1000;

/// A trace of one MoE layer (or `layers`) with `k` experts per token; `tokens[i]` lists token `i`'s
/// experts (the same in every layer) and its phase.
fn write_trace(
    dir: &std::path::Path,
    n_expert: usize,
    k: usize,
    layers: usize,
    tokens: &[(Phase, Vec<u32>)],
) -> Trace {
    let header = TraceHeader {
        model: "hand-made".into(),
        fingerprint: "0000000000000000".into(),
        n_expert,
        n_expert_used: k,
        moe_layers: (1..=layers).collect(),
        expert_bytes: vec![EXPERT_BYTES; layers],
        record_bytes: 0,
        numpy_dtype: serde_json::Value::Null,
    };
    let header = TraceHeader {
        record_bytes: (20 + 6 * layers * k).div_ceil(4) * 4,
        ..header
    };
    let path = dir.join("t.rtr");
    let mut w = TraceWriter::create(&path, header).unwrap();
    for (pos, (phase, experts)) in tokens.iter().enumerate() {
        assert_eq!(experts.len(), k);
        let routing: Vec<(u32, f32)> = (0..layers)
            .flat_map(|_| experts.iter().map(|&e| (e, 1.0 / k as f32)))
            .collect();
        w.record(&TraceRecord {
            session: 0,
            turn: 0,
            pos: pos as u32,
            token: 0,
            phase: *phase,
            routing,
        })
        .unwrap();
    }
    w.finish().unwrap();
    Trace::open(&path).unwrap()
}

fn decode(seq: &[u32]) -> Vec<(Phase, Vec<u32>)> {
    seq.iter().map(|&e| (Phase::Decode, vec![e])).collect()
}

fn opts(capacity: usize, policy: Policy) -> ReplayOptions {
    ReplayOptions {
        capacity,
        policy,
        warmup: 0,
        ubatch: 512,
    }
}

/// The textbook sequence a b c a b c with two slots: LRU misses every access, MIN keeps one of
/// them.
#[test]
fn lru_and_belady_on_the_textbook_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let t = write_trace(dir.path(), 4, 1, 1, &decode(&[0, 1, 2, 0, 1, 2]));
    let lru = replay(&t, &opts(2, Policy::Lru)).unwrap();
    assert_eq!((lru.layers[0].hits, lru.layers[0].misses), (0, 6));
    let min = replay(&t, &opts(2, Policy::Belady)).unwrap();
    // a(miss) b(miss) c(miss, evicts b: a is next used sooner) a(hit)
    // b(miss, evicts a: never used again) c(hit)
    assert_eq!((min.layers[0].hits, min.layers[0].misses), (2, 4));
    assert_eq!(min.decode.miss_bytes, 4 * EXPERT_BYTES);
    assert_eq!(min.decode.tokens, 6);
    // LFU: a, b, c each used once when c arrives; ties go to the least recent, as LRU.
    let lfu = replay(&t, &opts(2, Policy::Lfu)).unwrap();
    assert_eq!(lfu.layers[0].misses, 6);
}

/// An expert used heavily and then never again must lose its EMA score and its slot: every expert
/// decays every step. Two slots, expert 0 used 20 times, then 1 and 2 alternate 40 times: after a
/// few steps both fit and hit; a score that stopped decaying would pin expert 0 and make all 40
/// miss.
#[test]
fn ema_forgets_an_expert_that_stopped_being_used() {
    let dir = tempfile::tempdir().unwrap();
    let mut seq = vec![0; 20];
    seq.extend((0..40).map(|i| 1 + (i % 2)));
    let t = write_trace(dir.path(), 4, 1, 1, &decode(&seq));
    let r = replay(
        &t,
        &ReplayOptions {
            warmup: 20,
            ..opts(2, Policy::Ema(0.9))
        },
    )
    .unwrap();
    assert_eq!(r.decode.tokens, 40);
    assert!(r.layers[0].misses <= 10, "{:?}", r.layers[0]);
    let lru = replay(
        &t,
        &ReplayOptions {
            warmup: 20,
            ..opts(2, Policy::Lru)
        },
    )
    .unwrap();
    assert_eq!(lru.layers[0].misses, 2, "LRU drops expert 0 at once");
}

/// A prefill chunk needs the union of its tokens' experts once: 8 prompt tokens over experts {0..3}
/// cost 4 misses, not 8; split by `ubatch` 4 into two chunks, the second chunk hits what the first
/// admitted.
#[test]
fn prefill_is_counted_as_the_chunk_union() {
    let dir = tempfile::tempdir().unwrap();
    let mut tokens: Vec<(Phase, Vec<u32>)> = (0..8)
        .map(|i| (Phase::Prefill, vec![i % 4, 4 + i % 4]))
        .collect();
    tokens.push((Phase::Decode, vec![0, 7]));
    let t = write_trace(dir.path(), 16, 2, 2, &tokens);
    let r = replay(&t, &opts(8, Policy::Lru)).unwrap();
    assert_eq!((r.prefill.steps, r.prefill.tokens), (1, 8));
    assert_eq!(r.layers[0].misses, 8, "the union {{0..7}}, once");
    assert_eq!(r.layers[0].hits, 2, "the decoded token hits both");
    let r = replay(
        &t,
        &ReplayOptions {
            ubatch: 4,
            ..opts(8, Policy::Lru)
        },
    )
    .unwrap();
    assert_eq!(r.prefill.steps, 2);
    assert_eq!((r.layers[1].misses, r.layers[1].hits), (8, 8 + 2));
}

/// Belady's MIN never misses more than LRU, LFU or EMA, on random traces with locality.
#[test]
fn belady_bounds_every_policy_on_random_traces() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for case in 0..6 {
        let (n, k) = (16, 2 + case % 3);
        let tokens: Vec<(Phase, Vec<u32>)> = (0..200)
            .map(|_| {
                let mut e: Vec<u32> = Vec::new();
                while e.len() < k {
                    // Skewed: low ids are popular.
                    let x = (rng.random::<f64>().powi(2) * n as f64) as u32;
                    if !e.contains(&x) {
                        e.push(x);
                    }
                }
                (Phase::Decode, e)
            })
            .collect();
        let t = write_trace(dir.path(), n, k, 1, &tokens);
        for cap in [k, k + 2, 8, n] {
            let min = replay(&t, &opts(cap, Policy::Belady)).unwrap().layers[0].misses;
            for p in [Policy::Lru, Policy::Lfu, Policy::Ema(0.8)] {
                let m = replay(&t, &opts(cap, p)).unwrap().layers[0].misses;
                assert!(
                    min <= m,
                    "case {case}, cache {cap}: MIN {min} > {} {m}",
                    p.name()
                );
            }
            if cap == n {
                assert_eq!(
                    min as usize,
                    n.min(200 * k),
                    "a full cache only misses first uses"
                );
            }
        }
    }
}

#[test]
fn bad_options_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let t = write_trace(
        dir.path(),
        8,
        2,
        1,
        &decode(&[0, 1, 2])
            .into_iter()
            .map(|(p, mut e)| {
                e.push(7);
                (p, e)
            })
            .collect::<Vec<_>>(),
    );
    let err = |o: ReplayOptions| replay(&t, &o).unwrap_err().to_string();
    assert!(err(opts(1, Policy::Lru)).contains("below the 2 experts"));
    assert!(err(opts(9, Policy::Lru)).contains("above the model's 8"));
    assert!(err(opts(2, Policy::Ema(1.5))).contains("not in (0, 1)"));
    let short = ReplayOptions {
        warmup: 3,
        ..opts(2, Policy::Lru)
    };
    assert!(err(short).contains("nothing would be measured"));
}

#[test]
fn predicted_speed_adds_the_link_time() {
    let dir = tempfile::tempdir().unwrap();
    let t = write_trace(dir.path(), 4, 1, 1, &decode(&[0, 1, 2, 3]));
    let r = replay(&t, &opts(1, Policy::Lru)).unwrap();
    let card = card_named("3090").unwrap();
    // 4 misses and 4 admissions of 1000 bytes over 4 tokens: 2000 bytes per token.
    let link = 2000.0 / (31.5e9 * ingot_bench::replay::PCIE_EFFICIENCY);
    assert!((r.pcie_seconds_per_token(card) - link).abs() < 1e-15);
    let with_base = r.predicted_tok_s(card, Some(100.0));
    assert!((with_base - 1.0 / (0.01 + link)).abs() < 1e-6);
}
