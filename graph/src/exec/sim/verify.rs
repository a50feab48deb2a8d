//! The speculative verify in the simulator: a [`VerifyPlan`] per column count on the decode
//! plan's weights and latent caches, run node by node as the decode plan is. The host writes each
//! column's step state (and, without a fetch kernel, its embedding row), then reads each
//! column's logits and final hidden state.

use ingot_abi::step::StepState;
use ingot_gguf::GgufFile;
use ingot_model::{ModelConfig, ModelError};
use ptx_sim::{DevicePtr, LaunchStats, Module, Sim};

use super::{alloc_buffers, launch, launches, Launch};
use crate::error::ExecError;
use crate::exec::host_embedding::HostEmbedding;
use crate::plan::Plan;
use crate::planner::verify::{verify_plans, VerifyPlan, MAX_VERIFY_COLUMNS};

/// The verify plans of 2 to [`MAX_VERIFY_COLUMNS`] positions loaded beside a decode plan.
pub(super) struct SimVerify {
    /// Index `m - 2` holds the plan of `m` columns.
    plans: Vec<Loaded>,
}

struct Loaded {
    verify: VerifyPlan,
    ptrs: Vec<DevicePtr>,
    launches: Vec<Launch>,
    /// Counters per node, summed over every verify of this width so far.
    stats: Vec<LaunchStats>,
}

/// What one verify leaves: each column's logits and final hidden state, position-major, and
/// with a device argmax each column's `next_token`.
pub(super) struct Columns {
    pub logits: Vec<f32>,
    pub hidden: Vec<f32>,
    pub argmax: Option<Vec<u32>>,
}

impl SimVerify {
    /// The plans on `decode`'s allocations, or why there are none (an expert cache, a decode
    /// plan without `act.norm`). Only the simulator's own failures are errors.
    pub(super) fn load(
        sim: &mut Sim,
        file: &GgufFile,
        decode: (&Plan, &[DevicePtr]),
    ) -> Result<Result<Self, String>, ExecError> {
        let verifies = match verify_plans(decode.0) {
            Ok(v) => v,
            Err(why) => return Ok(Err(why)),
        };
        let mut plans = Vec::new();
        for verify in verifies {
            let descs = verify.plan.check_committed()?;
            let ptrs = alloc_buffers(sim, file, &verify.plan, Some(decode))?;
            plans.push(Loaded {
                launches: launches(&verify.plan, &descs, &ptrs),
                stats: vec![LaunchStats::default(); verify.plan.nodes.len()],
                verify,
                ptrs,
            });
        }
        Ok(Ok(SimVerify { plans }))
    }

    /// The plan of `m` columns, if there is one.
    pub(super) fn plan(&self, m: usize) -> Option<(&VerifyPlan, &[LaunchStats])> {
        let l = self.plans.get(m.checked_sub(2)?)?;
        Some((&l.verify, &l.stats))
    }

    /// Runs `tokens` (2 to [`MAX_VERIFY_COLUMNS`], already checked against the cache) at
    /// `pos..` as one verify. `embedding`: the decode plan's, when the host writes the rows.
    pub(super) fn run(
        &mut self,
        (sim, module): (&mut Sim, &Module),
        config: &ModelConfig,
        embedding: Option<&HostEmbedding>,
        (tokens, pos): (&[u32], usize),
    ) -> Result<Columns, ExecError> {
        let Some(l) = tokens
            .len()
            .checked_sub(2)
            .and_then(|i| self.plans.get_mut(i))
        else {
            return Err(ModelError::Unsupported(format!(
                "a verify of {} positions: the plans take 2 to {MAX_VERIFY_COLUMNS}",
                tokens.len()
            ))
            .into());
        };
        let v = &l.verify;
        let addr = |b: crate::BufId, column: usize| {
            let r = v.at(b, column);
            l.ptrs[r.buf.0 as usize].offset(r.offset)
        };
        let put = |sim: &mut Sim, at: DevicePtr, bytes: &[u8]| {
            sim.write(at, bytes).map_err(ExecError::SimSetup)
        };
        for (i, &token) in tokens.iter().enumerate() {
            let state = StepState {
                token,
                pos: (pos + i) as u32,
                ..StepState::default()
            };
            put(sim, addr(v.plan.step, i), bytemuck::bytes_of(&state))?;
            if let Some(e) = embedding {
                put(sim, addr(v.plan.residual, i), &e.row(token)?)?;
            }
        }
        for (i, node) in v.plan.nodes.iter().enumerate() {
            l.stats[i] += launch(sim, module, &l.launches[i], i, &node.label)?;
        }
        let norm = v.norm.expect("checked at load");
        let (vocab, d) = (config.vocab, config.n_embd);
        let mut out = Columns {
            logits: vec![0.0; tokens.len() * vocab],
            hidden: vec![0.0; tokens.len() * d],
            argmax: None,
        };
        let get = |at: DevicePtr, into: &mut [f32]| {
            sim.read(at, bytemuck::cast_slice_mut(into))
                .map_err(ExecError::SimSetup)
        };
        for i in 0..tokens.len() {
            get(
                addr(v.plan.logits, i),
                &mut out.logits[i * vocab..][..vocab],
            )?;
            get(addr(norm, i), &mut out.hidden[i * d..][..d])?;
        }
        if v.plan.device_argmax {
            let mut states = Vec::with_capacity(tokens.len());
            for i in 0..tokens.len() {
                let mut s = StepState::default();
                sim.read(addr(v.plan.step, i), bytemuck::bytes_of_mut(&mut s))
                    .map_err(ExecError::SimSetup)?;
                states.push(s.next_token);
            }
            out.argmax = Some(states);
        }
        Ok(out)
    }
}
