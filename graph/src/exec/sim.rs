//! The plan interpreted in ptx-sim: node by node, with the simulator's counters per node.

mod mtp;
mod verify;

use ingot_abi::step::StepState;
use ingot_gguf::GgufFile;
use ingot_model::{check_step, DecodeTrace, Decoder, Forward, ModelConfig, ModelError, Rows};
use ptx_sim::{Arg, DevicePtr, LaunchConfig, LaunchStats, Module, Sim};

use crate::error::ExecError;
use crate::exec::expert_cache::{ExpertCache, SlabCopy, SlotMemory};
use crate::exec::host_embedding::HostEmbedding;
use crate::node::{Node, NodeArg};
use crate::plan::Plan;
use crate::planner::prefill::{build_prefill_plan_for, PrefillPlan, PREFILL_BUCKETS};
use crate::planner::{build_plan_for, PlanOptions};
use crate::weights::initial_bytes;

/// One node's launch, resolved to simulator addresses.
struct Launch {
    kernel: String,
    config: LaunchConfig,
    args: Vec<Arg>,
}

/// The decode plan on the PTX simulator.
pub struct SimExecutor {
    config: ModelConfig,
    plan: Plan,
    sim: Sim,
    module: &'static Module,
    ptrs: Vec<DevicePtr>,
    launches: Vec<Launch>,
    /// Counters per node, summed over every step run so far.
    stats: Vec<LaunchStats>,
    /// Positions the cache holds.
    filled: usize,
    logits: Vec<f32>,
    embedding: Option<HostEmbedding>,
    /// The routed experts' cache, when the plan keeps experts beyond VRAM.
    experts: Option<ExpertCache<()>>,
    /// The batched prefill: its plans by bucket, or why there are none.
    prefill: Result<Prefill, String>,
    /// The decode plan's `act.norm`: after the last layer's down launch (whose tail norms the
    /// residual with `output_norm`) the final hidden state in f32.
    norm: Option<crate::BufId>,
    /// The final hidden state of the last decode step; `None` after a prefill chunk or reset.
    hidden: Option<Vec<f32>>,
    /// The NextN/MTP block's plan, or why the model has none.
    mtp: Result<mtp::SimMtp, String>,
    /// The speculative verify's plans, or why there are none.
    verify: Result<verify::SimVerify, String>,
}

/// The prefill plans of a [`SimExecutor`], one per bucket that fits the context, sharing the
/// decode plan's weights, caches and step state.
struct Prefill {
    /// Ascending by bucket.
    chunks: Vec<SimPrefill>,
    /// The embedding table (every prefill plan writes its chunk's rows from the host).
    embedding: HostEmbedding,
}

/// One prefill plan in the simulator.
struct SimPrefill {
    pre: PrefillPlan,
    ptrs: Vec<DevicePtr>,
    launches: Vec<Launch>,
    /// Counters per node, summed over every chunk run so far.
    stats: Vec<LaunchStats>,
}

impl SimPrefill {
    /// The plans of every bucket up to the context, or why the model has none (the reason the
    /// planner gave for the smallest bucket: a weight type without `mmq` kernels, too few heads
    /// for the prefill attention, an expert cache).
    fn load_all(
        sim: &mut Sim,
        file: &GgufFile,
        config: &ModelConfig,
        opts: PlanOptions,
        decode: (&Plan, &[DevicePtr]),
    ) -> Result<Result<Prefill, String>, ExecError> {
        let mut chunks = Vec::new();
        for bucket in PREFILL_BUCKETS.into_iter().filter(|&b| b <= opts.ctx) {
            let pre = match build_prefill_plan_for(config, file.header(), opts, bucket) {
                Ok(p) => p,
                Err(e) => return Ok(Err(e.to_string())),
            };
            let descs = pre.plan.check_committed()?;
            let ptrs = alloc_buffers(sim, file, &pre.plan, Some(decode))?;
            chunks.push(SimPrefill {
                launches: launches(&pre.plan, &descs, &ptrs),
                stats: vec![LaunchStats::default(); pre.plan.nodes.len()],
                pre,
                ptrs,
            });
        }
        let Some(first) = chunks.first() else {
            return Ok(Err(format!(
                "no prefill bucket fits a context of {} positions (the smallest is {})",
                opts.ctx, PREFILL_BUCKETS[0]
            )));
        };
        let embedding = HostEmbedding::for_plan(file, &first.pre.plan)?.ok_or(
            ExecError::NeedsHost("a prefill plan writes its embeddings from the host"),
        )?;
        Ok(Ok(Prefill { chunks, embedding }))
    }
}

