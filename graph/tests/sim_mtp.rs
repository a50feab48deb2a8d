//! The NextN/MTP block's plan in the simulator (`planner::mtp`, run by `SimExecutor`):
//!
//! * the decode plan's final hidden state and the block's logits and output against the oracle's on
//!   the same inputs (the oracle's hidden states, so the main models' own differences stay out), on
//!   the trained model (Q8_0) and tiny-glm (f32, golden);
//! * greedy output with drafts (k = 1, 2, 3) equals greedy without, token for token, on the sim,
//!   for both models: the trained model's drafts are often right (the accepting path), tiny-glm's
//!   random-weight drafts almost never (the rewinding path).
//!
//! The simulator runs every kernel thread by thread, so the cases are short (positions and tokens
//! counted in each test).

#[path = "support/drafting.rs"]
mod drafting;

use drafting::{check_bands, check_equal, open, trained_ids, CTX, TINY_GLM_PROMPT};
use ingot_gguf::GgufFile;
use ingot_graph::exec::sim::SimExecutor;
use ingot_graph::PlanOptions;
use ingot_model::Decoder;

fn sim(file: &GgufFile) -> SimExecutor {
    SimExecutor::load(file, PlanOptions::for_ctx(CTX)).expect("sim load")
}

/// [`drafting::compare`] on the sim, then every node of the block's plan must have run as PTX,
/// the head included.
fn compare(model: &str, ids: &[u32], last: usize) -> [f32; 3] {
    let file = open(model);
    let mut sim = sim(&file);
    let worst = drafting::compare(model, &mut sim, ids, last);
    let (plan, stats) = sim.mtp_stats().expect("MTP plan");
    assert_eq!(stats.len(), plan.nodes.len());
    for (n, st) in plan.nodes.iter().zip(stats) {
        assert!(st.warp_instructions > 0, "{model}: {} never ran", n.label);
    }
    worst
}

/// 16 positions of the trained model (Q8_0 weights, an MoE MTP block).
#[test]
fn sim_mtp_block_matches_oracle_on_the_trained_model() {
    let ids = trained_ids(18);
    check_bands("trained", compare("trained-rust-std", &ids, 15));
}

/// 9 positions of tiny-glm (f32 weights, 20 heads: the scalar flash kernel; an MoE MTP block).
#[test]
fn sim_mtp_block_matches_oracle_on_tiny_glm() {
    let mut ids = TINY_GLM_PROMPT.to_vec();
    ids.push(33);
    check_bands("tiny-glm", compare("tiny-glm-f32", &ids, 8));
}

/// A 12-token prompt and 16 greedy tokens, k = 1, 2, 3.
#[test]
fn sim_drafted_greedy_equals_plain_greedy_on_the_trained_model() {
    let file = open("trained-rust-std");
    let total = check_equal(
        "trained-rust-std",
        "the sim",
        &mut sim(&file),
        &trained_ids(12),
        16,
    );
    // Both paths must have run: accepted drafts and rejected ones.
    assert!(
        total.accepted > 0 && total.accepted < total.drafted,
        "{total:?}"
    );
}

/// The 9-token prompt and 8 greedy tokens, k = 1, 2, 3.
#[test]
fn sim_drafted_greedy_equals_plain_greedy_on_tiny_glm() {
    let file = open("tiny-glm-f32");
    let total = check_equal(
        "tiny-glm-f32",
        "the sim",
        &mut sim(&file),
        &TINY_GLM_PROMPT,
        8,
    );
    assert!(total.drafted > total.accepted, "{total:?}");
}

/// A model without a NextN/MTP block: the sim says why it cannot draft, and an MTP call is an
/// error, not a panic.
#[test]
fn sim_without_an_mtp_block_refuses_to_draft() {
    let file = open("tiny-mla-f32");
    let mut dec = sim(&file);
    let why = dec.mtp_ready().expect_err("no NextN block").to_string();
    assert!(why.contains("no NextN/MTP block"), "{why}");
    dec.decode(1, 0).unwrap();
    let h = dec.hidden().expect("hidden after a decode").to_vec();
    assert!(dec.mtp_step(&h, 1, 0).is_err());
    assert!(dec.mtp_logits().is_err());
    assert!(dec.mtp_hidden().is_none());
}

/// A head of the first 512 rows (`PlanOptions::mtp_head_rows`, what `--draft-vocab 512` loads):
/// its 512 logits are the whole head's bit for bit (a gemv row does not depend on the launch's
/// row count), greedy with drafts among those ids equals greedy without, and drafts among more
/// ids than the head computes are refused.
#[test]
fn sim_pruned_mtp_head_computes_its_rows_and_refuses_more() {
    use ingot_model::speculative::{greedy_drafted, greedy_plain, Drafts, Speculative};
    use ingot_model::{Sampler, SamplerConfig};
    const ROWS: usize = 512;
    let file = open("trained-rust-std");
    let mut whole = sim(&file);
    let mut pruned = SimExecutor::load(
        &file,
        PlanOptions {
            mtp_head_rows: Some(ROWS),
            ..PlanOptions::for_ctx(CTX)
        },
    )
    .expect("sim load");
    assert_eq!(pruned.mtp_head_rows(), Some(ROWS));
    assert_eq!(whole.mtp_head_rows(), None);
    let ids = trained_ids(6);
    for dec in [&mut whole, &mut pruned] {
        for (i, &t) in ids.iter().enumerate() {
            dec.decode(t, i).expect("decode");
        }
    }
    let h = whole.hidden().expect("hidden").to_vec();
    let a: Vec<u32> = {
        whole.mtp_step(&h, 7, 0).expect("mtp");
        whole.mtp_logits().expect("logits")[..ROWS]
            .iter()
            .map(|v| v.to_bits())
            .collect()
    };
    pruned.mtp_step(&h, 7, 0).expect("mtp");
    let b: Vec<u32> = pruned.mtp_logits().expect("logits")[..ROWS]
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(
        a, b,
        "the pruned head's logits are the whole head's first {ROWS}"
    );
    let prompt = trained_ids(12);
    let plain = greedy_plain(&mut pruned, &prompt, 12, || {}).expect("plain");
    let drafts = Drafts {
        k: 2,
        vocab: Some(ROWS),
    };
    let (drafted, stats) =
        greedy_drafted(&mut pruned, &prompt, (12, drafts, CTX), || {}).expect("drafted");
    assert_eq!(drafted, plain);
    assert!(stats.drafted > 0, "{stats:?}");
    pruned.reset();
    let mut sampler = Sampler::new(SamplerConfig::greedy());
    let err = Speculative::start(&mut pruned, &mut sampler, &prompt, 1, CTX)
        .err()
        .expect("drafts among the whole vocabulary must be refused");
    assert!(err.to_string().contains("only the first 512"), "{err}");
}
