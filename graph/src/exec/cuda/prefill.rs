//! The batched prefill ([`CudaExecutor::prefill_chunked`](super::CudaExecutor::prefill_chunked),
//! `Decoder::prefill_last`): a prompt in chunks, as the simulator runs it. At load one
//! [`PrefillPlan`] per bucket of [`PREFILL_BUCKETS`] that fits the context, with its own
//! activations and the decode plan's weights, latent caches and step state
//! ([`crate::exec::shared_buffers`]); at its first use one graph for the chunk's layers (nodes
//! `..head_start`) and one for the head.
//!
//! A chunk is: the host's embeddings of its `n` tokens (zero rows to the bucket's end), `n` and the
//! `StepState` (its first position) uploaded asynchronously through pinned memory, the layers'
//! replay; after the prompt's last chunk a device-to-device copy of row `n − 1` of the chunk's
//! residual stream into the head's input, the head's replay and the logits' copy back. What no
//! bucket fits, or the whole prompt when the planner refused the model
//! ([`CudaExecutor::prefill_unavailable`](super::CudaExecutor::prefill_unavailable)), runs token by
//! token through the decode graph.

use ingot_abi::launch::KernelDesc;
use ingot_cuda::{DeviceBuffer, Gpu, Graph, LaunchShape, PinnedBuffer};
use ingot_gguf::GgufFile;
use ingot_model::ModelConfig;

use super::launch::shapes_of;
use super::STATE_BYTES;
use crate::buffer::BufferKind;
use crate::error::ExecError;
use crate::exec::host_embedding::HostEmbedding;
use crate::plan::Plan;
use crate::planner::prefill::{build_prefill_plan_for, PrefillPlan, PREFILL_BUCKETS};
use crate::planner::PlanOptions;
use crate::weights::initial_bytes;

/// One prefill plan of a [`CudaExecutor`](super::CudaExecutor) as the host holds it.
pub(super) struct PrefillHost {
    pub(super) pre: PrefillPlan,
    pub(super) descs: Vec<&'static KernelDesc>,
    /// For each of its buffers, the decode plan's buffer it is ([`crate::exec::shared_buffers`]).
    pub(super) twins: Vec<Option<usize>>,
}

/// Where a buffer of a prefill plan lives on the device.
pub(super) enum Slot {
    /// The decode plan's buffer of that index.
    Shared(usize),
    Own(DeviceBuffer),
}

/// One prefill plan on the device.
pub(super) struct DevChunk {
    pub(super) slots: Vec<Slot>,
    /// Launch geometry of every node, in plan order.
    pub(super) shapes: Vec<LaunchShape>,
    /// The chunk's layers (nodes `..head_start`) and the head, each captured at its first use;
    /// never in eager mode.
    pub(super) body: Option<Graph>,
    pub(super) head: Option<Graph>,
}

/// The batched prefill's state on one device.
pub(super) struct DevPrefill {
    /// In the order of [`CudaExecutor::prefill`](super::CudaExecutor::prefill)'s plans.
    pub(super) chunks: Vec<DevChunk>,
    /// The embedding table (a prefill plan's rows come from the host).
    pub(super) embedding: HostEmbedding,
    /// Host staging of a chunk's residual rows (the largest bucket's), its row count and its
    /// StepState.
    pub(super) x_in: PinnedBuffer,
    pub(super) rows_in: PinnedBuffer,
    pub(super) state_in: PinnedBuffer,
}

/// The prefill plans of every bucket up to the context, each checked against the committed PTX
/// and mapped onto the decode plan's buffers, or why the model has none (the reason the planner
/// gave: a weight type without `mmq` kernels, too few heads for the prefill attention, an
/// expert cache). The same plans as [`crate::exec::sim::SimExecutor`] loads.
pub(super) fn prefill_plans(
    config: &ModelConfig,
    file: &GgufFile,
    opts: PlanOptions,
    decode: &Plan,
) -> Result<Result<Vec<PrefillHost>, String>, ExecError> {
    let mut out = Vec::new();
    for bucket in PREFILL_BUCKETS.into_iter().filter(|&b| b <= opts.ctx) {
        let pre = match build_prefill_plan_for(config, file.header(), opts, bucket) {
            Ok(p) => p,
            Err(e) => return Ok(Err(e.to_string())),
        };
        let descs = pre.plan.check_committed()?;
        let twins = crate::exec::shared_buffers(decode, &pre.plan)?;
        out.push(PrefillHost { pre, descs, twins });
    }
    if out.is_empty() {
        return Ok(Err(format!(
            "no prefill bucket fits a context of {} positions (the smallest is {})",
            opts.ctx, PREFILL_BUCKETS[0]
        )));
    }
    Ok(Ok(out))
}

