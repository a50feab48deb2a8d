//! Running the NextN/MTP block on the device (docs in `mtp.rs`): its loading at the first step,
//! then the block or its head.

use std::path::Path;

use ingot_abi::step::StepState;
use ingot_gguf::GgufFile;

use super::launch::{capture_nodes, launch_nodes, Pace};
use super::mtp::{f32s, mtp_place, own_device, DevMtp, MtpHost};
use super::upload::Loaded;
use super::STATE_BYTES;
use crate::error::ExecError;
use crate::BufId;

impl Loaded {
    /// Allocates and uploads the block at its first step ([`DevMtp::open`], from the model file
    /// at `path` reopened); `Ok(Err(why))` when the free memory cannot hold it.
    pub(super) fn open_mtp(
        &mut self,
        path: &Path,
        host: &MtpHost,
    ) -> Result<Result<(), String>, ExecError> {
        if self.mtp.is_some() {
            return Ok(Ok(()));
        }
        let file = GgufFile::open(path).map_err(|e| ExecError::Weight {
            name: path.display().to_string(),
            reason: format!("reopening the model for the NextN/MTP block: {e}"),
        })?;
        let decode = self.decode_addresses();
        let opened = DevMtp::open((&self.gpu, &mut self.module), &file, host, &decode)?;
        Ok(opened.map(|m| self.mtp = Some(m)))
    }

    /// Runs the block on `hidden` with `token` at MTP position `pos` and waits; returns its
    /// output after `shared_head_norm`. `eager`: node by node with a synchronisation after each.
    pub(super) fn run_mtp_block(
        &mut self,
        host: &MtpHost,
        input: (&[f32], u32, usize),
        eager: bool,
    ) -> Result<Vec<f32>, ExecError> {
        self.run_mtp(host, Some(input), eager)
    }

    /// Runs the block's head on the last block step's output and waits; returns the logits.
    pub(super) fn run_mtp_head(
        &mut self,
        host: &MtpHost,
        eager: bool,
    ) -> Result<Vec<f32>, ExecError> {
        self.run_mtp(host, None, eager)
    }

    /// The block (with its `input`: hidden state, token, MTP position) or, without one, the
    /// head: its graph captured at first use (before anything of the run is enqueued), the
    /// block's inputs uploaded, the replay (or the nodes one by one when `eager`), the output
    /// copied back, waited for.
    fn run_mtp(
        &mut self,
        host: &MtpHost,
        input: Option<(&[f32], u32, usize)>,
        eager: bool,
    ) -> Result<Vec<f32>, ExecError> {
        let Loaded {
            gpu,
            module,
            bufs,
            mapped,
            mtp,
            events,
            logits_out,
            ..
        } = self;
        let DevMtp {
            slots,
            shapes,
            body,
            head,
            embedding,
            hidden_in,
            row_in,
            state_in,
            hidden_out,
            ..
        } = mtp.as_mut().ok_or(ExecError::Faulted)?;
        let plan = &host.mtp.plan;
        let (bufs, mapped, slots) = (&*bufs, &*mapped, &*slots);
        let place = |i: usize| mtp_place(bufs, mapped, slots, i);
        let dev = |id: BufId| own_device(&place, id);
        let (nodes, graph, out, len, staging) = match input {
            Some(_) => (
                0..host.mtp.head_start,
                body,
                host.mtp.hidden_out,
                plan.n_embd,
                hidden_out,
            ),
            None => (
                host.mtp.head_start..plan.nodes.len(),
                head,
                plan.logits,
                plan.vocab,
                logits_out,
            ),
        };
        if !eager && graph.is_none() {
            *graph = Some(capture_nodes(
                gpu,
                module,
                plan,
                nodes.clone(),
                shapes,
                &place,
            )?);
        }
        if let Some((hidden, token, pos)) = input {
            // The previous run was waited for, so the staging is free.
            hidden_in
                .bytes_mut()
                .copy_from_slice(bytemuck::cast_slice(hidden));
            gpu.copy_from_pinned(hidden_in, 0, dev(host.mtp.hidden_in)?, 0, hidden.len() * 4)?;
            let state = StepState {
                token,
                pos: pos as u32,
                next_token: 0,
                steps_done: 0,
            };
            state_in
                .bytes_mut()
                .copy_from_slice(bytemuck::bytes_of(&state));
            gpu.copy_from_pinned(state_in, 0, dev(plan.step)?, 0, STATE_BYTES)?;
            if let Some(e) = embedding {
                let row = e.row(token)?;
                row_in.bytes_mut()[..row.len()].copy_from_slice(&row);
                gpu.copy_from_pinned(row_in, 0, dev(plan.residual)?, 0, row.len())?;
            }
        }
        match graph {
            Some(g) => g.launch()?,
            None => launch_nodes(gpu, module, plan, nodes, shapes, &place, Pace::Sync)?,
        }
        gpu.copy_to_pinned(dev(out)?, 0, staging, 0, len * 4)?;
        gpu.record(&events[0])?;
        events[0].synchronize()?;
        Ok(f32s(staging.bytes(), len))
    }
}
