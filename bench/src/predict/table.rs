//! The plan table: one row per node with its counts, the node-count line, and the prediction.

use std::collections::BTreeSet;
use std::fmt;

use ingot_abi::launch::KernelDesc;
use ingot_gguf::Gguf;
use ingot_graph::build_prefill_plan_for;
use ingot_graph::planner::build_plan_for;
use ingot_graph::{BufferKind, ExpertCacheOptions, NodeArg, Plan, PlanOptions};
use ingot_model::ModelConfig;
use serde::Serialize;

use super::card::Card;
use super::chain::chain_prefix;
use super::counts::{count_nodes, ChunkCount};
use super::flash::{cache_read_bytes, handoff_max, handoff_target, split_of};
use super::footprint::read_split;
use super::handoff::handed_ahead;
use super::measurement::Measurement;
use super::model::{
    node_time, prefetch_before_wait, Constants, NextLoad, NodeLoad, NodeTime, PathPart, PrefixLoad,
    PREFETCH_LINE_BYTES,
};
use super::resources::kernel_resources;
use super::tickets::{node_arg, TicketCounts};
use super::PredictError;

/// What to plan and count.
#[derive(Clone, Copy, Debug)]
pub struct TableOptions {
    /// Positions the cache holds.
    pub ctx: usize,
    /// Cached positions before the decoded token (its position).
    pub depth: usize,
    /// Card to predict for; the plan's attention split is then sized for its SMs.
    pub card: Option<&'static Card>,
    /// Most blocks simulated per node (≥ 2).
    pub max_blocks: u64,
    pub constants: Constants,
    /// Routed experts beyond VRAM: the plan's expert cache, and the fraction of the experts a
    /// token uses that are found in a VRAM slot (e.g. `ingot replay`'s hit rate). The simulator
    /// runs the cache cold (every routed expert over the link); hits move that share of the
    /// bytes back to DRAM.
    pub expert_cache: Option<(ExpertCacheOptions, f64)>,
    /// How the latent cache stores its rows.
    pub cache_type: ingot_model::CacheType,
    /// Count a prefill chunk of this many tokens at positions `depth..` (the bucket's plan,
    /// [`ingot_graph::build_prefill_plan_for`]) instead of a decode step.
    pub prefill: Option<usize>,
}

/// `nodes: N total, D per dense layer, M per MoE layer, K outside layers`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeCountLine {
    pub total: usize,
    /// Distinct per-layer counts of the dense layers (one value when they agree).
    pub per_dense_layer: Vec<usize>,
    pub per_moe_layer: Vec<usize>,
    pub outside_layers: usize,
}

