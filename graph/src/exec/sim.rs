//! The plan interpreted in ptx-sim: node by node, with the simulator's counters per node.

use ingot_abi::step::StepState;
use ingot_gguf::GgufFile;
use ingot_model::{check_step, DecodeTrace, Decoder, ModelConfig, ModelError};
use ptx_sim::{Arg, DevicePtr, LaunchConfig, LaunchStats, Module, Sim};

use crate::error::ExecError;
use crate::exec::expert_cache::{ExpertCache, SlotMemory};
use crate::node::{Node, NodeArg};
use crate::plan::Plan;
use crate::planner::{build_plan_for, PlanOptions};
use crate::weights::{initial_bytes, HostEmbedding};

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
    experts: Option<ExpertCache>,
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

    /// A copy outside any launch: no kernel counter sees it (a copy engine's transfer).
    fn copy(&mut self, dst: u64, src: u64, bytes: u64) -> Result<(), ExecError> {
        let mut buf = vec![0u8; bytes as usize];
        self.read(src, &mut buf)?;
        self.write(dst, &buf)
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
        let mut ptrs = Vec::with_capacity(plan.buffers.len());
        for decl in &plan.buffers {
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
        let launches = plan
            .nodes
            .iter()
            .zip(&descs)
            .map(|(n, d)| Launch {
                kernel: n.kernel.clone(),
                config: sim_config(n, d),
                args: sim_args(n, &ptrs),
            })
            .collect();
        let experts = match plan.expert_cache {
            Some(_) => Some(ExpertCache::new(
                &plan,
                |b| ptrs[b.0 as usize].0,
                &mut SimSlots(&mut sim),
            )?),
            None => None,
        };
        Ok(SimExecutor {
            experts,
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
        self.filled = pos + 1;
        Ok(())
    }

    fn run_node(&mut self, i: usize) -> Result<(), ExecError> {
        let l = &self.launches[i];
        let stats = self
            .sim
            .launch(self.module, &l.kernel, l.config, &l.args)
            .map_err(|source| ExecError::Sim {
                node: i,
                label: self.plan.nodes[i].label.clone(),
                source,
            })?;
        self.stats[i] += stats;
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
    }

    /// The last step's routing, when the plan has an expert cache (each layer's selection is
    /// kept then); `None` otherwise.
    fn routing(&self) -> Option<&[(u32, f32)]> {
        self.experts.as_ref().map(|c| c.routing())
    }
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
