//! Checked launches of the greedy head (`ingot_abi::launch` family `head`): either the lm_head
//! [`super::gemv::gemv_q8_1`] then [`argmax_step`] over the logits, or the fused
//! [`gemv_argmax_q8_1`], whose last block advances the state; and the fused head on the columns
//! of a speculative verify ([`gemv_argmax_cols_q8_1`]).

use super::gemv::{check, check_rows, GemvType};
use super::{bytes, launch, need, q8_1_bytes, shape, to_u32};
use crate::backend::Accelerator;
use crate::Result;
use ingot_abi::blocks::QK8_1;
use ingot_abi::launch::{
    ArgmaxStepArgs, GemvArgmaxArgs, GemvArgmaxColsArgs, ARGMAX_STEP, GEMV_ARGMAX_COLS_MIN,
    GEMV_STAGE_BLOCKS,
};
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

/// Bytes between consecutive columns' copies of each buffer of [`gemv_argmax_cols_q8_1`].
#[derive(Clone, Copy, Debug)]
pub struct ColumnStrides {
    pub x: usize,
    pub y: usize,
    pub acc: usize,
    pub state: usize,
}

/// [`gemv_argmax_q8_1`] on `m` columns (2 to 4) of one weight stream: column `c` reads its
/// activation at byte `c·strides.x` of `x`, writes its logits at `c·strides.y` of `y`, and folds
/// into its key at `c·strides.acc` of `acc` and advances its state at `c·strides.state` of
/// `state`; `count` is the launch's one done counter. Each column's logits and state are what
/// [`gemv_argmax_q8_1`] gives it alone. A type without the kernel, a stride shorter than its
/// column or misaligned (4 bytes; 8 for `acc`), or columns that overflow the activation stage
/// are a [`crate::KernelError::Shape`] error.
#[allow(clippy::too_many_arguments)]
pub fn gemv_argmax_cols_q8_1<B: Accelerator>(
    b: &mut B,
    ty: GemvType,
    m: usize,
    (w, x, y): (&B::Buf, &B::Buf, &B::Buf),
    (acc, state, count): (&B::Buf, &B::Buf, &B::Buf),
    strides: ColumnStrides,
    (nrows, ncols): (usize, usize),
) -> Result<()> {
    let plain = ty.plain();
    let k = ty.argmax_cols(m).ok_or_else(|| {
        shape(
            plain,
            format!(
                "no {m}-column fused lm_head for {ty:?} (the kernels take {GEMV_ARGMAX_COLS_MIN} \
                 to {} columns of Q6_K or Q8_0)",
                GEMV_ARGMAX_COLS_MIN + 2
            ),
        )
    })?;
    let d = &k.desc;
    let (ncols32, nrows32, warps) = check_rows(d, ty, nrows, ncols)?;
    if m * (ncols / QK8_1) > GEMV_STAGE_BLOCKS as usize {
        return Err(shape(
            d,
            format!(
                "{m} columns of {ncols}: a block stages at most {GEMV_STAGE_BLOCKS} q8_1 blocks"
            ),
        ));
    }
    let state_bytes = size_of::<StepState>();
    let columns = [
        ("x", strides.x, q8_1_bytes(1, ncols), 4),
        ("y", strides.y, bytes(nrows, 4, 1), 4),
        ("acc", strides.acc, Some(8), 8),
        ("state", strides.state, Some(state_bytes), 4),
    ];
    let mut scalars = [0u32; 4];
    for (i, (what, stride, len, align)) in columns.into_iter().enumerate() {
        let len = len.unwrap_or(usize::MAX);
        if stride < len || !stride.is_multiple_of(align) {
            return Err(shape(
                d,
                format!("{what} stride {stride}: a column takes {len} bytes, {align}-aligned"),
            ));
        }
        scalars[i] = to_u32(d, what, stride)?;
    }
    let span = |stride: usize, len: Option<usize>| {
        stride
            .checked_mul(m - 1)
            .zip(len)
            .and_then(|(a, b)| a.checked_add(b))
    };
    need(
        b,
        d,
        "w",
        w,
        bytes(nrows, ncols / ty.block_elems(), ty.block_bytes()),
    )?;
    need(b, d, "x", x, span(strides.x, q8_1_bytes(1, ncols)))?;
    need(b, d, "y", y, span(strides.y, bytes(nrows, 4, 1)))?;
    need(b, d, "acc", acc, span(strides.acc, Some(8)))?;
    need(b, d, "state", state, span(strides.state, Some(state_bytes)))?;
    need(b, d, "count", count, Some(4))?;
    let [x_stride, y_stride, acc_stride, state_stride] = scalars;
    launch(
        b,
        k,
        warps,
        GemvArgmaxColsArgs {
            w,
            x,
            y,
            acc,
            state,
            count,
            ncols: ncols32,
            nrows: nrows32,
            x_stride,
            y_stride,
            acc_stride,
            state_stride,
        },
    )
}
