//! The plan captured into one CUDA graph and replayed once per token.
//!
//! Load: build and check the plan, compare its device bytes with the free VRAM, upload every
//! weight once (zero-copy from the memory map into the copy), load the PTX, resolve every
//! kernel, then capture all nodes in order into one graph. Decode: the host writes the
//! [`StepState`] (token, position) through pinned memory, enqueues one replay and an
//! asynchronous copy of the logits into pinned memory, and waits on an event.
//!
//! [`CudaExecutor::generate_greedy`] keeps the host off the critical path: the graph's last
//! kernel writes the argmax into the `StepState` and advances it, so replay `k+1` is enqueued
//! before the host has read token `k`, which arrives through a pinned copy enqueued between the
//! two replays.
//!
//! **Prefill** ([`CudaExecutor::prefill_chunked`], `Decoder::prefill_last`) runs a prompt in
//! chunks, as the simulator does: at load one [`PrefillPlan`] per bucket of
//! [`PREFILL_BUCKETS`] that fits the context, with its own activations and the decode plan's
//! weights, latent caches and step state ([`super::shared_buffers`]); at its first use one graph
//! for the chunk's layers (nodes `..head_start`) and one for the head. A chunk is: the host's
//! embeddings of its `n` tokens (zero rows to the bucket's end), `n` and the `StepState` (its
//! first position) uploaded asynchronously through pinned memory, the layers' replay; after
//! the prompt's last chunk a device-to-device copy of row `n − 1` of the chunk's residual
//! stream into the head's input, the head's replay and the logits' copy back. What no bucket
//! fits, or the whole prompt when the planner refused the model
//! ([`CudaExecutor::prefill_unavailable`]), runs token by token through the decode graph.
//!
//! **Eager mode** (`INGOT_EAGER=1`, see [`EAGER_VAR`]) skips the capture and runs the nodes one by
//! one with a synchronisation after each, so the first node that faults is named (kernel, layer,
//! grid, arguments: [`ExecError::Node`]). A failing replay enters it by itself: the faulted
//! context is released (a fault poisons a CUDA context for good), the model is loaded again in a
//! fresh one, and the failing step is re-run eagerly; the replay's error then carries the first
//! failing node ([`ExecError::Replay`]). The re-run starts from a zeroed KV cache, so a fault
//! that depends on addresses (position, offsets, grid) reproduces, one that depends on values
//! written by earlier steps may not (the message says so). The executor is unusable after a
//! failed replay.

use std::path::PathBuf;
use std::time::Instant;

use ingot_abi::launch::KernelDesc;
use ingot_abi::step::StepState;
use ingot_cuda::{
    CopyStream, DeviceBuffer, Event, Fence, Gpu, Graph, JitReport, LaunchShape, MappedBuffer,
    Module, PinnedBuffer,
};
use ingot_gguf::GgufFile;
use ingot_model::{check_step, Decoder, ModelConfig, ModelError};

use crate::buffer::BufferKind;
use crate::error::ExecError;
use crate::exec::expert_cache::ExpertCache;
use crate::plan::Plan;
use crate::planner::prefill::{build_prefill_plan_for, PrefillPlan, PREFILL_BUCKETS};
use crate::planner::{build_plan_for, PlanOptions};
use crate::weights::{initial_bytes, HostEmbedding};
use crate::BufId;

mod launch;
mod slots;
use launch::{capture_nodes, in_prefill, launch_nodes, Pace, Place};
use slots::CudaSlots;

/// `INGOT_EAGER=1`: run every step node by node with a synchronisation after each instead of
/// replaying the captured graph (slow; for localising a GPU fault).
pub const EAGER_VAR: &str = "INGOT_EAGER";

/// Device memory kept free beyond the plan's buffers: the context, the JIT-compiled module,
/// the graph's own resources and cudarc's bookkeeping.
const VRAM_HEADROOM: u64 = 512 << 20;

/// Bytes of the unused device buffer that stands at a host-mapped buffer's index in `bufs`.
const MAPPED_PLACEHOLDER: usize = 256;

/// Pipelined greedy decoding keeps this many step results in flight.
const IN_FLIGHT: usize = 2;

const STATE_BYTES: usize = size_of::<StepState>();

/// Bytes of each of the two scratch buffers whose device-to-device copies keep the GPU busy
/// while the host enqueues a timed step ([`CudaExecutor::measure_step`]).
const FILLER_BYTES: usize = 512 << 20;
/// Filler copies before the first timed step (about 0.3 ms each on an H200, so 16 outlast
/// the ~700 launches and event records of a V2-Lite step at a few us each); doubled after
/// every repetition whose enqueueing outlasted the filler, up to [`MAX_FILLER_COPIES`]. The cap
/// keeps the copies plus the step's launches within the stream's queue of pending work (about
/// a thousand entries), past which the host blocks and every repetition would look host-bound.
const FIRST_FILLER_COPIES: usize = 16;
const MAX_FILLER_COPIES: usize = 128;

