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
//! By concern: this file holds the executor and its public API; `upload` the device state
//! (`Loaded`) and how it is allocated and filled; `replay` the decode step on the device
//! (capture, replay, node-by-node runs, the StepState and the expert cache between steps);
//! `prefill` the batched prefill's plans and chunks; `mtp` the NextN/MTP block (the drafter of
//! `--draft mtp`, run by `mtp_run`); `verify` the speculative verify's graphs (run by
//! `verify_run`); `fault` eager mode ([`EAGER_VAR`]) and the
//! localisation of a failed replay; `timing` the per-node and per-replay measurements; `launch`
//! the node launches themselves; `slots` the expert cache's view of GPU memory. The executor is
//! unusable after a failed replay (`dev` is `None`).

use std::path::PathBuf;

use ingot_abi::step::StepState;
use ingot_cuda::{Gpu, JitReport};
use ingot_gguf::GgufFile;
use ingot_model::{check_step, Decoder, Forward, ModelConfig, ModelError, Rows};

use crate::error::ExecError;
use crate::plan::Plan;
use crate::planner::{build_plan_for, PlanOptions};

mod fault;
mod launch;
mod mtp;
mod mtp_run;
mod prefill;
mod prefill_run;
mod replay;
mod slots;
mod timing;
mod upload;
mod verify;
mod verify_run;

pub use fault::EAGER_VAR;
pub use timing::StepTiming;

use fault::{eager_requested, Failed};
use mtp::{f32s, DevMtp, MtpHost};
use prefill::{prefill_own_bytes, prefill_plans, PrefillHost};
use upload::Loaded;
use verify::VerifyHost;

/// Device memory kept free beyond the plans' buffers: the context, the JIT-compiled module,
/// the graphs' own resources and cudarc's bookkeeping.
const VRAM_HEADROOM: u64 = 512 << 20;

/// Pipelined greedy decoding keeps this many step results in flight.
const IN_FLIGHT: usize = 2;

