//! The NextN/MTP block in the simulator: the [`MtpPlan`] on the decode plan's weights, run node by
//! node as the decode plan is (every step of the block's math is PTX; the host writes the block's
//! inputs, the step state and, without a fetch kernel, the embedding row).

use ingot_abi::step::StepState;
use ingot_gguf::GgufFile;
use ingot_model::{ModelConfig, ModelError};
use ptx_sim::{DevicePtr, LaunchStats, Module, Sim};

use super::{alloc_with_twins, launch, launches, Launch};
use crate::error::ExecError;
use crate::exec::host_embedding::HostEmbedding;
use crate::plan::Plan;
use crate::planner::mtp::MtpPlan;
use crate::planner::PlanOptions;

/// The MTP plan loaded beside a decode plan.
pub(super) struct SimMtp {
    mtp: MtpPlan,
    ptrs: Vec<DevicePtr>,
    launches: Vec<Launch>,
    /// Counters per node, summed over every MTP step run so far.
    stats: Vec<LaunchStats>,
    embedding: Option<HostEmbedding>,
    /// MTP positions the block's cache holds (`0..filled`).
    filled: usize,
    /// The last step's output after `shared_head_norm`; `None` before the first step.
    hidden: Option<Vec<f32>>,
    logits: Vec<f32>,
}

impl SimMtp {
    /// The block's plan on `decode`'s allocations, or why the model has none (no NextN block, a
    /// file stripped of its tensors, a shape or type the kernels do not take): a decoder that
    /// cannot draft still decodes. Only the simulator's own failures are errors.
    pub(super) fn load(
        sim: &mut Sim,
        file: &GgufFile,
        config: &ModelConfig,
        opts: PlanOptions,
        decode: (&Plan, &[DevicePtr]),
    ) -> Result<Result<Self, String>, ExecError> {
        let (mtp, descs) = match crate::exec::mtp_plan_or_why(config, file, opts) {
            Ok(p) => p,
            Err(why) => return Ok(Err(why)),
        };
        let twins = crate::exec::shared_initialized(decode.0, &mtp.plan);
        let ptrs = alloc_with_twins(sim, file, &mtp.plan, twins, Some(decode.1))?;
        let embedding = if mtp.plan.host_embedding {
            Some(HostEmbedding::of_tensor(
                file,
                &mtp.embed_tensor,
                &mtp.plan,
            )?)
        } else {
            None
        };
        Ok(Ok(SimMtp {
            launches: launches(&mtp.plan, &descs, &ptrs),
            stats: vec![LaunchStats::default(); mtp.plan.nodes.len()],
            logits: vec![0.0; mtp.plan.vocab],
            mtp,
            ptrs,
            embedding,
            filled: 0,
            hidden: None,
        }))
    }

    pub(super) fn plan(&self) -> &MtpPlan {
        &self.mtp
    }

    pub(super) fn stats(&self) -> &[LaunchStats] {
        &self.stats
    }

    pub(super) fn reset(&mut self) {
        self.filled = 0;
        self.hidden = None;
    }

    pub(super) fn hidden(&self) -> Option<&[f32]> {
        self.hidden.as_deref()
    }

    /// [`ingot_model::Decoder::mtp_step`]: the block at MTP position `pos` on `hidden` and `token`.
    pub(super) fn step(
        &mut self,
        sim: &mut Sim,
        module: &Module,
        config: &ModelConfig,
        (hidden, token, pos): (&[f32], u32, usize),
    ) -> Result<(), ExecError> {
        let plan = &self.mtp.plan;
        crate::exec::check_mtp_step(config, plan, self.filled, (hidden, token, pos))?;
        let ptr = |b: crate::BufId| self.ptrs[b.0 as usize];
        let write = |sim: &mut Sim, at: DevicePtr, bytes: &[u8]| {
            sim.write(at, bytes).map_err(ExecError::SimSetup)
        };
        write(sim, ptr(self.mtp.hidden_in), bytemuck::cast_slice(hidden))?;
        let state = StepState {
            token,
            pos: pos as u32,
            ..StepState::default()
        };
        write(sim, ptr(plan.step), bytemuck::bytes_of(&state))?;
        if let Some(e) = &self.embedding {
            write(sim, ptr(plan.residual), &e.row(token)?)?;
        }
        // Invalid until the block has run: a failed step leaves no output to read.
        self.hidden = None;
        for i in 0..self.mtp.head_start {
            self.stats[i] += launch(sim, module, &self.launches[i], i, &plan.nodes[i].label)?;
        }
        let mut h = vec![0f32; plan.n_embd];
        sim.read(ptr(self.mtp.hidden_out), bytemuck::cast_slice_mut(&mut h))
            .map_err(ExecError::SimSetup)?;
        self.hidden = Some(h);
        self.filled = pos + 1;
        Ok(())
    }

    /// [`ingot_model::Decoder::mtp_logits`]: the head nodes on the last step's output.
    pub(super) fn logits(&mut self, sim: &mut Sim, module: &Module) -> Result<&[f32], ExecError> {
        if self.hidden.is_none() {
            return Err(ModelError::Unsupported(
                "MTP logits asked for before an MTP step ran".into(),
            )
            .into());
        }
        let plan = &self.mtp.plan;
        for i in self.mtp.head_start..self.launches.len() {
            self.stats[i] += launch(sim, module, &self.launches[i], i, &plan.nodes[i].label)?;
        }
        sim.read(
            self.ptrs[plan.logits.0 as usize],
            bytemuck::cast_slice_mut(&mut self.logits),
        )
        .map_err(ExecError::SimSetup)?;
        Ok(&self.logits)
    }
}
