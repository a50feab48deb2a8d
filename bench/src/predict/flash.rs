//! The split-K attention launches in the predictor: which of a decode flash launch's blocks
//! have work at a depth, and how much of the split's partial outputs a step uses.
//!
//! A flash launch has `max_segments` blocks per head group whatever the depth; those without
//! a segment and heads ([`flash_block`]) exit after a few instructions. The counts sample the
//! working blocks only ([`working_blocks`]) and the time terms spread the launch over them, so
//! neither an exiting block's instructions nor its share of the bandwidth is credited to the
//! launch.

use ingot_abi::launch::{flash_block, flash_segments, FlashSplit, KernelDesc};
use ingot_graph::{BufferKind, Node, NodeArg, Plan};

use super::tickets::node_arg;

/// The split-K attention state of a decode flash launch or of a merge that reads its output
/// (the launches with a `max_segments` parameter) at cache position `depth`.
#[derive(Clone, Copy, Debug)]
pub struct Split {
    n_head: u32,
    pub max_segments: u32,
    at: FlashSplit,
}

impl Split {
    /// Segments the step writes and reads.
    pub fn live(&self) -> u64 {
        u64::from(self.at.count.min(self.max_segments.max(1)))
    }
}

/// The split of node `n` (kernel `d`) at `depth`; `None` for a launch without `max_segments`.
pub fn split_of(n: &Node, d: &KernelDesc, depth: usize) -> Option<Split> {
    let max_segments = u32_arg(n, d, "max_segments")?;
    let len = u32::try_from(depth + 1).ok()?;
    Some(Split {
        n_head: u32_arg(n, d, "n_head")?,
        max_segments,
        at: flash_segments(len, max_segments),
    })
}

/// The indices of the blocks of node `n` (kernel `d`, a `blocks`-block launch) that have work
/// at `depth`, ascending, for a decode flash launch; `None` for every other launch (a merge's
/// blocks all work: its grid covers heads × dims, not segments). At least one block.
pub fn working_blocks(n: &Node, d: &KernelDesc, depth: usize, blocks: u64) -> Option<Vec<u64>> {
    if !reads_cache(&n.kernel) {
        return None;
    }
    let s = split_of(n, d, depth)?;
    let b = u32::try_from(blocks).unwrap_or(u32::MAX);
    let work: Vec<u64> = (0..b)
        .filter(|&b| flash_block(b, s.n_head, s.max_segments, s.at).is_some())
        .map(u64::from)
        .collect();
    (!work.is_empty()).then_some(work)
}

/// The most bytes node `n` (kernel `d`) hands ahead to a later launch (the sum of its
/// `next_a_bytes` and `next_b_bytes`: a decode flash launch, `ingot_abi::launch::FLASH_LATENT`);
/// `None` for a launch without weights handed ahead.
pub fn handoff_max(n: &Node, d: &KernelDesc) -> Option<u64> {
    let a = u32_arg(n, d, "next_a_bytes")?;
    Some(u64::from(a) + u64::from(u32_arg(n, d, "next_b_bytes")?))
}

/// Node `n`'s `u32` argument `name` (kernel `d`); `None` for a launch without it.
fn u32_arg(n: &Node, d: &KernelDesc, name: &str) -> Option<u32> {
    match node_arg(n, d, name) {
        Some(NodeArg::U32(v)) => Some(v),
        _ => None,
    }
}

/// The node of `plan` that node `i` (kernel `d`) hands its weights to: the first after it whose
/// arguments name the buffer of its `next_a`; `None` for a launch without weights handed ahead,
/// or with none (0 bytes) to hand.
pub fn handoff_target(plan: &Plan, i: usize, d: &KernelDesc) -> Option<usize> {
    let n = &plan.nodes[i];
    if handoff_max(n, d)? == 0 {
        return None;
    }
    let Some(NodeArg::Buf(a)) = node_arg(n, d, "next_a") else {
        return None;
    };
    (i + 1..plan.nodes.len()).find(|&j| {
        plan.nodes[j]
            .args
            .iter()
            .any(|x| matches!(x, NodeArg::Buf(r) if r.buf == a.buf))
    })
}

/// The latent-cache bytes node `i` of `plan` reads over a context of `len` rows: the rows
/// `0..len` of each cache buffer among its arguments (for a launch that reads the cache,
/// [`reads_cache`]; a decode flash launch reads them evict-first, its tile loads being `.cs`).
pub fn cache_read_bytes(plan: &Plan, i: usize, len: usize) -> u64 {
    plan.nodes[i]
        .args
        .iter()
        .filter_map(|a| match a {
            NodeArg::Buf(r) => Some(&plan.buffers[r.buf.0 as usize]),
            _ => None,
        })
        .filter(|b| matches!(b.kind, BufferKind::KvCache { .. }))
        .map(|b| cache_rows_bytes(plan, b.bytes, len))
        .sum()
}

/// Bytes of rows `0..len` of a cache buffer of `bytes` bytes (`plan.ctx` rows).
pub fn cache_rows_bytes(plan: &Plan, bytes: u64, len: usize) -> u64 {
    bytes / plan.ctx.max(1) as u64 * len.min(plan.ctx) as u64
}

/// Whether `kernel` reads the latent cache (rows `0..=depth`).
pub fn reads_cache(kernel: &str) -> bool {
    use ingot_abi::launch::{
        FLASH_LATENT, FLASH_LATENT_MMA, FLASH_LATENT_MMA_Q8_0, FLASH_LATENT_PREFILL,
        FLASH_LATENT_PREFILL_Q8_0, FLASH_LATENT_Q8_0,
    };
    [
        FLASH_LATENT.desc,
        FLASH_LATENT_MMA.desc,
        FLASH_LATENT_Q8_0.desc,
        FLASH_LATENT_MMA_Q8_0.desc,
        FLASH_LATENT_PREFILL.desc,
        FLASH_LATENT_PREFILL_Q8_0.desc,
    ]
    .iter()
    .any(|d| d.name == kernel)
}
