//! The plan's state on one device and how it gets there: every buffer allocated once at its
//! declared size and its initial bytes uploaded (host-mapped buffers, the routed experts outside
//! VRAM, filled in place), the PTX loaded and every kernel the plans name resolved, the expert
//! cache set up, and the decode nodes captured. Nothing is allocated after load but the NextN/MTP
//! block's buffers, at its first draft (`mtp.rs`: checked against the free memory then).

use std::time::Instant;

use ingot_abi::launch::KernelDesc;
use ingot_cuda::{
    CopyStream, DeviceBuffer, Event, Fence, Gpu, Graph, LaunchShape, MappedBuffer, Module,
    PinnedBuffer,
};
use ingot_gguf::GgufFile;

use super::launch::shapes_of;
use super::mtp::DevMtp;
use super::prefill::{prefill_own_bytes, DevPrefill, PrefillHost};
use super::slots::CudaSlots;
use super::{IN_FLIGHT, STATE_BYTES, VRAM_HEADROOM};
use crate::buffer::BufferKind;
use crate::error::ExecError;
use crate::exec::expert_cache::ExpertCache;
use crate::exec::host_embedding::HostEmbedding;
use crate::plan::Plan;
use crate::weights::initial_bytes;

/// Bytes of the unused device buffer that stands at a host-mapped buffer's index in `bufs`.
const MAPPED_PLACEHOLDER: usize = 256;

/// The plan's state on one device.
pub(super) struct Loaded {
    pub(super) gpu: Gpu,
    pub(super) module: Module,
    pub(super) bufs: Vec<DeviceBuffer>,
    /// Launch geometry of every node, in plan order.
    pub(super) shapes: Vec<LaunchShape>,
    /// The captured step; `None` in eager mode.
    pub(super) graph: Option<Graph>,
    /// Host staging of the StepState written before a replay.
    pub(super) state_in: PinnedBuffer,
    /// `IN_FLIGHT` StepState slots read back by greedy decoding.
    pub(super) state_out: PinnedBuffer,
    pub(super) logits_out: PinnedBuffer,
    pub(super) events: Vec<Event>,
    /// Host copy of the embedding table and its pinned staging row, for plans without a
    /// device embedding fetch.
    pub(super) embedding: Option<(HostEmbedding, PinnedBuffer)>,
    /// The host-mapped buffers (routed experts outside VRAM), by plan buffer index; `bufs`
    /// holds a small unused placeholder at their index.
    pub(super) mapped: Vec<Option<MappedBuffer>>,
    /// The routed experts' cache, when the plan keeps experts beyond VRAM, and the stream its
    /// slot fills run on.
    pub(super) experts: Option<(ExpertCache<Fence>, CopyStream)>,
    /// The batched prefill; `None` when the executor has no prefill plan.
    pub(super) prefill: Option<DevPrefill>,
    /// The NextN/MTP block; `None` until its first step.
    pub(super) mtp: Option<DevMtp>,
    /// The speculative verify of `m` positions at index `m - 2`; `None` until its first use.
    pub(super) verify: Vec<Option<super::verify::DevVerify>>,
    /// Host staging of the decode plan's final hidden state (`act.norm`, n_embd f32).
    pub(super) hidden_out: PinnedBuffer,
}

/// The device address of each of the decode plan's buffers: `bufs[j]`, or where a host-mapped
/// buffer `mapped[j]` is seen from the device.
fn device_addresses(gpu: &Gpu, bufs: &[DeviceBuffer], mapped: &[Option<MappedBuffer>]) -> Vec<u64> {
    (bufs.iter().zip(mapped))
        .map(|(b, m)| match m {
            Some(m) => m.device_address(),
            None => gpu.device_address(b),
        })
        .collect()
}

impl Loaded {
    /// The device address of each of the decode plan's buffers (host-mapped or in VRAM), which a
    /// second plan's buffers shared with it point to ([`super::prefill::own_slots`]).
    pub(super) fn decode_addresses(&self) -> Vec<u64> {
        device_addresses(&self.gpu, &self.bufs, &self.mapped)
    }

