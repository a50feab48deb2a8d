//! Counting a plan's nodes in the PTX simulator without the weights: every buffer is allocated
//! zeroed (weights included), constants are written, the `StepState` says the step decodes at
//! position `depth`, and each node runs on a sample of its blocks ([`super::sample`]).
//!
//! Zero weights are enough for counts: the hot loops are branch-free (the audit requires it), so
//! warp instructions and bytes do not depend on the values; what does (the q8_1 rounding
//! branches, the router's top-k on tied scores) is a few instructions per block. The cache rows
//! `0..=depth` hold zeros, which the attention kernels read like any other rows. A launch with a
//! done counter runs its tail in its last block, sampled or not.

use ingot_abi::launch::{ExpertSelection, KernelDesc, MAX_EXPERTS_USED, MOE_ROUTE_ROWS};
use ingot_abi::step::StepState;
use ingot_graph::exec::sim::{sim_args, sim_config};
use ingot_graph::{BufferKind, NodeArg, Plan};
use ptx_sim::{LaunchStats, Sim};

use super::chain::{chain_work, count_chained, ChainCounts};
use super::flash::working_blocks;
use super::sample::{sample_blocks, scale};
use super::tickets::{count_ticketed, node_arg, ticket_work, TicketCounts};
use super::PredictError;

/// One node's counters and how they were obtained.
#[derive(Clone, Copy, Debug)]
pub struct NodeCounts {
    /// Counters of the whole launch (scaled from the sample when `blocks_run < blocks_working`).
    pub stats: LaunchStats,
    pub blocks: u64,
    /// Blocks with work: `blocks` but for a decode flash launch, whose blocks without a segment
    /// exit at once ([`super::flash`]); `stats` counts those with work only.
    pub blocks_working: u64,
    pub blocks_run: u64,
    /// Warp instructions of the launch's last-block-done tail (a kernel with a `count`
    /// parameter): what the block that ran it executed beyond the mean of the others. They are
    /// part of `stats` too. 0 for kernels without a tail.
    pub tail_warp_instructions: u64,
    /// Bit `i` set: the launch read the buffer of argument `i` (`Sim::was_read`); a buffer it
    /// only writes is no part of what it must read.
    pub read_args: u64,
    /// A launch whose blocks take tickets ([`super::tickets`]): its counters by part (`stats`
    /// is their sum, `tail_warp_instructions` 0: the routing runs before the routed blocks,
    /// not after every block).
    pub tickets: Option<TicketCounts>,
    /// A chained launch ([`super::chain`]): its counters by part (`stats` is their sum,
    /// `tail_warp_instructions` its one tail: the first part's rope or the second's norm).
    pub chain: Option<ChainCounts>,
    /// Prefetch lanes of the blocks without work of a decode flash launch (every one of them
    /// runs: a few instructions each), which `stats` leaves out: they hand the next launches'
    /// weights ahead like the working blocks ([`super::flash`]). 0 for every other launch.
    pub idle_prefetch_lanes: u64,
}

/// What a prefill chunk's count needs beyond the decode step's: the chunk's token-count word
/// (set to the whole bucket) and its tokens, whose routing is set to a balanced one after
/// each `moe_route_rows` node (token `t`'s slot `s` takes expert `(t·n_used + s) mod
/// n_expert` with weight `1/n_used`): zero weights would route every token to the same
/// experts, and the expert-grouped products' tiles and bytes depend on how the pairs spread.
/// A real routing is less even, so its products run a few more partial tiles.
#[derive(Clone, Copy, Debug)]
pub struct ChunkCount {
    pub rows: ingot_graph::BufId,
    pub ntok: usize,
    pub n_expert: usize,
    pub n_used: usize,
}