/// The simulator's memory as the expert cache sees it.
struct SimSlots<'a>(&'a mut Sim);

impl SlotMemory for SimSlots<'_> {
    fn read(&mut self, addr: u64, out: &mut [u8]) -> Result<(), ExecError> {
        self.0
            .read(DevicePtr(addr), out)
            .map_err(ExecError::SimSetup)
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), ExecError> {
        self.0
            .write(DevicePtr(addr), data)
            .map_err(ExecError::SimSetup)
    }

    type Fence = ();

    /// Copies outside any launch: no kernel counter sees them (a copy engine's transfers). They
    /// land before this returns.
    fn copy_slabs(&mut self, copies: &[SlabCopy]) -> Result<(), ExecError> {
        for c in copies {
            let mut buf = vec![0u8; c.bytes as usize];
            self.read(c.src, &mut buf)?;
            self.write(c.dst, &buf)?;
        }
        Ok(())
    }

    fn landed(&mut self, _: &()) -> Result<bool, ExecError> {
        Ok(true)
    }
}

impl SimExecutor {
    /// Builds the plan for `file`, checks it against the committed PTX, and uploads weights
    /// and constants into a fresh simulator.
    pub fn load(file: &GgufFile, opts: PlanOptions) -> Result<Self, ExecError> {
        let config = ModelConfig::from_gguf(file.header()).map_err(crate::PlanError::from)?;
        let plan = build_plan_for(&config, file.header(), opts)?;
        let descs = plan.check_committed()?;
        let module = ingot_kernels::backend::sim::module().map_err(ExecError::SimSetup)?;
        let mut sim = Sim::new();
        let device_bytes = plan.summary().device_bytes();
        // Room for the plan plus the simulator's own bookkeeping; the default cap is 4 GiB.
        sim.set_memory_limit(
            device_bytes
                .saturating_mul(2)
                .max(ptx_sim::DEFAULT_MEMORY_LIMIT),
        );
        let ptrs = alloc_buffers(&mut sim, file, &plan, None)?;
        let launches = launches(&plan, &descs, &ptrs);
        let experts = match plan.expert_cache {
            Some(_) => Some(ExpertCache::new(
                &plan,
                |b| ptrs[b.0 as usize].0,
                &mut SimSlots(&mut sim),
            )?),
            None => None,
        };
        let prefill = SimPrefill::load_all(&mut sim, file, &config, opts, (&plan, &ptrs))?;
        let mtp = mtp::SimMtp::load(&mut sim, file, &config, opts, (&plan, &ptrs))?;
        let verify = verify::SimVerify::load(&mut sim, file, (&plan, &ptrs))?;
        let norm = plan
            .buffers
            .iter()
            .position(|b| b.name == "act.norm")
            .map(|i| crate::BufId(i as u32));
        Ok(SimExecutor {
            norm,
            hidden: None,
            mtp,
            verify,
            experts,
            prefill,
            embedding: HostEmbedding::for_plan(file, &plan)?,
            stats: vec![LaunchStats::default(); plan.nodes.len()],
            logits: vec![0.0; config.vocab],
            config,
            plan,
            sim,
            module,
            ptrs,
            launches,
            filled: 0,
        })
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Runs the decode steps from here on with the kernels a Hopper card runs under programmatic
    /// dependent launch (`ingot_kernels::backend::sim::hopper_module`): each waits on its
    /// predecessor first, and a global access before the wait is a simulator fault.
    pub fn use_hopper_kernels(&mut self) -> Result<(), ExecError> {
        self.module = ingot_kernels::backend::sim::hopper_module().map_err(ExecError::SimSetup)?;
        Ok(())
    }

    /// Counters of every node, summed over all steps run so far (same order as the plan's nodes).
    pub fn node_stats(&self) -> &[LaunchStats] {
        &self.stats
    }

    /// A table of the nodes, heaviest first by warp instructions, with their global traffic
    /// per step (counters divided by `steps`), at most `top` rows plus a total.
    pub fn profile(&self, steps: usize, top: usize) -> String {
        use std::fmt::Write as _;
        let per = |v: u64| v / steps.max(1) as u64;
        let mut order: Vec<usize> = (0..self.stats.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.stats[i].warp_instructions));
        let mut out = format!(
            "{:>4} {:<28} {:<26} {:>12} {:>12} {:>10}\n",
            "node", "label", "kernel", "warp instr", "global B rd", "sectors"
        );
        for &i in order.iter().take(top) {
            let (n, s) = (&self.plan.nodes[i], &self.stats[i]);
            let _ = writeln!(
                out,
                "{i:>4} {:<28} {:<26} {:>12} {:>12} {:>10}",
                n.label,
                n.kernel,
                per(s.warp_instructions),
                per(s.global_bytes_read),
                per(s.sectors_read)
            );
        }
        let total = self.stats.iter().fold(LaunchStats::default(), |mut a, s| {
            a += *s;
            a
        });
        let _ = write!(
            out,
            "     {:<55} {:>12} {:>12} {:>10}",
            format!("total of {} nodes per step", self.stats.len()),
            per(total.warp_instructions),
            per(total.global_bytes_read),
            per(total.sectors_read)
        );
        out
    }

