//! Counting a launch whose blocks take tickets: a `moe_gate_up_router_*` launch (the gate/up
//! kernel with its router). A block's work is the ticket it draws when it starts, not its index, so
//! [`super::sample`]'s sample of block indices would run the first tickets' work only; and its
//! routed blocks wait for the router's, so their counts would include spin loops, which depend
//! on the schedule, not on the work.
//!
//! The router's blocks run first, all of them, as on the GPU: the last of them alone, so the
//! routing its last warp runs can be told from the rows (the router's tail). Then each sampled
//! block of the shared experts' and of the routed slots' work runs alone, its ticket written
//! into the ticket word before the launch; the routing is published by then, so a routed block
//! passes its wait at the first look and no spin is counted. Each part is sampled and scaled
//! as [`super::sample`] does. The control words are set back to 0 after the node, as the
//! launch leaves them.

use ingot_abi::launch::moe::MOE_GATE_UP_ROWS;
use ingot_abi::launch::{
    gate_up_router_blocks, KernelDesc, CHAIN_CTL_DONE, CHAIN_CTL_WORDS, MOE_DOWN_BLOCK_ROWS,
    ROUTE_CTL_TICKET, ROUTE_CTL_WORDS,
};
use ingot_graph::{BufRef, Node, NodeArg};
use ptx_sim::{DevicePtr, LaunchStats, Sim};

use super::sample::{sample_blocks, scale};
use super::PredictError;

/// The work of a ticketed launch, in ticket order: `router` blocks, `shared` blocks, `routed`
/// blocks (which wait for the router's), and in a chained FFN (`moe_ffn_*`) `down` blocks,
/// which wait for every gate/up row block (counted in `chain`'s words; their norm tail's
/// counter is `count`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TicketWork {
    pub ctl: BufRef,
    pub router: u64,
    pub shared: u64,
    pub routed: u64,
    pub down: u64,
    pub chain: Option<BufRef>,
    pub count: Option<BufRef>,
}

/// The counters of a ticketed launch by part.
#[derive(Clone, Copy, Debug)]
pub struct TicketCounts {
    pub work: TicketWork,
    /// The router's blocks, all run.
    pub router: LaunchStats,
    /// What the router's last block ran beyond the mean of the others: the routing.
    pub routing_tail_warp_instructions: u64,
    /// The shared experts' and the routed slots' blocks, each scaled from its sample.
    pub shared: LaunchStats,
    pub routed: LaunchStats,
    /// A chained FFN's down blocks, scaled from their sample (the norm tail included), and
    /// what the last of them ran beyond the mean of the others: the norm tail.
    pub down: LaunchStats,
    pub down_tail_warp_instructions: u64,
    /// Blocks run in all.
    pub blocks_run: u64,
}

/// The ticketed work of node `n` (kernel `d`), or `None` for a launch whose block index is its
/// work: the kernels with a `route_ctl` parameter take tickets.
pub fn ticket_work(n: &Node, d: &KernelDesc) -> Option<TicketWork> {
    let arg = |name: &str| node_arg(n, d, name);
    let u32_arg = |name: &str| match arg(name) {
        Some(NodeArg::U32(v)) => Some(v),
        _ => None,
    };
    let Some(NodeArg::Buf(ctl)) = arg("route_ctl") else {
        return None;
    };
    let buf = |name: &str| match arg(name) {
        Some(NodeArg::Buf(r)) => Some(r),
        _ => None,
    };
    let per_expert = u64::from((u32_arg("ff")? / MOE_GATE_UP_ROWS).max(1));
    let chain = buf("chain_ctl");
    Some(TicketWork {
        ctl,
        router: u64::from(gate_up_router_blocks(u32_arg("n_expert")?)),
        shared: u64::from(u32_arg("ff_sh")? / MOE_GATE_UP_ROWS),
        routed: u64::from(u32_arg("n_used")?) * per_expert,
        down: match chain {
            Some(_) => u64::from(u32_arg("nrows")?.div_ceil(MOE_DOWN_BLOCK_ROWS)),
            None => 0,
        },
        chain,
        count: buf("count"),
    })
}

/// Node `n`'s argument for kernel `d`'s parameter `name`.
pub(crate) fn node_arg(n: &Node, d: &KernelDesc, name: &str) -> Option<NodeArg> {
    let i = d.params.iter().position(|p| p.name == name)?;
    n.args.get(i).copied()
}

/// Runs the given block indices of a node in the simulator.
pub type LaunchBlocks<'a> = dyn Fn(&mut Sim, &[u64]) -> Result<LaunchStats, PredictError> + 'a;

/// A part of a ticketed launch: `blocks` blocks from ticket `first` on, drawn from the word at
/// `word`.
pub struct Tickets {
    pub word: DevicePtr,
    pub first: u64,
    pub blocks: u64,
}