/// Device bytes the prefill plans allocate for themselves (their activations).
pub(super) fn prefill_own_bytes(plans: &[PrefillHost]) -> u64 {
    plans
        .iter()
        .map(|h| crate::exec::own_bytes(&h.pre.plan, &h.twins))
        .sum()
}

/// A second plan's buffers (a prefill chunk's, the NextN/MTP block's, a verify's) on the device:
/// the decode plan's where `twins` names one (at its device address `decode[j]`), otherwise its
/// own, allocated and filled with its initial bytes; its own expert tables are then written as
/// the decode plan's are at load (the identity table over each routed tensor,
/// [`Plan::expert_tables`]), which no initial bytes hold. Only the decode plan keeps weights in
/// host memory (the routed experts beyond VRAM).
pub(super) fn own_slots(
    gpu: &Gpu,
    file: &GgufFile,
    plan: &Plan,
    (twins, decode): (&[Option<usize>], &[u64]),
) -> Result<Vec<Slot>, ExecError> {
    let mut slots = Vec::with_capacity(twins.len());
    for (decl, twin) in plan.buffers.iter().zip(twins) {
        if let Some(j) = *twin {
            slots.push(Slot::Shared(j));
            continue;
        }
        if let BufferKind::Weight {
            host_mapped: true, ..
        } = decl.kind
        {
            return Err(ExecError::Weight {
                name: decl.name.clone(),
                reason: "a host-mapped weight outside the decode plan".into(),
            });
        }
        let b = gpu.alloc(decl.bytes as usize)?;
        if let Some(bytes) = initial_bytes(file, decl)? {
            gpu.upload(&b, &bytes)?;
        }
        slots.push(Slot::Own(b));
    }
    let addr = |b: crate::BufId| match &slots[b.0 as usize] {
        Slot::Shared(j) => decode[*j],
        Slot::Own(d) => gpu.device_address(d),
    };
    for (t, entries) in plan.expert_tables(addr) {
        if let Slot::Own(d) = &slots[t.0 as usize] {
            gpu.upload(d, bytemuck::cast_slice(&entries))?;
        }
    }
    Ok(slots)
}

impl DevPrefill {
    /// Allocates each prefill plan's own buffers (uploading any initial bytes; the shared
    /// ones are the decode plan's), the host staging and the embedding table. `None` without
    /// prefill plans.
    pub(super) fn open(
        gpu: &Gpu,
        file: &GgufFile,
        plans: &[PrefillHost],
        decode: &[u64],
    ) -> Result<Option<Self>, ExecError> {
        let Some(first) = plans.first() else {
            return Ok(None);
        };
        let mut chunks = Vec::with_capacity(plans.len());
        for h in plans {
            let slots = own_slots(gpu, file, &h.pre.plan, (&h.twins, decode))?;
            chunks.push(DevChunk {
                slots,
                shapes: shapes_of(&h.pre.plan, &h.descs),
                body: None,
                head: None,
            });
        }
        let embedding = HostEmbedding::for_plan(file, &first.pre.plan)?.ok_or(
            ExecError::NeedsHost("a prefill plan writes its embeddings from the host"),
        )?;
        let largest = plans.iter().map(|h| h.pre.ntok).max().unwrap_or(0);
        Ok(Some(DevPrefill {
            chunks,
            embedding,
            x_in: gpu.alloc_pinned(largest * first.pre.plan.n_embd * 4)?,
            rows_in: gpu.alloc_pinned(4)?,
            state_in: gpu.alloc_pinned(STATE_BYTES)?,
        }))
    }
}
