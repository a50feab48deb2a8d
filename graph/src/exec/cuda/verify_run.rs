//! Running the speculative verify on the device (docs in `verify.rs`): a width's buffers at its
//! first verify, then the replay.

use ingot_abi::step::StepState;
use ingot_gguf::GgufFile;

use super::launch::{capture_nodes, launch_nodes, shapes_of, Pace};
use super::mtp::{f32s, mtp_place, own_device};
use super::prefill::own_slots;
use super::upload::Loaded;
use super::verify::{Columns, DevVerify, VerifyHost};
use super::STATE_BYTES;
use crate::error::ExecError;
use crate::planner::verify::MAX_VERIFY_COLUMNS;

impl Loaded {
    /// Allocates the verify of `m` positions (its activations and step states: every
    /// initialised buffer is the decode plan's, so `file` is read for nothing) and its staging,
    /// and prepares its kernels, unless already done.
    pub(super) fn open_verify(
        &mut self,
        host: &VerifyHost,
        file: &GgufFile,
        m: usize,
    ) -> Result<(), ExecError> {
        let Some((v, descs, twins)) = host.get(m) else {
            return Err(ingot_model::ModelError::Unsupported(format!(
                "a verify of {m} positions: the plans take 2 to {MAX_VERIFY_COLUMNS}"
            ))
            .into());
        };
        if self.verify.len() < MAX_VERIFY_COLUMNS - 1 {
            self.verify.resize_with(MAX_VERIFY_COLUMNS - 1, || None);
        }
        if self.verify[m - 2].is_some() {
            return Ok(());
        }
        let plan = &v.plan;
        for k in &plan.summary().kernels {
            self.module.prepare(k)?;
        }
        let (d, vocab) = (plan.n_embd * 4, plan.vocab * 4);
        let decode = self.decode_addresses();
        self.verify[m - 2] = Some(DevVerify {
            slots: own_slots(&self.gpu, file, plan, (twins, &decode))?,
            shapes: shapes_of(plan, descs),
            graph: None,
            states_in: self.gpu.alloc_pinned(m * STATE_BYTES)?,
            rows_in: self.gpu.alloc_pinned(m * d)?,
            logits_out: self.gpu.alloc_pinned(m * vocab)?,
            states_out: self.gpu.alloc_pinned(m * STATE_BYTES)?,
            hidden_out: self.gpu.alloc_pinned(m * d)?,
        });
        Ok(())
    }

    /// Whether the verify of `m` positions is allocated ([`Loaded::open_verify`]).
    pub(super) fn verify_open(&self, m: usize) -> bool {
        m.checked_sub(2)
            .and_then(|i| self.verify.get(i))
            .is_some_and(Option::is_some)
    }

    /// Runs `tokens` (2 to [`MAX_VERIFY_COLUMNS`], checked against the cache) at `pos..` as one
    /// verify, opened by [`Loaded::open_verify`], and waits; its graph is captured at first use.
    /// `argmax`: copy back each position's argmax (its step state's `next_token`) instead of its
    /// logits, where the plan takes it on the device. `eager`: node by node with a
    /// synchronisation after each.
    pub(super) fn run_verify(
        &mut self,
        host: &VerifyHost,
        (tokens, pos): (&[u32], usize),
        (argmax, eager): (bool, bool),
    ) -> Result<Columns, ExecError> {
        let m = tokens.len();
        let (Some((v, _, _)), true) = (host.get(m), self.verify_open(m)) else {
            return Err(ExecError::NeedsHost(
                "a verify run before its buffers were opened",
            ));
        };
        let plan = &v.plan;
        let Loaded {
            gpu,
            module,
            bufs,
            mapped,
            verify,
            events,
            embedding,
            ..
        } = self;
        let dv = verify[m - 2].as_mut().expect("checked by verify_open");
        let (bufs, mapped, slots) = (&*bufs, &*mapped, &dv.slots);
        let place = |i: usize| mtp_place(bufs, mapped, slots, i);
        let dev = |id: crate::BufId| own_device(&place, id);
        if !eager && dv.graph.is_none() {
            let nodes = 0..plan.nodes.len();
            dv.graph = Some(capture_nodes(gpu, module, plan, nodes, &dv.shapes, &place)?);
        }
        let row = plan.n_embd * 4;
        for (i, &token) in tokens.iter().enumerate() {
            let state = StepState {
                token,
                pos: (pos + i) as u32,
                next_token: 0,
                steps_done: 0,
            };
            dv.states_in.bytes_mut()[i * STATE_BYTES..][..STATE_BYTES]
                .copy_from_slice(bytemuck::bytes_of(&state));
            let at = v.at(plan.step, i);
            gpu.copy_from_pinned(
                &dv.states_in,
                i * STATE_BYTES,
                dev(at.buf)?,
                at.offset as usize,
                STATE_BYTES,
            )?;
            if let Some((e, _)) = embedding {
                dv.rows_in.bytes_mut()[i * row..][..row].copy_from_slice(&e.row(token)?);
                let at = v.at(plan.residual, i);
                gpu.copy_from_pinned(&dv.rows_in, i * row, dev(at.buf)?, at.offset as usize, row)?;
            }
        }
        match &dv.graph {
            Some(g) => g.launch()?,
            None => {
                let nodes = 0..plan.nodes.len();
                launch_nodes(gpu, module, plan, nodes, &dv.shapes, &place, Pace::Sync)?
            }
        }
        let vocab = plan.vocab * 4;
        let norm = v.norm.expect("checked by VerifyHost::new");
        // Each position's argmax (its step state) instead of its logits, where the plan takes it.
        let argmax = argmax && plan.device_argmax;
        for i in 0..m {
            let (buf, out, len) = match argmax {
                true => (plan.step, &mut dv.states_out, STATE_BYTES),
                false => (plan.logits, &mut dv.logits_out, vocab),
            };
            let at = v.at(buf, i);
            gpu.copy_to_pinned(dev(at.buf)?, at.offset as usize, out, i * len, len)?;
            let at = v.at(norm, i);
            gpu.copy_to_pinned(
                dev(at.buf)?,
                at.offset as usize,
                &mut dv.hidden_out,
                i * row,
                row,
            )?;
        }
        gpu.record(&events[0])?;
        events[0].synchronize()?;
        let hidden = f32s(dv.hidden_out.bytes(), m * plan.n_embd);
        if argmax {
            let states: &[StepState] =
                bytemuck::cast_slice(&dv.states_out.bytes()[..m * STATE_BYTES]);
            let argmax = states.iter().map(|s| s.next_token).collect();
            return Ok(Columns {
                logits: Vec::new(),
                hidden,
                argmax: Some(argmax),
            });
        }
        Ok(Columns {
            logits: f32s(dv.logits_out.bytes(), m * plan.vocab),
            hidden,
            argmax: None,
        })
    }
}
