//! GPU times of the decode step: back-to-back replays, and one step node by node between CUDA
//! events, with device-to-device copies ahead of it so the events see the GPU's pace rather
//! than the host's enqueueing. Milliseconds throughout.

use std::time::Instant;

use ingot_model::check_step;

use super::launch::Pace;
use super::CudaExecutor;
use crate::error::ExecError;

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

impl CudaExecutor {
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
    /// between CUDA events (`Pace::Marks`, no synchronisation in between), the whole step in
    /// eager mode (a synchronisation after each node), and `replays` back-to-back graph replays.
    /// The cache must hold positions `0..pos` (the caller decodes them first) and have room
    /// for `pos + replays` positions.
    ///
    /// Repeating is valid because a step at a fixed position is idempotent: before every run
    /// the StepState is rewritten to `{token, pos, next_token: 0, steps_done: 0}` (exactly as
    /// [`CudaExecutor::step`] does), every activation is written before it is read within the
    /// step, the argmax key and its done counter are left at 0 by the fused lm_head's last
    /// block, and the step writes only cache row `pos` (with the same values each time, from
    /// the same token and rows `0..pos`).
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
        crate::exec::check_greedy_span(self.plan.ctx, pos, replays.max(1))?;
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
}
