//! The time model of one node (see the module docs of [`crate::predict`] for the formulas).

use serde::Serialize;

use super::card::Card;
pub use super::joined::NextLoad;

/// A constant of the model that is not a published figure: its value, where it came from, and
/// that it is to be fitted when a GPU is lent (the device bench then prints predicted beside
/// measured per node).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Fitted {
    pub value: f64,
    pub unit: &'static str,
    pub origin: &'static str,
}

/// The model's unpublished constants.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Constants {
    /// Cost of one kernel node inside a replayed CUDA graph, added to every node.
    pub launch_in_graph_s: Fitted,
    /// Fraction of peak DRAM bandwidth a streaming kernel reaches when every SM takes part.
    pub dram_efficiency: Fitted,
    /// Bytes per clock per SM at which re-read bytes are served (mostly L1 hits, some L2).
    pub reread_bytes_per_sm_clock: Fitted,
    /// Resident warps per scheduler needed to issue every cycle (latency hiding); fewer warps
    /// issue proportionally less often.
    pub warps_to_hide_latency: Fitted,
    /// Shared memory the driver reserves per resident block (bytes).
    pub reserved_shared_per_block: Fitted,
    /// Share of [`Constants::launch_in_graph_s`] hidden behind the previous node when a node is
    /// launched early (programmatic dependent launch, [`Card::early_launch`]).
    pub early_launch_hidden: Fitted,
    /// Share of what a node could stream before its grid-dependency wait (its prefetched weight
    /// lines that fit the window and the L2, [`prefetch_before_wait`]) that does arrive in L2
    /// before the wait returns and is then not read from DRAM again.
    pub weight_prefetch_overlap: Fitted,
}

/// The constants as shipped, before any fit.
pub const DEFAULT_CONSTANTS: Constants = Constants {
    launch_in_graph_s: Fitted {
        value: 0.80e-6,
        unit: "s per node",
        origin: "anchor of issue 17: the reference build log's graph node cost on an RTX 3090 \
                 (~0.80 us); to be fitted per card",
    },
    dram_efficiency: Fitted {
        value: 0.90,
        unit: "fraction of peak",
        origin: "assumption, no anchor: typical fraction of peak reached by long streaming \
                 reads on GDDR6X/HBM; to be fitted",
    },
    reread_bytes_per_sm_clock: Fitted {
        value: 64.0,
        unit: "bytes per clock per SM",
        origin: "assumption, no anchor: half of the 128 B/clock/SM L1 load bandwidth commonly \
                 cited for Volta to Hopper, as re-reads (activation vectors, queries) mostly hit L1 \
                 and some go to L2; to be fitted",
    },
    warps_to_hide_latency: Fitted {
        value: 4.0,
        unit: "warps per scheduler",
        origin: "assumption, no anchor: a dependent arithmetic chain of ~4 cycles per issue; \
                 to be fitted",
    },
    reserved_shared_per_block: Fitted {
        value: 1024.0,
        unit: "bytes",
        origin: "CUDA C++ Programming Guide: 1 KB of shared memory per block is reserved for \
                 system use on compute capability 8.x and 9.0 (published)",
    },
    early_launch_hidden: Fitted {
        value: 0.5,
        unit: "fraction of the node cost",
        origin: "assumption, no anchor: on sm_90 and later every node after the first of a \
                 graph is launched early and waits on its predecessor first \
                 (ingot_kernels::grid_dep), so its launch and block start-up overlap the \
                 predecessor's last blocks while the wait for the predecessor's completion and \
                 the memory flush remain; half of the fitted node cost is the guess. Measured \
                 when a card is lent: scripts/device-bench.sh runs the decode with and without \
                 (INGOT_NO_PDL=1)",
    },
    weight_prefetch_overlap: Fitted {
        value: 0.5,
        unit: "fraction of the prefetchable stream",
        origin: "assumption, no anchor: on sm_90 the decode gemvs, the attention output and the \
                 shared experts' blocks prefetch their weight rows into L2 before \
                 griddepcontrol.wait (kernels/device/src/prefetch.rs). A prefetch is a hint (the \
                 memory system may delay or drop it, the predecessor's stream may evict its \
                 line), and how much DRAM the predecessor leaves idle over time is not known: \
                 half is the guess, chosen before any prediction was computed and the same even \
                 split as early_launch_hidden. Measured when a card is lent: \
                 scripts/device-bench.sh's decode rows with and without early launch \
                 (INGOT_NO_PDL=1), against this model's saving",
    },
};

