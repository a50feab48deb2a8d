//! Counting a chained launch (`attn_merge_v_b_o_*`, `ingot_abi::launch::attn_out`): its blocks
//! take tickets, the merge's first, and `attn_output`'s blocks wait for every merge block. A
//! sample of block indices would run the first tickets' work only, and a waiting block run
//! before the merge would spin.
//!
//! The merge's blocks run first, all of them in one launch (a pair's two halves meet, so each
//! pair's sum runs as on the GPU; the launch leaves the done word at the merge's count). Then
//! each sampled `attn_output` block runs alone, its ticket written into the ticket word: the
//! done word already holds the count it waits for, so it passes at the first look and no spin
//! is counted. The last sampled block runs with the norm tail's counter set to every other
//! block's, as [`super::counts`] does for any done counter, so the tail is counted once and
//! told apart. The control words are set back to 0 after the node.

use ingot_abi::launch::{
    merge_v_b_items, merge_v_b_o_out_blocks, KernelDesc, CHAIN_CTL_TICKET, CHAIN_CTL_WORDS,
};
use ingot_graph::{BufRef, Node, NodeArg};
use ptx_sim::{DevicePtr, LaunchStats, Sim};

use super::tickets::{count_sampled, node_arg, LaunchBlocks, Tickets};
use super::PredictError;

/// The work of a chained launch, in ticket order: `first` merge items, then `waiting` row
/// blocks of `attn_output`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainWork {
    pub ctl: BufRef,
    pub first: u64,
    pub waiting: u64,
}

/// The counters of a chained launch by part.
#[derive(Clone, Copy, Debug)]
pub struct ChainCounts {
    pub work: ChainWork,
    /// The merge's blocks, all run.
    pub first: LaunchStats,
    /// `attn_output`'s blocks, scaled from the sample (its norm tail included).
    pub waiting: LaunchStats,
    /// What the last `attn_output` block ran beyond the mean of the others: the norm tail.
    pub tail_warp_instructions: u64,
    pub blocks_run: u64,
}

/// The chained work of node `n` (kernel `d`), or `None` for any other launch: the kernels with
/// a `chain_ctl` parameter are chained.
pub fn chain_work(n: &Node, d: &KernelDesc) -> Option<ChainWork> {
    let u32_arg = |name: &str| match node_arg(n, d, name) {
        Some(NodeArg::U32(v)) => Some(v),
        _ => None,
    };
    let Some(NodeArg::Buf(ctl)) = node_arg(n, d, "chain_ctl") else {
        return None;
    };
    Some(ChainWork {
        ctl,
        first: u64::from(merge_v_b_items(u32_arg("n_head")?, u32_arg("d_v")?)),
        waiting: u64::from(merge_v_b_o_out_blocks(u32_arg("nrows")?)),
    })
}

/// Runs the chained launch of `w` through `launch` (which runs the given block indices of the
/// node), at most `max_blocks` (≥ 2) sampled `attn_output` blocks; `ctl` is the control words'
/// address, `count` the norm tail's counter (`None`: no tail) and `warps` a block's warps.
pub fn count_chained(
    sim: &mut Sim,
    launch: &LaunchBlocks<'_>,
    (ctl, count): (DevicePtr, Option<DevicePtr>),
    w: &ChainWork,
    (max_blocks, warps): (u64, u64),
) -> Result<ChainCounts, PredictError> {
    let ticket = ctl.offset(u64::from(CHAIN_CTL_TICKET) * 4);
    sim.write(ticket, &0u32.to_le_bytes())?;
    let all: Vec<u64> = (0..w.first).collect();
    let first = launch(sim, &all)?;
    let t = Tickets {
        word: ticket,
        first: w.first,
        blocks: w.waiting,
    };
    let waiting = count_sampled(sim, launch, &t, count, (max_blocks, warps))?;
    sim.write(ctl, &[0u8; CHAIN_CTL_WORDS as usize * 4])?;
    Ok(ChainCounts {
        work: *w,
        first,
        waiting: waiting.stats,
        tail_warp_instructions: waiting.tail_warp_instructions,
        blocks_run: w.first + waiting.blocks_run,
    })
}