/// GPU times of one decode step measured by [`CudaExecutor::measure_step`], in milliseconds,
/// one entry per repetition.
#[derive(Clone, Debug, Default)]
pub struct StepTiming {
    /// `node_ms[rep][i]`: node `i` between the events recorded around it (its kernel plus the
    /// gap to the next one on a stream the host kept fed; one event record included).
    pub node_ms: Vec<Vec<f32>>,
    /// A whole step launched node by node with a synchronisation after each (`INGOT_EAGER=1`
    /// mode), first launch to last completion.
    pub eager_ms: Vec<f32>,
    /// One graph replay: `replays` back-to-back replays divided by `replays`; empty when the
    /// executor runs eagerly (no graph captured).
    pub graph_ms: Vec<f32>,
    /// Graph replays per `graph_ms` sample.
    pub replays: usize,
    /// Repetitions whose host enqueueing outlasted the filler copies before them: the GPU may
    /// have waited for the host there, so their node times can include launch gaps. Excluded
    /// from `node_ms` when at least one repetition was clean.
    pub host_bound_reps: usize,
    /// Filler copies before the last timed repetition (0: no scratch memory for them).
    pub filler_copies: usize,
}

fn eager_requested() -> bool {
    std::env::var(EAGER_VAR).is_ok_and(|v| v.trim() == "1")
}

/// The decode plan as one CUDA graph (or node by node in eager mode).
pub struct CudaExecutor {
    config: ModelConfig,
    plan: Plan,
    /// The model file, reopened to re-run a failing step eagerly in a fresh context.
    path: PathBuf,
    eager: bool,
    /// Everything on the device; `None` once a replay failed (dropping it released the
    /// faulted context).
    dev: Option<Box<Loaded>>,
    filled: usize,
    logits: Vec<f32>,
    device_name: String,
    /// The batched prefill's plans, ascending by bucket, or why there are none.
    prefill: Result<Vec<PrefillHost>, String>,
}

/// One prefill plan of a [`CudaExecutor`] as the host holds it.
struct PrefillHost {
    pre: PrefillPlan,
    descs: Vec<&'static KernelDesc>,
    /// For each of its buffers, the decode plan's buffer it is ([`super::shared_buffers`]).
    twins: Vec<Option<usize>>,
}

/// Where a buffer of a prefill plan lives on the device.
enum Slot {
    /// The decode plan's buffer of that index.
    Shared(usize),
    Own(DeviceBuffer),
}

/// One prefill plan on the device.
struct DevChunk {
    slots: Vec<Slot>,
    /// Launch geometry of every node, in plan order.
    shapes: Vec<LaunchShape>,
    /// The chunk's layers (nodes `..head_start`) and the head, each captured at its first use;
    /// never in eager mode.
    body: Option<Graph>,
    head: Option<Graph>,
}

/// The batched prefill's state on one device.
struct DevPrefill {
    /// In the order of [`CudaExecutor::prefill`]'s plans.
    chunks: Vec<DevChunk>,
    /// The embedding table (a prefill plan's rows come from the host).
    embedding: HostEmbedding,
    /// Host staging of a chunk's residual rows (the largest bucket's), its row count and its
    /// StepState.
    x_in: PinnedBuffer,
    rows_in: PinnedBuffer,
    state_in: PinnedBuffer,
}

/// A failed piece of work, re-run eagerly in a fresh context to name its first failing node.
#[derive(Clone, Copy)]
enum Failed<'t> {
    Step {
        token: u32,
        pos: usize,
    },
    /// Prefill plan `k` on `tokens` at `pos..`, with the head when `head`.
    Chunk {
        k: usize,
        tokens: &'t [u32],
        pos: usize,
        head: bool,
    },
}

impl Failed<'_> {
    fn pos(self) -> usize {
        match self {
            Failed::Step { pos, .. } | Failed::Chunk { pos, .. } => pos,
        }
    }

    fn describe(self) -> String {
        match self {
            Failed::Step { pos, .. } => format!("pos {pos}"),
            Failed::Chunk { tokens, pos, .. } => {
                format!("the prefill chunk of {} tokens at pos {pos}", tokens.len())
            }
        }
    }
}

/// The plan's state on one device.
struct Loaded {
    gpu: Gpu,
    module: Module,
    bufs: Vec<DeviceBuffer>,
    /// Launch geometry of every node, in plan order.
    shapes: Vec<LaunchShape>,
    /// The captured step; `None` in eager mode.
    graph: Option<Graph>,
    /// Host staging of the StepState written before a replay.
    state_in: PinnedBuffer,
    /// `IN_FLIGHT` StepState slots read back by greedy decoding.
    state_out: PinnedBuffer,
    logits_out: PinnedBuffer,
    events: Vec<Event>,
    /// Host copy of the embedding table and its pinned staging row, for plans without a
    /// device embedding fetch.
    embedding: Option<(HostEmbedding, PinnedBuffer)>,
    /// The host-mapped buffers (routed experts outside VRAM), by plan buffer index; `bufs`
    /// holds a small unused placeholder at their index.
    mapped: Vec<Option<MappedBuffer>>,
    /// The routed experts' cache, when the plan keeps experts beyond VRAM, and the stream its
    /// slot fills run on.
    experts: Option<(ExpertCache<Fence>, CopyStream)>,
    /// The batched prefill; `None` when the executor has no prefill plan.
    prefill: Option<DevPrefill>,
}