const STATE_BYTES: usize = size_of::<StepState>();

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
    /// The decode plan's `act.norm` (the final hidden state).
    norm: Option<crate::BufId>,
    /// Read `act.norm` back after each decode step: set by drafting (a verify, an MTP step) or
    /// [`CudaExecutor::keep_hidden`]; a plain decode copies nothing more than its logits.
    keep_hidden: bool,
    /// The final hidden state of the last decode step while `keep_hidden`; `None` otherwise and
    /// after a prefill chunk, a pipelined greedy run or a reset.
    hidden: Option<Vec<f32>>,
    /// The NextN/MTP block's plan (on the device as `Loaded::mtp` from its first step), or why
    /// it cannot draft.
    mtp: Result<MtpHost, String>,
    /// MTP positions the block's cache holds (`0..mtp_filled`).
    mtp_filled: usize,
    /// The last block step's output after `shared_head_norm`; `None` before the first.
    mtp_hidden: Option<Vec<f32>>,
    mtp_logits: Vec<f32>,
    /// The speculative verify's plans (a width on the device from its first verify), or why
    /// drafts are verified one decode step at a time.
    verify: Result<VerifyHost, String>,
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
    /// Largest L2 access policy window a launch marked [`crate::Node::l2_streaming`] gets, in
    /// bytes; 0 where the device or driver takes none or `INGOT_NO_L2_STREAMING` is set (the
    /// launches then run without the hint).
    pub l2_window_max: usize,
    /// Device bytes of the prefill plans' own buffers (their activations), part of what was
    /// checked against the free memory; 0 without a batched prefill.
    pub prefill_bytes: u64,
    /// The prefill buckets loaded (ascending), or why prompts run token by token.
    pub prefill: Result<Vec<usize>, String>,
    /// Device bytes of the NextN/MTP block's own buffers (`--draft mtp`; allocated at its first
    /// draft), or why it cannot draft.
    pub draft: Result<u64, String>,
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
            mtp_head_rows: opts.mtp_head_rows,
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
        let mtp = crate::exec::mtp_plan_or_why(&config, file, opts).map(|p| MtpHost::new(p, &plan));
        let norm = plan
            .buffers
            .iter()
            .position(|b| b.name == "act.norm")
            .map(|i| crate::BufId(i as u32));
        let verify = VerifyHost::new(&plan)?;
        let info = CudaInfo {
            device: device_name.clone(),
            nodes: summary.nodes,
            nodes_per_layer: summary.max_nodes_per_layer(),
            device_bytes: summary.device_bytes() + prefill_own_bytes(pf),
            upload_s,
            jit: dev.module.jit_report().clone(),
            eager,
            early_launch: dev.module.early_launch() && !eager,
            l2_window_max: dev.gpu.l2_window_max(),
            prefill_bytes: prefill_own_bytes(pf),
            prefill: match &prefill {
                Ok(p) => Ok(p.iter().map(|h| h.pre.ntok).collect()),
                Err(e) => Err(e.clone()),
            },
            draft: match &mtp {
                Ok(h) => Ok(h.own_bytes()),
                Err(why) => Err(why.clone()),
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
            norm,
            keep_hidden: false,
            hidden: None,
            mtp,
            mtp_filled: 0,
            mtp_hidden: None,
            mtp_logits: Vec::new(),
            verify,
        };
        Ok((exec, info))
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
        let norm = self.norm.filter(|_| self.keep_hidden);
        self.hidden = None;
        let result = self
            .dev
            .as_deref_mut()
            .ok_or(ExecError::Faulted)
            .and_then(|d| {
                d.enqueue_state(plan, token, pos)?;
                d.run(plan)?;
                let logits = &d.bufs[plan.logits.0 as usize];
                d.gpu.copy_to_pinned(logits, 0, &mut d.logits_out, 0, n)?;
                // The MTP block's input, only while drafting.
                if let Some(b) = norm {
                    let src = &d.bufs[b.0 as usize];
                    d.gpu
                        .copy_to_pinned(src, 0, &mut d.hidden_out, 0, plan.n_embd * 4)?;
                }
                d.gpu.record(&d.events[0])?;
                d.events[0].synchronize()?;
                d.update_experts()?;
                Ok(norm.map(|_| f32s(d.hidden_out.bytes(), plan.n_embd)))
            });
        match result {
            Ok(h) => self.hidden = h,
            Err(e) => return Err(self.after_failure(e, Failed::Step { token, pos })),
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
        crate::exec::check_greedy_span(self.plan.ctx, pos, n)?;
        // No hidden state is read back between pipelined replays.
        self.hidden = None;
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
}

impl Decoder for CudaExecutor {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn decode(&mut self, token: u32, pos: usize) -> Result<&[f32], ModelError> {
        self.step(token, pos).map_err(crate::exec::to_model_error)?;
        Ok(&self.logits)
    }

    fn reset(&mut self) {
        self.filled = 0;
        self.hidden = None;
        self.mtp_filled = 0;
        self.mtp_hidden = None;
    }

    /// In chunks of the prefill plans ([`CudaExecutor::prefill_chunked`]).
    fn prefill_last(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, ModelError> {
        self.prefill_chunked(tokens, start_pos)
            .map_err(crate::exec::to_model_error)
    }

    /// The last step's routing, when the plan has an expert cache; `None` otherwise.
    fn routing(&self) -> Option<&[(u32, f32)]> {
        self.dev
            .as_deref()
            .and_then(|d| d.experts.as_ref())
            .map(|(c, _)| c.routing())
    }

    /// Read back only while drafting ([`CudaExecutor::keep_hidden`]).
    fn hidden(&self) -> Option<&[f32]> {
        self.hidden.as_deref()
    }

    /// 2 to [`crate::MAX_VERIFY_COLUMNS`] positions with [`Rows::All`] or [`Rows::Argmax`] (a
    /// speculative verify) as one verify graph (`verify.rs`); otherwise see
    /// `exec::forward_rows_by_steps`. The steps' hidden states are read back from now on.
    fn forward_rows(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
        rows: Rows,
    ) -> Result<Forward, ModelError> {
        self.keep_hidden();
        let batched = (2..=crate::MAX_VERIFY_COLUMNS).contains(&tokens.len());
        if rows != Rows::Last && batched && self.verify.is_ok() {
            return self
                .run_verify(tokens, start_pos, rows)
                .map_err(crate::exec::to_model_error);
        }
        let prefill = self.prefill.is_ok();
        crate::exec::forward_rows_by_steps(self, tokens, start_pos, rows, prefill)
    }

    /// The block's plan, and (before its first step) whether the free memory holds it.
    fn mtp_ready(&self) -> Result<(), ModelError> {
        let host = self
            .mtp
            .as_ref()
            .map_err(|why| ModelError::Unsupported(why.clone()))?;
        match self.dev.as_deref() {
            Some(d) if d.mtp.is_none() => match DevMtp::fits(&d.gpu, host) {
                Ok(Ok(())) => Ok(()),
                Ok(Err(why)) => Err(ModelError::Unsupported(why)),
                Err(e) => Err(crate::exec::to_model_error(e)),
            },
            _ => Ok(()),
        }
    }

    fn mtp_step(&mut self, hidden: &[f32], token: u32, pos: usize) -> Result<(), ModelError> {
        self.run_mtp_step(hidden, token, pos)
            .map_err(crate::exec::to_model_error)
    }

    fn mtp_logits(&mut self) -> Result<&[f32], ModelError> {
        self.run_mtp_logits().map_err(crate::exec::to_model_error)?;
        Ok(&self.mtp_logits)
    }

    fn mtp_hidden(&self) -> Option<&[f32]> {
        self.mtp_hidden.as_deref()
    }

    fn mtp_head_rows(&self) -> Option<usize> {
        let rows = self.mtp.as_ref().ok()?.mtp.head_rows;
        (rows < self.config.vocab).then_some(rows)
    }
}

impl CudaExecutor {
    /// Reads each decode step's final hidden state back from now on ([`Decoder::hidden`]), as
    /// drafting does by itself: one `n_embd` copy a step more.
    pub fn keep_hidden(&mut self) {
        self.keep_hidden = true;
    }

    /// [`Decoder::mtp_step`]: the block at MTP position `pos` on `hidden` and `token`; the first
    /// step allocates and uploads the block (`mtp.rs`), from the model file reopened.
    fn run_mtp_step(&mut self, hidden: &[f32], token: u32, pos: usize) -> Result<(), ExecError> {
        let host = self
            .mtp
            .as_ref()
            .map_err(|why| ModelError::Unsupported(why.clone()))?;
        let input = (hidden, token, pos);
        crate::exec::check_mtp_step(&self.config, &host.mtp.plan, self.mtp_filled, input)?;
        self.keep_hidden = true;
        let path = &self.path;
        self.dev
            .as_deref_mut()
            .ok_or(ExecError::Faulted)?
            .open_mtp(path, host)?
            .map_err(ModelError::Unsupported)?;
        // Invalid until the block has run: a failed step leaves no output to read.
        self.mtp_hidden = None;
        let eager = self.eager;
        let result = self
            .dev
            .as_deref_mut()
            .ok_or(ExecError::Faulted)
            .and_then(|d| d.run_mtp_block(host, input, eager));
        match result {
            Ok(h) => {
                self.mtp_hidden = Some(h);
                self.mtp_filled = pos + 1;
                Ok(())
            }
            Err(e) => Err(self.after_failure(e, Failed::Mtp { pos })),
        }
    }

    /// [`Decoder::forward_rows`]'s verify: every position checked before anything runs, then
    /// one replay of the verify graph of `tokens.len()` positions (`verify.rs`). With
    /// [`Rows::Argmax`] and a device argmax only each position's token and hidden state come back
    /// (the executor's logits then stay the last decode step's).
    fn run_verify(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
        rows: Rows,
    ) -> Result<Forward, ExecError> {
        ingot_model::check_span(&self.config, self.plan.ctx, self.filled, tokens, start_pos)?;
        let host = (self.verify.as_ref()).map_err(|why| ModelError::Unsupported(why.clone()))?;
        let d = self.dev.as_deref_mut().ok_or(ExecError::Faulted)?;
        if !d.verify_open(tokens.len()) {
            let file = GgufFile::open(&self.path).map_err(|e| ExecError::Weight {
                name: self.path.display().to_string(),
                reason: format!("reopening the model for the verify: {e}"),
            })?;
            d.open_verify(host, &file, tokens.len())?;
        }
        // Invalid until the verify has run: a failed one leaves no state to read.
        self.hidden = None;
        let eager = self.eager;
        let result = (self.dev.as_deref_mut())
            .ok_or(ExecError::Faulted)
            .and_then(|d| d.run_verify(host, (tokens, start_pos), (rows == Rows::Argmax, eager)));
        let cols = match result {
            Ok(c) => c,
            Err(e) => {
                let failed = Failed::Verify {
                    n: tokens.len(),
                    pos: start_pos,
                };
                return Err(self.after_failure(e, failed));
            }
        };
        let (n, vocab, d) = (tokens.len(), self.config.vocab, self.config.n_embd);
        if let Some(last) = cols.logits.get((n - 1) * vocab..) {
            self.logits.copy_from_slice(last);
        }
        self.hidden = Some(cols.hidden[(n - 1) * d..].to_vec());
        self.filled = start_pos + n;
        let read = (cols.hidden, cols.logits, cols.argmax);
        Ok(crate::exec::verify_rows(n, read, rows, vocab))
    }

    /// [`Decoder::mtp_logits`]: the head on the last block step's output, into `mtp_logits`.
    fn run_mtp_logits(&mut self) -> Result<(), ExecError> {
        let host = self
            .mtp
            .as_ref()
            .map_err(|why| ModelError::Unsupported(why.clone()))?;
        if self.mtp_hidden.is_none() {
            return Err(ModelError::Unsupported(
                "MTP logits asked for before an MTP step ran".into(),
            )
            .into());
        }
        let eager = self.eager;
        let result = self
            .dev
            .as_deref_mut()
            .ok_or(ExecError::Faulted)
            .and_then(|d| d.run_mtp_head(host, eager));
        match result {
            Ok(l) => {
                self.mtp_logits = l;
                Ok(())
            }
            Err(e) => {
                let pos = self.mtp_filled.saturating_sub(1);
                Err(self.after_failure(e, Failed::Mtp { pos }))
            }
        }
    }
}