/// One node of the plan with its counts.
#[derive(Clone, Debug, Serialize)]
pub struct NodeRow {
    pub index: usize,
    pub label: String,
    pub kernel: String,
    pub layer: Option<usize>,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Blocks the simulator ran (the counts are scaled from them when fewer than the grid's).
    pub blocks_run: u64,
    /// Unique bytes read plus bytes written (DRAM traffic).
    pub dram_bytes: u64,
    /// Bytes read again after their first read.
    pub reread_bytes: u64,
    /// Bytes read over the host link (routed experts outside VRAM).
    pub host_bytes: u64,
    pub warp_instructions: u64,
    /// Registers per thread from the audit budgets (`None`: the kernel is not budgeted).
    pub registers: Option<u32>,
    /// Static + dynamic shared memory per block.
    pub shared_bytes: u32,
    pub time: Option<NodeTime>,
    /// What the time model was given for the node (`None` without a card).
    #[serde(skip)]
    pub load: Option<NodeLoad>,
    /// Bytes of routed expert tensors (`*_exps`) among [`NodeRow::dram_bytes`].
    #[serde(skip)]
    pub routed_bytes: u64,
    /// Measured on a GPU (`--measure`): the median event-to-event time, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_s: Option<f64>,
}

/// The prediction for one card.
#[derive(Clone, Debug, Serialize)]
pub struct Prediction {
    pub card: Card,
    pub constants: Constants,
    /// Sum of the node times, seconds.
    pub step_s: f64,
    /// Tokens per second: the plan's tokens over `step_s`.
    pub tok_s: f64,
    /// Sum of the launch costs alone, seconds.
    pub launch_s: f64,
    /// Nodes bound by DRAM, L2 and issue.
    pub bound_dram: usize,
    pub bound_l2: usize,
    pub bound_issue: usize,
    pub bound_pcie: usize,
    /// tok/s if the step streamed its DRAM bytes at full peak bandwidth and nothing else.
    pub dram_limit_tok_s: f64,
    /// The step's DRAM bytes at the efficient bandwidth the node times assume
    /// ([`Constants::dram_efficiency`]), seconds: no overlap brings the step below it.
    pub dram_floor_s: f64,
    /// DRAM time the weight prefetch before the wait and the weights handed ahead moved out of
    /// the nodes, summed, at [`Constants::weight_prefetch_overlap`] (what it saves is less: most
    /// nodes are not DRAM-bound).
    pub prefetched_s: f64,
    /// The step without either prefetch's overlap (their instructions still counted).
    pub without_prefetch_s: f64,
    /// The step with all of each node's prefetchable stream on time: the mechanism's bound.
    pub all_prefetch_on_time_s: f64,
}

/// The whole table.
#[derive(Clone, Debug, Serialize)]
pub struct PlanTable {
    pub model: String,
    pub ctx: usize,
    pub depth: usize,
    /// Tokens one run of the plan processes: 1 for a decode step, the chunk's for a prefill.
    pub tokens: usize,
    pub max_blocks_per_node: u64,
    pub nodes: NodeCountLine,
    pub dram_bytes: u64,
    pub reread_bytes: u64,
    /// Bytes over the host link per step (routed experts outside VRAM).
    pub host_bytes: u64,
    pub warp_instructions: u64,
    pub rows: Vec<NodeRow>,
    pub prediction: Option<Prediction>,
    /// Measured on a GPU (`--measure`, [`super::measured::attach`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measurement: Option<Measurement>,
}

/// Plans the decode step of the model whose header is `gguf`, counts every node in the
/// simulator and, with a card, predicts its time.
pub fn plan_table(gguf: &Gguf, opts: TableOptions) -> Result<PlanTable, PredictError> {
    if opts.max_blocks < 2 {
        return Err(PredictError::MaxBlocks(opts.max_blocks));
    }
    let config = ModelConfig::from_gguf(gguf)?;
    let plan_opts = plan_options(&opts);
    let (plan, chunk) = match opts.prefill {
        None => (build_plan_for(&config, gguf, plan_opts)?, None),
        Some(ntok) => {
            let pre = build_prefill_plan_for(&config, gguf, plan_opts, ntok)?;
            let chunk = ChunkCount {
                rows: pre.rows,
                ntok,
                n_expert: config.n_expert,
                n_used: config.n_expert_used,
            };
            (pre.plan, Some(chunk))
        }
    };
    table_of(gguf, &config, &plan, opts, chunk)
}

/// The [`PlanOptions`] of a table: the split sized for the card's SMs.
pub(crate) fn plan_options(opts: &TableOptions) -> PlanOptions {
    PlanOptions {
        expert_cache: opts.expert_cache.map(|(c, _)| c),
        cache_type: opts.cache_type,
        ..match opts.card {
            Some(c) => PlanOptions::for_device(opts.ctx, c.sms),
            None => PlanOptions::for_ctx(opts.ctx),
        }
    }
}

/// The table of `plan` (a decode step, a prefill chunk with `chunk`, or the NextN/MTP block's
/// step) for the model `gguf` configured as `config`.
pub(crate) fn table_of(
    gguf: &Gguf,
    config: &ModelConfig,
    plan: &Plan,
    opts: TableOptions,
    chunk: Option<ChunkCount>,
) -> Result<PlanTable, PredictError> {
    let hit_rate = opts.expert_cache.map_or(0.0, |(_, h)| h.clamp(0.0, 1.0));
    let tokens = chunk.map_or(1, |c| c.ntok);
    if opts.depth + tokens > opts.ctx {
        return Err(PredictError::Depth {
            depth: opts.depth + tokens - 1,
            ctx: opts.ctx,
        });
    }
    let descs = plan.check_committed()?;
    let counts = count_nodes(plan, &descs, opts.depth, opts.max_blocks, chunk)?;
    let arch = opts.card.map_or("sm_86", |c| c.arch);
    let mut rows = Vec::with_capacity(plan.nodes.len());
    for (i, ((n, d), c)) in plan.nodes.iter().zip(&descs).zip(&counts).enumerate() {
        let res = kernel_resources(arch, &n.kernel)?;
        let split = split_of(n, d, opts.depth);
        let (unique, reread, routed) =
            read_split(plan, config, (i, d, split), (opts.depth, tokens), c);
        let handoff = handoff_max(n, d);
        // Cold-cache host bytes, split by the hit rate between the link and the VRAM slots.
        let cold = c.stats.host_bytes_fetched;
        let host_bytes = (cold as f64 * (1.0 - hit_rate)).round() as u64;
        let dram_bytes = unique + 32 * c.stats.sectors_written + (cold - host_bytes);
        let shared_bytes = res.static_shared + d.shared_bytes;
        let load = opts.card.map(|_| NodeLoad {
            blocks: c.blocks_working,
            threads_per_block: d.threads(),
            // A kernel missing from the budgets is charged the most registers a thread
            // can have, so its occupancy is not overstated.
            registers: res.registers.unwrap_or(255),
            shared_bytes,
            warp_instructions: c.stats.warp_instructions,
            dram_bytes,
            reread_bytes: reread,
            tail_warp_instructions: c.tail_warp_instructions,
            host_bytes,
            // A launch that hands weights ahead prefetches none of its own.
            prefetch_bytes: if handoff.is_some() {
                0
            } else {
                (c.stats.prefetch_lanes * PREFETCH_LINE_BYTES).min(unique)
            },
            handoff_bytes: handoff.map_or(0, |max| {
                ((c.stats.prefetch_lanes + c.idle_prefetch_lanes) * PREFETCH_LINE_BYTES).min(max)
            }),
            // Read evict-first: a flash launch's cache rows (its `.cs` tile loads), a weight
            // in the launch's L2 streaming window (`Node::l2_streaming`, read whole).
            streamed_bytes: (handoff.map_or(0, |_| cache_read_bytes(plan, i, opts.depth + tokens))
                + n.l2_streaming
                    .map_or(0, |w| plan.buffers[w.0 as usize].bytes))
            .min(dram_bytes),
            prefix: c
                .tickets
                .map(|t| prefix_load(plan, (config, tokens), n, d, &t, (routed, reread)))
                .or(c
                    .chain
                    .map(|t| chain_prefix(plan, n, d, &t, dram_bytes, reread))),
            next: None,
        });
        let load = load.map(|l| match (c.tickets, c.chain) {
            (Some(_), Some(chain)) => joined_load(plan, n, d, l, &chain),
            _ => l,
        });
        let time = opts
            .card
            .zip(load)
            .map(|(card, load)| node_time(card, &opts.constants, &load, i > 0));
        rows.push(NodeRow {
            index: i,
            label: n.label.clone(),
            kernel: n.kernel.clone(),
            layer: n.layer,
            grid: d.grid(n.items),
            block: d.block,
            blocks_run: c.blocks_run,
            dram_bytes,
            reread_bytes: reread,
            host_bytes,
            warp_instructions: c.stats.warp_instructions,
            registers: res.registers,
            shared_bytes,
            time,
            load,
            routed_bytes: routed,
            measured_s: None,
        });
    }
    // The weight prefetch before the wait and the weights handed ahead, node by node against
    // the times alone of the launches before it; the step without them, and with all of each
    // node's prefetchable stream on time (the mechanisms' bound), for the comparison the
    // prediction prints.
    let mut without_s = 0.0;
    let mut all_on_time_s = 0.0;
    if let Some(card) = opts.card {
        let k = &opts.constants;
        let mut k_all = *k;
        k_all.weight_prefetch_overlap.value = 1.0;
        let alone: Vec<Option<(NodeLoad, NodeTime)>> =
            rows.iter().map(|r| r.load.zip(r.time)).collect();
        // The node each launch hands weights ahead to, and from where.
        let mut source = vec![None; alone.len()];
        for (i, d) in descs.iter().enumerate() {
            if let Some(j) = handoff_target(plan, i, d) {
                source[j] = Some(i);
            }
        }
        for (i, a) in alone.iter().enumerate() {
            let Some((load, t)) = *a else { continue };
            without_s += t.total_s;
            all_on_time_s += t.total_s;
            if let Some((prev_load, prev)) = i.checked_sub(1).and_then(|p| alone[p]) {
                // Both fill the predecessor's idle DRAM time: the better one counts, never both.
                let between: Vec<(NodeLoad, NodeTime)> = source[i]
                    .map_or(&[][..], |s| &alone[s..i])
                    .iter()
                    .flatten()
                    .copied()
                    .collect();
                // A joined node's handed rows are its FFN's, whose routed path keeps its bytes.
                let chained = counts[i].chain.is_some() && counts[i].tickets.is_none();
                let both = |k: &Constants| {
                    let wait = prefetch_before_wait(card, k, &load, &t, &prev_load, &prev);
                    let ahead = handed_ahead(card, k, (&load, &t), &between, (true, chained));
                    if ahead.total_s < wait.total_s {
                        ahead
                    } else {
                        wait
                    }
                };
                let with = both(k);
                let all = both(&k_all);
                all_on_time_s += all.total_s - t.total_s;
                rows[i].time = Some(with);
            }
        }
    }
    let prediction = opts.card.map(|card| {
        let floor = step_floor(card, &opts.constants, &rows);
        let bounds = (without_s.max(floor), all_on_time_s.max(floor));
        predict(card, opts.constants, &rows, tokens, bounds)
    });
    Ok(PlanTable {
        model: config_name(gguf),
        ctx: opts.ctx,
        depth: opts.depth,
        tokens,
        max_blocks_per_node: opts.max_blocks,
        nodes: node_counts(plan, config),
        dram_bytes: rows.iter().map(|r| r.dram_bytes).sum(),
        reread_bytes: rows.iter().map(|r| r.reread_bytes).sum(),
        host_bytes: rows.iter().map(|r| r.host_bytes).sum(),
        warp_instructions: rows.iter().map(|r| r.warp_instructions).sum(),
        rows,
        prediction,
        measurement: None,
    })
}

fn config_name(gguf: &Gguf) -> String {
    gguf.kv
        .iter()
        .find(|(k, _)| k == "general.name")
        .and_then(|(_, v)| match v {
            ingot_gguf::MetaValue::String(s) => Some(s.clone()),
            _ => None,
        })
        .unwrap_or_else(|| "(unnamed)".into())
}

/// A joined node's load (`moe_ffn_rope_kb_*`, [`NextLoad`]): `l`, counted over the whole node,
/// split into the FFN's part and the projections' (`chain`, the second launch's counters).
/// The projections' DRAM bytes are their weights and small inputs (`w0`, `w1`, `w_kb`,
/// `kv_norm`, `rope_freq`) and the sectors they write; their re-reads their share of the warp
/// instructions; their prefetch what their blocks prefetched; their tail the rope's. The FFN's
/// part keeps the rest, its path and its norm tail.
fn joined_load(
    plan: &Plan,
    n: &ingot_graph::Node,
    d: &KernelDesc,
    l: NodeLoad,
    chain: &super::chain::ChainCounts,
) -> NodeLoad {
    let bytes = |name: &str| match node_arg(n, d, name) {
        Some(NodeArg::Buf(r)) => plan.buffers[r.buf.0 as usize].bytes,
        _ => 0,
    };
    let mut parts = chain.first;
    parts += chain.waiting;
    let written = 32 * parts.sectors_written;
    let weights = ["w0", "w1", "w_kb", "kv_norm", "rope_freq"];
    let dram = (weights.iter().map(|w| bytes(w)).sum::<u64>() + written).min(l.dram_bytes);
    let instructions = parts.warp_instructions.min(l.warp_instructions);
    let reread = (l.reread_bytes as f64 * instructions as f64 / l.warp_instructions.max(1) as f64)
        .round() as u64;
    let prefetch = (parts.prefetch_lanes * PREFETCH_LINE_BYTES).min(dram);
    let next = NextLoad {
        work: PathPart {
            blocks: chain.work.first + chain.work.waiting,
            warp_instructions: instructions,
            dram_bytes: dram,
            reread_bytes: reread,
            tail_warp_instructions: chain.first_tail_warp_instructions,
            prefetch_bytes: prefetch,
        },
        prefix: Some(chain_prefix(plan, n, d, chain, dram, reread)),
    };
    NodeLoad {
        blocks: l.blocks.saturating_sub(next.work.blocks),
        warp_instructions: l.warp_instructions - instructions,
        dram_bytes: l.dram_bytes - dram,
        reread_bytes: l.reread_bytes - reread,
        prefetch_bytes: l.prefetch_bytes.saturating_sub(prefetch),
        next: Some(next),
        ..l
    }
}

/// The router's path through a ticketed launch ([`PrefixLoad`]): the router reads its weights
/// and input once; the routed blocks read the routed experts' gate/up bytes (`routed` less the
/// down part's) and a share of the node's re-reads (`reread`) by their share of the rows'
/// instructions. A chained FFN's down blocks follow: they read the down weights (`down`, the
/// routed slots' share of its tensor, and `down_sh`), which they prefetch before their wait,
/// and their norm tail.
fn prefix_load(
    plan: &Plan,
    (config, tokens): (&ModelConfig, usize),
    n: &ingot_graph::Node,
    d: &KernelDesc,
    t: &TicketCounts,
    (routed, reread): (u64, u64),
) -> PrefixLoad {
    let bytes = |name: &str| arg_read_bytes(plan, (config, tokens), n, d, name);
    let rows = t.shared.warp_instructions + t.routed.warp_instructions + t.down.warp_instructions;
    let share = |w: u64| (reread as f64 * w as f64 / rows.max(1) as f64).round() as u64;
    let then = (t.work.down > 0).then(|| {
        let down = bytes("down") + bytes("down_sh");
        PathPart {
            blocks: t.work.down,
            warp_instructions: t.down.warp_instructions,
            dram_bytes: down,
            reread_bytes: share(t.down.warp_instructions),
            tail_warp_instructions: t.down_tail_warp_instructions,
            prefetch_bytes: down,
        }
    });
    let routed_down = if then.is_some() { bytes("down") } else { 0 };
    PrefixLoad {
        first: PathPart {
            blocks: t.work.router,
            warp_instructions: t.router.warp_instructions,
            dram_bytes: bytes("rw") + bytes("rx"),
            tail_warp_instructions: t.routing_tail_warp_instructions,
            ..PathPart::default()
        },
        waiting: PathPart {
            blocks: t.work.routed,
            warp_instructions: t.routed.warp_instructions,
            dram_bytes: routed.saturating_sub(routed_down),
            reread_bytes: share(t.routed.warp_instructions),
            ..PathPart::default()
        },
        then,
    }
}

/// Bytes a launch reads through its argument `name`: the buffer's, or through an expert table
/// the routed slots' share of the tensor it names (0 when that tensor is host-mapped).
fn arg_read_bytes(
    plan: &Plan,
    (config, tokens): (&ModelConfig, usize),
    n: &ingot_graph::Node,
    d: &KernelDesc,
    name: &str,
) -> u64 {
    let i = d.params.iter().position(|p| p.name == name);
    let Some(NodeArg::Buf(r)) = i.and_then(|i| n.args.get(i)) else {
        return 0;
    };
    match plan.buffers[r.buf.0 as usize].kind {
        BufferKind::ExpertTable { weight, .. } => match plan.buffers[weight.0 as usize].kind {
            BufferKind::Weight {
                host_mapped: false, ..
            } => {
                let used = (tokens * config.n_expert_used).min(config.n_expert.max(1));
                let e = config.n_expert.max(1) as u64;
                plan.buffers[weight.0 as usize].bytes * used as u64 / e
            }
            _ => 0,
        },
        _ => plan.buffers[r.buf.0 as usize].bytes,
    }
}

fn node_counts(plan: &Plan, config: &ModelConfig) -> NodeCountLine {
    let summary = plan.summary();
    let mut dense = BTreeSet::new();
    let mut moe = BTreeSet::new();
    for (il, &n) in summary.nodes_per_layer.iter().enumerate() {
        if config.is_moe_layer(il) {
            moe.insert(n);
        } else {
            dense.insert(n);
        }
    }
    NodeCountLine {
        total: summary.nodes,
        per_dense_layer: dense.into_iter().collect(),
        per_moe_layer: moe.into_iter().collect(),
        outside_layers: summary.nodes_outside_layers,
    }
}

/// The nodes run one after the other and share one DRAM: whatever overlaps, a step cannot move
/// its bytes faster than the streaming rate the node times assume.
fn step_floor(card: &Card, constants: &Constants, rows: &[NodeRow]) -> f64 {
    let dram: u64 = rows.iter().map(|r| r.dram_bytes).sum();
    dram as f64 / (card.dram_gbps * 1e9 * constants.dram_efficiency.value)
}

fn predict(
    card: &Card,
    constants: Constants,
    rows: &[NodeRow],
    tokens: usize,
    (without_prefetch_s, all_prefetch_on_time_s): (f64, f64),
) -> Prediction {
    let times: Vec<&NodeTime> = rows.iter().filter_map(|r| r.time.as_ref()).collect();
    let count = |b: &str| times.iter().filter(|t| t.bound == b).count();
    let dram: u64 = rows.iter().map(|r| r.dram_bytes).sum();
    let floor = step_floor(card, &constants, rows);
    let step_s = times.iter().map(|t| t.total_s).sum::<f64>().max(floor);
    Prediction {
        card: *card,
        constants,
        step_s,
        tok_s: tokens as f64 / step_s,
        launch_s: times.iter().map(|t| t.launch_s).sum(),
        bound_dram: count("dram"),
        bound_l2: count("l2"),
        bound_issue: count("issue"),
        bound_pcie: count("pcie"),
        dram_limit_tok_s: tokens as f64 * card.dram_gbps * 1e9 / dram.max(1) as f64,
        dram_floor_s: floor,
        prefetched_s: times.iter().map(|t| t.prefetched_s).sum(),
        without_prefetch_s,
        all_prefetch_on_time_s,
    }
}

impl fmt::Display for NodeCountLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &[usize]| match v {
            [] => "0".to_string(),
            [one] => one.to_string(),
            many => many
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join("/"),
        };
        write!(
            f,
            "nodes: {} total, {} per dense layer, {} per MoE layer, {} outside layers",
            self.total,
            list(&self.per_dense_layer),
            list(&self.per_moe_layer),
            self.outside_layers
        )
    }
}

