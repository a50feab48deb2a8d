//! Checked launches of the greedy head (`ingot_abi::launch` family `head`): either the lm_head
//! [`super::gemv::gemv_q8_1`] then [`argmax_step`] over the logits, or the fused
//! [`gemv_argmax_q8_1`], whose last block advances the state.

use super::gemv::{check, GemvType};
use super::{bytes, launch, need, q8_1_bytes, shape, to_u32};
use crate::backend::Accelerator;
use crate::Result;
use ingot_abi::launch::{ArgmaxStepArgs, GemvArgmaxArgs, ARGMAX_STEP};
use ingot_abi::step::StepState;
use std::mem::size_of;

/// Picks the largest of the `n` logits (lowest index on ties, NaN below every number) as
/// `StepState.next_token` and `.token`, and advances `pos` and `steps_done` by one, all on the
/// device.
pub fn argmax_step<B: Accelerator>(
    b: &mut B,
    logits: &B::Buf,
    state: &B::Buf,
    n: usize,
) -> Result<()> {
    let d = &ARGMAX_STEP;
    if n == 0 {
        return Err(shape(d, "n = 0 logits".into()));
    }
    let n32 = to_u32(d, "n", n)?;
    need(b, d, "logits", logits, bytes(n, 4, 1))?;
    need(b, d, "state", state, Some(size_of::<StepState>()))?;
    launch(
        b,
        d,
        1,
        ArgmaxStepArgs {
            logits,
            state,
            n: n32,
        },
    )
}

/// The lm_head gemv `y = W·x` (as [`super::gemv::gemv_q8_1`]) that also folds every row into
/// the 8-byte accumulator `acc`, then, in the launch's last block, turns it into the next token
/// and advances `state` exactly as [`argmax_step`] does. `acc` and the 4-byte done counter
/// `count` must hold 0 (allocate them zeroed once; the launch leaves both at 0). Types without a
/// fused kernel are a [`crate::KernelError::Shape`] error.
pub fn gemv_argmax_q8_1<B: Accelerator>(
    b: &mut B,
    ty: GemvType,
    (w, x, y): (&B::Buf, &B::Buf, &B::Buf),
    (acc, state, count): (&B::Buf, &B::Buf, &B::Buf),
    nrows: usize,
    ncols: usize,
) -> Result<()> {
    let plain = ty.plain();
    let d = ty.argmax().ok_or_else(|| {
        shape(
            plain,
            format!("no fused lm_head argmax for {ty:?}; use gemv_q8_1 and argmax_step"),
        )
    })?;
    let (ncols32, nrows32, warps) = check(b, d, ty, (w, y), nrows, ncols)?;
    need(b, d, "x", x, q8_1_bytes(1, ncols))?;
    need(b, d, "acc", acc, Some(8))?;
    need(b, d, "state", state, Some(size_of::<StepState>()))?;
    need(b, d, "count", count, Some(4))?;
    launch(
        b,
        d,
        warps,
        GemvArgmaxArgs {
            w,
            x,
            y,
            ncols: ncols32,
            nrows: nrows32,
            acc,
            state,
            count,
        },
    )
}
