//! Counting a chained launch (`attn_merge_v_b_o_*`, `ingot_abi::launch::attn_out`;
//! `gemv2_rope_kb_*` and `gemv2_norm_rope_kb_*`, `ingot_abi::launch::projections`): its blocks
//! take tickets, the first part's first, and each later part's blocks wait for the one before.
//! A sample of block indices would run the first tickets' work only, and a waiting block run
//! before the part it waits for would spin.
//!
//! The merge's blocks run first, all of them in one launch (a pair's two halves meet, so each
//! pair's sum runs as on the GPU; the launch leaves the done word at the merge's count). The
//! gemv2's blocks of `gemv2_rope_kb_*` are sampled instead, each alone with its ticket written
//! into the ticket word, the last with the rope tail's counter at every other block's: it runs
//! the tail (told apart from the rows, as [`super::counts`] does for any done counter). Then
//! each sampled waiting block runs alone, its ticket written and the done word set to the first
//! part's count, so it passes at the first look and no spin is counted; `attn_output`'s last
//! sampled block runs its norm tail the same way. In `gemv2_norm_rope_kb_*` the first products'
//! blocks are sampled as the gemv2's are (the last runs the norm tail and counts itself in the
//! norm's control words), then `attn_q_b`'s as the gemv2's of `gemv2_rope_kb_*`, then
//! `attn_k_b`'s. The control words are set back to 0 after the node.

use ingot_abi::launch::{
    gemv2_norm_blocks, gemv2_rope_kb_blocks, merge_v_b_items, merge_v_b_o_out_blocks,
    moe_ffn_items, KernelDesc, CHAIN_CTL_DONE, CHAIN_CTL_TICKET, CHAIN_CTL_WORDS, ROUTE_CTL_TICKET,
};
use ingot_abi::weight_types::{GemvType, CHAIN_FFN_ROPE_KB, CHAIN_ROPE_KB};
use ingot_graph::{BufRef, Node, NodeArg, Plan};
use ptx_sim::{DevicePtr, LaunchStats, Sim};

use super::model::{PathPart, PrefixLoad};
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
    /// `gemv2_norm_rope_kb_*`: the first products' row blocks (the last runs the norm tail),
    /// then `attn_q_b`'s (weight `w0`), which wait for the norm (the last of them runs the rope
    /// tail), then `attn_k_b`'s (weight `w_kb`), which wait for `attn_q_b`'s rows.
    NormRopeKb(NormWork),
}

impl ChainKind {
    /// The parameter naming the waiting part's weight: its DRAM bytes and what it prefetches.
    pub fn waiting_weight(self) -> &'static str {
        match self {
            ChainKind::MergeOutput => "w_o",
            ChainKind::RopeKb => "w_kb",
            ChainKind::NormRopeKb(_) => "w0",
        }
    }
}

/// The norm part of a `gemv2_norm_rope_kb_*` launch: its tail's done counter and its control
/// words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NormWork {
    pub count: BufRef,
    pub ctl: BufRef,
}

/// The work of a chained launch, in ticket order: `first` blocks of the first part, then
/// `waiting` blocks of the second, then `then` blocks of a third (0 without one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainWork {
    pub kind: ChainKind,
    pub ctl: BufRef,
    pub first: u64,
    pub waiting: u64,
    pub then: u64,
    /// Where the chain is the second launch of a joined node (`moe_ffn_rope_kb_*`,
    /// [`super::model::NextLoad`]): the node's ticket word and the tickets before the chain's (the
    /// FFN's), and the control words of the norm signal its first part waits for.
    pub joined: Option<JoinedChain>,
}

/// See [`ChainWork::joined`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JoinedChain {
    pub ticket: BufRef,
    pub before: u64,
    pub norm_ctl: BufRef,
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
    /// for `attn_k_b`; the rope tail for `attn_q_b`'s rows).
    pub tail_warp_instructions: u64,
    /// A third part's blocks (`attn_k_b` after `attn_q_b`), scaled from the sample.
    pub then: LaunchStats,
    pub blocks_run: u64,
}