impl fmt::Display for PlanTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let timed = self.prediction.is_some();
        let measured = self.measurement.is_some();
        write!(
            f,
            "{:>4} {:<26} {:<28} {:>5} {:>7} {:>5} {:>12} {:>11} {:>12} {:>4} {:>6}",
            "node",
            "label",
            "kernel",
            "layer",
            "grid",
            "run",
            "DRAM B",
            "re-read B",
            "warp instr",
            "regs",
            "smem"
        )?;
        if timed {
            write!(f, " {:>9} {:<5}", "time us", "bound")?;
        }
        if measured {
            write!(f, " {:>11}", "measured us")?;
        }
        writeln!(f)?;
        for r in &self.rows {
            let layer = r.layer.map_or_else(|| "-".into(), |l| l.to_string());
            let regs = r.registers.map_or_else(|| "?".into(), |v| v.to_string());
            write!(
                f,
                "{:>4} {:<26} {:<28} {:>5} {:>7} {:>5} {:>12} {:>11} {:>12} {:>4} {:>6}",
                r.index,
                r.label,
                r.kernel,
                layer,
                r.grid[0] * r.grid[1] * r.grid[2],
                r.blocks_run,
                r.dram_bytes,
                r.reread_bytes,
                r.warp_instructions,
                regs,
                r.shared_bytes
            )?;
            if let Some(t) = &r.time {
                write!(f, " {:>9.2} {:<5}", t.total_s * 1e6, t.bound)?;
            }
            if measured {
                match r.measured_s {
                    Some(m) => write!(f, " {:>11.2}", m * 1e6)?,
                    None => write!(f, " {:>11}", "-")?,
                }
            }
            writeln!(f)?;
        }
        writeln!(f, "{}", self.nodes)?;
        let unit = if self.tokens == 1 {
            "step".to_string()
        } else {
            format!("prefill chunk of {} tokens", self.tokens)
        };
        write!(
            f,
            "per {unit}: {:.1} MB from DRAM, {:.1} MB re-read, {} warp instructions \
             (ctx {}, depth {}, at most {} blocks simulated per node)",
            self.dram_bytes as f64 / 1e6,
            self.reread_bytes as f64 / 1e6,
            self.warp_instructions,
            self.ctx,
            self.depth,
            self.max_blocks_per_node
        )?;
        if self.host_bytes > 0 {
            write!(
                f,
                "; {:.1} MB over the host link (routed experts outside VRAM)",
                self.host_bytes as f64 / 1e6
            )?;
        }
        if let Some(p) = &self.prediction {
            write!(
                f,
                "\nPREDICTED (model, not a measurement) on {} ({}): {:.1} us per {unit} = {:.1} tok/s{} \
                 ({:.1} us of it launch cost; nodes bound by DRAM {}, L2 {}, issue {}, PCIe {}); \
                 DRAM-only limit {:.1} tok/s",
                p.card.display,
                p.card.arch,
                p.step_s * 1e6,
                p.tok_s,
                if self.tokens == 1 {
                    String::new()
                } else {
                    format!(" (pp{})", self.tokens)
                },
                p.launch_s * 1e6,
                p.bound_dram,
                p.bound_l2,
                p.bound_issue,
                p.bound_pcie,
                p.dram_limit_tok_s
            )?;
            // What is neither the DRAM floor nor the node cost: instructions, tails and
            // dependent parts beyond their bytes, less what the prefetches moved.
            write!(
                f,
                "\nwhere the time goes: {:.1} us the DRAM bytes at the assumed efficient bandwidth \
                 ({:.0}% of {:.0} GB/s), {:.1} us the nodes' fixed cost, {:.1} us the rest",
                p.dram_floor_s * 1e6,
                p.constants.dram_efficiency.value * 100.0,
                p.card.dram_gbps,
                p.launch_s * 1e6,
                (p.step_s - p.dram_floor_s - p.launch_s) * 1e6
            )?;
            if p.card.early_launch() {
                write!(
                    f,
                    "\nnodes after the first start early (programmatic dependent launch): {:.0}% of each \
                     one's {:.2} us node cost ASSUMED hidden (early_launch_hidden, not yet measured)",
                    p.constants.early_launch_hidden.value * 100.0,
                    p.constants.launch_in_graph_s.value * 1e6
                )?;
            }
            if p.prefetched_s > 0.0 {
                let what = if p.card.early_launch() {
                    "weight prefetch before the wait and weights handed ahead"
                } else {
                    "weights handed ahead (no early launch on this card)"
                };
                write!(
                    f,
                    "\n{what}: {:.1} us per {unit} saved ({:.1} us of DRAM time moved before the \
                     nodes start) with {:.0}% of what each node could stream ASSUMED on time \
                     (weight_prefetch_overlap, not yet measured); with all of it on time {:.1} us = {:.1} tok/s",
                    (p.without_prefetch_s - p.step_s) * 1e6,
                    p.prefetched_s * 1e6,
                    p.constants.weight_prefetch_overlap.value * 100.0,
                    p.all_prefetch_on_time_s * 1e6,
                    self.tokens as f64 / p.all_prefetch_on_time_s
                )?;
            }
        }
        if let Some(m) = &self.measurement {
            write!(f, "\n{m}")?;
        }
        Ok(())
    }
}