/// The counters of a sampled part ([`count_sampled`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Sampled {
    /// Scaled to the part's blocks.
    pub stats: LaunchStats,
    /// What the last block ran beyond the mean of the others: its norm tail (0 without one).
    pub tail_warp_instructions: u64,
    pub blocks_run: u64,
}

/// Runs a sample of at most `max_blocks` (≥ 2) of part `t`'s blocks, each alone with its ticket
/// written into the ticket word first (and run at that block index, so its prefetch guesses
/// its own work), and scales them as [`super::sample`] does. With `count` (a norm tail's done
/// counter, `warps` per block) the last sampled block runs with the counter at every other
/// block's warps, so it runs the tail, counted once and told apart.
pub fn count_sampled(
    sim: &mut Sim,
    launch: &LaunchBlocks<'_>,
    t: &Tickets,
    count: Option<DevicePtr>,
    (max_blocks, warps): (u64, u64),
) -> Result<Sampled, PredictError> {
    if t.blocks == 0 {
        return Ok(Sampled::default());
    }
    let sample = sample_blocks(t.blocks, max_blocks);
    let mut each = Vec::with_capacity(sample.len());
    for (i, &j) in sample.iter().enumerate() {
        let ticket = t.first + j;
        sim.write(t.word, &(ticket as u32).to_le_bytes())?;
        if let (Some(c), true) = (count, i + 1 == sample.len()) {
            let done = u32::try_from((t.blocks - 1) * warps).unwrap_or(u32::MAX);
            sim.write(c, &done.to_le_bytes())?;
        }
        each.push(launch(sim, &[ticket])?);
    }
    let (last, others) = each.split_last().expect("a sample holds a block");
    let mut o = LaunchStats::default();
    for s in others {
        o += *s;
    }
    let tail = match (count, others.len() as u64) {
        (Some(_), n) if n > 0 => last
            .warp_instructions
            .saturating_sub(o.warp_instructions / n),
        _ => 0,
    };
    Ok(Sampled {
        stats: scale(&o, others.len() as u64, last, t.blocks),
        tail_warp_instructions: tail,
        blocks_run: sample.len() as u64,
    })
}

/// Runs the ticketed launch of `w` through `launch` (which runs the given block indices of the
/// node), at most `max_blocks` (≥ 2) sampled blocks per part beyond the router's; `ptr` gives
/// a buffer reference's address (the control words, the norm tail's counter); `warps`: a
/// block's warps.
pub fn count_ticketed(
    sim: &mut Sim,
    launch: &LaunchBlocks<'_>,
    ptr: &dyn Fn(&BufRef) -> DevicePtr,
    w: &TicketWork,
    (max_blocks, warps): (u64, u64),
) -> Result<TicketCounts, PredictError> {
    let ctl = ptr(&w.ctl);
    // The router: tickets 0.. in the order the blocks start; its last block alone.
    let (router, tail) = match w.router {
        0 => (LaunchStats::default(), 0),
        1 => (launch(sim, &[0])?, 0),
        r => {
            let first: Vec<u64> = (0..r - 1).collect();
            let o = launch(sim, &first)?;
            let l = launch(sim, &[r - 1])?;
            let mut all = o;
            all += l;
            let tail = l
                .warp_instructions
                .saturating_sub(o.warp_instructions / (r - 1));
            (all, tail)
        }
    };
    let ticket_word = ctl.offset(u64::from(ROUTE_CTL_TICKET) * 4);
    let part = |sim: &mut Sim, from: u64, blocks: u64, count: Option<DevicePtr>| {
        let t = Tickets {
            word: ticket_word,
            first: w.router + from,
            blocks,
        };
        count_sampled(sim, launch, &t, count, (max_blocks, warps))
    };
    let shared = part(sim, 0, w.shared, None)?;
    let routed = part(sim, w.shared, w.routed, None)?;
    let mut down = Sampled::default();
    if let (Some(chain), true) = (w.chain, w.down > 0) {
        let chain = ptr(&chain);
        // Every gate/up row block has counted (the down blocks then pass their wait at the
        // first look), and the routing is still published: the sampled routed blocks passed
        // it without the last of its waiters.
        let rows = u32::try_from(w.shared + w.routed).unwrap_or(u32::MAX);
        let done = chain.offset(u64::from(CHAIN_CTL_DONE) * 4);
        sim.write(done, &rows.to_le_bytes())?;
        down = part(sim, w.shared + w.routed, w.down, w.count.map(|c| ptr(&c)))?;
        sim.write(chain, &[0u8; CHAIN_CTL_WORDS as usize * 4])?;
    }
    sim.write(ctl, &[0u8; ROUTE_CTL_WORDS as usize * 4])?;
    Ok(TicketCounts {
        work: *w,
        router,
        routing_tail_warp_instructions: tail,
        shared: shared.stats,
        routed: routed.stats,
        down: down.stats,
        down_tail_warp_instructions: down.tail_warp_instructions,
        blocks_run: w.router + shared.blocks_run + routed.blocks_run + down.blocks_run,
    })
}
