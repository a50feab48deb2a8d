//! Running the batched prefill (docs in `prefill.rs`): the executor's entry points, one chunk on
//! the device ([`Loaded::run_chunk`]), and the `ChunkedPrefill` the shared chunking drives. A
//! failed chunk is re-run eagerly to name its node (`fault.rs`).

use ingot_abi::step::StepState;
use ingot_model::ModelConfig;

use super::fault::Failed;
use super::launch::{capture_nodes, decode_place, in_prefill, launch_nodes, Pace, Place};
use super::prefill::{DevChunk, PrefillHost, Slot};
use super::upload::Loaded;
use super::{CudaExecutor, STATE_BYTES};
use crate::error::ExecError;
use crate::BufId;

impl CudaExecutor {
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
    /// see `exec::prefill_in_chunks`.
    pub fn prefill_chunked(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
    ) -> Result<Vec<f32>, ExecError> {
        crate::exec::prefill_in_chunks(self, tokens, start_pos)?;
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
        // A chunk runs no decode step: the decode plan's hidden state is stale.
        self.hidden = None;
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
}

impl Loaded {
    /// Runs `tokens` at `pos..` through prefill plan `k` of `plans` and waits for it: the
    /// chunk's uploads (embeddings and zero rows, row count, StepState), its layers, and with
    /// `head` the head on row `n − 1` and the logits' copy into `logits_out`. The layers and
    /// the head are graph replays (captured here at their first use) unless `eager`, which
    /// runs them node by node with a synchronisation after each.
    pub(super) fn run_chunk(
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
}

impl crate::exec::ChunkedPrefill for CudaExecutor {
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