/// Bytes one prefetch asks the L2 for: its line (128 bytes on compute capability 8.x and 9.0,
/// CUDA C++ Best Practices Guide, "L2 cache"; the PTX ISA defines `prefetch` as bringing in the
/// line that holds the address).
pub const PREFETCH_LINE_BYTES: u64 = 128;

/// The constants for `card`: [`DEFAULT_CONSTANTS`] with what has been fitted on that card
/// replacing the defaults. Only the H200's node cost is fitted so far.
pub fn constants_for(card: Option<&Card>) -> Constants {
    let mut k = DEFAULT_CONSTANTS;
    if card.is_some_and(|c| c.name == "h200") {
        k.launch_in_graph_s = Fitted {
            value: 2.45e-6,
            unit: "s per node",
            origin: "fitted on an H200 (driver 580.159.04, a Firecracker VM), 2026-11-30: \
                     `ingot plan --measure` on synthetic v2-lite q4_k_m measured a graph replay of \
                     1867.4 us per token at depth 0, where the other terms predict 1003.8 us: \
                     (1867.4 - 1003.8) / 353 nodes = 2.45 us. Checked at depth 4096: 1954.6 \
                     predicted vs 1986.8 measured (-1.6%). It holds all the fixed cost of a node \
                     on that card (launch, ramp-up, tail), not only the launch",
        };
    }
    k
}

/// What the model needs to know about one node.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct NodeLoad {
    pub blocks: u64,
    pub threads_per_block: u32,
    /// Registers per thread (from the audit).
    pub registers: u32,
    /// Static + dynamic shared memory per block, bytes.
    pub shared_bytes: u32,
    pub warp_instructions: u64,
    /// Bytes the node must move from DRAM: each distinct byte read once, plus the writes.
    pub dram_bytes: u64,
    /// Bytes read again after their first read (served by L2/L1 on a GPU).
    pub reread_bytes: u64,
    /// Warp instructions of a last-block-done tail (included in `warp_instructions`), which
    /// one block runs after all the others: serial time, not spread over the SMs.
    pub tail_warp_instructions: u64,
    /// Bytes read over the host link from host-mapped memory (routed experts outside VRAM).
    pub host_bytes: u64,
    /// Weight bytes the node's blocks prefetch into L2 before their grid-dependency wait (the
    /// simulator's prefetched lines times [`PREFETCH_LINE_BYTES`], at most the bytes it reads):
    /// rows known from the block's index, never a routed expert's (its id is the router's
    /// output).
    pub prefetch_bytes: u64,
    /// Weight bytes the node's blocks prefetch into L2 for the node after it (the simulator's
    /// prefetched lines of a launch with weights handed ahead, [`super::handoff`]); 0 for every
    /// other node.
    pub handoff_bytes: u64,
    /// Of `dram_bytes`, what the node reads with the evict-first priority (a decode flash
    /// launch's cache rows): lines L2 gives up first, so they do not push out the lines handed
    /// ahead.
    pub streamed_bytes: u64,
    /// A launch in two dependent parts (`moe_gate_up_router_*`: the router, then the routed
    /// blocks; `attn_merge_v_b_o_*`: the merge, then `attn_output`): what must run before the
    /// waiting blocks can start and what they do then. `None` for every other node.
    pub prefix: Option<PrefixLoad>,
    /// A second launch's work in the node's grid after this one's (`moe_ffn_rope_kb_*`,
    /// [`super::joined`]); the fields above are the first's. `None` for every other node.
    pub next: Option<NextLoad>,
}

