//! The split-K attention launches in the predictor: which of a decode flash launch's blocks
//! have work at a depth, and how much of the split's partial outputs a step uses.
//!
//! A flash launch has `max_segments` blocks per head group whatever the depth; those without
//! a segment and heads ([`flash_block`]) exit after a few instructions. The counts sample the
//! working blocks only ([`working_blocks`]) and the time terms spread the launch over them, so
//! neither an exiting block's instructions nor its share of the bandwidth is credited to the
//! launch.

use ingot_abi::launch::{flash_block, flash_segments, FlashSplit, KernelDesc};
use ingot_graph::{Node, NodeArg};

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
    let u = |name: &str| match node_arg(n, d, name) {
        Some(NodeArg::U32(v)) => Some(v),
        _ => None,
    };
    let max_segments = u("max_segments")?;
    let len = u32::try_from(depth + 1).ok()?;
    Some(Split {
        n_head: u("n_head")?,
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
