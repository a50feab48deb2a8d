//! The plan: buffers and nodes of one decode step, its summary, and its check against the
//! kernel table.

use std::collections::BTreeSet;
use std::fmt;

use ingot_abi::launch::{stacked_expert, KernelDesc, EXPERT_TABLE_ENTRY_BYTES};

use crate::buffer::{BufId, BufferDecl, BufferKind};
use crate::error::PlanError;
use crate::node::{Node, NodeArg};

/// One decode step as data. Built by [`crate::build_plan`].
#[derive(Clone, Debug)]
pub struct Plan {
    pub buffers: Vec<BufferDecl>,
    /// Launches in execution order; each reads only what earlier nodes (or the upload) wrote.
    pub nodes: Vec<Node>,
    pub n_layer: usize,
    /// Positions the KV cache holds.
    pub ctx: usize,
    pub vocab: usize,
    pub n_embd: usize,
    /// The residual stream (`n_embd` f32): the embedding, then each layer's output.
    pub residual: BufId,
    /// The logits (`vocab` f32) of the step.
    pub logits: BufId,
    /// The [`ingot_abi::step::StepState`].
    pub step: BufId,
    /// No embedding-fetch kernel for the embedding's type: before each step the executor
    /// writes the dequantized row of the step's token into `residual` (so a replay needs the
    /// host to know the token).
    pub host_embedding: bool,
    /// The last node writes the argmax into `StepState.next_token` and advances the state, so
    /// replays can follow each other without the host; otherwise the host takes the argmax.
    pub device_argmax: bool,
    /// The routed experts' cache when the plan keeps them beyond VRAM: after each step
    /// the executor reads each layer's selection, runs the policy and rewrites the slot tables.
    pub expert_cache: Option<ExpertCachePlan>,
}

/// The expert cache of a plan: `slots` VRAM slots per MoE layer, the rest in host-mapped memory.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpertCachePlan {
    pub slots: usize,
    pub policy: ingot_model::expert_cache::Policy,
    pub n_expert: usize,
    pub n_expert_used: usize,
    /// See [`crate::ExpertCacheOptions::route_bonus`].
    pub route_bonus: f32,
    /// Per MoE layer, in layer order.
    pub layers: Vec<ExpertCacheLayer>,
}

/// One MoE layer's part of [`ExpertCachePlan`].
#[derive(Clone, Debug, PartialEq)]
pub struct ExpertCacheLayer {
    pub layer: usize,
    /// The layer's own [`ingot_abi::launch::ExpertSelection`] (not shared with other layers, so it
    /// is still there after the step).
    pub selection: BufId,
    /// The [`BufferKind::ExpertTable`] of each routed tensor (gate and up, or merged; down).
    pub tables: Vec<BufId>,
    /// With cache-aware routing, the router's selection bias for this layer.
    pub route_bias: Option<RouteBias>,
}

/// A layer's cache-aware selection bias: `n_expert` f32, the model's `exp_probs_b` (`base`, or
/// 0) plus the routing bonus for each expert in a VRAM slot. Written by the executor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RouteBias {
    pub buf: BufId,
    pub base: Option<BufId>,
}

/// Node and byte counts of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanSummary {
    pub nodes: usize,
    /// Nodes of each layer, in layer order.
    pub nodes_per_layer: Vec<usize>,
    /// Nodes outside the layers (embedding fetch, head).
    pub nodes_outside_layers: usize,
    pub weight_bytes: u64,
    pub kv_cache_bytes: u64,
    pub activation_bytes: u64,
    pub constant_bytes: u64,
    /// Routed expert weights kept in host-mapped memory (not part of [`Self::device_bytes`]).
    pub host_weight_bytes: u64,
    /// Distinct kernels launched.
    pub kernels: Vec<String>,
}

impl PlanSummary {
    /// Device memory the plan allocates, in bytes.
    pub fn device_bytes(&self) -> u64 {
        self.weight_bytes + self.kv_cache_bytes + self.activation_bytes + self.constant_bytes
    }

    /// The largest node count of any layer.
    pub fn max_nodes_per_layer(&self) -> usize {
        self.nodes_per_layer.iter().copied().max().unwrap_or(0)
    }
}

impl fmt::Display for PlanSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        let per_layer: BTreeSet<usize> = self.nodes_per_layer.iter().copied().collect();
        write!(
            f,
            "{} nodes ({} layers x {:?} + {} outside layers); device memory {:.1} MiB \
             (weights {:.1}, kv cache {:.1}, activations {:.2}, constants {:.2})",
            self.nodes,
            self.nodes_per_layer.len(),
            per_layer,
            self.nodes_outside_layers,
            mib(self.device_bytes()),
            mib(self.weight_bytes),
            mib(self.kv_cache_bytes),
            mib(self.activation_bytes),
            mib(self.constant_bytes),
        )?;
        if self.host_weight_bytes > 0 {
            write!(
                f,
                "; {:.1} MiB of routed experts in host-mapped memory",
                mib(self.host_weight_bytes)
            )?;
        }
        Ok(())
    }
}

