//! The prefill chunk plan built from synthetic headers: it checks against the committed PTX,
//! shares every buffer it has in common with the decode plan, and names what it cannot plan.

mod support;

use ingot_graph::{
    build_plan, build_prefill_plan, BufferKind, PlanError, PlanOptions, PREFILL_BUCKETS,
};
use ingot_synth::{Dims, Layout, Preset, QuantMix};

/// [`support::tiny64`] with 16 heads: one whole head group of the flash kernels.
pub fn tiny16() -> Dims {
    Dims {
        n_head: 16,
        ..support::tiny64()
    }
}

fn count(plan: &ingot_graph::Plan, kernel_prefix: &str) -> usize {
    plan.nodes
        .iter()
        .filter(|n| n.kernel.starts_with(kernel_prefix))
        .count()
}

#[test]
fn v2_lite_chunks_fit_the_committed_kernels_and_share_the_decode_buffers() {
    let h = support::header(Preset::V2Lite, Layout::Mla, QuantMix::Q4KM);
    let opts = PlanOptions::for_ctx(4096);
    let decode = build_plan(&h, opts).expect("decode plan");
    for ntok in PREFILL_BUCKETS {
        let pre = build_prefill_plan(&h, opts, ntok).expect("prefill plan");
        pre.plan
            .check_committed()
            .unwrap_or_else(|e| panic!("bucket {ntok}: {e}"));
        let s = pre.plan.summary();
        println!("v2-lite q4_k_m, bucket {ntok}: {s}");
        if ntok == 512 {
            for n in pre
                .plan
                .nodes
                .iter()
                .filter(|n| n.layer.is_none_or(|l| l <= 1))
            {
                println!("  {:<28} {:<24} {:>6} items", n.label, n.kernel, n.items);
            }
        }
        assert_eq!(s.nodes_per_layer.len(), 27);
        // The head is output_norm and the lm_head gemv, after every layer node.
        assert_eq!(pre.plan.nodes.len() - pre.head_start, 2);
        assert!(pre.plan.nodes[..pre.head_start]
            .iter()
            .all(|n| n.layer.is_some()));
        // Every weight but the embedding (the host writes the chunk's rows) is read, once.
        let file_bytes: u64 = h
            .tensors
            .iter()
            .filter(|t| t.name != ingot_model::tensors::TOKEN_EMBD)
            .map(|t| t.nbytes)
            .sum();
        assert_eq!(s.weight_bytes, file_bytes);
        // What both plans name and an executor shares is declared alike (an activation of
        // the same name, such as the head's one-row `act.residual`, is each plan's own).
        for d in &pre.plan.buffers {
            match decode.buffers.iter().find(|x| x.name == d.name) {
                Some(x) if d.is_shareable() => {
                    assert_eq!(x, d, "{} differs from the decode plan's", d.name);
                }
                Some(_) => assert!(matches!(d.kind, BufferKind::Activation), "{}", d.name),
                None => assert!(
                    !d.must_be_shared() && !matches!(d.kind, BufferKind::Weight { .. }),
                    "{} is only in the prefill plan",
                    d.name
                ),
            }
        }
        // Per layer: the projections, attn_output, and the shared experts' three (dense
        // layer: the FFN's three) as mmq; attn_k_b, attn_v_b, and gate, up, down of the
        // routed experts as mmq_moe (the dense lead layer has none).
        assert_eq!(count(&pre.plan, "mmq_moe"), 2 * 27 + 3 * 26);
        assert_eq!(
            count(&pre.plan, "mmq_") - count(&pre.plan, "mmq_moe"),
            6 * 27
        );
        assert_eq!(count(&pre.plan, "flash_latent_prefill"), 27);
        assert_eq!(count(&pre.plan, "moe_combine"), 27 * 2);
    }
}

#[test]
fn the_mixes_and_layouts_with_mmq_types_plan() {
    // Q3_K_M at these widths: Q3_K rows that do not split into 256-blocks fall back to Q4_0
    // (`attn_k_b` among them, as in V2-Lite's file), Q4_K ones to Q5_0.
    for (layout, mix) in [
        (Layout::Mla, QuantMix::Q8_0),
        (Layout::Legacy, QuantMix::Q4KM),
        (Layout::Legacy, QuantMix::Q8_0),
        (Layout::Mla, QuantMix::Q3KM),
    ] {
        let h = support::header_for(&tiny16(), layout, mix);
        let pre = build_prefill_plan(&h, PlanOptions::for_ctx(256), 64)
            .unwrap_or_else(|e| panic!("{layout:?} {mix:?}: {e}"));
        pre.plan
            .check_committed()
            .unwrap_or_else(|e| panic!("{layout:?} {mix:?}: {e}"));
        if mix == QuantMix::Q3KM {
            // `attn_k_b` per layer, the heads as experts.
            assert!(
                count(&pre.plan, "mmq_moe_q4_0") >= 1,
                "q3_k_m: no Q4_0 product"
            );
        }
    }
}

/// V2-Lite's Q3_K_M file: layer 0's `ffn_down` (10944 columns, not whole 256-blocks) falls back
/// from Q5_K to Q5_1, which the chunk runs on `mmq_q5_1`.
#[test]
fn v2_lite_q3_k_m_plans_its_q5_1_ffn_down() {
    let h = support::header(Preset::V2Lite, Layout::Mla, QuantMix::Q3KM);
    let pre = build_prefill_plan(&h, PlanOptions::for_ctx(4096), 64).expect("prefill plan");
    pre.plan.check_committed().expect("committed kernels");
    assert_eq!(count(&pre.plan, "mmq_q5_1"), 1, "layer 0's ffn_down");
}

#[test]
fn what_the_chunk_cannot_run_is_named() {
    let opts = PlanOptions::for_ctx(256);
    // A k-quant without mmq kernels names the tensor and the types that have them.
    let h = support::header_for(&tiny16(), Layout::Mla, QuantMix::Q2K);
    match build_prefill_plan(&h, opts, 16) {
        Err(PlanError::UnsupportedType {
            name, supported, ..
        }) => {
            assert!(name.starts_with("blk."), "{name}");
            let mut types: Vec<&str> = supported.split(", ").collect();
            types.sort_unstable();
            assert_eq!(
                types,
                [
                    "IQ4_NL", "Q3_K", "Q4_0", "Q4_1", "Q4_K", "Q5_0", "Q5_1", "Q5_K", "Q6_K",
                    "Q8_0"
                ]
            );
        }
        other => panic!("q2_k: {other:?}"),
    }
    // Four heads are one partial head group, which the chunk's attention takes.
    let h = support::header_for(&support::tiny64(), Layout::Mla, QuantMix::Q4KM);
    let pre = build_prefill_plan(&h, opts, 16).expect("4 heads plan");
    assert!(pre
        .plan
        .nodes
        .iter()
        .any(|n| n.kernel == "flash_latent_prefill"));
    // A bucket past the context or past 512 tokens.
    let h = support::header_for(&tiny16(), Layout::Mla, QuantMix::Q4KM);
    for ntok in [0, 257, 1024] {
        assert!(
            matches!(
                build_prefill_plan(&h, opts, ntok),
                Err(PlanError::Context { .. })
            ),
            "{ntok} tokens"
        );
    }
}
