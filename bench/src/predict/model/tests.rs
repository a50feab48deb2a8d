//! The node time's terms, each against its formula, and what breaks each premise.

use super::*;
use crate::predict::card::card_named;

/// An empty node of 4 blocks per SM of a 3090 (328), 256 threads of 32 registers.
pub(crate) fn load() -> NodeLoad {
    NodeLoad {
        blocks: 82 * 4,
        threads_per_block: 256,
        registers: 32,
        shared_bytes: 0,
        warp_instructions: 0,
        dram_bytes: 0,
        reread_bytes: 0,
        tail_warp_instructions: 0,
        host_bytes: 0,
        prefetch_bytes: 0,
        handoff_bytes: 0,
        streamed_bytes: 0,
        prefix: None,
        next: None,
    }
}

#[test]
fn host_link_bytes_take_pcie_time() {
    let c = card_named("3090").unwrap();
    let k = DEFAULT_CONSTANTS;
    // 100 MB over the link dwarfs 1 MB from DRAM: the node is link-bound.
    let l = NodeLoad {
        dram_bytes: 1_000_000,
        host_bytes: 100_000_000,
        ..load()
    };
    let t = node_time(c, &k, &l, true);
    let want = 1e8 / (c.pcie_gbps * 1e9 * crate::replay::PCIE_EFFICIENCY);
    assert!((t.pcie_s - want).abs() < 1e-12);
    assert_eq!(t.bound, "pcie");
    assert!((t.total_s - t.pcie_s - t.launch_s).abs() < 1e-12);
}

#[test]
fn streaming_node_is_dram_bound_at_the_efficient_bandwidth() {
    let c = card_named("3090").unwrap();
    let k = DEFAULT_CONSTANTS;
    let l = NodeLoad {
        dram_bytes: 936_000_000,
        ..load()
    };
    let t = node_time(c, &k, &l, true);
    assert_eq!(t.bound, "dram");
    // 0.936 GB at 0.9 x 936 GB/s.
    assert!((t.dram_s - 1.0 / 0.9e3).abs() < 1e-12, "{}", t.dram_s);
    assert!((t.total_s - t.dram_s - 0.8e-6).abs() < 1e-15);
}

/// A launch that runs its router first: the routed blocks' path (the router's time, then
/// theirs) counts only where it is longer than the whole launch's terms; a slow router
/// (one block, so one SM's share of the DRAM bandwidth) makes it the node's time.
#[test]
fn the_router_path_counts_where_it_is_longer() {
    let c = card_named("h200").unwrap();
    let k = constants_for(Some(c));
    let prefix = |router_blocks| PrefixLoad {
        first: PathPart {
            blocks: router_blocks,
            warp_instructions: 1000,
            dram_bytes: 512 * 1024,
            tail_warp_instructions: 500,
            ..PathPart::default()
        },
        waiting: PathPart {
            blocks: 264,
            warp_instructions: 100_000,
            dram_bytes: 19_000_000,
            ..PathPart::default()
        },
        then: None,
    };
    let base = NodeLoad {
        blocks: 384,
        warp_instructions: 150_000,
        dram_bytes: 26_000_000,
        ..load()
    };
    let plain = node_time(c, &k, &base, true);
    assert_eq!(plain.critical_s, 0.0);
    let spread = node_time(
        c,
        &k,
        &NodeLoad {
            prefix: Some(prefix(32)),
            ..base
        },
        true,
    );
    assert!(spread.critical_s > 0.0 && spread.critical_s < spread.dram_s);
    assert_eq!(spread.total_s, plain.total_s);
    let one = node_time(
        c,
        &k,
        &NodeLoad {
            prefix: Some(prefix(1)),
            ..base
        },
        true,
    );
    assert!(one.critical_s > one.dram_s);
    assert!((one.total_s - one.critical_s - one.launch_s).abs() < 1e-15);
}

/// On sm_90 a node after another kernel node hides `early_launch_hidden` of its fixed cost;
/// the graph's first node and every node on an sm_86 card pay it whole.
#[test]
fn early_launch_hides_part_of_the_node_cost_on_hopper_only() {
    let (h200, r3090) = (card_named("h200").unwrap(), card_named("3090").unwrap());
    assert!(h200.early_launch() && card_named("h100").unwrap().early_launch());
    assert!(!r3090.early_launch() && !card_named("4090").unwrap().early_launch());
    let l = NodeLoad {
        dram_bytes: 1_000_000,
        ..load()
    };
    let k = constants_for(Some(h200));
    let (first, later) = (
        node_time(h200, &k, &l, false),
        node_time(h200, &k, &l, true),
    );
    assert_eq!(first.launch_s, k.launch_in_graph_s.value);
    let hidden = k.launch_in_graph_s.value * k.early_launch_hidden.value;
    assert!((first.total_s - later.total_s - hidden).abs() < 1e-15);
    let k = constants_for(Some(r3090));
    assert_eq!(
        node_time(r3090, &k, &l, true).launch_s,
        k.launch_in_graph_s.value
    );
}