    /// Uploads the plan's buffers to `gpu` and the prefill plans' own ones, loads the PTX,
    /// and captures the decode nodes into one graph when `capture` (the prefill graphs are
    /// captured at their first use). Returns the upload's wall time in seconds too.
    pub(super) fn open(
        gpu: Gpu,
        file: &GgufFile,
        plan: &Plan,
        descs: &[&'static KernelDesc],
        prefill: &[PrefillHost],
        progress: bool,
        capture: bool,
    ) -> Result<(Self, f64), ExecError> {
        let summary = plan.summary();
        let (free, _total) = gpu.mem_info()?;
        let prefill_bytes = prefill_own_bytes(prefill);
        let needed = summary.device_bytes() + prefill_bytes + VRAM_HEADROOM;
        if needed > free as u64 {
            return Err(ExecError::OutOfMemory {
                needed,
                free: free as u64,
                prefill: prefill_bytes,
            });
        }
        let mut module = ingot_kernels::cubin::load_module(&gpu)?;
        let mut kernels = summary.kernels.clone();
        for h in prefill {
            kernels.extend(h.pre.plan.summary().kernels);
        }
        kernels.sort();
        kernels.dedup();
        for k in &kernels {
            module.prepare(k)?;
        }
        let started = Instant::now();
        let bar = upload_bar(progress, summary.device_bytes());
        let mut bufs = Vec::with_capacity(plan.buffers.len());
        let mut mapped = Vec::with_capacity(plan.buffers.len());
        for decl in &plan.buffers {
            bar.set_message(decl.name.clone());
            if let BufferKind::Weight {
                host_mapped: true, ..
            } = decl.kind
            {
                let mut m = gpu.alloc_mapped(decl.bytes as usize)?;
                if let Some(bytes) = initial_bytes(file, decl)? {
                    m.bytes_mut().copy_from_slice(&bytes);
                }
                bufs.push(gpu.alloc(MAPPED_PLACEHOLDER)?);
                mapped.push(Some(m));
                continue;
            }
            let b = gpu.alloc(decl.bytes as usize)?;
            if let Some(bytes) = initial_bytes(file, decl)? {
                gpu.upload(&b, &bytes)?;
            }
            bar.inc(decl.bytes);
            bufs.push(b);
            mapped.push(None);
        }
        let addrs = device_addresses(&gpu, &bufs, &mapped);
        let prefill = DevPrefill::open(&gpu, file, prefill, &addrs)?;
        bar.finish_and_clear();
        let upload_s = started.elapsed().as_secs_f64();
        let shapes = shapes_of(plan, descs);
        let embedding = match HostEmbedding::for_plan(file, plan)? {
            Some(e) => Some((e, gpu.alloc_pinned(plan.n_embd * 4)?)),
            None => None,
        };
        let mut dev = Loaded {
            state_in: gpu.alloc_pinned(STATE_BYTES)?,
            state_out: gpu.alloc_pinned(STATE_BYTES * IN_FLIGHT)?,
            logits_out: gpu.alloc_pinned(plan.vocab * 4)?,
            hidden_out: gpu.alloc_pinned(plan.n_embd * 4)?,
            events: (0..IN_FLIGHT)
                .map(|_| gpu.event(false))
                .collect::<Result<_, _>>()?,
            embedding,
            gpu,
            module,
            bufs,
            shapes,
            graph: None,
            mapped,
            experts: None,
            prefill,
            mtp: None,
            verify: Vec::new(),
        };
        for (t, entries) in plan.expert_tables(|b| addrs[b.0 as usize]) {
            dev.gpu
                .upload(&dev.bufs[t.0 as usize], bytemuck::cast_slice(&entries))?;
        }
        if plan.expert_cache.is_some() {
            let copies = dev.gpu.copy_stream()?;
            let mut mem = CudaSlots {
                gpu: &dev.gpu,
                copies: &copies,
            };
            let cache = ExpertCache::new(plan, |b| addrs[b.0 as usize], &mut mem)?;
            dev.experts = Some((cache, copies));
        }
        if capture {
            dev.capture(plan)?;
        }
        Ok((dev, upload_s))
    }
}

fn upload_bar(progress: bool, total: u64) -> indicatif::ProgressBar {
    if !progress {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "upload {msg:>28} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}