    /// Runs one step and returns the residual stream after every layer (the embedding first)
    /// and the logits, for comparison with [`ingot_model::Oracle::decode_with_trace`].
    pub fn step_with_trace(&mut self, token: u32, pos: usize) -> Result<DecodeTrace, ExecError> {
        self.begin_step(token, pos)?;
        let mut trace = DecodeTrace {
            embedding: Vec::new(),
            layers: Vec::with_capacity(self.plan.n_layer),
            route_margins: Vec::new(),
            logits: Vec::new(),
        };
        let first_layer = self.plan.nodes.iter().position(|n| n.layer.is_some());
        let ends: Vec<usize> = (0..self.plan.n_layer)
            .filter_map(|il| self.plan.layer_end(il))
            .collect();
        for i in 0..self.launches.len() {
            if Some(i) == first_layer {
                trace.embedding = self.read_f32(self.plan.residual, self.plan.n_embd)?;
            }
            self.run_node(i)?;
            if ends.contains(&(i + 1)) {
                trace
                    .layers
                    .push(self.read_f32(self.plan.residual, self.plan.n_embd)?);
            }
        }
        self.update_experts()?;
        self.finish_step(pos)?;
        trace.logits = self.logits.clone();
        Ok(trace)
    }

    /// Runs one step; the logits are then in [`SimExecutor::logits`].
    pub fn step(&mut self, token: u32, pos: usize) -> Result<(), ExecError> {
        self.begin_step(token, pos)?;
        for i in 0..self.launches.len() {
            self.run_node(i)?;
        }
        self.update_experts()?;
        self.finish_step(pos)
    }

    /// After a step: the expert cache (if any) admits what the step missed.
    fn update_experts(&mut self) -> Result<(), ExecError> {
        match &mut self.experts {
            Some(c) => c.update(&mut SimSlots(&mut self.sim)),
            None => Ok(()),
        }
    }

    /// The expert cache's hit rate so far (`None` without an expert cache).
    pub fn expert_hit_rate(&self) -> Option<f64> {
        self.experts.as_ref().map(|c| c.hit_rate())
    }

    /// Bytes the kernels fetched from host-mapped memory (routed experts outside the VRAM
    /// slots) over every step run so far: what would cross the host link.
    pub fn host_bytes_fetched(&self) -> u64 {
        self.stats.iter().map(|s| s.host_bytes_fetched).sum()
    }

    pub fn logits(&self) -> &[f32] {
        &self.logits
    }