/// A DRAM-bound node of 8 MB (every block resident at once) prefetching 4 MB of it, after a
/// predecessor `prev` of `prev_bytes` DRAM bytes and `prev_issue` of issue time.
fn prefetching(card: &Card, prefetch: u64, prev_bytes: u64, prev_issue: f64) -> [NodeTime; 3] {
    let k = constants_for(Some(card));
    let l = NodeLoad {
        blocks: u64::from(card.sms),
        dram_bytes: 8_000_000,
        prefetch_bytes: prefetch,
        ..load()
    };
    let prev_load = NodeLoad {
        blocks: u64::from(card.sms),
        dram_bytes: prev_bytes,
        ..load()
    };
    let mut prev = node_time(card, &k, &prev_load, true);
    prev.issue_s = prev_issue;
    let t = node_time(card, &k, &l, true);
    [
        t,
        prev,
        prefetch_before_wait(card, &k, &l, &t, &prev_load, &prev),
    ]
}

/// After a predecessor that leaves DRAM idle for its whole body (issue-bound, no bytes), a
/// node's prefetch streams through the whole node cost (`h·L` beside the predecessor, `(1 −
/// h)·L` while it completes) at the node's DRAM rate, of which the assumed share arrives:
/// that much DRAM time leaves the node.
#[test]
fn a_prefetch_moves_the_window_times_the_assumed_share() {
    let h200 = card_named("h200").unwrap();
    let k = constants_for(Some(h200));
    let [t, _, with] = prefetching(h200, 4_000_000, 0, 10e-6);
    let rate = 8e6 / t.dram_s;
    let window = k.launch_in_graph_s.value;
    let want = (4e6f64).min(window * rate) * k.weight_prefetch_overlap.value / rate;
    assert!(want > 0.0 && want < t.dram_s);
    assert!((with.prefetched_s - want).abs() < 1e-15, "{with:?}");
    assert!((with.dram_s - (t.dram_s - want)).abs() < 1e-15);
    assert!(
        (t.total_s - with.total_s - want).abs() < 1e-15,
        "DRAM-bound: all of it saved"
    );
    // A predecessor streaming DRAM for its whole body leaves only the completion part.
    let [_, prev, busy] = prefetching(h200, 8_000_000, 40_000_000, 0.0);
    assert_eq!(prev.bound, "dram");
    let hidden = k.early_launch_hidden.value;
    let want = (1.0 - hidden) * k.launch_in_graph_s.value * k.weight_prefetch_overlap.value;
    assert!((busy.prefetched_s - want).abs() < 1e-15, "{busy:?}");
}

/// What cannot help does not: no early launch (sm_86 prefetches just before its own reads),
/// nothing prefetched (routed experts, whose ids the predecessor writes), a predecessor whose
/// reads fill the L2 (the prefetched lines would be evicted), an issue-bound node (its DRAM
/// time shrinks, its time does not).
#[test]
fn a_prefetch_saves_nothing_where_it_cannot_help() {
    let (h200, r3090) = (card_named("h200").unwrap(), card_named("3090").unwrap());
    let [t, _, with] = prefetching(r3090, 4_000_000, 0, 10e-6);
    assert_eq!(with, t);
    let [t, _, with] = prefetching(h200, 0, 0, 10e-6);
    assert_eq!(with, t);
    let [t, _, with] = prefetching(h200, 4_000_000, h200.l2_bytes, 10e-6);
    assert_eq!(with.prefetched_s, 0.0);
    assert_eq!(with.total_s, t.total_s);
    let k = constants_for(Some(h200));
    let l = NodeLoad {
        blocks: u64::from(h200.sms),
        dram_bytes: 1_000_000,
        prefetch_bytes: 1_000_000,
        ..load()
    };
    let mut t = node_time(h200, &k, &l, true);
    t.issue_s = 5.0 * t.dram_s;
    t.bound = "issue";
    t.total_s = t.issue_s + t.launch_s;
    let with = prefetch_before_wait(h200, &k, &l, &t, &l, &t);
    assert!(with.prefetched_s > 0.0);
    assert_eq!((with.total_s, with.bound), (t.total_s, "issue"));
}

#[test]
fn occupancy_takes_the_tightest_limit() {
    let c = card_named("3090").unwrap();
    let k = DEFAULT_CONSTANTS;
    // 256 threads x 32 regs: 8 warps x 1024 regs -> 8 blocks by registers, 6 by warps.
    assert_eq!(occupancy(c, &k, &load()).blocks_per_sm, 6);
    assert_eq!(occupancy(c, &k, &load()).limit, "warps");
    // 128 registers: 4096 per warp x 8 warps -> 2 blocks.
    let heavy = NodeLoad {
        registers: 128,
        ..load()
    };
    assert_eq!(occupancy(c, &k, &heavy).blocks_per_sm, 2);
    // 40 KB shared + 1 KB reserved -> 2 blocks in 100 KB.
    let smem = NodeLoad {
        shared_bytes: 40 * 1024,
        ..load()
    };
    assert_eq!(occupancy(c, &k, &smem).limit, "shared memory");
    assert_eq!(occupancy(c, &k, &smem).blocks_per_sm, 2);
}