impl Plan {
    /// What each [`BufferKind::ExpertTable`] holds at load, given every buffer's device address:
    /// the identity table (entry `e` = expert `e`'s slab in the table's `weight` tensor). Every
    /// executor writes these once after allocating; an expert cache rewrites its tables later.
    pub fn expert_tables(&self, addr: impl Fn(BufId) -> u64) -> Vec<(BufId, Vec<u64>)> {
        self.buffers
            .iter()
            .enumerate()
            .filter_map(|(i, b)| match b.kind {
                BufferKind::ExpertTable { weight, slab, .. } => {
                    let n = b.bytes / EXPERT_TABLE_ENTRY_BYTES;
                    let base = addr(weight);
                    let entries = (0..n).map(|e| stacked_expert(base, slab, e)).collect();
                    Some((BufId(i as u32), entries))
                }
                _ => None,
            })
            .collect()
    }

    pub fn buffer(&self, id: BufId) -> &BufferDecl {
        &self.buffers[id.0 as usize]
    }

    /// Node and byte counts.
    pub fn summary(&self) -> PlanSummary {
        let mut nodes_per_layer = vec![0; self.n_layer];
        let mut outside = 0;
        for n in &self.nodes {
            match n.layer {
                Some(l) => nodes_per_layer[l] += 1,
                None => outside += 1,
            }
        }
        let mut s = PlanSummary {
            nodes: self.nodes.len(),
            nodes_per_layer,
            nodes_outside_layers: outside,
            weight_bytes: 0,
            kv_cache_bytes: 0,
            activation_bytes: 0,
            constant_bytes: 0,
            host_weight_bytes: 0,
            kernels: Vec::new(),
        };
        for b in &self.buffers {
            let slot = match b.kind {
                BufferKind::Weight {
                    host_mapped: true, ..
                } => &mut s.host_weight_bytes,
                BufferKind::Weight { .. }
                | BufferKind::Derived { .. }
                | BufferKind::ExpertSlots { .. } => &mut s.weight_bytes,
                BufferKind::KvCache { .. } => &mut s.kv_cache_bytes,
                BufferKind::Activation | BufferKind::StepState | BufferKind::ExpertTable { .. } => {
                    &mut s.activation_bytes
                }
                BufferKind::Constant { .. } => &mut s.constant_bytes,
            };
            *slot += b.bytes;
        }
        let kernels: BTreeSet<&str> = self.nodes.iter().map(|n| n.kernel.as_str()).collect();
        s.kernels = kernels.into_iter().map(str::to_owned).collect();
        s
    }

    /// Index one past the last node of layer `il` (the residual buffer holds that layer's
    /// output once nodes `..end` have run).
    pub fn layer_end(&self, il: usize) -> Option<usize> {
        self.nodes
            .iter()
            .rposition(|n| n.layer == Some(il))
            .map(|i| i + 1)
    }

    /// Checks every node against the kernel table: the kernel exists (descriptor and an
    /// `.entry` in `ptx`), argument count and kinds match its parameters, and every buffer
    /// argument points inside its buffer. Returns each node's descriptor.
    pub fn check(
        &self,
        lookup: impl Fn(&str) -> Option<&'static KernelDesc>,
        ptx: &str,
    ) -> Result<Vec<&'static KernelDesc>, PlanError> {
        let mut missing = BTreeSet::new();
        let mut descs = Vec::with_capacity(self.nodes.len());
        let entries = entry_names(ptx);
        for n in &self.nodes {
            match lookup(&n.kernel) {
                Some(d) if entries.contains(n.kernel.as_str()) => descs.push(d),
                _ => {
                    missing.insert(n.kernel.clone());
                }
            }
        }
        if !missing.is_empty() {
            return Err(PlanError::MissingKernels(missing.into_iter().collect()));
        }
        for (i, (n, d)) in self.nodes.iter().zip(&descs).enumerate() {
            if n.args.len() != d.params.len() {
                return Err(PlanError::ArgCount {
                    node: i,
                    label: n.label.clone(),
                    kernel: n.kernel.clone(),
                    expected: d.params.len(),
                    got: n.args.len(),
                });
            }
            for (index, (a, p)) in n.args.iter().zip(d.params).enumerate() {
                if a.kind() != p.kind {
                    return Err(PlanError::ArgKind {
                        node: i,
                        label: n.label.clone(),
                        kernel: n.kernel.clone(),
                        index,
                        param: p.name,
                        expected: p.kind,
                        got: a.kind(),
                    });
                }
                if let NodeArg::Buf(r) = a {
                    let b = self.buffers.get(r.buf.0 as usize);
                    let len = b.map_or(0, |b| b.bytes);
                    if r.offset >= len {
                        return Err(PlanError::BufferRange {
                            node: i,
                            label: n.label.clone(),
                            index,
                            buffer: b.map_or_else(|| format!("#{}", r.buf.0), |b| b.name.clone()),
                            offset: r.offset,
                            len,
                        });
                    }
                }
            }
        }
        Ok(descs)
    }

    /// [`Plan::check`] against the committed PTX and its launch table.
    pub fn check_committed(&self) -> Result<Vec<&'static KernelDesc>, PlanError> {
        self.check(ingot_kernels::kernel, ingot_kernels::PTX)
    }
}

/// Names of the `.entry` kernels of PTX text.
pub(crate) fn entry_names(ptx: &str) -> std::collections::HashSet<&str> {
    ptx.split(".entry ")
        .skip(1)
        .filter_map(|rest| rest.split('(').next())
        .map(str::trim)
        .collect()
}
