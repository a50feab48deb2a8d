//! The decode step on the device: the nodes captured into one graph and replayed, or launched
//! one by one (eager mode, timing); the StepState (and the host's embedding row) staged through
//! pinned memory before a step; the expert cache's update after one.

use ingot_abi::step::StepState;

use super::launch::decode_place;
use super::launch::{capture_nodes, launch_nodes, Pace};
use super::slots::CudaSlots;
use super::upload::Loaded;
use super::STATE_BYTES;
use crate::error::ExecError;
use crate::plan::Plan;

impl Loaded {
    /// Captures every node in order into one graph.
    pub(super) fn capture(&mut self, plan: &Plan) -> Result<(), ExecError> {
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
    pub(super) fn run(&mut self, plan: &Plan) -> Result<(), ExecError> {
        if let Some(graph) = &self.graph {
            return Ok(graph.launch()?);
        }
        self.run_nodes(plan, Pace::Sync)
    }

    /// Launches the plan's nodes one by one on the stream (the eager path, and the per-node
    /// timing of [`CudaExecutor::measure_step`]), paced as `pace` says. A launch error names
    /// its node.
    pub(super) fn run_nodes(&mut self, plan: &Plan, pace: Pace<'_>) -> Result<(), ExecError> {
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

    /// Enqueues the StepState `{token, pos}` (through pinned memory) before the next step.
    pub(super) fn enqueue_state(
        &mut self,
        plan: &Plan,
        token: u32,
        pos: usize,
    ) -> Result<(), ExecError> {
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
    pub(super) fn update_experts(&mut self) -> Result<(), ExecError> {
        match &mut self.experts {
            Some((c, copies)) => c.update(&mut CudaSlots {
                gpu: &self.gpu,
                copies,
            }),
            None => Ok(()),
        }
    }

    /// Waits for the copy into `slot` and returns the token it holds.
    pub(super) fn read_slot(&self, slot: usize) -> Result<u32, ExecError> {
        self.events[slot].synchronize()?;
        let bytes = &self.state_out.bytes()[slot * STATE_BYTES..(slot + 1) * STATE_BYTES];
        let s: StepState = bytemuck::pod_read_unaligned(bytes);
        Ok(s.next_token)
    }
}