#[test]
fn a_tail_is_serial_and_leaves_the_spread_part() {
    let c = card_named("3090").unwrap();
    let k = DEFAULT_CONSTANTS;
    let clock = c.boost_clock_ghz * 1e9;
    let spread = NodeLoad {
        blocks: 82,
        warp_instructions: 82 * 4000,
        ..load()
    };
    // The same launch plus a 6000-instruction tail in one block of 8 warps: the rows'
    // issue time is unchanged and the tail adds 6000 / (4 schedulers x clock x 0.5).
    let with_tail = NodeLoad {
        warp_instructions: 82 * 4000 + 6000,
        tail_warp_instructions: 6000,
        ..spread
    };
    let (a, b) = (
        node_time(c, &k, &spread, true),
        node_time(c, &k, &with_tail, true),
    );
    assert!((a.issue_s - b.issue_s).abs() < 1e-15);
    assert!((b.tail_s - 6000.0 / (4.0 * clock * 0.5)).abs() < 1e-15);
    assert!((b.total_s - a.total_s - b.tail_s).abs() < 1e-15);
}

#[test]
fn issue_time_counts_waves_and_latency_hiding() {
    let c = card_named("3090").unwrap();
    let k = DEFAULT_CONSTANTS;
    let clock = c.boost_clock_ghz * 1e9;
    // One block per SM of 8 warps: 2 warps per scheduler, half of the 4 needed.
    let l = NodeLoad {
        blocks: 82,
        warp_instructions: 82 * 4000,
        ..load()
    };
    let t = node_time(c, &k, &l, true);
    assert!((t.issue_s - 4000.0 / (4.0 * clock * 0.5)).abs() < 1e-15);
    // One more block than SMs: the busiest SM runs two (a second wave's worth).
    let l2 = NodeLoad {
        blocks: 83,
        warp_instructions: 83 * 4000,
        ..load()
    };
    let t2 = node_time(c, &k, &l2, true);
    assert_eq!(t2.blocks_on_busiest_sm, 2);
    assert!((t2.issue_s - 8000.0 / (4.0 * clock)).abs() < 1e-15);
}

/// The joined node costs the two launches less one node cost, less what the second's first
/// wave streams during the first's tail at the assumed share; without a tail, or without a
/// prefetch, only the node cost goes.
#[test]
fn one_node_cost_and_the_tail_window() {
    let c = card_named("3090").unwrap();
    let k = DEFAULT_CONSTANTS;
    let rate = c.dram_gbps * 1e9 * k.dram_efficiency.value;
    let ffn = NodeLoad {
        dram_bytes: 40_000_000,
        warp_instructions: 4_000_000,
        tail_warp_instructions: 200_000,
        ..load()
    };
    let next = NextLoad {
        work: PathPart {
            blocks: 300,
            warp_instructions: 2_000_000,
            dram_bytes: 5_000_000,
            prefetch_bytes: 5_000_000,
            ..PathPart::default()
        },
        prefix: None,
    };
    let alone = |l: &NodeLoad| node_time(c, &k, l, true);
    let second = NodeLoad {
        blocks: next.work.blocks,
        warp_instructions: next.work.warp_instructions,
        dram_bytes: next.work.dram_bytes,
        ..load()
    };
    let (a, b) = (alone(&ffn), alone(&second));
    assert!(a.tail_s > 0.0);
    let joined = node_time(
        c,
        &k,
        &NodeLoad {
            next: Some(next),
            ..ffn
        },
        true,
    );
    let occ = occupancy(c, &k, &ffn);
    let slots = (u64::from(c.sms) * u64::from(occ.blocks_per_sm) - 1).min(300);
    let early = (5e6 * slots as f64 / 300.0).min(a.tail_s * rate) * 0.5;
    let b_early = alone(&NodeLoad {
        dram_bytes: 5_000_000 - early.round() as u64,
        ..second
    });
    let want = a.total_s + b_early.total_s - b_early.launch_s;
    assert!((joined.total_s - want).abs() < 1e-12, "{joined:?}");
    assert!(joined.total_s < a.total_s + b.total_s - b.launch_s);
    assert_eq!(joined.launch_s, a.launch_s);
    // No tail to stream in, or nothing prefetched: the node cost alone.
    for (first, nx) in [
        (
            NodeLoad {
                tail_warp_instructions: 0,
                ..ffn
            },
            next,
        ),
        (
            ffn,
            NextLoad {
                work: PathPart {
                    prefetch_bytes: 0,
                    ..next.work
                },
                ..next
            },
        ),
    ] {
        let j = node_time(
            c,
            &k,
            &NodeLoad {
                next: Some(nx),
                ..first
            },
            true,
        );
        let a = alone(&first);
        assert!((j.total_s - (a.total_s + b.total_s - b.launch_s)).abs() < 1e-12);
    }
}
