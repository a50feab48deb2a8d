//! A launch that runs two launches' work in one grid, the second's blocks waiting for the
//! first's tail (`moe_ffn_rope_kb_*`, `ingot_abi::launch::ffn_rope_kb`: a MoE layer's FFN, whose
//! down tail writes the next layer's normed token, then that layer's projections). Each part is
//! counted and timed as the launch it replaces ([`super::model::node_time`] on its own load);
//! the joined node costs one node cost, and the second part's first wave, resident while only
//! the first part's tail block runs, streams the weight rows it prefetches before its wait in
//! that window: [`Constants::weight_prefetch_overlap`] of what the window carries at the card's
//! efficient DRAM bandwidth arrives on time (the same assumed share as every other prefetch).
//! The blocks of the second part that start before the first part's last wave ends are not
//! credited: the first part's stream then keeps the DRAM busy.

use serde::Serialize;

use super::card::Card;
use super::model::{node_time, occupancy, Constants, NodeLoad, NodeTime, PrefixLoad};

/// The second launch's work in a joined node ([`NodeLoad::next`]): its own counts, on the
/// node's threads, registers and shared memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct NextLoad {
    pub blocks: u64,
    pub warp_instructions: u64,
    pub dram_bytes: u64,
    pub reread_bytes: u64,
    /// Its own last-block-done tail (the rope's), in `warp_instructions`.
    pub tail_warp_instructions: u64,
    /// Of `dram_bytes`, the weight rows its blocks prefetch before they wait.
    pub prefetch_bytes: u64,
    /// Its own dependency path (the projections' rows, then `attn_k_b`).
    pub prefix: Option<PrefixLoad>,
}

/// The time of `load` (the first part) joined with `next` (see the module docs): the first
/// part's time, then the second's without a node cost of its own and with the bytes its first
/// wave streamed during the first part's tail taken out of its DRAM stream and of its path's
/// first part. The result's path (`critical_s`) is the whole node less its node cost; its DRAM,
/// L2, issue and tail terms are the parts' sums.
pub fn joined_time(
    card: &Card,
    k: &Constants,
    load: &NodeLoad,
    next: &NextLoad,
    after_kernel: bool,
) -> NodeTime {
    let first_load = NodeLoad {
        next: None,
        ..*load
    };
    let first = node_time(card, k, &first_load, after_kernel);
    let occ = occupancy(card, k, load);
    let slots = (u64::from(card.sms) * u64::from(occ.blocks_per_sm)).saturating_sub(1);
    let wave = slots.min(next.blocks) as f64 / next.blocks.max(1) as f64;
    let rate = card.dram_gbps * 1e9 * k.dram_efficiency.value;
    let early = (next.prefetch_bytes.min(next.dram_bytes) as f64 * wave).min(first.tail_s * rate)
        * k.weight_prefetch_overlap.value;
    let early = early.round() as u64;
    let second_load = NodeLoad {
        blocks: next.blocks,
        warp_instructions: next.warp_instructions,
        dram_bytes: next.dram_bytes - early.min(next.dram_bytes),
        reread_bytes: next.reread_bytes,
        tail_warp_instructions: next.tail_warp_instructions,
        host_bytes: 0,
        prefetch_bytes: 0,
        handoff_bytes: 0,
        streamed_bytes: 0,
        prefix: next.prefix.map(|p| PrefixLoad {
            first: super::model::PathPart {
                dram_bytes: p.first.dram_bytes - early.min(p.first.dram_bytes),
                ..p.first
            },
            ..p
        }),
        next: None,
        ..*load
    };
    let second = node_time(card, k, &second_load, after_kernel);
    let path = (first.total_s - first.launch_s) + (second.total_s - second.launch_s);
    NodeTime {
        dram_s: first.dram_s + second.dram_s,
        l2_s: first.l2_s + second.l2_s,
        issue_s: first.issue_s + second.issue_s,
        launch_s: first.launch_s,
        tail_s: first.tail_s + second.tail_s,
        pcie_s: first.pcie_s,
        prefetched_s: 0.0,
        critical_s: path,
        total_s: path + first.launch_s,
        ..first
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::card::card_named;
    use crate::predict::model::tests::load;
    use crate::predict::model::DEFAULT_CONSTANTS;

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
            blocks: 300,
            warp_instructions: 2_000_000,
            dram_bytes: 5_000_000,
            prefetch_bytes: 5_000_000,
            ..NextLoad::default()
        };
        let alone = |l: &NodeLoad| node_time(c, &k, l, true);
        let second = NodeLoad {
            blocks: next.blocks,
            warp_instructions: next.warp_instructions,
            dram_bytes: next.dram_bytes,
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
                    prefetch_bytes: 0,
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
}