/// The decode plan's buffer `i`.
fn decode_place<'a>(
    bufs: &'a [DeviceBuffer],
    mapped: &[Option<MappedBuffer>],
    i: usize,
) -> Place<'a> {
    match &mapped[i] {
        Some(m) => Place::Mapped(m.device_address()),
        None => Place::Dev(&bufs[i]),
    }
}

/// Where a loaded executor stands; printed by `ingot run -v`.
#[derive(Clone, Debug)]
pub struct CudaInfo {
    pub device: String,
    pub nodes: usize,
    pub nodes_per_layer: usize,
    pub device_bytes: u64,
    pub upload_s: f64,
    /// How the kernels' module loaded (embedded cubin or the PTX's JIT): wall time, info log.
    pub jit: JitReport,
    /// Node by node with a sync after each (`INGOT_EAGER=1`) instead of a graph replay.
    pub eager: bool,
    /// The graph's nodes start before their predecessor has finished (programmatic dependent
    /// launch: sm_90 and later, unless `INGOT_NO_PDL` is set).
    pub early_launch: bool,
    /// Device bytes of the prefill plans' own buffers (their activations), part of what was
    /// checked against the free memory; 0 without a batched prefill.
    pub prefill_bytes: u64,
    /// The prefill buckets loaded (ascending), or why prompts run token by token.
    pub prefill: Result<Vec<usize>, String>,
}

impl CudaExecutor {
    /// Opens GPU 0 and loads `file` into one captured graph (or, with `INGOT_EAGER=1`, for
    /// node-by-node execution). `progress` draws an upload bar.
    pub fn load(
        file: &GgufFile,
        opts: PlanOptions,
        progress: bool,
    ) -> Result<(Self, CudaInfo), ExecError> {
        let config = ModelConfig::from_gguf(file.header()).map_err(crate::PlanError::from)?;
        let gpu = Gpu::new(0)?;
        // The attention split is sized to this GPU (one block per SM), whatever the caller
        // chose: any split gives the same result up to f32 summation order.
        let opts = PlanOptions {
            expert_cache: opts.expert_cache,
            cache_type: opts.cache_type,
            ..PlanOptions::for_device(opts.ctx, gpu.sm_count()?)
        };
        let plan = build_plan_for(&config, file.header(), opts)?;
        let descs = plan.check_committed()?;
        let prefill = prefill_plans(&config, file, opts, &plan)?;
        let pf = prefill.as_deref().unwrap_or(&[]);
        let summary = plan.summary();
        let device_name = gpu.name()?;
        let eager = eager_requested();
        let (dev, upload_s) = Loaded::open(gpu, file, &plan, &descs, pf, progress, !eager)?;
        let info = CudaInfo {
            device: device_name.clone(),
            nodes: summary.nodes,
            nodes_per_layer: summary.max_nodes_per_layer(),
            device_bytes: summary.device_bytes() + prefill_own_bytes(pf),
            upload_s,
            jit: dev.module.jit_report().clone(),
            eager,
            early_launch: dev.module.early_launch() && !eager,
            prefill_bytes: prefill_own_bytes(pf),
            prefill: match &prefill {
                Ok(p) => Ok(p.iter().map(|h| h.pre.ntok).collect()),
                Err(e) => Err(e.clone()),
            },
        };
        let exec = CudaExecutor {
            logits: vec![0.0; config.vocab],
            filled: 0,
            config,
            plan,
            path: file.path().to_owned(),
            eager,
            dev: Some(Box::new(dev)),
            device_name,
            prefill,
        };
        Ok((exec, info))
    }

    /// Why this executor prefills token by token (no prefill plan), or `None` when it runs
    /// prompts in chunks.
    pub fn prefill_unavailable(&self) -> Option<&str> {
        self.prefill.as_ref().err().map(String::as_str)
    }