/// Runs every node of `plan` (descriptors `descs`, from [`Plan::check_committed`]) at cache
/// position `depth`, at most `max_blocks` blocks per node (≥ 2); `chunk` for a prefill plan.
pub fn count_nodes(
    plan: &Plan,
    descs: &[&'static KernelDesc],
    depth: usize,
    max_blocks: u64,
    chunk: Option<ChunkCount>,
) -> Result<Vec<NodeCounts>, PredictError> {
    if depth >= plan.ctx {
        return Err(PredictError::Depth {
            depth,
            ctx: plan.ctx,
        });
    }
    let module = ingot_kernels::backend::sim::module()?;
    let mut sim = Sim::new();
    let total: u64 = plan.buffers.iter().map(|b| b.bytes).sum();
    sim.set_memory_limit(total.saturating_add(ptx_sim::DEFAULT_MEMORY_LIMIT));
    let mut ptrs = Vec::with_capacity(plan.buffers.len());
    for b in &plan.buffers {
        let p = match b.kind {
            BufferKind::Weight {
                host_mapped: true, ..
            } => sim.alloc_host_mapped(b.bytes as usize)?,
            _ => sim.alloc(b.bytes as usize)?,
        };
        if let BufferKind::Constant { data } = &b.kind {
            sim.write(p, data)?;
        }
        ptrs.push(p);
    }
    // Every expert table starts as the identity over its tensor: an expert cache starts cold,
    // so every routed expert is read over the host link (the caller scales that by a hit rate).
    for (t, entries) in plan.expert_tables(|b| ptrs[b.0 as usize].0) {
        sim.write(ptrs[t.0 as usize], bytemuck::cast_slice(&entries))?;
    }
    let state = StepState {
        token: 1,
        pos: depth as u32,
        next_token: 0,
        steps_done: 0,
    };
    sim.write(ptrs[plan.step.0 as usize], bytemuck::bytes_of(&state))?;
    if let Some(c) = chunk {
        sim.write(ptrs[c.rows.0 as usize], &(c.ntok as u32).to_le_bytes())?;
    }

    let mut out = Vec::with_capacity(plan.nodes.len());
    for (n, d) in plan.nodes.iter().zip(descs) {
        let cfg = sim_config(n, d);
        let args = sim_args(n, &ptrs);
        let blocks = u64::from(cfg.grid[0]) * u64::from(cfg.grid[1]) * u64::from(cfg.grid[2]);
        // The blocks the counters stand for: the grid, or a decode flash launch's working
        // blocks (the others exit at once), sampled as a grid of their own.
        let work = working_blocks(n, d, depth, blocks);
        let runs = work.as_ref().map_or(blocks, |w| w.len() as u64);
        let sample: Vec<u64> = sample_blocks(runs, max_blocks)
            .into_iter()
            .map(|i| work.as_ref().map_or(i, |w| w[i as usize]))
            .collect();
        let launch = |sim: &mut Sim, which: &[u64]| {
            sim.launch_blocks(module, &n.kernel, cfg, &args, which)
                .map_err(|source| PredictError::Sim {
                    label: n.label.clone(),
                    source,
                })
        };
        let count = d.params.iter().position(|p| p.name == "count");
        let mut tail_warp_instructions = 0;
        sim.clear_read_marks();
        let mut tickets = None;
        let mut chain = None;
        let mut blocks_run = sample.len() as u64;
        // A launch with a done counter always runs its last block alone, so its tail's
        // instructions can be told apart from the rows'.
        let stats = if let Some(w) = ticket_work(n, d) {
            let ptr = |r: &ingot_graph::BufRef| ptrs[r.buf.0 as usize].offset(r.offset);
            let warps = u64::from(d.threads().div_ceil(32));
            let t = count_ticketed(&mut sim, &launch, &ptr, &w, (max_blocks, warps))?;
            blocks_run = t.blocks_run;
            tail_warp_instructions = t.down_tail_warp_instructions;
            tickets = Some(t);
            let mut all = t.router;
            all += t.shared;
            all += t.routed;
            all += t.down;
            // A joined node's second launch (`moe_ffn_rope_kb_*`: the next layer's projections,
            // tickets after the FFN's; their rope tail's counter is `rope_count`).
            if let Some(w) = chain_work(n, d).filter(|w| w.joined.is_some()) {
                let rope = match node_arg(n, d, "rope_count") {
                    Some(NodeArg::Buf(r)) => Some(ptr(&r)),
                    _ => None,
                };
                let c = count_chained(&mut sim, &launch, &ptr, rope, &w, (max_blocks, warps))?;
                blocks_run += c.blocks_run;
                all += c.first;
                all += c.waiting;
                chain = Some(c);
            }
            all
        } else if let Some(w) = chain_work(n, d) {
            let ptr = |r: &ingot_graph::BufRef| ptrs[r.buf.0 as usize].offset(r.offset);
            let count = match count.map(|i| &n.args[i]) {
                Some(NodeArg::Buf(r)) => Some(ptr(r)),
                _ => None,
            };
            let warps = u64::from(d.threads().div_ceil(32));
            let c = count_chained(&mut sim, &launch, &ptr, count, &w, (max_blocks, warps))?;
            blocks_run = c.blocks_run;
            // The tails: the rope's (first part) or the norm's (second part); or both (the
            // norm's first, the rope's second).
            tail_warp_instructions = c.tail_warp_instructions + c.first_tail_warp_instructions;
            chain = Some(c);
            let mut all = c.first;
            all += c.waiting;
            all += c.then;
            all
        } else if sample.len() as u64 == runs && (count.is_none() || runs == 1) {
            launch(&mut sim, &sample)?
        } else {
            let (last, others) = sample.split_last().expect("a sample holds the last block");
            let o = launch(&mut sim, others)?;
            // A done counter (see `KernelDesc`) now holds the sampled blocks' warps only: set
            // it to every other block's, so the last block runs the launch's tail (counted
            // once, as on the GPU) and leaves the counter at 0.
            if let Some(i) = count {
                if let NodeArg::Buf(r) = &n.args[i] {
                    let warps = u64::from(d.threads().div_ceil(32));
                    let done = u32::try_from((runs - 1) * warps).unwrap_or(u32::MAX);
                    sim.write(ptrs[r.buf.0 as usize].offset(r.offset), &done.to_le_bytes())?;
                }
            }
            let l = launch(&mut sim, std::slice::from_ref(last))?;
            if count.is_some() && !others.is_empty() {
                let mean = o.warp_instructions / others.len() as u64;
                tail_warp_instructions = l.warp_instructions.saturating_sub(mean);
            }
            scale(&o, others.len() as u64, &l, runs)
        };
        // The blocks without work run for their prefetches alone (they read nothing).
        let idle: Vec<u64> = match &work {
            Some(w) => (0..blocks)
                .filter(|b| w.binary_search(b).is_err())
                .collect(),
            None => Vec::new(),
        };
        let idle_prefetch_lanes = if idle.is_empty() {
            0
        } else {
            launch(&mut sim, &idle)?.prefetch_lanes
        };
        let read_args = n
            .args
            .iter()
            .enumerate()
            .filter(|(_, a)| match a {
                NodeArg::Buf(r) => sim.was_read(ptrs[r.buf.0 as usize]),
                _ => false,
            })
            .fold(0u64, |m, (i, _)| m | 1 << i);
        if let Some(c) = chunk.filter(|_| n.kernel == MOE_ROUTE_ROWS.name) {
            let i = d.params.iter().position(|p| p.name == "sel");
            if let Some(NodeArg::Buf(r)) = i.map(|i| &n.args[i]) {
                let sel = balanced_routing(c);
                sim.write(
                    ptrs[r.buf.0 as usize].offset(r.offset),
                    bytemuck::cast_slice(&sel),
                )?;
            }
        }
        out.push(NodeCounts {
            stats,
            blocks,
            blocks_working: runs,
            blocks_run,
            tail_warp_instructions,
            read_args,
            tickets,
            chain,
            idle_prefetch_lanes,
        });
    }
    Ok(out)
}

/// The balanced routing of [`ChunkCount`].
fn balanced_routing(c: ChunkCount) -> Vec<ExpertSelection> {
    let used = c.n_used.min(MAX_EXPERTS_USED);
    (0..c.ntok)
        .map(|t| {
            let mut sel = ExpertSelection {
                ids: [0; MAX_EXPERTS_USED],
                weights: [0.0; MAX_EXPERTS_USED],
            };
            for s in 0..used {
                sel.ids[s] = ((t * c.n_used + s) % c.n_expert.max(1)) as u32;
                sel.weights[s] = 1.0 / used as f32;
            }
            sel
        })
        .collect()
}