/// The chained work of node `n` (kernel `d`), or `None` for any other launch: the kernels with
/// a `chain_ctl` parameter are chained.
pub fn chain_work(n: &Node, d: &KernelDesc) -> Option<ChainWork> {
    let u32_arg = |name: &str| match node_arg(n, d, name) {
        Some(NodeArg::U32(v)) => Some(v),
        _ => None,
    };
    if let (Some(NodeArg::Buf(kb_ctl)), Some(NodeArg::Buf(route)), Some(NodeArg::Buf(norm))) = (
        node_arg(n, d, "kb_ctl"),
        node_arg(n, d, "route_ctl"),
        node_arg(n, d, "norm_ctl"),
    ) {
        let (_, _, (ty, kb)) = CHAIN_FFN_ROPE_KB.iter().copied().find(|&(g, dn, r)| {
            GemvType::moe_ffn_rope_kb(g, dn, r).is_some_and(|k| k.name == d.name)
        })?;
        let units = |t: GemvType, n: u32| n / t.row_multiple() as u32;
        let ffn = moe_ffn_items(
            (
                u32_arg("n_used")?,
                u32_arg("ff")?,
                u32_arg("ff_sh")?,
                u32_arg("n_expert")?,
            ),
            u32_arg("nrows")?,
        )?;
        let nrows = u32_arg("nrows0")? + u32_arg("nrows1")?;
        let (first, waiting) = gemv2_rope_kb_blocks(
            (ty.unit(), units(ty, u32_arg("kb_ncols")?), nrows),
            (
                kb.unit(),
                units(kb, u32_arg("d_nope")?),
                u32_arg("n_head")? * u32_arg("kv_lora")?,
            ),
        );
        return Some(ChainWork {
            kind: ChainKind::RopeKb,
            ctl: kb_ctl,
            first: u64::from(first),
            waiting: u64::from(waiting),
            then: 0,
            joined: Some(JoinedChain {
                ticket: BufRef {
                    offset: route.offset + u64::from(ROUTE_CTL_TICKET) * 4,
                    ..route
                },
                before: u64::from(ffn),
                norm_ctl: norm,
            }),
        });
    }
    let Some(NodeArg::Buf(ctl)) = node_arg(n, d, "chain_ctl") else {
        return None;
    };
    if let (Some(NodeArg::Buf(count)), Some(NodeArg::Buf(norm_ctl))) =
        (node_arg(n, d, "norm_count"), node_arg(n, d, "norm_ctl"))
    {
        let (ty, kb) = CHAIN_ROPE_KB
            .iter()
            .copied()
            .find(|&(t, k)| t.pair_norm_rope_kb(k).is_some_and(|k| k.name == d.name))?;
        let units = |t: GemvType, n: u32| n / t.row_multiple() as u32;
        let (d_nope, nrows) = (u32_arg("d_nope")?, u32_arg("nrows0")? + u32_arg("nrows1")?);
        let norm_rows = u32_arg("nrows_a0")? + u32_arg("nrows_a1")?;
        let norm = gemv2_norm_blocks(ty.unit(), units(ty, u32_arg("ncols_a")?), norm_rows);
        let (waiting, then) = gemv2_rope_kb_blocks(
            (ty.unit(), units(ty, u32_arg("ncols")?), nrows),
            (
                kb.unit(),
                units(kb, d_nope),
                u32_arg("n_head")? * u32_arg("kv_lora")?,
            ),
        );
        return Some(ChainWork {
            kind: ChainKind::NormRopeKb(NormWork {
                count,
                ctl: norm_ctl,
            }),
            ctl,
            first: u64::from(norm),
            waiting: u64::from(waiting),
            then: u64::from(then),
            joined: None,
        });
    }
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
            then: 0,
            joined: None,
        });
    }
    Some(ChainWork {
        kind: ChainKind::MergeOutput,
        ctl,
        first: u64::from(merge_v_b_items(u32_arg("n_head")?, u32_arg("d_v")?)),
        waiting: u64::from(merge_v_b_o_out_blocks(u32_arg("nrows")?)),
        then: 0,
        joined: None,
    })
}