/// The parts of a launch on its dependency path ([`NodeLoad::prefix`]), each waiting for the
/// one before: the first part's blocks (their work, then their tail: the router's routing),
/// the blocks that wait for it, and, in a chained FFN, the down blocks that wait for those.
/// The rest of the launch (the shared experts' gate/up blocks) runs beside the path.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PrefixLoad {
    pub first: PathPart,
    pub waiting: PathPart,
    pub then: Option<PathPart>,
}

/// One part of a dependency path ([`PrefixLoad`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PathPart {
    pub blocks: u64,
    pub warp_instructions: u64,
    /// Its DRAM bytes (the router's weights and input; the routed experts'; the merge's
    /// partials and `attn_v_b`; `attn_output`'s or the down kernel's weights).
    pub dram_bytes: u64,
    pub reread_bytes: u64,
    /// Its serial end (the routing; a norm tail), in `warp_instructions`.
    pub tail_warp_instructions: u64,
    /// Of `dram_bytes`, what its blocks prefetch into L2 before they wait (rows known before
    /// the wait). The blocks resident beside the part before get
    /// [`Constants::weight_prefetch_overlap`] of theirs on time.
    pub prefetch_bytes: u64,
}

/// Resident blocks per SM for a node, and which limit decided it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Occupancy {
    pub blocks_per_sm: u32,
    pub limit: &'static str,
}

/// The node's predicted time and its parts, seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct NodeTime {
    pub dram_s: f64,
    pub l2_s: f64,
    pub issue_s: f64,
    pub launch_s: f64,
    /// The last-block-done tail: its instructions issued by one block's warps on one SM.
    pub tail_s: f64,
    /// The host link: [`NodeLoad::host_bytes`] over the card's PCIe bandwidth times
    /// [`crate::replay::PCIE_EFFICIENCY`].
    pub pcie_s: f64,
    /// DRAM time taken out of [`NodeTime::dram_s`] because the node streamed it into L2 before
    /// its wait, while its predecessor ran ([`prefetch_before_wait`]; 0 otherwise).
    pub prefetched_s: f64,
    /// With a [`NodeLoad::prefix`]: the first part's time alone (with its tail), then the
    /// waiting blocks' alone (with theirs, less what they prefetched beside the first part),
    /// each on the SMs it has; 0 otherwise.
    pub critical_s: f64,
    /// `max(max(dram, l2, issue, pcie) + tail, critical) + launch`.
    pub total_s: f64,
    /// Which of dram/l2/issue/pcie is the largest.
    pub bound: &'static str,
    pub occupancy: Occupancy,
    /// Blocks on the busiest SM (`ceil(blocks / SMs)`: wave quantisation).
    pub blocks_on_busiest_sm: u64,
}

/// Register allocation granularity: registers are allocated per warp in units of 256
/// (CUDA occupancy calculator, compute capability 8.x/9.0).
const REG_ALLOC_UNIT: u32 = 256;

/// Resident blocks per SM: the tightest of the block, warp, register and shared-memory limits.
pub fn occupancy(card: &Card, k: &Constants, load: &NodeLoad) -> Occupancy {
    let warps = load.threads_per_block.div_ceil(32).max(1);
    let regs_per_warp = (load.registers.max(1) * 32).div_ceil(REG_ALLOC_UNIT) * REG_ALLOC_UNIT;
    let by_regs = card.registers_per_sm / (regs_per_warp * warps);
    let shared = load.shared_bytes + k.reserved_shared_per_block.value as u32;
    let by_shared = card.shared_per_sm / shared;
    let limits = [
        (card.max_blocks_per_sm, "blocks"),
        (card.max_warps_per_sm / warps, "warps"),
        (by_regs, "registers"),
        (by_shared, "shared memory"),
    ];
    let (blocks_per_sm, limit) = limits
        .into_iter()
        .min_by_key(|&(n, _)| n)
        .expect("four limits");
    Occupancy {
        blocks_per_sm: blocks_per_sm.max(1),
        limit,
    }
}

