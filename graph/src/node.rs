//! Nodes of a plan: one kernel launch each, with arguments in PTX parameter order.

use crate::buffer::BufId;
use ingot_abi::launch::ParamKind;

/// A device address: `offset` bytes into buffer `buf`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufRef {
    pub buf: BufId,
    pub offset: u64,
}

/// One kernel argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NodeArg {
    Buf(BufRef),
    U32(u32),
    I32(i32),
    F32(f32),
    U64(u64),
}

impl NodeArg {
    /// The PTX parameter kind this argument fills.
    pub fn kind(&self) -> ParamKind {
        match self {
            NodeArg::Buf(_) => ParamKind::Ptr,
            NodeArg::U32(_) => ParamKind::U32,
            NodeArg::I32(_) => ParamKind::I32,
            NodeArg::F32(_) => ParamKind::F32,
            NodeArg::U64(_) => ParamKind::U64,
        }
    }
}

/// One kernel launch. Launch geometry comes from the kernel's
/// [`KernelDesc`](ingot_abi::launch::KernelDesc): `grid = desc.grid(items)`, `desc.block`,
/// `desc.shared_bytes`; the plan only says how many work items there are.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Exported kernel name in the PTX.
    pub kernel: String,
    /// What the launch computes, e.g. `blk.3 attn_q`; used in errors and reports.
    pub label: String,
    /// Layer the node belongs to; `None` for the embedding fetch and the head.
    pub layer: Option<usize>,
    /// Work items (see the kernel's descriptor for what an item is); positive.
    pub items: u32,
    pub args: Vec<NodeArg>,
    /// A weight buffer among `args` that the launch reads once and nothing after it reads
    /// again in the step: the CUDA executor gives the launch an L2 access policy window over it
    /// with the streaming property (evict-first), so its lines give way before those an earlier
    /// launch handed ahead to a later one (`ingot_abi::launch::FLASH_LATENT`'s `next_a`). Only a
    /// hint: the bits do not depend on it. `None` for most launches.
    pub l2_streaming: Option<BufId>,
}
