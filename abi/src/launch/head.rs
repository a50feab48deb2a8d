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

macro_rules! gemv_argmax {
    ($desc:ident, $name:literal, $ty:literal) => {
        #[doc = concat!("`", $name, "(w, x, y, ncols, nrows, acc: *mut u64)`: the plain ", $ty,
            " gemv (same grid: an item is a warp), each row also folded into `*acc` as the key ",
            "`orderable(logit) << 32 | !row` by `red.global.max.u64`. `*acc` must be 0 before; ",
            "[`ARGMAX_FINISH`] consumes and resets it.")]
        pub const $desc: KernelDesc = KernelDesc {
            name: $name,
            params: GEMV_ARGMAX_PARAMS,
            block: [GEMV_BLOCK_WARPS * WARP_SIZE, 1, 1],
            items_per_block: GEMV_BLOCK_WARPS,
            shared_bytes: 0,
        };
    };
}

gemv_argmax!(GEMV_ARGMAX_Q8_0_Q8_1, "gemv_argmax_q8_0_q8_1", "Q8_0");
gemv_argmax!(GEMV_ARGMAX_Q4K_Q8_1, "gemv_argmax_q4k_q8_1", "Q4_K");
gemv_argmax!(GEMV_ARGMAX_Q5K_Q8_1, "gemv_argmax_q5k_q8_1", "Q5_K");
gemv_argmax!(GEMV_ARGMAX_Q6K_Q8_1, "gemv_argmax_q6k_q8_1", "Q6_K");

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
pub const ALL: &[KernelDesc] = &[
    ARGMAX_STEP,
    GEMV_ARGMAX_Q8_0_Q8_1,
    GEMV_ARGMAX_Q4K_Q8_1,
    GEMV_ARGMAX_Q5K_Q8_1,
    GEMV_ARGMAX_Q6K_Q8_1,
    ARGMAX_FINISH,
];
