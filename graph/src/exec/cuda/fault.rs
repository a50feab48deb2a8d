//! Eager mode and fault localisation.
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

use ingot_cuda::Gpu;
use ingot_gguf::GgufFile;

use super::upload::Loaded;
use super::CudaExecutor;
use crate::error::ExecError;

/// `INGOT_EAGER=1`: run every step node by node with a synchronisation after each instead of
/// replaying the captured graph (slow; for localising a GPU fault).
pub const EAGER_VAR: &str = "INGOT_EAGER";

pub(super) fn eager_requested() -> bool {
    std::env::var(EAGER_VAR).is_ok_and(|v| v.trim() == "1")
}

/// A failed piece of work, re-run eagerly in a fresh context to name its first failing node.
#[derive(Clone, Copy)]
pub(super) enum Failed<'t> {
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
    /// A step or the head of the NextN/MTP block at MTP position `pos`.
    Mtp {
        pos: usize,
    },
    /// A speculative verify of `n` positions at `pos..`.
    Verify {
        n: usize,
        pos: usize,
    },
}

impl Failed<'_> {
    fn pos(self) -> usize {
        match self {
            Failed::Step { pos, .. }
            | Failed::Chunk { pos, .. }
            | Failed::Mtp { pos }
            | Failed::Verify { pos, .. } => pos,
        }
    }

    fn describe(self) -> String {
        match self {
            Failed::Step { pos, .. } => format!("pos {pos}"),
            Failed::Chunk { tokens, pos, .. } => {
                format!("the prefill chunk of {} tokens at pos {pos}", tokens.len())
            }
            Failed::Mtp { pos } => format!("the NextN/MTP block at MTP position {pos}"),
            Failed::Verify { n, pos } => format!("the verify of {n} positions at pos {pos}"),
        }
    }
}

impl CudaExecutor {
    /// Turns a failed step or prefill chunk into the error to report. A failed graph replay
    /// releases the faulted context and re-runs the work eagerly in a fresh one to name the
    /// first failing node; an eager run's error already names it.
    pub(super) fn after_failure(&mut self, e: ExecError, failed: Failed<'_>) -> ExecError {
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

    /// Loads the model again in a fresh context and runs `failed` node by node. The NextN/MTP
    /// block's input (a hidden state the host no longer holds) and a verify (the cache rows of
    /// its prefix) cannot be replayed: their faults are left to an eager run from the start.
    fn localise(&self, failed: Failed<'_>) -> String {
        if let Failed::Mtp { .. } | Failed::Verify { .. } = failed {
            return format!(
                "the replay of {} faulted; decode from the start with {EAGER_VAR}=1 to name its \
                 failing node",
                failed.describe()
            );
        }
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
                // Answered above without a re-run.
                Failed::Mtp { .. } | Failed::Verify { .. } => {}
            }
            Ok(())
        };
        let what = failed.describe();
        match rerun() {
            Err(e @ ExecError::Node(_)) => format!(
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