    /// Greedy decoding of `n` tokens after feeding `token` at `pos`, the way a replayed graph
    /// does it: the host writes the StepState once, then each step's last node puts its argmax
    /// into `StepState.next_token`/`token` and advances `pos`, and the next step starts from
    /// that. Returns the `n` chosen tokens; the logits of the last step stay readable.
    pub fn generate_greedy(
        &mut self,
        token: u32,
        pos: usize,
        n: usize,
    ) -> Result<Vec<u32>, ExecError> {
        if !self.plan.device_argmax {
            return Err(ExecError::NeedsHost(
                "greedy decoding on the device needs an argmax kernel for the lm_head",
            ));
        }
        check_step(&self.config, self.plan.ctx, self.filled, token, pos)?;
        super::check_greedy_span(self.plan.ctx, pos, n)?;
        self.begin_step(token, pos)?;
        let mut out = Vec::with_capacity(n);
        for k in 0..n {
            if k > 0 {
                if let Some(e) = &self.embedding {
                    // No embedding-fetch kernel: the host copies the row of the token the
                    // device chose (the only host step between replays).
                    let row = e.row(self.step_state()?.token)?;
                    self.sim
                        .write(self.ptrs[self.plan.residual.0 as usize], &row)
                        .map_err(ExecError::SimSetup)?;
                }
            }
            for i in 0..self.launches.len() {
                self.run_node(i)?;
            }
            self.update_experts()?;
            out.push(self.step_state()?.next_token);
        }
        if n > 0 {
            self.finish_step(pos + n - 1)?;
        }
        Ok(out)
    }

    /// The step state as the last step left it (`next_token` is the argmax of its logits).
    pub fn step_state(&self) -> Result<StepState, ExecError> {
        let mut s = StepState::default();
        self.sim
            .read(
                self.ptrs[self.plan.step.0 as usize],
                bytemuck::bytes_of_mut(&mut s),
            )
            .map_err(ExecError::SimSetup)?;
        Ok(s)
    }

    fn begin_step(&mut self, token: u32, pos: usize) -> Result<(), ExecError> {
        check_step(&self.config, self.plan.ctx, self.filled, token, pos)?;
        let mut s = self.step_state()?;
        s.token = token;
        s.pos = pos as u32;
        self.sim
            .write(self.ptrs[self.plan.step.0 as usize], bytemuck::bytes_of(&s))
            .map_err(ExecError::SimSetup)?;
        if let Some(e) = &self.embedding {
            let row = e.row(token)?;
            self.sim
                .write(self.ptrs[self.plan.residual.0 as usize], &row)
                .map_err(ExecError::SimSetup)?;
        }
        Ok(())
    }

    fn finish_step(&mut self, pos: usize) -> Result<(), ExecError> {
        self.logits = self.read_f32(self.plan.logits, self.plan.vocab)?;
        self.hidden = match self.norm {
            Some(b) => Some(self.read_f32(b, self.plan.n_embd)?),
            None => None,
        };
        self.filled = pos + 1;
        Ok(())
    }

    /// The NextN/MTP plan's nodes with their counters summed over every MTP step so far, or why
    /// the model has no such plan.
    pub fn mtp_stats(&self) -> Result<(&Plan, &[LaunchStats]), &str> {
        match &self.mtp {
            Ok(m) => Ok((&m.plan().plan, m.stats())),
            Err(e) => Err(e),
        }
    }

    /// The verify plan of `m` positions with its counters summed over every verify of that width
    /// so far, or why there is none.
    pub fn verify_stats(&self, m: usize) -> Result<(&crate::VerifyPlan, &[LaunchStats]), String> {
        let v = self.verify.as_ref().map_err(String::clone)?;
        v.plan(m)
            .ok_or_else(|| format!("no verify plan of {m} positions"))
    }

    /// [`Decoder::forward_rows`] with [`Rows::All`] or [`Rows::Argmax`] as one verify plan
    /// (`tokens`: 2 to [`crate::MAX_VERIFY_COLUMNS`]); every position is checked before anything
    /// runs. The argmax is the device's (each column's `next_token`) where the plan takes it.
    fn run_verify(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
        rows: Rows,
    ) -> Result<Forward, ExecError> {
        ingot_model::check_span(&self.config, self.plan.ctx, self.filled, tokens, start_pos)?;
        let v = (self.verify.as_mut())
            .map_err(|why| ExecError::Step(ModelError::Unsupported(why.clone())))?;
        // Invalid until the verify has run: a failed one leaves no state to read.
        self.hidden = None;
        let cols = v.run(
            (&mut self.sim, self.module),
            &self.config,
            self.embedding.as_ref(),
            (tokens, start_pos),
        )?;
        let (n, vocab, d) = (tokens.len(), self.config.vocab, self.config.n_embd);
        self.logits = cols.logits[(n - 1) * vocab..].to_vec();
        self.hidden = Some(cols.hidden[(n - 1) * d..].to_vec());
        self.filled = start_pos + n;
        let read = (cols.hidden, cols.logits, cols.argmax);
        Ok(super::verify_rows(n, read, rows, vocab))
    }

