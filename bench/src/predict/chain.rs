//! Counting a chained launch (`attn_merge_v_b_o_*`, `ingot_abi::launch::attn_out`;
//! `gemv2_rope_kb_*`, `ingot_abi::launch::projections`): its blocks take tickets, the first
//! part's first, and the second part's blocks wait for the first. A sample of block indices
//! would run the first tickets' work only, and a waiting block run before the first part would
//! spin.
//!
//! The merge's blocks run first, all of them in one launch (a pair's two halves meet, so each
//! pair's sum runs as on the GPU; the launch leaves the done word at the merge's count). The
//! gemv2's blocks of `gemv2_rope_kb_*` are sampled instead, each alone with its ticket written
//! into the ticket word, the last with the rope tail's counter at every other block's: it runs
//! the tail (told apart from the rows, as [`super::counts`] does for any done counter). Then
//! each sampled waiting block runs alone, its ticket written and the done word set to the first
//! part's count, so it passes at the first look and no spin is counted; `attn_output`'s last
//! sampled block runs its norm tail the same way. The control words are set back to 0 after
//! the node.

use ingot_abi::launch::{
    gemv2_rope_kb_blocks, merge_v_b_items, merge_v_b_o_out_blocks, KernelDesc, CHAIN_CTL_DONE,
    CHAIN_CTL_TICKET, CHAIN_CTL_WORDS,
};
use ingot_abi::weight_types::{GemvType, CHAIN_ROPE_KB};
use ingot_graph::{BufRef, Node, NodeArg};
use ptx_sim::{DevicePtr, LaunchStats, Sim};

use super::tickets::{count_sampled, node_arg, LaunchBlocks, Tickets};
use super::PredictError;

/// Which chained launch: what its parts are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainKind {
    /// `attn_merge_v_b_o_*`: merge items, then `attn_output`'s row blocks (weight `w_o`).
    MergeOutput,
    /// `gemv2_rope_kb_*`: the gemv2's row blocks (the last runs the rope tail), then
    /// `attn_k_b`'s (weight `w_kb`), which wait for the rows only: the tail runs beside them.
    RopeKb,
}

impl ChainKind {
    /// The parameter naming the waiting part's weight: its DRAM bytes and what it prefetches.
    pub fn waiting_weight(self) -> &'static str {
        match self {
            ChainKind::MergeOutput => "w_o",
            ChainKind::RopeKb => "w_kb",
        }
    }
}

/// The work of a chained launch, in ticket order: `first` blocks of the first part, then
/// `waiting` blocks of the second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainWork {
    pub kind: ChainKind,
    pub ctl: BufRef,
    pub first: u64,
    pub waiting: u64,
}

/// The counters of a chained launch by part.
#[derive(Clone, Copy, Debug)]
pub struct ChainCounts {
    pub work: ChainWork,
    /// The first part's blocks: the merge's all run, the gemv2's scaled from the sample (the
    /// rope tail included).
    pub first: LaunchStats,
    /// What the first part's last block ran beyond the mean of the others: the rope tail (0
    /// for the merge).
    pub first_tail_warp_instructions: u64,
    /// The second part's blocks, scaled from the sample (`attn_output`'s norm tail included).
    pub waiting: LaunchStats,
    /// What the last `attn_output` block ran beyond the mean of the others: the norm tail (0
    /// for `attn_k_b`).
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
    if node_arg(n, d, "w_kb").is_some() {
        let (ty, kb) = CHAIN_ROPE_KB
            .iter()
            .copied()
            .find(|&(t, k)| t.pair_rope_kb(k).is_some_and(|k| k.name == d.name))?;
        let units = |t: GemvType, n: u32| n / t.row_multiple() as u32;
        let (d_nope, nrows) = (u32_arg("d_nope")?, u32_arg("nrows0")? + u32_arg("nrows1")?);
        let (first, waiting) = gemv2_rope_kb_blocks(
            (ty.unit(), units(ty, u32_arg("ncols")?), nrows),
            (
                kb.unit(),
                units(kb, d_nope),
                u32_arg("n_head")? * u32_arg("kv_lora")?,
            ),
        );
        return Some(ChainWork {
            kind: ChainKind::RopeKb,
            ctl,
            first: u64::from(first),
            waiting: u64::from(waiting),
        });
    }
    Some(ChainWork {
        kind: ChainKind::MergeOutput,
        ctl,
        first: u64::from(merge_v_b_items(u32_arg("n_head")?, u32_arg("d_v")?)),
        waiting: u64::from(merge_v_b_o_out_blocks(u32_arg("nrows")?)),
    })
}

/// Runs the chained launch of `w` through `launch` (which runs the given block indices of the
/// node), at most `max_blocks` (≥ 2) sampled blocks per sampled part; `ctl` is the control
/// words' address, `count` the tail's counter (`None`: no tail; the rope's for `RopeKb`, the
/// norm's otherwise) and `warps` a block's warps.
pub fn count_chained(
    sim: &mut Sim,
    launch: &LaunchBlocks<'_>,
    (ctl, count): (DevicePtr, Option<DevicePtr>),
    w: &ChainWork,
    (max_blocks, warps): (u64, u64),
) -> Result<ChainCounts, PredictError> {
    let ticket = ctl.offset(u64::from(CHAIN_CTL_TICKET) * 4);
    let (first, first_tail, first_run, count) = match w.kind {
        ChainKind::MergeOutput => {
            sim.write(ticket, &0u32.to_le_bytes())?;
            let all: Vec<u64> = (0..w.first).collect();
            (launch(sim, &all)?, 0, w.first, count)
        }
        ChainKind::RopeKb => {
            let t = Tickets {
                word: ticket,
                first: 0,
                blocks: w.first,
            };
            let s = count_sampled(sim, launch, &t, count, (max_blocks, warps))?;
            (s.stats, s.tail_warp_instructions, s.blocks_run, None)
        }
    };
    // Every first-part block has counted (the sampled ones alone left a part of the count).
    let done = ctl.offset(u64::from(CHAIN_CTL_DONE) * 4);
    sim.write(
        done,
        &u32::try_from(w.first).unwrap_or(u32::MAX).to_le_bytes(),
    )?;
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
        first_tail_warp_instructions: first_tail,
        waiting: waiting.stats,
        tail_warp_instructions: waiting.tail_warp_instructions,
        blocks_run: first_run + waiting.blocks_run,
    })
}
