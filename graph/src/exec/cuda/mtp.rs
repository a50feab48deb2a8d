//! The NextN/MTP block on the device (`Decoder::mtp_step`, `Decoder::mtp_logits`): the
//! [`MtpPlan`] the simulator runs, on the decode plan's buffers where a weight or constant is
//! declared alike ([`crate::exec::shared_initialized`]: the embedding, the lm_head, the rope
//! tables) and on its own otherwise (the block's weights, its latent cache and step state, its
//! activations). The plan is built at load; its buffers are allocated and uploaded at its first
//! step, only when the free memory then holds them and the headroom (`mtp_ready` asks the same
//! first), so a decoder that never drafts spends no VRAM on it, and one that cannot draft still
//! decodes, and says why.
//!
//! Two graphs, each captured at its first use (never in eager mode): the block (nodes
//! `..head_start`) and the head. A step uploads the hidden state, the StepState and (without a
//! fetch kernel) the token's embedding row through pinned memory, replays the block, copies its
//! output (after `shared_head_norm`) back and waits; the head runs only when its logits are
//! asked for. The block's input, the decode plan's final hidden state (`act.norm`), is copied
//! back after each decode step once drafting has begun (`CudaExecutor`'s `keep_hidden`).

use ingot_abi::launch::KernelDesc;
use ingot_cuda::{DeviceBuffer, Gpu, Graph, LaunchShape, MappedBuffer, Module, PinnedBuffer};
use ingot_gguf::GgufFile;

use super::launch::{decode_place, shapes_of, Place};
use super::prefill::{own_slots, Slot};
use super::{STATE_BYTES, VRAM_HEADROOM};
use crate::error::ExecError;
use crate::exec::host_embedding::HostEmbedding;
use crate::plan::Plan;
use crate::planner::mtp::MtpPlan;
use crate::BufId;

/// The block's plan as the host holds it.
pub(super) struct MtpHost {
    pub(super) mtp: MtpPlan,
    descs: Vec<&'static KernelDesc>,
    /// For each of its buffers, the decode plan's buffer it is, if any.
    twins: Vec<Option<usize>>,
}

impl MtpHost {
    pub(super) fn new((mtp, descs): (MtpPlan, Vec<&'static KernelDesc>), decode: &Plan) -> Self {
        let twins = crate::exec::shared_initialized(decode, &mtp.plan);
        MtpHost { mtp, descs, twins }
    }

    /// Device bytes of the block's own buffers.
    pub(super) fn own_bytes(&self) -> u64 {
        crate::exec::own_bytes(&self.mtp.plan, &self.twins)
    }
}

/// The block on the device.
pub(super) struct DevMtp {
    pub(super) slots: Vec<Slot>,
    pub(super) shapes: Vec<LaunchShape>,
    pub(super) body: Option<Graph>,
    pub(super) head: Option<Graph>,
    /// The embedding rows, for a plan without a device fetch.
    pub(super) embedding: Option<HostEmbedding>,
    /// Host staging: the hidden state in, the embedding row, the StepState, the block's output.
    pub(super) hidden_in: PinnedBuffer,
    pub(super) row_in: PinnedBuffer,
    pub(super) state_in: PinnedBuffer,
    pub(super) hidden_out: PinnedBuffer,
}

impl DevMtp {
    /// Whether the free memory holds the block's own buffers beside the headroom; `Ok(Err(why))`
    /// when not.
    pub(super) fn fits(gpu: &Gpu, host: &MtpHost) -> Result<Result<(), String>, ExecError> {
        let own = host.own_bytes();
        let (free, _total) = gpu.mem_info()?;
        if own + VRAM_HEADROOM > free as u64 {
            return Ok(Err(format!(
                "too little free GPU memory for the NextN/MTP block: it needs {own} bytes beside \
                 the decode plan (and {VRAM_HEADROOM} of headroom), {free} are free; lower --ctx"
            )));
        }
        Ok(Ok(()))
    }

    /// Allocates the block's own buffers (uploading their initial bytes) and its staging, and
    /// prepares its kernels; `Ok(Err(why))` when it does not [`fit`](DevMtp::fits) (nothing is
    /// allocated then).
    pub(super) fn open(
        (gpu, module): (&Gpu, &mut Module),
        file: &GgufFile,
        host: &MtpHost,
        decode: &[u64],
    ) -> Result<Result<DevMtp, String>, ExecError> {
        if let Err(why) = Self::fits(gpu, host)? {
            return Ok(Err(why));
        }
        let plan = &host.mtp.plan;
        for k in &plan.summary().kernels {
            module.prepare(k)?;
        }
        let slots = own_slots(gpu, file, plan, (&host.twins, decode))?;
        let embedding = if plan.host_embedding {
            Some(HostEmbedding::of_tensor(
                file,
                &host.mtp.embed_tensor,
                plan,
            )?)
        } else {
            None
        };
        let row = plan.n_embd * 4;
        Ok(Ok(DevMtp {
            slots,
            shapes: shapes_of(plan, &host.descs),
            body: None,
            head: None,
            embedding,
            hidden_in: gpu.alloc_pinned(row)?,
            row_in: gpu.alloc_pinned(row)?,
            state_in: gpu.alloc_pinned(STATE_BYTES)?,
            hidden_out: gpu.alloc_pinned(row)?,
        }))
    }
}

/// Where buffer `i` of the block's plan is: the decode plan's twin or its own.
pub(super) fn mtp_place<'a>(
    bufs: &'a [DeviceBuffer],
    mapped: &[Option<MappedBuffer>],
    slots: &'a [Slot],
    i: usize,
) -> Place<'a> {
    match &slots[i] {
        Slot::Shared(j) => decode_place(bufs, mapped, *j),
        Slot::Own(b) => Place::Dev(b),
    }
}

/// The device buffer of `id` (one the host copies to or from, never host-mapped).
pub(super) fn own_device<'a>(
    place: &dyn Fn(usize) -> Place<'a>,
    id: BufId,
) -> Result<&'a DeviceBuffer, ExecError> {
    match place(id.0 as usize) {
        Place::Dev(b) => Ok(b),
        Place::Mapped(_) => Err(ExecError::NeedsHost(
            "a buffer the host copies to or from (the NextN/MTP block's, the verify's) is host-mapped",
        )),
    }
}

/// The first `n` f32 of `bytes` (a staging buffer the device wrote).
pub(super) fn f32s(bytes: &[u8], n: usize) -> Vec<f32> {
    bytemuck::pod_collect_to_vec(&bytes[..n * 4])
}
