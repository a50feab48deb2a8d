//! The speculative verify on the device (`Decoder::forward_rows` of 2 to
//! [`crate::MAX_VERIFY_COLUMNS`] positions with every position's logits): the [`VerifyPlan`]s the
//! simulator runs (`graph/tests/sim_verify.rs` proves them bit for bit the decode steps'), on the
//! decode plan's weights and latent caches ([`crate::exec::shared_buffers`]) and their own
//! activations and step states. Planned at load; a width's activations are allocated at its
//! first verify (a few MiB at most: `m` copies of the decode plan's activations), its graph
//! captured then (never in eager mode).
//!
//! A verify: the `m` StepStates (and, without a fetch kernel, the embedding rows) uploaded
//! through pinned memory, one replay, every position's logits and final hidden state copied
//! back, one wait. The host then holds what `forward_rows` returns; the decode plan's own step
//! state is untouched (the next decode step writes it).

use ingot_abi::launch::KernelDesc;
use ingot_cuda::{Graph, LaunchShape, PinnedBuffer};

use super::prefill::Slot;
use crate::error::ExecError;
use crate::plan::Plan;
use crate::planner::verify::{verify_plans, VerifyPlan};

/// The verify plans of 2 to [`crate::MAX_VERIFY_COLUMNS`] positions as the host holds them (index
/// `m - 2`).
pub(super) struct VerifyHost {
    plans: Vec<HostPlan>,
}

/// One width's plan, its nodes' descriptors, and for each of its buffers the decode plan's
/// buffer it is ([`crate::exec::shared_buffers`]).
pub(super) type HostPlan = (VerifyPlan, Vec<&'static KernelDesc>, Vec<Option<usize>>);

impl VerifyHost {
    /// The plans of `decode`, checked against the committed PTX, or why there are none (an
    /// expert cache, a decode plan without `act.norm`).
    pub(super) fn new(decode: &Plan) -> Result<Result<Self, String>, ExecError> {
        let verifies = match verify_plans(decode) {
            Ok(v) => v,
            Err(why) => return Ok(Err(why)),
        };
        let mut plans = Vec::new();
        for v in verifies {
            let descs = v.plan.check_committed()?;
            let twins = crate::exec::shared_buffers(decode, &v.plan)?;
            plans.push((v, descs, twins));
        }
        Ok(Ok(VerifyHost { plans }))
    }

    pub(super) fn get(&self, m: usize) -> Option<&HostPlan> {
        self.plans.get(m.checked_sub(2)?)
    }
}

/// One width's verify on the device.
pub(super) struct DevVerify {
    pub(super) slots: Vec<Slot>,
    pub(super) shapes: Vec<LaunchShape>,
    pub(super) graph: Option<Graph>,
    /// Host staging: the step states and embedding rows in, the logits (or the step states)
    /// and hidden states out.
    pub(super) states_in: PinnedBuffer,
    pub(super) rows_in: PinnedBuffer,
    pub(super) logits_out: PinnedBuffer,
    pub(super) states_out: PinnedBuffer,
    pub(super) hidden_out: PinnedBuffer,
}

/// What one verify returns, position-major: each position's final hidden state, and its logits
/// or (asked for, with a device argmax) its argmax, `logits` then empty.
pub(super) struct Columns {
    pub(super) logits: Vec<f32>,
    pub(super) hidden: Vec<f32>,
    pub(super) argmax: Option<Vec<u32>>,
}
