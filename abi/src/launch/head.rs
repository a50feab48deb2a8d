//! The output head: greedy next-token choice and the step-state advance, either after a plain
//! lm_head gemv ([`ARGMAX_STEP`] over the logits) or fused into it (`GEMV_ARGMAX_*` folding each
//! row into a 64-bit atomic maximum, then [`ARGMAX_FINISH`]).

use super::{ptr, u32_, KernelDesc, GEMV_BLOCK_WARPS, WARP_SIZE};

/// Threads of the single [`ARGMAX_STEP`] block.
pub const ARGMAX_THREADS: u32 = 1024;

/// `argmax_step(logits: *const f32, state: *mut StepState, n: u32)`: the index of the largest
/// of `n ≥ 1` logits (lowest index on ties, NaN below every number) becomes
/// `StepState.next_token` and `StepState.token`; `pos` and `steps_done` grow by one. It keeps
/// nothing between launches, so a replayed graph needs no reset. One block; one item.
pub const ARGMAX_STEP: KernelDesc = KernelDesc {
    name: "argmax_step",
    params: &[ptr("logits"), ptr("state"), u32_("n")],
    block: [ARGMAX_THREADS, 1, 1],
    items_per_block: 1,
    shared_bytes: 0,
};

const GEMV_ARGMAX_PARAMS: &[super::Param] = &[
    ptr("w"),
    ptr("x"),
    ptr("y"),
    u32_("ncols"),
    u32_("nrows"),
    ptr("acc"),
];

/// The descriptor of a `gemv_argmax_*` kernel (`crate::weight_types::GemvType::argmax`):
/// `(w, x, y, ncols, nrows, acc: *mut u64)`, the plain gemv of the type (same grid: an item is a
/// warp), each row also folded into `*acc` as the key `orderable(logit) << 32 | !row` by
/// `red.global.max.u64`. `*acc` must be 0 before; [`ARGMAX_FINISH`] consumes and resets it.
pub(crate) const fn gemv_argmax_desc(name: &'static str) -> KernelDesc {
    KernelDesc {
        name,
        params: GEMV_ARGMAX_PARAMS,
        block: [GEMV_BLOCK_WARPS * WARP_SIZE, 1, 1],
        items_per_block: GEMV_BLOCK_WARPS,
        shared_bytes: 0,
    }
}

/// `argmax_finish(acc: *mut u64, state: *mut StepState)`: the token in the key `*acc` becomes
/// `next_token` and `token`, `pos` and `steps_done` grow by one, and `*acc` is reset to 0. One
/// thread; one item.
pub const ARGMAX_FINISH: KernelDesc = KernelDesc {
    name: "argmax_finish",
    params: &[ptr("acc"), ptr("state")],
    block: [1, 1, 1],
    items_per_block: 1,
    shared_bytes: 0,
};

/// The kernels of this family.
pub const ALL: &[KernelDesc] = &[ARGMAX_STEP, ARGMAX_FINISH];
