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
//! two replays. Prefill runs the same graph once per prompt token.

use std::time::Instant;

use ingot_abi::step::StepState;
use ingot_cuda::{Arg, DeviceBuffer, Event, Gpu, Graph, LaunchShape, Module, PinnedBuffer};
use ingot_gguf::GgufFile;
use ingot_model::{check_step, Decoder, ModelConfig, ModelError};

use crate::planner::{build_plan_for, PlanOptions};
use crate::error::ExecError;
use crate::node::NodeArg;
use crate::plan::Plan;
use crate::weights::{initial_bytes, HostEmbedding};

/// Device memory kept free beyond the plan's buffers: the context, the JIT-compiled module,
/// the graph's own resources and cudarc's bookkeeping.
const VRAM_HEADROOM: u64 = 512 << 20;

/// Pipelined greedy decoding keeps this many step results in flight.
const IN_FLIGHT: usize = 2;

const STATE_BYTES: usize = size_of::<StepState>();

/// The decode plan as one CUDA graph.
pub struct CudaExecutor {
    config: ModelConfig,
    plan: Plan,
    gpu: Gpu,
    /// Kept alive for the graph's kernels.
    _module: Module,
    bufs: Vec<DeviceBuffer>,
    graph: Graph,
    /// Host staging of the StepState written before a replay.
    state_in: PinnedBuffer,
    /// `IN_FLIGHT` StepState slots read back by greedy decoding.
    state_out: PinnedBuffer,
    logits_out: PinnedBuffer,
    events: Vec<Event>,
    /// Host copy of the embedding table and its pinned staging row, for plans without a
    /// device embedding fetch.
    embedding: Option<(HostEmbedding, PinnedBuffer)>,
    filled: usize,
    logits: Vec<f32>,
    device_name: String,
}

/// Where a loaded executor stands; printed by `ingot run -v`.
#[derive(Clone, Debug)]
pub struct CudaInfo {
    pub device: String,
    pub nodes: usize,
    pub nodes_per_layer: usize,
    pub device_bytes: u64,
    pub upload_s: f64,
}

