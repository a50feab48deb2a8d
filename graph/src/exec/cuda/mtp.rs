//! The NextN/MTP block on the device (`Decoder::mtp_step`, `Decoder::mtp_logits`): the
//! [`MtpPlan`] the simulator runs, on the decode plan's buffers where a weight or constant is
//! declared alike ([`crate::exec::shared_initialized`]: the embedding, the lm_head, the rope
//! tables) and on its own otherwise (the block's weights, its latent cache and step state, its
//! activations). It is loaded after the decode plan, only when the free memory then holds its
//! own buffers and the headroom: a decoder that cannot draft still decodes, and says why.
//!
//! Two graphs, each captured at its first use (never in eager mode): the block (nodes
//! `..head_start`) and the head. A step uploads the hidden state, the StepState and (without a
//! fetch kernel) the token's embedding row through pinned memory, replays the block, copies its
//! output (after `shared_head_norm`) back and waits; the head runs only when its logits are
//! asked for. While the block is loaded, every decode step also copies the decode plan's final
//! hidden state (`act.norm`) back: the block's input.

use ingot_abi::launch::KernelDesc;
use ingot_abi::step::StepState;
use ingot_cuda::{DeviceBuffer, Graph, LaunchShape, MappedBuffer, PinnedBuffer};
use ingot_gguf::GgufFile;

use super::launch::{capture_nodes, decode_place, launch_nodes, shapes_of, Pace, Place};
use super::prefill::{own_slots, Slot};
use super::upload::{Loaded, VRAM_HEADROOM};
use super::STATE_BYTES;
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
    slots: Vec<Slot>,
    shapes: Vec<LaunchShape>,
    body: Option<Graph>,
    head: Option<Graph>,
    /// The embedding rows, for a plan without a device fetch.
    embedding: Option<HostEmbedding>,
    /// Host staging: the hidden state in, the embedding row, the StepState, the block's output,
    /// and the decode plan's final hidden state after each decode step.
    hidden_in: PinnedBuffer,
    row_in: PinnedBuffer,
    state_in: PinnedBuffer,
    hidden_out: PinnedBuffer,
    pub(super) decode_hidden: PinnedBuffer,
}