/// The time of one node on `card`; `after_kernel`: the node follows another kernel node of its
/// graph, so on a card with early launch [`Constants::early_launch_hidden`] of its fixed cost
/// is hidden.
pub fn node_time(card: &Card, k: &Constants, load: &NodeLoad, after_kernel: bool) -> NodeTime {
    if let Some(next) = load.next {
        return super::joined::joined_time(card, k, load, &next, after_kernel);
    }
    let occ = occupancy(card, k, load);
    let sms = u64::from(card.sms);
    let blocks = load.blocks.max(1);
    let busiest = blocks.div_ceil(sms);
    // Bandwidth scales with the SMs that have work: one SM alone cannot draw the whole DRAM
    // bandwidth.
    let active = blocks.min(sms) as f64 / sms as f64;
    let dram_bw = card.dram_gbps * 1e9 * k.dram_efficiency.value * active;
    let l2_bw =
        k.reread_bytes_per_sm_clock.value * blocks.min(sms) as f64 * card.boost_clock_ghz * 1e9;
    let dram_s = load.dram_bytes as f64 / dram_bw;
    let l2_s = load.reread_bytes as f64 / l2_bw;
    // Issue: the busiest SM's share of warp instructions over its schedulers, slowed when too
    // few warps are resident to hide latency.
    let warps = u64::from(load.threads_per_block.div_ceil(32).max(1));
    let resident = busiest.min(u64::from(occ.blocks_per_sm)) * warps;
    let per_scheduler = resident as f64 / f64::from(card.schedulers_per_sm);
    let efficiency = (per_scheduler / k.warps_to_hide_latency.value).min(1.0);
    let tail = load.tail_warp_instructions.min(load.warp_instructions);
    let per_block = (load.warp_instructions - tail) as f64 / blocks as f64;
    let clock = card.boost_clock_ghz * 1e9;
    let issue_rate = f64::from(card.schedulers_per_sm) * clock * efficiency;
    let issue_s = busiest as f64 * per_block / issue_rate;
    // The tail starts when the last other block is done and has its block's warps alone.
    let tail_efficiency =
        (warps as f64 / f64::from(card.schedulers_per_sm) / k.warps_to_hide_latency.value).min(1.0);
    let tail_s = tail as f64 / (f64::from(card.schedulers_per_sm) * clock * tail_efficiency);
    let pcie_s = load.host_bytes as f64 / (card.pcie_gbps * 1e9 * crate::replay::PCIE_EFFICIENCY);
    let (bound, longest) = [
        ("dram", dram_s),
        ("l2", l2_s),
        ("issue", issue_s),
        ("pcie", pcie_s),
    ]
    .into_iter()
    .fold(("dram", 0.0f64), |a, b| if b.1 > a.1 { b } else { a });
    let hidden = if after_kernel && card.early_launch() {
        k.early_launch_hidden.value
    } else {
        0.0
    };
    let launch_s = k.launch_in_graph_s.value * (1.0 - hidden);
    let critical_s = load.prefix.map_or(0.0, |p| {
        let part = |x: &PathPart, before: u64, host_bytes| {
            // The blocks that start beside the part before (the resident slots it leaves)
            // prefetch their rows while it runs; the others start after it.
            let slots = (sms * u64::from(occ.blocks_per_sm)).saturating_sub(before);
            let beside = slots.min(x.blocks) as f64 / x.blocks.max(1) as f64;
            let early = x.prefetch_bytes.min(x.dram_bytes) as f64
                * beside
                * k.weight_prefetch_overlap.value;
            let part = NodeLoad {
                blocks: x.blocks,
                warp_instructions: x.warp_instructions,
                dram_bytes: x.dram_bytes - early.round() as u64,
                reread_bytes: x.reread_bytes,
                tail_warp_instructions: x.tail_warp_instructions,
                host_bytes,
                prefetch_bytes: 0,
                handoff_bytes: 0,
                streamed_bytes: 0,
                prefix: None,
                next: None,
                ..*load
            };
            let t = node_time(card, k, &part, after_kernel);
            t.total_s - t.launch_s
        };
        let first = part(&p.first, u64::MAX, 0);
        let waiting = part(&p.waiting, p.first.blocks, load.host_bytes);
        let then = p.then.map_or(0.0, |t| part(&t, p.waiting.blocks, 0));
        first + waiting + then
    });
    NodeTime {
        dram_s,
        l2_s,
        issue_s,
        launch_s,
        tail_s,
        pcie_s,
        prefetched_s: 0.0,
        critical_s,
        total_s: (longest + tail_s).max(critical_s) + launch_s,
        bound,
        occupancy: occ,
        blocks_on_busiest_sm: busiest,
    }
}

