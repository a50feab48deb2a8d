//! The time model of one node (see the module docs of [`crate::predict`] for the formulas).

use serde::Serialize;

use super::card::Card;

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
    /// [`NextLoad`]); the fields above are the first's. `None` for every other node.
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

/// The second launch's work in a joined node ([`NodeLoad::next`], timed by `joined_time`): its own
/// counts, on the node's threads, registers and shared memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct NextLoad {
    /// Its counts: its tail is the rope's; its prefetch the weight rows its blocks prefetch
    /// before they wait.
    pub work: PathPart,
    /// Its own dependency path (the projections' rows, then `attn_k_b`).
    pub prefix: Option<PrefixLoad>,
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
        return joined_time(card, k, load, &next, after_kernel);
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

/// A launch that runs two launches' work in one grid, the second's blocks waiting for the
/// first's tail (`moe_ffn_rope_kb_*`, `ingot_abi::launch::ffn_rope_kb`: a MoE layer's FFN, whose
/// down tail writes the next layer's normed token, then that layer's projections). Each part is
/// counted and timed as the launch it replaces ([`node_time`] on its own load);
/// the joined node costs one node cost, and the second part's first wave, resident while only
/// the first part's tail block runs, streams the weight rows it prefetches before its wait in
/// that window: [`Constants::weight_prefetch_overlap`] of what the window carries at the card's
/// efficient DRAM bandwidth arrives on time (the same assumed share as every other prefetch).
/// The blocks of the second part that start before the first part's last wave ends are not
/// credited: the first part's stream then keeps the DRAM busy.
///
/// The time of `load` (the first part) joined with `next` (as above): the first
/// part's time, then the second's without a node cost of its own and with the bytes its first
/// wave streamed during the first part's tail taken out of its DRAM stream and of its path's
/// first part. The result's path (`critical_s`) is the whole node less its node cost; its DRAM,
/// L2, issue and tail terms are the parts' sums.
fn joined_time(
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
    let w = &next.work;
    let wave = slots.min(w.blocks) as f64 / w.blocks.max(1) as f64;
    let rate = card.dram_gbps * 1e9 * k.dram_efficiency.value;
    let early = (w.prefetch_bytes.min(w.dram_bytes) as f64 * wave).min(first.tail_s * rate)
        * k.weight_prefetch_overlap.value;
    let early = early.round() as u64;
    let second_load = NodeLoad {
        blocks: w.blocks,
        warp_instructions: w.warp_instructions,
        dram_bytes: w.dram_bytes - early.min(w.dram_bytes),
        reread_bytes: w.reread_bytes,
        tail_warp_instructions: w.tail_warp_instructions,
        host_bytes: 0,
        prefetch_bytes: 0,
        handoff_bytes: 0,
        streamed_bytes: 0,
        prefix: next.prefix.map(|p| PrefixLoad {
            first: PathPart {
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
pub(crate) mod tests;