impl Loaded {
    /// Allocates the block's own buffers (uploading their initial bytes) and its staging, and
    /// prepares its kernels; `Ok(Err(why))` when the free memory cannot hold them beside the
    /// headroom (nothing is allocated then).
    pub(super) fn open_mtp(
        &mut self,
        file: &GgufFile,
        host: &MtpHost,
    ) -> Result<Result<DevMtp, String>, ExecError> {
        let own = host.own_bytes();
        let (free, _total) = self.gpu.mem_info()?;
        if own + VRAM_HEADROOM > free as u64 {
            return Ok(Err(format!(
                "too little free GPU memory for the NextN/MTP block: it needs {own} bytes beside \
                 the decode plan (and {VRAM_HEADROOM} of headroom), {free} are free; lower --ctx"
            )));
        }
        let plan = &host.mtp.plan;
        for k in &plan.summary().kernels {
            self.module.prepare(k)?;
        }
        let slots = own_slots(&self.gpu, file, plan, &host.twins)?;
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
            hidden_in: self.gpu.alloc_pinned(row)?,
            row_in: self.gpu.alloc_pinned(row)?,
            state_in: self.gpu.alloc_pinned(STATE_BYTES)?,
            hidden_out: self.gpu.alloc_pinned(row)?,
            decode_hidden: self.gpu.alloc_pinned(row)?,
        }))
    }

    /// Runs the block on `hidden` with `token` at MTP position `pos` and waits; returns its
    /// output after `shared_head_norm`. `eager`: node by node with a synchronisation after each.
    pub(super) fn run_mtp_block(
        &mut self,
        host: &MtpHost,
        input: (&[f32], u32, usize),
        eager: bool,
    ) -> Result<Vec<f32>, ExecError> {
        self.run_mtp(host, Some(input), eager)
    }

    /// Runs the block's head on the last block step's output and waits; returns the logits.
    pub(super) fn run_mtp_head(
        &mut self,
        host: &MtpHost,
        eager: bool,
    ) -> Result<Vec<f32>, ExecError> {
        self.run_mtp(host, None, eager)
    }

    /// The block (with its `input`: hidden state, token, MTP position) or, without one, the
    /// head: its graph captured at first use (before anything of the run is enqueued), the
    /// block's inputs uploaded, the replay (or the nodes one by one when `eager`), the output
    /// copied back, waited for.
    fn run_mtp(
        &mut self,
        host: &MtpHost,
        input: Option<(&[f32], u32, usize)>,
        eager: bool,
    ) -> Result<Vec<f32>, ExecError> {
        let Loaded {
            gpu,
            module,
            bufs,
            mapped,
            mtp,
            events,
            logits_out,
            ..
        } = self;
        let DevMtp {
            slots,
            shapes,
            body,
            head,
            embedding,
            hidden_in,
            row_in,
            state_in,
            hidden_out,
            ..
        } = mtp.as_mut().ok_or(ExecError::Faulted)?;
        let plan = &host.mtp.plan;
        let (bufs, mapped, slots) = (&*bufs, &*mapped, &*slots);
        let place = |i: usize| mtp_place(bufs, mapped, slots, i);
        let dev = |id: BufId| own_device(&place, id);
        let (nodes, graph, out, len, staging) = match input {
            Some(_) => (
                0..host.mtp.head_start,
                body,
                host.mtp.hidden_out,
                plan.n_embd,
                hidden_out,
            ),
            None => (
                host.mtp.head_start..plan.nodes.len(),
                head,
                plan.logits,
                plan.vocab,
                logits_out,
            ),
        };
        if !eager && graph.is_none() {
            *graph = Some(capture_nodes(
                gpu,
                module,
                plan,
                nodes.clone(),
                shapes,
                &place,
            )?);
        }
        if let Some((hidden, token, pos)) = input {
            // The previous run was waited for, so the staging is free.
            hidden_in
                .bytes_mut()
                .copy_from_slice(bytemuck::cast_slice(hidden));
            gpu.copy_from_pinned(hidden_in, 0, dev(host.mtp.hidden_in)?, 0, hidden.len() * 4)?;
            let state = StepState {
                token,
                pos: pos as u32,
                next_token: 0,
                steps_done: 0,
            };
            state_in
                .bytes_mut()
                .copy_from_slice(bytemuck::bytes_of(&state));
            gpu.copy_from_pinned(state_in, 0, dev(plan.step)?, 0, STATE_BYTES)?;
            if let Some(e) = embedding {
                let row = e.row(token)?;
                row_in.bytes_mut()[..row.len()].copy_from_slice(&row);
                gpu.copy_from_pinned(row_in, 0, dev(plan.residual)?, 0, row.len())?;
            }
        }
        match graph {
            Some(g) => g.launch()?,
            None => launch_nodes(gpu, module, plan, nodes, shapes, &place, Pace::Sync)?,
        }
        gpu.copy_to_pinned(dev(out)?, 0, staging, 0, len * 4)?;
        gpu.record(&events[0])?;
        events[0].synchronize()?;
        Ok(f32s(staging.bytes(), len))
    }
}

/// Where buffer `i` of the block's plan is: the decode plan's twin or its own.
fn mtp_place<'a>(
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
fn own_device<'a>(
    place: &dyn Fn(usize) -> Place<'a>,
    id: BufId,
) -> Result<&'a DeviceBuffer, ExecError> {
    match place(id.0 as usize) {
        Place::Dev(b) => Ok(b),
        Place::Mapped(_) => Err(ExecError::NeedsHost(
            "a buffer the NextN/MTP block's host copies touch is host-mapped",
        )),
    }
}

/// The first `n` little-endian f32 of `bytes`.
pub(super) fn f32s(bytes: &[u8], n: usize) -> Vec<f32> {
    bytes[..n * 4]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}
