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

/// The kernels of this family.
pub const ALL: &[KernelDesc] = &[ARGMAX_STEP.desc];
