//! The prediction's block sampling: counters scaled from a sample of each node's blocks against
//! the same nodes run whole, on synthetic models planned from their headers alone.

use ingot_bench::predict::counts::count_nodes;
use ingot_graph::planner::build_plan_for;
use ingot_graph::PlanOptions;
use ingot_model::ModelConfig;
use ingot_synth::{header, Layout, Preset, QuantMix, SynthOptions};

/// Runs the plan of `preset` whole and sampled (`max_blocks` per node) at `depth`, and returns
/// the worst relative error of a node's warp instructions and of its sectors read, and the
/// relative error of the step's totals, among the nodes that were sampled.
fn compare(preset: Preset, ctx: usize, depth: usize, max_blocks: u64) -> (f64, f64, f64, usize) {
    let h = header(&SynthOptions {
        preset,
        layout: Layout::Mla,
        mix: QuantMix::Q4KM,
        seed: 0,
    })
    .unwrap();
    let config = ModelConfig::from_gguf(&h).unwrap();
    let plan = build_plan_for(&config, &h, PlanOptions::for_ctx(ctx)).unwrap();
    let descs = plan.check_committed().unwrap();
    let full = count_nodes(&plan, &descs, depth, u64::MAX, None).unwrap();
    let part = count_nodes(&plan, &descs, depth, max_blocks, None).unwrap();
    let rel = |a: u64, b: u64| (a as f64 - b as f64).abs() / (b as f64).max(1.0);
    let (mut worst_instr, mut worst_sectors, mut sampled) = (0.0f64, 0.0f64, 0);
    let (mut total_full, mut total_part) = (0u64, 0u64);
    for (i, (f, p)) in full.iter().zip(&part).enumerate() {
        // A flash launch's blocks without work are not run (`blocks_working`).
        assert_eq!(f.blocks_run, f.blocks_working, "node {i} ran whole");
        assert_eq!((f.blocks, f.blocks_working), (p.blocks, p.blocks_working));
        assert_eq!(
            p.stats.blocks, p.blocks_working,
            "node {i}: scaled block count"
        );
        total_full += f.stats.warp_instructions;
        total_part += p.stats.warp_instructions;
        if p.blocks_run < p.blocks_working {
            sampled += 1;
            let e = rel(p.stats.warp_instructions, f.stats.warp_instructions);
            let s = rel(p.stats.sectors_read, f.stats.sectors_read);
            eprintln!(
                "node {i:>3} {:<28} {:>5}/{:<5} blocks: instr err {e:.4}, sectors err {s:.4}",
                plan.nodes[i].kernel, p.blocks_run, p.blocks
            );
            worst_instr = worst_instr.max(e);
            worst_sectors = worst_sectors.max(s);
        }
    }
    (
        worst_instr,
        worst_sectors,
        rel(total_part, total_full),
        sampled,
    )
}

/// Tolerances: blocks of one launch do the same work except at the edges the sample always
/// includes (first and last block), so the scaled counts of gemvs, norms and attention are
/// exact; the MoE launches mix routed-expert and shared-expert blocks (different row counts per
/// expert) inside the grid, which an evenly spaced sample weighs approximately: 5% per node,
/// 1% on the step's total.
#[test]
fn sampled_counts_match_full_runs_on_lite_4l() {
    let (instr, sectors, total, sampled) = compare(Preset::Lite4l, 640, 600, 16);
    // 21 nodes (5 for the dense layer 0, 4 per MoE layer, 3 outside) leave 14 grids larger
    // than the sample.
    assert!(sampled >= 14, "only {sampled} nodes were sampled");
    assert!(instr <= 0.05, "worst node warp-instruction error {instr}");
    assert!(sectors <= 0.05, "worst node sector error {sectors}");
    assert!(total <= 0.01, "step total error {total}");
}