    /// The prefill buckets this executor has, ascending (empty without a batched prefill).
    pub fn prefill_buckets(&self) -> Vec<usize> {
        match &self.prefill {
            Ok(p) => p.iter().map(|h| h.pre.ntok).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Feeds `tokens` at `start_pos..` as prefill chunks (what no bucket fits, or everything
    /// without any, token by token on the decode plan) and returns the last position's logits;
    /// see [`super::prefill_in_chunks`].
    pub fn prefill_chunked(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
    ) -> Result<Vec<f32>, ExecError> {
        super::prefill_in_chunks(self, tokens, start_pos)?;
        Ok(self.logits.clone())
    }

    /// Runs `tokens` at `pos..` through prefill plan `k` and waits for it; with `head`, also
    /// the output head on the last token, whose logits are then in [`CudaExecutor::logits`].
    fn run_chunk(
        &mut self,
        k: usize,
        tokens: &[u32],
        pos: usize,
        head: bool,
    ) -> Result<(), ExecError> {
        let plans = match &self.prefill {
            Ok(p) => p.as_slice(),
            Err(e) => return Err(ExecError::Prefill(format!("no prefill plan: {e}"))),
        };
        let eager = self.eager;
        let result = self
            .dev
            .as_deref_mut()
            .ok_or(ExecError::Faulted)
            .and_then(|d| d.run_chunk(plans, k, tokens, pos, head, eager));
        if let Err(e) = result {
            let failed = Failed::Chunk {
                k,
                tokens,
                pos,
                head,
            };
            return Err(self.after_failure(e, failed));
        }
        self.filled = pos + tokens.len();
        if head {
            self.read_logits()?;
        }
        Ok(())
    }

    /// The logits the last completed copy put into the pinned staging.
    fn read_logits(&mut self) -> Result<(), ExecError> {
        let n = self.plan.vocab * 4;
        let d = self.dev.as_deref().ok_or(ExecError::Faulted)?;
        for (v, b) in self
            .logits
            .iter_mut()
            .zip(d.logits_out.bytes()[..n].chunks_exact(4))
        {
            *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        Ok(())
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    /// Turns programmatic dependent launch of the decode step's nodes on or off and recaptures
    /// the step; returns whether it is now on. It can only be on for kernels built to wait on
    /// their predecessor (compute capability 9.0 and later, `ingot_kernels::grid_dep`); in
    /// eager mode nodes never start early. The logits do not depend on it (the device check's
    /// gate compares them); the time per step does.
    pub fn set_early_launch(&mut self, on: bool) -> Result<bool, ExecError> {
        let plan = &self.plan;
        let Some(dev) = self.dev.as_mut() else {
            return Ok(false);
        };
        let now = dev.module.set_early_launch(on);
        if dev.graph.is_some() {
            dev.graph = None;
            dev.capture(plan)?;
        }
        Ok(now)
    }

    /// Whether the decode step's nodes start before their predecessor has finished (see
    /// [`CudaExecutor::set_early_launch`]).
    pub fn early_launch(&self) -> bool {
        self.dev
            .as_ref()
            .is_some_and(|d| d.module.early_launch() && d.graph.is_some())
    }

    /// Whether steps run node by node (`INGOT_EAGER=1`).
    pub fn is_eager(&self) -> bool {
        self.eager
    }

    /// One step at `pos` with `token`; the logits are then in [`CudaExecutor::logits`].
    pub fn step(&mut self, token: u32, pos: usize) -> Result<(), ExecError> {
        check_step(&self.config, self.plan.ctx, self.filled, token, pos)?;
        let n = self.plan.vocab * 4;
        let plan = &self.plan;
        let result = self
            .dev
            .as_deref_mut()
            .ok_or(ExecError::Faulted)
            .and_then(|d| {
                d.enqueue_state(plan, token, pos)?;
                d.run(plan)?;
                let logits = &d.bufs[plan.logits.0 as usize];
                d.gpu.copy_to_pinned(logits, 0, &mut d.logits_out, 0, n)?;
                d.gpu.record(&d.events[0])?;
                d.events[0].synchronize()?;
                d.update_experts()
            });
        if let Err(e) = result {
            return Err(self.after_failure(e, Failed::Step { token, pos }));
        }
        self.read_logits()?;
        self.filled = pos + 1;
        Ok(())
    }

    pub fn logits(&self) -> &[f32] {
        &self.logits
    }

    /// Greedy decoding of `n` tokens after feeding `token` at `pos`: returns the argmax chosen
    /// by each of the `n` replays. Replay `k+1` is queued before the host reads token `k`
    /// (the graph advances the StepState itself), so the GPU never idles on the host.
    /// Logits are not read back. A failure is localised by an eager re-run at `pos` (the
    /// pipelined replays do not say which of them faulted).
    pub fn generate_greedy(
        &mut self,
        token: u32,
        pos: usize,
        n: usize,
    ) -> Result<Vec<u32>, ExecError> {
        check_step(&self.config, self.plan.ctx, self.filled, token, pos)?;
        if self.plan.host_embedding || !self.plan.device_argmax {
            return Err(ExecError::NeedsHost(
                "pipelined greedy decoding needs the device embedding fetch and lm_head argmax kernels",
            ));
        }
        super::check_greedy_span(self.plan.ctx, pos, n)?;
        let plan = &self.plan;
        let result = self
            .dev
            .as_deref_mut()
            .ok_or(ExecError::Faulted)
            .and_then(|d| {
                d.enqueue_state(plan, token, pos)?;
                let mut out = Vec::with_capacity(n);
                if d.experts.is_some() {
                    // The cache's host step sits between replays: one token at a time.
                    for _ in 0..n {
                        d.run(plan)?;
                        let step = &d.bufs[plan.step.0 as usize];
                        d.gpu
                            .copy_to_pinned(step, 0, &mut d.state_out, 0, STATE_BYTES)?;
                        d.gpu.record(&d.events[0])?;
                        out.push(d.read_slot(0)?);
                        d.update_experts()?;
                    }
                    return Ok(out);
                }
                for k in 0..n {
                    d.run(plan)?;
                    let slot = k % IN_FLIGHT;
                    let step = &d.bufs[plan.step.0 as usize];
                    d.gpu.copy_to_pinned(
                        step,
                        0,
                        &mut d.state_out,
                        slot * STATE_BYTES,
                        STATE_BYTES,
                    )?;
                    d.gpu.record(&d.events[slot])?;
                    if k >= 1 {
                        out.push(d.read_slot((k - 1) % IN_FLIGHT)?);
                    }
                }
                if n >= 1 {
                    out.push(d.read_slot((n - 1) % IN_FLIGHT)?);
                }
                Ok(out)
            });
        match result {
            Ok(out) => {
                self.filled = pos + n;
                Ok(out)
            }
            Err(e) => Err(self.after_failure(e, Failed::Step { token, pos })),
        }
    }

    /// GPU milliseconds of `reps` back-to-back replays at the current state (no readback).
    pub fn time_replays_ms(&mut self, reps: usize) -> Result<f32, ExecError> {
        let plan = &self.plan;
        let d = self.dev.as_deref_mut().ok_or(ExecError::Faulted)?;
        let start = d.gpu.event(true)?;
        let end = d.gpu.event(true)?;
        d.gpu.record(&start)?;
        for _ in 0..reps {
            d.run(plan)?;
        }
        d.gpu.record(&end)?;
        end.synchronize()?;
        Ok(start.elapsed_ms(&end)?)
    }

    /// Times one decode step at `pos` (token `token`) on the GPU, `reps` times: each node
    /// between CUDA events ([`Pace::Marks`], no synchronisation in between), the whole step in
    /// eager mode (a synchronisation after each node), and `replays` back-to-back graph replays.
    /// The cache must hold positions `0..pos` (the caller decodes them first) and have room
    /// for `pos + replays` positions.
    ///
    /// Repeating is valid because a step at a fixed position is idempotent: before every run
    /// the StepState is rewritten to `{token, pos, next_token: 0, steps_done: 0}` (exactly as
    /// [`CudaExecutor::step`] does), every activation is written before it is read within the
    /// step, the argmax key is left at 0 by `argmax_finish`, and the step writes only cache
    /// row `pos` (with the same values each time, from the same token and rows `0..pos`).
    /// The graph replays after the first advance the position themselves (the argmax kernel
    /// does) and write rows `pos + 1..pos + replays`, which no step at `pos` reads.
    ///
    /// Before each marked run the stream gets device-to-device copies (the filler) during
    /// which the host enqueues all the launches and events, so the events see the GPU's pace,
    /// not the host's; a repetition whose enqueueing outlasted the filler is counted in
    /// [`StepTiming::host_bound_reps`] and the next one gets twice the filler.
    pub fn measure_step(
        &mut self,
        token: u32,
        pos: usize,
        reps: usize,
        replays: usize,
    ) -> Result<StepTiming, ExecError> {
        check_step(&self.config, self.plan.ctx, self.filled, token, pos)?;
        super::check_greedy_span(self.plan.ctx, pos, replays.max(1))?;
        let plan = &self.plan;
        let d = self.dev.as_deref_mut().ok_or(ExecError::Faulted)?;
        let n = plan.nodes.len();
        let marks = (0..=n)
            .map(|_| d.gpu.event(true))
            .collect::<Result<Vec<_>, _>>()?;
        let (start, end) = (d.gpu.event(true)?, d.gpu.event(true)?);
        // Scratch for the filler; without room for it the node times may include launch gaps
        // (every repetition is then counted as host-bound).
        let filler = match (d.gpu.alloc(FILLER_BYTES), d.gpu.alloc(FILLER_BYTES)) {
            (Ok(a), Ok(b)) => Some((a, b)),
            _ => None,
        };
        let mut copies = if filler.is_some() {
            FIRST_FILLER_COPIES
        } else {
            0
        };
        let mut t = StepTiming {
            replays,
            ..StepTiming::default()
        };
        let mut clean = Vec::with_capacity(reps);
        let mut dirty = Vec::new();
        // Repetition 0 is a warm-up (first touch, module and cache state), not kept.
        for rep in 0..=reps {
            // Per node, between events, the host kept ahead by the filler.
            d.enqueue_state(plan, token, pos)?;
            d.gpu.record(&start)?;
            if let Some((a, b)) = &filler {
                for _ in 0..copies {
                    d.gpu.copy_device(a, b)?;
                }
            }
            let enqueue = Instant::now();
            d.run_nodes(plan, Pace::Marks(&marks))?;
            let host_ms = enqueue.elapsed().as_secs_f64() * 1e3;
            marks[n].synchronize()?;
            let filler_ms = f64::from(start.elapsed_ms(&marks[0])?);
            let node_ms = marks
                .windows(2)
                .map(|w| w[0].elapsed_ms(&w[1]))
                .collect::<Result<Vec<_>, _>>()?;
            let host_bound = filler.is_none() || filler_ms <= host_ms;
            t.filler_copies = copies;
            if host_bound && filler.is_some() {
                copies = (copies * 2).min(MAX_FILLER_COPIES);
            }
            // Eager: a synchronisation after every node.
            d.enqueue_state(plan, token, pos)?;
            d.gpu.record(&start)?;
            d.run_nodes(plan, Pace::Sync)?;
            d.gpu.record(&end)?;
            end.synchronize()?;
            let eager_ms = start.elapsed_ms(&end)?;
            // The graph, replayed back to back as in greedy decoding.
            let graph_ms = if d.graph.is_some() && replays > 0 {
                d.enqueue_state(plan, token, pos)?;
                d.gpu.record(&start)?;
                for _ in 0..replays {
                    d.run(plan)?;
                }
                d.gpu.record(&end)?;
                end.synchronize()?;
                Some(start.elapsed_ms(&end)? / replays as f32)
            } else {
                None
            };
            if rep == 0 {
                continue;
            }
            if host_bound {
                t.host_bound_reps += 1;
                dirty.push(node_ms);
            } else {
                clean.push(node_ms);
            }
            t.eager_ms.push(eager_ms);
            t.graph_ms.extend(graph_ms);
        }
        t.node_ms = if clean.is_empty() { dirty } else { clean };
        // The cache now holds the step at `pos` (and greedy rows after it, which the next
        // step at `pos + 1` overwrites).
        self.filled = pos + 1;
        Ok(t)
    }

    /// Turns a failed step or prefill chunk into the error to report. A failed graph replay
    /// releases the faulted context and re-runs the work eagerly in a fresh one to name the
    /// first failing node; an eager run's error already names it.
    fn after_failure(&mut self, e: ExecError, failed: Failed<'_>) -> ExecError {
        let replay_fault = matches!(e, ExecError::Cuda(_)) && !self.eager;
        if !replay_fault {
            return e;
        }
        // Drops every buffer, event, the graphs, the module and the context reference: with
        // the last reference gone the driver destroys the faulted primary context.
        self.dev = None;
        let localised = self.localise(failed);
        ExecError::Replay {
            pos: failed.pos(),
            source: Box::new(e),
            localised,
        }
    }

    /// Loads the model again in a fresh context and runs `failed` node by node.
    fn localise(&self, failed: Failed<'_>) -> String {
        let plans = self.prefill.as_deref().unwrap_or(&[]);
        let rerun = || -> Result<(), ExecError> {
            let file = GgufFile::open(&self.path).map_err(|e| ExecError::Weight {
                name: self.path.display().to_string(),
                reason: format!("reopening the model for the eager re-run: {e}"),
            })?;
            let descs = self.plan.check_committed()?;
            let gpu = Gpu::new(0)?;
            let (mut d, _) = Loaded::open(gpu, &file, &self.plan, &descs, plans, false, false)?;
            match failed {
                Failed::Step { token, pos } => {
                    d.enqueue_state(&self.plan, token, pos)?;
                    d.run(&self.plan)?;
                    d.gpu.synchronize()?;
                }
                Failed::Chunk {
                    k,
                    tokens,
                    pos,
                    head,
                } => d.run_chunk(plans, k, tokens, pos, head, true)?,
            }
            Ok(())
        };
        let what = failed.describe();
        match rerun() {
            Err(e @ ExecError::Node { .. }) => format!(
                "eager re-run of {what} in a fresh context ({EAGER_VAR}=1 mode, sync after every node): {e}"
            ),
            Err(e) => format!("the eager re-run of {what} failed before naming a node: {e}"),
            Ok(()) => format!(
                "the eager re-run of {what} passed every node: the fault needs state that earlier \
                 steps left (the re-run starts from a zeroed KV cache) or lies in the graph itself; \
                 decode from the start with {EAGER_VAR}=1 to find it"
            ),
        }
    }
}

/// The prefill plans of every bucket up to the context, each checked against the committed PTX
/// and mapped onto the decode plan's buffers, or why the model has none (the reason the planner
/// gave: a weight type without `mmq` kernels, too few heads for the prefill attention, an
/// expert cache). The same plans as [`super::sim::SimExecutor`] loads.
fn prefill_plans(
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
        let twins = super::shared_buffers(decode, &pre.plan)?;
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
fn prefill_own_bytes(plans: &[PrefillHost]) -> u64 {
    plans
        .iter()
        .map(|h| super::own_bytes(&h.pre.plan, &h.twins))
        .sum()
}

/// Every node's launch geometry, in plan order.
fn shapes_of(plan: &Plan, descs: &[&'static KernelDesc]) -> Vec<LaunchShape> {
    plan.nodes
        .iter()
        .zip(descs)
        .map(|(n, d)| LaunchShape {
            grid: d.grid(n.items),
            block: d.block,
            shared_bytes: d.shared_bytes,
        })
        .collect()
}

impl Loaded {
    /// Uploads the plan's buffers to `gpu` and the prefill plans' own ones, loads the PTX,
    /// and captures the decode nodes into one graph when `capture` (the prefill graphs are
    /// captured at their first use). Returns the upload's wall time in seconds too.
    fn open(
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
        let prefill = DevPrefill::open(&gpu, file, prefill)?;
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
        };
        if plan.expert_cache.is_some() {
            let addrs: Vec<u64> = dev
                .bufs
                .iter()
                .zip(&dev.mapped)
                .map(|(b, m)| match m {
                    Some(m) => m.device_address(),
                    None => dev.gpu.device_address(b),
                })
                .collect();
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

    /// Captures every node in order into one graph.
    fn capture(&mut self, plan: &Plan) -> Result<(), ExecError> {
        let Loaded {
            gpu,
            module,
            bufs,
            shapes,
            mapped,
            ..
        } = self;
        let (bufs, mapped) = (&*bufs, &*mapped);
        let place = |i| decode_place(bufs, mapped, i);
        let graph = capture_nodes(gpu, module, plan, 0..plan.nodes.len(), shapes, &place)?;
        self.graph = Some(graph);
        Ok(())
    }

    /// Enqueues one step: the graph replay (asynchronous), or in eager mode every node with a
    /// synchronisation after each, stopping at the first failing one.
    fn run(&mut self, plan: &Plan) -> Result<(), ExecError> {
        if let Some(graph) = &self.graph {
            return Ok(graph.launch()?);
        }
        self.run_nodes(plan, Pace::Sync)
    }

    /// Launches the plan's nodes one by one on the stream (the eager path, and the per-node
    /// timing of [`CudaExecutor::measure_step`]), paced as `pace` says. A launch error names
    /// its node.
    fn run_nodes(&mut self, plan: &Plan, pace: Pace<'_>) -> Result<(), ExecError> {
        let Loaded {
            gpu,
            module,
            bufs,
            shapes,
            mapped,
            ..
        } = self;
        let (bufs, mapped) = (&*bufs, &*mapped);
        let place = |i| decode_place(bufs, mapped, i);
        launch_nodes(gpu, module, plan, 0..plan.nodes.len(), shapes, &place, pace)?;
        if let Pace::Marks(marks) = pace {
            gpu.record(&marks[plan.nodes.len()])?;
        }
        Ok(())
    }

    /// Runs `tokens` at `pos..` through prefill plan `k` of `plans` and waits for it: the
    /// chunk's uploads (embeddings and zero rows, row count, StepState), its layers, and with
    /// `head` the head on row `n − 1` and the logits' copy into `logits_out`. The layers and
    /// the head are graph replays (captured here at their first use) unless `eager`, which
    /// runs them node by node with a synchronisation after each.
    fn run_chunk(
        &mut self,
        plans: &[PrefillHost],
        k: usize,
        tokens: &[u32],
        pos: usize,
        head: bool,
        eager: bool,
    ) -> Result<(), ExecError> {
        let Loaded {
            gpu,
            module,
            bufs,
            mapped,
            prefill,
            logits_out,
            events,
            ..
        } = self;
        let (Some(pf), Some(host)) = (prefill.as_mut(), plans.get(k)) else {
            return Err(ExecError::Prefill(format!(
                "no prefill plan {k} on the device"
            )));
        };
        let pre = &host.pre;
        let plan = &pre.plan;
        let n = tokens.len();
        if n == 0 || n > pre.ntok {
            return Err(ExecError::Prefill(format!(
                "a chunk of {n} tokens in the {}-token plan",
                pre.ntok
            )));
        }
        let DevChunk {
            slots,
            shapes,
            body,
            head: head_graph,
        } = &mut pf.chunks[k];
        let (bufs, mapped, slots) = (&*bufs, &*mapped, &*slots);
        let place = |i: usize| match &slots[i] {
            Slot::Shared(j) => decode_place(bufs, mapped, *j),
            Slot::Own(b) => Place::Dev(b),
        };
        let dev = |id: BufId| match place(id.0 as usize) {
            Place::Dev(b) => Ok(b),
            Place::Mapped(_) => Err(ExecError::Prefill(format!(
                "{} is host-mapped",
                plan.buffers[id.0 as usize].name
            ))),
        };
        let (layers, head_nodes) = (0..pre.head_start, pre.head_start..plan.nodes.len());
        // Capture before anything of this chunk is enqueued.
        if !eager && body.is_none() {
            *body = Some(capture_nodes(
                gpu,
                module,
                plan,
                layers.clone(),
                shapes,
                &place,
            )?);
        }
        if !eager && head && head_graph.is_none() {
            let g = capture_nodes(gpu, module, plan, head_nodes.clone(), shapes, &place)?;
            *head_graph = Some(g);
        }
        // The chunk's embeddings, then zero rows to the bucket's end (computed, never read).
        // The previous chunk was waited for, so the staging is free.
        let row_bytes = 4 * plan.n_embd;
        let x_bytes = pre.ntok * row_bytes;
        let staging = &mut pf.x_in.bytes_mut()[..x_bytes];
        for (row, &t) in staging.chunks_exact_mut(row_bytes).zip(tokens) {
            row.copy_from_slice(&pf.embedding.row(t)?);
        }
        staging[n * row_bytes..].fill(0);
        gpu.copy_from_pinned(&pf.x_in, 0, dev(pre.x)?, 0, x_bytes)?;
        pf.rows_in
            .bytes_mut()
            .copy_from_slice(&(n as u32).to_le_bytes());
        gpu.copy_from_pinned(&pf.rows_in, 0, dev(pre.rows)?, 0, 4)?;
        let state = StepState {
            token: tokens[n - 1],
            pos: pos as u32,
            next_token: 0,
            steps_done: 0,
        };
        pf.state_in
            .bytes_mut()
            .copy_from_slice(bytemuck::bytes_of(&state));
        gpu.copy_from_pinned(&pf.state_in, 0, dev(plan.step)?, 0, STATE_BYTES)?;
        let in_chunk = |e: ExecError| in_prefill(e, pre.ntok, pos);
        match body {
            Some(g) => g.launch()?,
            None => launch_nodes(gpu, module, plan, layers, shapes, &place, Pace::Sync)
                .map_err(in_chunk)?,
        }
        if head {
            // The head's input: the last token's row of the chunk's residual stream.
            let (x, residual) = (dev(pre.x)?, dev(plan.residual)?);
            let at = gpu.device_address(x) + ((n - 1) * row_bytes) as u64;
            gpu.copy_at(gpu.device_address(residual), at, row_bytes)?;
            match head_graph {
                Some(g) => g.launch()?,
                None => launch_nodes(gpu, module, plan, head_nodes, shapes, &place, Pace::Sync)
                    .map_err(in_chunk)?,
            }
            let logits = dev(plan.logits)?;
            gpu.copy_to_pinned(logits, 0, logits_out, 0, plan.vocab * 4)?;
        }
        // Waiting per chunk lets a fault surface at the chunk that caused it.
        gpu.record(&events[0])?;
        events[0].synchronize()?;
        Ok(())
    }

    /// Enqueues the StepState `{token, pos}` (through pinned memory) before the next step.
    fn enqueue_state(&mut self, plan: &Plan, token: u32, pos: usize) -> Result<(), ExecError> {
        let s = StepState {
            token,
            pos: pos as u32,
            next_token: 0,
            steps_done: 0,
        };
        self.state_in
            .bytes_mut()
            .copy_from_slice(bytemuck::bytes_of(&s));
        let step = &self.bufs[plan.step.0 as usize];
        self.gpu
            .copy_from_pinned(&self.state_in, 0, step, 0, STATE_BYTES)?;
        if let Some((e, staging)) = &mut self.embedding {
            let row = e.row(token)?;
            staging.bytes_mut().copy_from_slice(&row);
            let residual = &self.bufs[plan.residual.0 as usize];
            self.gpu
                .copy_from_pinned(staging, 0, residual, 0, row.len())?;
        }
        Ok(())
    }

    /// After a completed step: the expert cache (if any) admits what the step missed; its slab
    /// copies run on the copy stream while the next replays decode, and the tables name a slot once
    /// its copy has landed.
    fn update_experts(&mut self) -> Result<(), ExecError> {
        match &mut self.experts {
            Some((c, copies)) => c.update(&mut CudaSlots {
                gpu: &self.gpu,
                copies,
            }),
            None => Ok(()),
        }
    }

    /// Waits for the copy into `slot` and returns the token it holds.
    fn read_slot(&self, slot: usize) -> Result<u32, ExecError> {
        self.events[slot].synchronize()?;
        let bytes = &self.state_out.bytes()[slot * STATE_BYTES..(slot + 1) * STATE_BYTES];
        let s: StepState = bytemuck::pod_read_unaligned(bytes);
        Ok(s.next_token)
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

impl DevPrefill {
    /// Allocates each prefill plan's own buffers (uploading any initial bytes; the shared
    /// ones are the decode plan's), the host staging and the embedding table. `None` without
    /// prefill plans.
    fn open(gpu: &Gpu, file: &GgufFile, plans: &[PrefillHost]) -> Result<Option<Self>, ExecError> {
        let Some(first) = plans.first() else {
            return Ok(None);
        };
        let mut chunks = Vec::with_capacity(plans.len());
        for h in plans {
            let mut slots = Vec::with_capacity(h.twins.len());
            for (decl, twin) in h.pre.plan.buffers.iter().zip(&h.twins) {
                if let Some(j) = *twin {
                    slots.push(Slot::Shared(j));
                    continue;
                }
                if let BufferKind::Weight {
                    host_mapped: true, ..
                } = decl.kind
                {
                    return Err(ExecError::Prefill(format!(
                        "{}: a host-mapped weight of the prefill plan's own",
                        decl.name
                    )));
                }
                let b = gpu.alloc(decl.bytes as usize)?;
                if let Some(bytes) = initial_bytes(file, decl)? {
                    gpu.upload(&b, &bytes)?;
                }
                slots.push(Slot::Own(b));
            }
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

impl Decoder for CudaExecutor {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn decode(&mut self, token: u32, pos: usize) -> Result<&[f32], ModelError> {
        self.step(token, pos).map_err(super::to_model_error)?;
        Ok(&self.logits)
    }

    fn reset(&mut self) {
        self.filled = 0;
    }

    /// In chunks of the prefill plans ([`CudaExecutor::prefill_chunked`]).
    fn prefill_last(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, ModelError> {
        self.prefill_chunked(tokens, start_pos)
            .map_err(super::to_model_error)
    }

    /// The last step's routing, when the plan has an expert cache; `None` otherwise.
    fn routing(&self) -> Option<&[(u32, f32)]> {
        self.dev
            .as_deref()
            .and_then(|d| d.experts.as_ref())
            .map(|(c, _)| c.routing())
    }
}

impl super::ChunkedPrefill for CudaExecutor {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn ctx_filled(&self) -> (usize, usize) {
        (self.plan.ctx, self.filled)
    }

    fn buckets(&self) -> Vec<usize> {
        self.prefill_buckets()
    }

    fn run_chunk(
        &mut self,
        k: usize,
        tokens: &[u32],
        pos: usize,
        head: bool,
    ) -> Result<(), ExecError> {
        CudaExecutor::run_chunk(self, k, tokens, pos, head)
    }

    fn step(&mut self, token: u32, pos: usize) -> Result<(), ExecError> {
        CudaExecutor::step(self, token, pos)
    }
}