    fn run_node(&mut self, i: usize) -> Result<(), ExecError> {
        let l = &self.launches[i];
        self.stats[i] += launch(&mut self.sim, self.module, l, i, &self.plan.nodes[i].label)?;
        Ok(())
    }

    /// Why this executor prefills token by token (no prefill plan), or `None` when it runs
    /// prompts in chunks.
    pub fn prefill_unavailable(&self) -> Option<&str> {
        self.prefill.as_ref().err().map(String::as_str)
    }

    /// Each prefill plan (ascending by bucket) with its per-node counters summed over every
    /// chunk run so far.
    pub fn prefill_stats(&self) -> Vec<(&PrefillPlan, &[LaunchStats])> {
        match &self.prefill {
            Ok(p) => p
                .chunks
                .iter()
                .map(|c| (&c.pre, c.stats.as_slice()))
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Feeds `tokens` at `start_pos..` as prefill chunks (what no bucket fits, or everything
    /// without any, token by token on the decode plan) and returns the last position's logits;
    /// see `exec::prefill_in_chunks`.
    pub fn prefill_chunked(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
    ) -> Result<Vec<f32>, ExecError> {
        super::prefill_in_chunks(self, tokens, start_pos)?;
        Ok(self.logits.clone())
    }

    /// Runs `tokens` at `pos..` through prefill plan `k`; with `head`, also the output head on
    /// the last token, whose logits are then in [`SimExecutor::logits`].
    fn run_chunk(
        &mut self,
        k: usize,
        tokens: &[u32],
        pos: usize,
        head: bool,
    ) -> Result<(), ExecError> {
        let Ok(p) = &mut self.prefill else {
            return Err(ExecError::Prefill("no prefill plan".into()));
        };
        // A chunk runs no decode step: the decode plan's hidden state is stale.
        self.hidden = None;
        let c = &mut p.chunks[k];
        let row_bytes = 4 * c.pre.plan.n_embd;
        // The chunk's embeddings, then zero rows to the bucket's end (computed, never read).
        let mut x = vec![0u8; c.pre.ntok * row_bytes];
        for (row, &t) in x.chunks_exact_mut(row_bytes).zip(tokens) {
            row.copy_from_slice(&p.embedding.row(t)?);
        }
        let ptr = |b: crate::BufId| c.ptrs[b.0 as usize];
        let sim = &mut self.sim;
        sim.write(ptr(c.pre.x), &x).map_err(ExecError::SimSetup)?;
        sim.write(ptr(c.pre.rows), &(tokens.len() as u32).to_le_bytes())
            .map_err(ExecError::SimSetup)?;
        let mut state = StepState::default();
        let step = ptr(c.pre.plan.step);
        sim.read(step, bytemuck::bytes_of_mut(&mut state))
            .map_err(ExecError::SimSetup)?;
        state.pos = pos as u32;
        sim.write(step, bytemuck::bytes_of(&state))
            .map_err(ExecError::SimSetup)?;
        let nodes = if head {
            0..c.launches.len()
        } else {
            0..c.pre.head_start
        };
        for i in nodes {
            if i == c.pre.head_start {
                // The head's input: the last token's row of the chunk's residual stream.
                let mut row = vec![0u8; row_bytes];
                let at = ptr(c.pre.x).offset(((tokens.len() - 1) * row_bytes) as u64);
                sim.read(at, &mut row).map_err(ExecError::SimSetup)?;
                sim.write(ptr(c.pre.plan.residual), &row)
                    .map_err(ExecError::SimSetup)?;
            }
            let label = &c.pre.plan.nodes[i].label;
            c.stats[i] += launch(sim, self.module, &c.launches[i], i, label)?;
        }
        self.filled = pos + tokens.len();
        if head {
            let mut v = vec![0f32; c.pre.plan.vocab];
            sim.read(ptr(c.pre.plan.logits), bytemuck::cast_slice_mut(&mut v))
                .map_err(ExecError::SimSetup)?;
            self.logits = v;
        }
        Ok(())
    }

    fn read_f32(&self, buf: crate::BufId, n: usize) -> Result<Vec<f32>, ExecError> {
        let mut v = vec![0f32; n];
        self.sim
            .read(self.ptrs[buf.0 as usize], bytemuck::cast_slice_mut(&mut v))
            .map_err(ExecError::SimSetup)?;
        Ok(v)
    }
}

impl Decoder for SimExecutor {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn decode(&mut self, token: u32, pos: usize) -> Result<&[f32], ModelError> {
        self.step(token, pos).map_err(super::to_model_error)?;
        Ok(&self.logits)
    }

    fn reset(&mut self) {
        self.filled = 0;
        self.hidden = None;
        if let Ok(m) = &mut self.mtp {
            m.reset();
        }
    }

    fn prefill_last(&mut self, tokens: &[u32], start_pos: usize) -> Result<Vec<f32>, ModelError> {
        self.prefill_chunked(tokens, start_pos)
            .map_err(super::to_model_error)
    }

    /// The last step's routing, when the plan has an expert cache (each layer's selection is
    /// kept then); `None` otherwise.
    fn routing(&self) -> Option<&[(u32, f32)]> {
        self.experts.as_ref().map(|c| c.routing())
    }

    fn hidden(&self) -> Option<&[f32]> {
        self.hidden.as_deref()
    }

    /// 2 to [`crate::MAX_VERIFY_COLUMNS`] positions with [`Rows::All`] or [`Rows::Argmax`] (a
    /// speculative verify) as one verify plan, when the decode plan has them; otherwise see
    /// `exec::forward_rows_by_steps`.
    fn forward_rows(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
        rows: Rows,
    ) -> Result<Forward, ModelError> {
        let batched = (2..=crate::MAX_VERIFY_COLUMNS).contains(&tokens.len());
        if rows != Rows::Last && batched && self.verify.is_ok() {
            return self
                .run_verify(tokens, start_pos, rows)
                .map_err(super::to_model_error);
        }
        let prefill = self.prefill.is_ok();
        super::forward_rows_by_steps(self, tokens, start_pos, rows, prefill)
    }

    fn mtp_ready(&self) -> Result<(), ModelError> {
        match &self.mtp {
            Ok(_) => Ok(()),
            Err(why) => Err(ModelError::Unsupported(why.clone())),
        }
    }

    fn mtp_step(&mut self, hidden: &[f32], token: u32, pos: usize) -> Result<(), ModelError> {
        let m = self
            .mtp
            .as_mut()
            .map_err(|why| ModelError::Unsupported(why.clone()))?;
        m.step(
            &mut self.sim,
            self.module,
            &self.config,
            (hidden, token, pos),
        )
        .map_err(super::to_model_error)
    }

    fn mtp_logits(&mut self) -> Result<&[f32], ModelError> {
        let m = self
            .mtp
            .as_mut()
            .map_err(|why| ModelError::Unsupported(why.clone()))?;
        m.logits(&mut self.sim, self.module)
            .map_err(super::to_model_error)
    }

    fn mtp_hidden(&self) -> Option<&[f32]> {
        self.mtp.as_ref().ok().and_then(|m| m.hidden())
    }

    fn mtp_head_rows(&self) -> Option<usize> {
        let rows = self.mtp.as_ref().ok()?.plan().head_rows;
        (rows < self.config.vocab).then_some(rows)
    }
}

/// Runs one resolved launch; a failure names node `i` by `label`.
fn launch(
    sim: &mut Sim,
    module: &Module,
    l: &Launch,
    i: usize,
    label: &str,
) -> Result<LaunchStats, ExecError> {
    sim.launch(module, &l.kernel, l.config, &l.args)
        .map_err(|source| ExecError::Sim {
            node: i,
            label: label.to_owned(),
            source,
        })
}

/// A node's launch shape in the simulator: its grid from the launch table for its item count.
pub fn sim_config(n: &Node, d: &ingot_abi::launch::KernelDesc) -> LaunchConfig {
    LaunchConfig {
        grid: d.grid(n.items),
        block: d.block,
        shared_bytes: d.shared_bytes,
    }
}

/// A node's arguments in the simulator, each buffer resolved to `ptrs[buffer] + offset`.
pub fn sim_args(n: &Node, ptrs: &[DevicePtr]) -> Vec<Arg> {
    n.args
        .iter()
        .map(|a| match *a {
            NodeArg::Buf(r) => Arg::Ptr(ptrs[r.buf.0 as usize].offset(r.offset)),
            NodeArg::U32(v) => Arg::U32(v),
            NodeArg::I32(v) => Arg::I32(v),
            NodeArg::F32(v) => Arg::F32(v),
            NodeArg::U64(v) => Arg::U64(v),
        })
        .collect()
}

/// Allocates and fills `plan`'s buffers in `sim`. With `shared`, a weight, constant, latent
/// cache or step state declared exactly as a buffer of that plan (same name, kind and size) is
/// that buffer, not a copy: a prefill plan writes the decode plan's caches and reads its weights
/// ([`super::shared_buffers`], the rule the CUDA executor allocates by too).
fn alloc_buffers(
    sim: &mut Sim,
    file: &GgufFile,
    plan: &Plan,
    shared: Option<(&Plan, &[DevicePtr])>,
) -> Result<Vec<DevicePtr>, ExecError> {
    let twins = match shared {
        Some((first, _)) => super::shared_buffers(first, plan)?,
        None => vec![None; plan.buffers.len()],
    };
    alloc_with_twins(sim, file, plan, twins, shared.map(|s| s.1))
}

/// [`alloc_buffers`] with the twins given: buffer `i` of `plan` is `first[twins[i]]` where that
/// is `Some`, a fresh allocation (filled from the file when initialised) otherwise.
fn alloc_with_twins(
    sim: &mut Sim,
    file: &GgufFile,
    plan: &Plan,
    twins: Vec<Option<usize>>,
    first: Option<&[DevicePtr]>,
) -> Result<Vec<DevicePtr>, ExecError> {
    let mut ptrs = Vec::with_capacity(plan.buffers.len());
    for (decl, twin) in plan.buffers.iter().zip(twins) {
        if let (Some(i), Some(first)) = (twin, first) {
            ptrs.push(first[i]);
            continue;
        }
        let p = match decl.kind {
            crate::BufferKind::Weight {
                host_mapped: true, ..
            } => sim.alloc_host_mapped(decl.bytes as usize),
            _ => sim.alloc(decl.bytes as usize),
        }
        .map_err(ExecError::SimSetup)?;
        if let Some(bytes) = initial_bytes(file, decl)? {
            sim.write(p, &bytes).map_err(ExecError::SimSetup)?;
        }
        ptrs.push(p);
    }
    for (t, entries) in plan.expert_tables(|b| ptrs[b.0 as usize].0) {
        sim.write(ptrs[t.0 as usize], bytemuck::cast_slice(&entries))
            .map_err(ExecError::SimSetup)?;
    }
    Ok(ptrs)
}

/// Every node of `plan` resolved to simulator addresses.
fn launches(
    plan: &Plan,
    descs: &[&ingot_abi::launch::KernelDesc],
    ptrs: &[DevicePtr],
) -> Vec<Launch> {
    plan.nodes
        .iter()
        .zip(descs)
        .map(|(n, d)| Launch {
            kernel: n.kernel.clone(),
            config: sim_config(n, d),
            args: sim_args(n, ptrs),
        })
        .collect()
}

impl super::ChunkedPrefill for SimExecutor {
    fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn ctx_filled(&self) -> (usize, usize) {
        (self.plan.ctx, self.filled)
    }

    fn buckets(&self) -> Vec<usize> {
        match &self.prefill {
            Ok(p) => p.chunks.iter().map(|c| c.pre.ntok).collect(),
            Err(_) => Vec::new(),
        }
    }

    fn run_chunk(
        &mut self,
        k: usize,
        tokens: &[u32],
        pos: usize,
        head: bool,
    ) -> Result<(), ExecError> {
        SimExecutor::run_chunk(self, k, tokens, pos, head)
    }

    fn step(&mut self, token: u32, pos: usize) -> Result<(), ExecError> {
        SimExecutor::step(self, token, pos)
    }
}
