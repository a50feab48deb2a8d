//! What a node reads, split three ways for the time model: the bytes it reads once (its read
//! footprint, from DRAM), those it reads again (L1/L2), and the routed experts' share of the
//! first. The footprint is each read buffer's bytes, except where the node is known to read part
//! of one: a routed tensor's evenly routed share, the cache rows attention reads, the split's live
//! segments, a gemv's rows.

use std::collections::BTreeSet;

use ingot_abi::launch::KernelDesc;
use ingot_graph::{BufferKind, NodeArg, Plan};
use ingot_model::ModelConfig;

use super::counts::NodeCounts;
use super::flash::{cache_rows_bytes, reads_cache, Split};
use super::tickets::node_arg;

/// Unique, re-read and routed-expert bytes (of the unique ones) of node `i` (see the module
/// docs of [`super`]) of a plan that runs
/// `tokens` tokens at positions `depth..`: the routed experts' share of their tensors is what
/// `tokens` evenly routed tokens touch, `min(1, tokens·n_used/n_expert)`, and attention reads
/// cache rows `0..depth + tokens`.
pub(crate) fn read_split(
    plan: &Plan,
    config: &ModelConfig,
    (i, d, split): (usize, &KernelDesc, Option<Split>),
    (depth, tokens): (usize, usize),
    c: &NodeCounts,
) -> (u64, u64, u64) {
    // The split's outputs hold `max_segments` segments, of which the step at `depth` writes and
    // reads the first `count`.
    let parts: Vec<u32> = ["part_o", "part_ml"]
        .iter()
        .filter_map(|name| match node_arg(&plan.nodes[i], d, name) {
            Some(NodeArg::Buf(r)) => Some(r.buf.0),
            _ => None,
        })
        .collect();
    // The buffers the launch read (an output it only writes is no part of its read footprint).
    let bufs: BTreeSet<u32> = plan.nodes[i]
        .args
        .iter()
        .enumerate()
        .filter_map(|(k, a)| match a {
            NodeArg::Buf(r) if c.read_args >> k & 1 == 1 => Some(r.buf.0),
            _ => None,
        })
        .collect();
    // A MoE launch reads a routed tensor through its expert table: the tensor the table names
    // is read too (when in VRAM; host-mapped experts are no part of the device's reads).
    let bufs: BTreeSet<u32> = bufs
        .iter()
        .flat_map(|&b| {
            let weight = match plan.buffers[b as usize].kind {
                BufferKind::ExpertTable { weight, .. } => {
                    match plan.buffers[weight.0 as usize].kind {
                        BufferKind::Weight {
                            host_mapped: false, ..
                        } => Some(weight.0),
                        _ => None,
                    }
                }
                _ => None,
            };
            std::iter::once(b).chain(weight)
        })
        .collect();
    let routed: u64 = bufs
        .iter()
        .map(|&b| {
            let decl = &plan.buffers[b as usize];
            match &decl.kind {
                BufferKind::Weight { tensor, .. } if tensor.contains("_exps") => {
                    let used = (tokens * config.n_expert_used).min(config.n_expert.max(1));
                    decl.bytes * used as u64 / config.n_expert.max(1) as u64
                }
                _ => 0,
            }
        })
        .sum();
    // A gemv reads the first `nrows` rows of its weight, which may be fewer than the tensor's
    // (a pruned draft head): only those are its footprint.
    let gemv_w = match node_arg(&plan.nodes[i], d, "w") {
        Some(NodeArg::Buf(r)) => Some(r.buf.0),
        _ => None,
    };
    let footprint: u64 = bufs
        .into_iter()
        .map(|b| {
            let decl = &plan.buffers[b as usize];
            match &decl.kind {
                BufferKind::Weight { tensor, .. } if tensor.contains("_exps") => 0,
                // Only attention reads the cache; the rope (alone or as a gemv's tail) writes
                // one row and reads none, so the cache is no part of its read footprint.
                BufferKind::KvCache { .. } if reads_cache(&plan.nodes[i].kernel) => {
                    cache_rows_bytes(plan, decl.bytes, depth + tokens)
                }
                BufferKind::KvCache { .. } => 0,
                BufferKind::Weight { ty, .. } if Some(b) == gemv_w => {
                    gemv_rows_bytes(&plan.nodes[i], d, *ty)
                        .map_or(decl.bytes, |r| r.min(decl.bytes))
                }
                _ => match split.filter(|_| parts.contains(&b)) {
                    Some(sp) => decl.bytes / u64::from(sp.max_segments.max(1)) * sp.live(),
                    None => decl.bytes,
                },
            }
        })
        .sum::<u64>()
        + routed;
    let read = 32 * c.stats.sectors_read;
    let unique = footprint.min(read);
    (unique, read - unique, routed.min(unique))
}

/// Bytes of the rows a gemv node `n` (parameters `w`, `ncols`, `nrows`) reads of its weight of
/// type `ty`: `nrows` rows of `ncols` values; `None` for a node without those parameters.
fn gemv_rows_bytes(n: &ingot_graph::Node, d: &KernelDesc, ty: ingot_gguf::GgmlType) -> Option<u64> {
    let (Some(NodeArg::U32(ncols)), Some(NodeArg::U32(nrows))) =
        (node_arg(n, d, "ncols"), node_arg(n, d, "nrows"))
    else {
        return None;
    };
    ty.row_bytes(u64::from(ncols))?
        .checked_mul(u64::from(nrows))
}