/// `t` (the time of `load` alone, after a kernel node) with the part of its DRAM stream that its
/// prefetch moves before its grid-dependency wait taken out; `prev` and `prev_load`: its
/// predecessor's time alone and load. Unchanged on a card without early launch, where a block
/// prefetches just before it reads the same lines.
///
/// The window: with early launch a node's blocks are resident from `h·L` before the end of its
/// predecessor's body (`L` the node cost, `h` [`Constants::early_launch_hidden`]; at most the
/// whole body) until the wait returns `(1 − h)·L` after it (the predecessor's completion and
/// memory flush, when nothing else streams). During the first part the prefetch gets only the
/// DRAM time the predecessor leaves idle (`1 − dram/body` of it, as if its stream were spread
/// evenly over its body); during the second, all of it. The prefetch streams at the node's own
/// DRAM rate.
///
/// What it can stream: [`NodeLoad::prefetch_bytes`] of the blocks resident in the first wave
/// (later waves start after the wait), and no more than the L2 holds beside everything the
/// predecessor reads (a prefetched line evicted before its read helps nothing). Of that,
/// [`Constants::weight_prefetch_overlap`] arrives in time. DRAM bandwidth stays shared: what
/// moves is only what fits the predecessor's idle DRAM time, so the step's DRAM bytes still
/// take at least their time at the card's bandwidth.
pub fn prefetch_before_wait(
    card: &Card,
    k: &Constants,
    load: &NodeLoad,
    t: &NodeTime,
    prev_load: &NodeLoad,
    prev: &NodeTime,
) -> NodeTime {
    if !card.early_launch() || load.prefetch_bytes == 0 || t.dram_s <= 0.0 {
        return *t;
    }
    let node_cost = k.launch_in_graph_s.value;
    let h = k.early_launch_hidden.value;
    let prev_body = prev
        .dram_s
        .max(prev.l2_s)
        .max(prev.issue_s)
        .max(prev.pcie_s)
        + prev.tail_s;
    let idle = if prev_body > 0.0 {
        (1.0 - prev.dram_s / prev_body).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let window_s = (h * node_cost).min(prev_body) * idle + (1.0 - h) * node_cost;
    // The node's DRAM rate, as in `node_time`.
    let rate = load.dram_bytes as f64 / t.dram_s;
    let sms = u64::from(card.sms);
    let first_wave = (sms * u64::from(t.occupancy.blocks_per_sm)).min(load.blocks.max(1));
    let resident = load.prefetch_bytes as f64 * first_wave as f64 / load.blocks.max(1) as f64;
    let l2_room = card.l2_bytes.saturating_sub(prev_load.dram_bytes) as f64;
    let bytes = resident.min(l2_room).min(window_s * rate) * k.weight_prefetch_overlap.value;
    let prefetched_s = (bytes / rate).min(t.dram_s);
    let dram_s = t.dram_s - prefetched_s;
    let (bound, longest) = [
        ("dram", dram_s),
        ("l2", t.l2_s),
        ("issue", t.issue_s),
        ("pcie", t.pcie_s),
    ]
    .into_iter()
    .fold(("dram", 0.0f64), |a, b| if b.1 > a.1 { b } else { a });
    NodeTime {
        dram_s,
        prefetched_s,
        total_s: (longest + t.tail_s).max(t.critical_s) + t.launch_s,
        bound,
        ..*t
    }
}

#[cfg(test)]
pub(crate) mod tests {
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
}