/// Runs the chained launch of `w` through `launch` (which runs the given block indices of the
/// node), at most `max_blocks` (≥ 2) sampled blocks per sampled part; `ptr` gives a buffer
/// reference's address (the control words, the norm's counter), `count` is the tail's counter
/// (`None`: no tail; the rope's for `RopeKb` and `NormRopeKb`, the norm's otherwise) and `warps`
/// a block's warps.
pub fn count_chained(
    sim: &mut Sim,
    launch: &LaunchBlocks<'_>,
    ptr: &dyn Fn(&BufRef) -> DevicePtr,
    count: Option<DevicePtr>,
    w: &ChainWork,
    (max_blocks, warps): (u64, u64),
) -> Result<ChainCounts, PredictError> {
    let ctl = ptr(&w.ctl);
    let (ticket, before) = match w.joined {
        Some(j) => (ptr(&j.ticket), j.before),
        None => (ctl.offset(u64::from(CHAIN_CTL_TICKET) * 4), 0),
    };
    let done = |c: DevicePtr| c.offset(u64::from(CHAIN_CTL_DONE) * 4);
    // A joined chain's first part waits for the norm signal: published, so no spin is counted.
    if let Some(j) = w.joined {
        sim.write(done(ptr(&j.norm_ctl)), &1u32.to_le_bytes())?;
    }
    let part = |sim: &mut Sim, first, blocks, count| {
        let t = Tickets {
            word: ticket,
            first: before + first,
            blocks,
        };
        count_sampled(sim, launch, &t, count, (max_blocks, warps))
    };
    let (first, first_tail, first_run, count) = match w.kind {
        ChainKind::MergeOutput => {
            sim.write(ticket, &0u32.to_le_bytes())?;
            let all: Vec<u64> = (0..w.first).collect();
            (launch(sim, &all)?, 0, w.first, count)
        }
        ChainKind::NormRopeKb(norm) => {
            let s = part(sim, 0, w.first, Some(ptr(&norm.count)))?;
            // The norm's last block counted itself; every `attn_q_b` block passes.
            sim.write(done(ptr(&norm.ctl)), &1u32.to_le_bytes())?;
            (s.stats, s.tail_warp_instructions, s.blocks_run, count)
        }
        ChainKind::RopeKb => {
            let s = part(sim, 0, w.first, count)?;
            (s.stats, s.tail_warp_instructions, s.blocks_run, None)
        }
    };
    // Every first-part block has counted (the sampled ones alone left a part of the count).
    let at = u32::try_from(w.first).unwrap_or(u32::MAX);
    sim.write(done(ctl), &at.to_le_bytes())?;
    let waiting = part(sim, w.first, w.waiting, count)?;
    let mut then = LaunchStats::default();
    let mut then_run = 0;
    if w.then > 0 {
        let at = u32::try_from(w.waiting).unwrap_or(u32::MAX);
        sim.write(done(ctl), &at.to_le_bytes())?;
        let s = part(sim, w.first + w.waiting, w.then, None)?;
        (then, then_run) = (s.stats, s.blocks_run);
    }
    sim.write(ctl, &[0u8; CHAIN_CTL_WORDS as usize * 4])?;
    if let Some(j) = w.joined {
        sim.write(ptr(&j.norm_ctl), &[0u8; CHAIN_CTL_WORDS as usize * 4])?;
        sim.write(ticket, &0u32.to_le_bytes())?;
    }
    if let ChainKind::NormRopeKb(norm) = w.kind {
        sim.write(ptr(&norm.ctl), &[0u8; CHAIN_CTL_WORDS as usize * 4])?;
    }
    Ok(ChainCounts {
        work: *w,
        first,
        first_tail_warp_instructions: first_tail,
        waiting: waiting.stats,
        tail_warp_instructions: waiting.tail_warp_instructions,
        then,
        blocks_run: first_run + waiting.blocks_run + then_run,
    })
}

/// The dependency path of a chained launch (this module's): the first part (the merge; the
/// gemv2's rows; the first products with their norm tail), then the second (`attn_output`;
/// `attn_k_b`; `attn_q_b`), whose weight rows (argument `w_o`; `w_kb`; `w0`) are its DRAM bytes
/// and what its blocks prefetch before they wait, then a third where there is one (`attn_k_b`
/// after `attn_q_b`, weight `w_kb`, the same way); the first part has the rest of the node's
/// `dram_bytes`. Re-reads split as the warp instructions do.
pub fn chain_prefix(
    plan: &Plan,
    n: &Node,
    d: &KernelDesc,
    c: &ChainCounts,
    dram_bytes: u64,
    reread: u64,
) -> PrefixLoad {
    let weight = |name: &str| {
        let i = d.params.iter().position(|p| p.name == name);
        match i.and_then(|i| n.args.get(i)) {
            Some(NodeArg::Buf(r)) => plan.buffers[r.buf.0 as usize].bytes.min(dram_bytes),
            _ => 0,
        }
    };
    let w_waiting = weight(c.work.kind.waiting_weight());
    let w_then = if c.work.then > 0 {
        weight("w_kb").min(dram_bytes - w_waiting)
    } else {
        0
    };
    let all = c.first.warp_instructions + c.waiting.warp_instructions + c.then.warp_instructions;
    let share = |w: u64| (reread as f64 * w as f64 / all.max(1) as f64).round() as u64;
    // The norm's tail is on the path (`attn_q_b` waits for it); the rope's runs beside the part
    // after it and is the launch's (`NodeLoad::tail_warp_instructions`).
    let norm_tail = if let ChainKind::NormRopeKb(_) = c.work.kind {
        c.first_tail_warp_instructions
    } else {
        0
    };
    let later = |blocks, stats: &ptx_sim::LaunchStats, bytes, tail| PathPart {
        blocks,
        warp_instructions: stats.warp_instructions,
        dram_bytes: bytes,
        reread_bytes: share(stats.warp_instructions),
        tail_warp_instructions: tail,
        prefetch_bytes: bytes,
    };
    let waiting_tail = if c.work.then > 0 {
        0
    } else {
        c.tail_warp_instructions
    };
    PrefixLoad {
        first: PathPart {
            blocks: c.work.first,
            warp_instructions: c.first.warp_instructions,
            dram_bytes: dram_bytes - w_waiting - w_then,
            // The waiting blocks wait for the first part's rows, not for its tail where it is
            // the rope's (it runs beside `attn_k_b`): that tail is the launch's.
            tail_warp_instructions: norm_tail,
            ..PathPart::default()
        },
        waiting: later(c.work.waiting, &c.waiting, w_waiting, waiting_tail),
        then: (c.work.then > 0).then(|| later(c.work.then, &c.then, w_then, 0)),
    }
}