impl CudaExecutor {
    /// Opens GPU 0 and loads `file` into one captured graph. `progress` draws an upload bar.
    pub fn load(
        file: &GgufFile,
        opts: PlanOptions,
        progress: bool,
    ) -> Result<(Self, CudaInfo), ExecError> {
        let config = ModelConfig::from_gguf(file.header()).map_err(crate::PlanError::from)?;
        let gpu = Gpu::new(0)?;
        // The attention split is sized to this GPU (two blocks per SM), whatever the caller
        // chose: any split gives the same result up to f32 summation order.
        let opts = PlanOptions::for_device(opts.ctx, gpu.sm_count()?);
        let plan = build_plan_for(&config, file.header(), opts)?;
        let descs = plan.check_committed()?;
        let summary = plan.summary();

        let device_name = gpu.name()?;
        let (free, _total) = gpu.mem_info()?;
        let needed = summary.device_bytes() + VRAM_HEADROOM;
        if needed > free as u64 {
            return Err(ExecError::OutOfMemory {
                needed,
                free: free as u64,
            });
        }
        let mut module = gpu.load_ptx(ingot_kernels::PTX)?;
        for k in &summary.kernels {
            module.prepare(k)?;
        }

        let started = Instant::now();
        let bar = upload_bar(progress, summary.device_bytes());
        let mut bufs = Vec::with_capacity(plan.buffers.len());
        for decl in &plan.buffers {
            bar.set_message(decl.name.clone());
            let b = gpu.alloc(decl.bytes as usize)?;
            if let Some(bytes) = initial_bytes(file, decl)? {
                gpu.upload(&b, &bytes)?;
            }
            bar.inc(decl.bytes);
            bufs.push(b);
        }
        bar.finish_and_clear();
        let upload_s = started.elapsed().as_secs_f64();

        gpu.begin_capture()?;
        let captured = plan.nodes.iter().zip(&descs).try_for_each(|(n, d)| {
            let args: Vec<Arg<'_>> = n
                .args
                .iter()
                .map(|a| match *a {
                    NodeArg::Buf(r) => Arg::BufAt(&bufs[r.buf.0 as usize], r.offset),
                    NodeArg::U32(v) => Arg::U32(v),
                    NodeArg::I32(v) => Arg::I32(v),
                    NodeArg::F32(v) => Arg::F32(v),
                    NodeArg::U64(v) => Arg::U64(v),
                })
                .collect();
            let shape = LaunchShape {
                grid: d.grid(n.items),
                block: d.block,
                shared_bytes: d.shared_bytes,
            };
            gpu.launch(&mut module, &n.kernel, shape, &args)
        });
        // The capture must end whatever happened, or the stream stays in capture mode.
        let graph = gpu.end_capture();
        captured?;
        let graph = graph?;
        graph.upload()?;

        let info = CudaInfo {
            device: device_name.clone(),
            nodes: summary.nodes,
            nodes_per_layer: summary.max_nodes_per_layer(),
            device_bytes: summary.device_bytes(),
            upload_s,
        };
        let embedding = match HostEmbedding::for_plan(file, &plan)? {
            Some(e) => Some((e, gpu.alloc_pinned(plan.n_embd * 4)?)),
            None => None,
        };
        let exec = CudaExecutor {
            embedding,
            state_in: gpu.alloc_pinned(STATE_BYTES)?,
            state_out: gpu.alloc_pinned(STATE_BYTES * IN_FLIGHT)?,
            logits_out: gpu.alloc_pinned(config.vocab * 4)?,
            events: (0..IN_FLIGHT)
                .map(|_| gpu.event(false))
                .collect::<Result<_, _>>()?,
            logits: vec![0.0; config.vocab],
            filled: 0,
            config,
            plan,
            gpu,
            _module: module,
            bufs,
            graph,
            device_name,
        };
        Ok((exec, info))
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    /// Enqueues the StepState `{token, pos}` (through pinned memory) before the next replay.
    fn enqueue_state(&mut self, token: u32, pos: usize) -> Result<(), ExecError> {
        let s = StepState {
            token,
            pos: pos as u32,
            next_token: 0,
            steps_done: 0,
        };
        self.state_in
            .bytes_mut()
            .copy_from_slice(bytemuck::bytes_of(&s));
        let step = &self.bufs[self.plan.step.0 as usize];
        self.gpu
            .copy_from_pinned(&self.state_in, 0, step, 0, STATE_BYTES)?;
        if let Some((e, staging)) = &mut self.embedding {
            let row = e.row(token)?;
            staging.bytes_mut().copy_from_slice(&row);
            let residual = &self.bufs[self.plan.residual.0 as usize];
            self.gpu
                .copy_from_pinned(staging, 0, residual, 0, row.len())?;
        }
        Ok(())
    }

    /// One replay at `pos` with `token`; the logits are then in [`CudaExecutor::logits`].
    pub fn step(&mut self, token: u32, pos: usize) -> Result<(), ExecError> {
        check_step(&self.config, self.plan.ctx, self.filled, token, pos)?;
        self.enqueue_state(token, pos)?;
        self.graph.launch()?;
        let logits = &self.bufs[self.plan.logits.0 as usize];
        let n = self.plan.vocab * 4;
        self.gpu
            .copy_to_pinned(logits, 0, &mut self.logits_out, 0, n)?;
        self.gpu.record(&self.events[0])?;
        self.events[0].synchronize()?;
        let bytes = &self.logits_out.bytes()[..n];
        for (v, b) in self.logits.iter_mut().zip(bytes.chunks_exact(4)) {
            *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        self.filled = pos + 1;
        Ok(())
    }

    pub fn logits(&self) -> &[f32] {
        &self.logits
    }

    /// Greedy decoding of `n` tokens after feeding `token` at `pos`: returns the argmax chosen
    /// by each of the `n` replays. Replay `k+1` is queued before the host reads token `k`
    /// (the graph advances the StepState itself), so the GPU never idles on the host.
    /// Logits are not read back.
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
        self.enqueue_state(token, pos)?;
        let mut out = Vec::with_capacity(n);
        for k in 0..n {
            self.graph.launch()?;
            let slot = k % IN_FLIGHT;
            let step = &self.bufs[self.plan.step.0 as usize];
            self.gpu.copy_to_pinned(
                step,
                0,
                &mut self.state_out,
                slot * STATE_BYTES,
                STATE_BYTES,
            )?;
            self.gpu.record(&self.events[slot])?;
            if k >= 1 {
                out.push(self.read_slot((k - 1) % IN_FLIGHT)?);
            }
        }
        if n >= 1 {
            out.push(self.read_slot((n - 1) % IN_FLIGHT)?);
        }
        self.filled = pos + n;
        Ok(out)
    }

    /// Waits for the copy into `slot` and returns the token it holds.
    fn read_slot(&self, slot: usize) -> Result<u32, ExecError> {
        self.events[slot].synchronize()?;
        let bytes = &self.state_out.bytes()[slot * STATE_BYTES..(slot + 1) * STATE_BYTES];
        let s: StepState = bytemuck::pod_read_unaligned(bytes);
        Ok(s.next_token)
    }

    /// GPU milliseconds of `reps` back-to-back replays at the current state (no readback).
    pub fn time_replays_ms(&mut self, reps: usize) -> Result<f32, ExecError> {
        let start = self.gpu.event(true)?;
        let end = self.gpu.event(true)?;
        self.gpu.record(&start)?;
        for _ in 0..reps {
            self.graph.launch()?;
        }
        self.gpu.record(&end)?;
        end.synchronize()?;
        Ok(start.elapsed_ms(&end)?)
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
}
