//! The output head: greedy next-token choice and the step-state advance, either after a plain
//! lm_head gemv ([`ARGMAX_STEP`] over the logits) or fused into it (`gemv_argmax_*` folding each
//! row into a 64-bit atomic maximum, the advance in its last block).

use super::{signature, Kernel, KernelDesc};

/// Threads of the single [`ARGMAX_STEP`] block.
pub const ARGMAX_THREADS: u32 = 1024;

/// `argmax_step(logits: *const f32, state: *mut StepState, n: u32)`: the index of the largest
/// of `n ≥ 1` logits (lowest index on ties, NaN below every number) becomes
/// `StepState.next_token` and `StepState.token`; `pos` and `steps_done` grow by one. It keeps
/// nothing between launches, so a replayed graph needs no reset. One block; one item.
pub const ARGMAX_STEP: Kernel<ArgmaxStepArgs> =
    Kernel::new("argmax_step", [ARGMAX_THREADS, 1, 1], 1, 0);

signature! {
    /// The arguments of [`ARGMAX_STEP`].
    ArgmaxStepArgs { logits: ptr, state: ptr, n: u32 }
}

signature! {
    /// The arguments of the `gemv_argmax_*` kernels (`crate::weight_types::GemvType::argmax`).
    GemvArgmaxArgs {
        w: ptr,
        x: ptr,
        y: ptr,
        ncols: u32,
        nrows: u32,
        acc: ptr,
        state: ptr,
        count: ptr,
    }
}

/// The descriptor of a `gemv_argmax_*` kernel (`crate::weight_types::GemvType::argmax`):
/// `(w, x, y, ncols, nrows, acc: *mut u64, state: *mut StepState, count: *mut u32)`, the plain
/// gemv of the type (same grid: an item is a warp), each row also folded into `*acc` as the
/// key `orderable(logit) << 32 | !row` by `red.global.max.u64`. The block that finishes last
/// turns `*acc` into the next token as [`ARGMAX_STEP`] does (`next_token` and `token`; `pos`
/// and `steps_done` grow by one) and sets `*acc` back to 0. `*acc` must be 0 before; `count`
/// is a done counter (see [`super::KernelDesc`]): 0 before and after every launch.
pub(crate) const fn gemv_argmax_kernel(name: &'static str) -> Kernel<GemvArgmaxArgs> {
    super::gemv::gemv_kernel(name)
}

signature! {
    /// The arguments of the [`GEMV_ARGMAX_COLS_Q6K`] kernels; every stride in bytes.
    GemvArgmaxColsArgs {
        w: ptr,
        x: ptr,
        y: ptr,
        acc: ptr,
        state: ptr,
        count: ptr,
        ncols: u32,
        nrows: u32,
        x_stride: u32,
        y_stride: u32,
        acc_stride: u32,
        state_stride: u32,
    }
}

/// `gemv_argmax_colsM_T_q8_1(w, x, y, acc, state, count, ncols, nrows, x_stride, y_stride,
/// acc_stride, state_stride)`, `M` = 2, 3, 4 ([`GEMV_ARGMAX_COLS_MIN`] + index) per lm_head type
/// `T` ([`GEMV_ARGMAX_COLS_Q6K`], the llama.cpp mixes' head, and [`GEMV_ARGMAX_COLS_Q8_0`]; by
/// type: `crate::weight_types::GemvType::argmax_cols`): the `gemv_argmax_*` kernel of `T` on `M`
/// columns, a speculative verify's head. Column `c` reads its q8_1 activation at
/// `x + c·x_stride` and writes its logits at `y + c·y_stride`, its key at `acc + c·acc_stride`
/// and its step state at `state + c·state_stride` (each as the one-column kernel does: every key
/// 0 before, the last block turns each into its column's next token and resets it); `count` is
/// the launch's one done counter. The plain gemv's launch shape (an item is a warp); each
/// column's logits and token are the one-column kernel's bits; the weights stream from DRAM once
/// for all columns. The block stages every column: `M·ncols/32 ≤` [`super::GEMV_STAGE_BLOCKS`].
pub const GEMV_ARGMAX_COLS_Q6K: [Kernel<GemvArgmaxColsArgs>; 3] = [
    super::gemv::gemv_kernel("gemv_argmax_cols2_q6k_q8_1"),
    super::gemv::gemv_kernel("gemv_argmax_cols3_q6k_q8_1"),
    super::gemv::gemv_kernel("gemv_argmax_cols4_q6k_q8_1"),
];

/// [`GEMV_ARGMAX_COLS_Q6K`] for Q8_0 heads.
pub const GEMV_ARGMAX_COLS_Q8_0: [Kernel<GemvArgmaxColsArgs>; 3] = [
    super::gemv::gemv_kernel("gemv_argmax_cols2_q8_0_q8_1"),
    super::gemv::gemv_kernel("gemv_argmax_cols3_q8_0_q8_1"),
    super::gemv::gemv_kernel("gemv_argmax_cols4_q8_0_q8_1"),
];

/// Columns of each type's first multi-column head kernel.
pub const GEMV_ARGMAX_COLS_MIN: usize = 2;

/// The kernels of this family.
pub const ALL: &[KernelDesc] = &[
    ARGMAX_STEP.desc,
    GEMV_ARGMAX_COLS_Q6K[0].desc,
    GEMV_ARGMAX_COLS_Q6K[1].desc,
    GEMV_ARGMAX_COLS_Q6K[2].desc,
    GEMV_ARGMAX_COLS_Q8_0[0].desc,
    GEMV_ARGMAX_COLS_Q8_0[1].desc,
    GEMV_ARGMAX_COLS_Q8_0[2].desc,
];
