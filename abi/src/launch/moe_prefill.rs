//! The mixture-of-experts glue of a prefill chunk of `ntok` tokens, around the expert-grouped
//! products of `crate::weight_types::GemvType::mmq_moe`: the pair list from the router's selections
//! ([`MOE_PAIRS`]), the SwiGLU between the gate/up and the down products ([`MOE_SWIGLU_Q8_1`]),
//! and the weighted sum of each token's expert outputs into the residual ([`MOE_COMBINE`]).
//!
//! One chunk's MoE FFN, every launch reading only device buffers (no host round trip):
//! 1. `moe_router_f32` per token (or the router gemm) → `ntok` [`super::ExpertSelection`]s;
//! 2. [`MOE_PAIRS`] → `expert_start`, `pair_token`, `pair_of`, `pair_self`;
//! 3. `mmq_moe` gate and up (`pair_token`, `pair_self` as `pair_row`, `x` the chunk's normed
//!    q8_1 rows) → `n_pairs × ff` floats each, pair-major (or one `n_pairs × 2·ff` launch over a
//!    merged `ffn_gate_up_exps`);
//! 4. [`MOE_SWIGLU_Q8_1`] → `n_pairs × ff/32` q8_1 blocks, pair-major;
//! 5. `mmq_moe` down with `pair_self` as its `pair_token` and `pair_row` and `ntok = n_pairs`
//!    (its input rows are per pair, already in sorted order) → `n_pairs × n_embd` floats,
//!    pair-major;
//! 6. the shared experts as dense `mmq` launches → `ntok × n_embd` floats, token-major;
//! 7. [`MOE_COMBINE`] → the updated residual stream.

use super::moe::ROUTER_MAX_EXPERTS;
use super::{signature, Kernel, KernelDesc, WARP_SIZE};

/// Threads of the single [`MOE_PAIRS`] block: one per possible expert in its scan.
pub const MOE_PAIRS_THREADS: u32 = ROUTER_MAX_EXPERTS;
/// Warps of the [`MOE_PAIRS`] block; warp `w` counts and places the `w`-th of as many
/// contiguous segments of the choices.
pub const MOE_PAIRS_WARPS: u32 = MOE_PAIRS_THREADS / WARP_SIZE;

/// `moe_pairs(sel: *const ExpertSelection, expert_start: *mut u32, pair_token: *mut u32,
/// pair_of: *mut u32, pair_self: *mut u32, ntok, n_used, n_expert)`: the expert-sorted pair
/// list of a chunk, from `ntok` selections of `n_used` choices each (`n_pairs = ntok·n_used`
/// pairs; choice `j = t·n_used + s` is token `t`'s slot `s`, expert `sel[t].ids[s]`).
///
/// Writes `expert_start[0 ..= n_expert]` (the exclusive prefix sum of the per-expert counts;
/// `expert_start[n_expert] = n_pairs`), `pair_token[p]` (the token of sorted pair `p`),
/// `pair_of[j]` (where choice `j` landed: `pair_token[pair_of[j]] = j / n_used`, so a combine
/// finds each choice's output row) and `pair_self[p] = p` (the identity list: every `mmq_moe`
/// of the FFN takes it as its `pair_row`, for pair-major outputs, and the down projection also
/// as its `pair_token`: its input rows are per pair). Within an expert the
/// pairs keep choice order `j`, i.e. (token, slot) order: a counting sort, stable and
/// independent of scheduling, so every later summation order is fixed.
///
/// An id `≥ n_expert` counts as expert `n_expert − 1` (clamped, as `moe_gate_up_*` and
/// `moe_down_*` clamp): every choice becomes exactly one pair, so all outputs stay in bounds
/// and `pair_of` is a permutation of `0 .. n_pairs`.
///
/// One block ([`MOE_PAIRS_THREADS`] threads, one item: the chunk), no atomics: each warp
/// counts its segment of the choices per expert in a shared-memory row (lanes with equal ids
/// found by one warp vote per id bit), one thread per expert turns the rows into offsets (a
/// prefix over the segments, then a block scan over the experts), and the warps walk their
/// segments again, placing each choice at its offset plus its rank among equal lanes.
pub const MOE_PAIRS: Kernel<MoePairsArgs> =
    Kernel::new("moe_pairs", [MOE_PAIRS_THREADS, 1, 1], 1, 0);

signature! {
    /// The arguments of [`MOE_PAIRS`].
    MoePairsArgs {
        sel: ptr,
        expert_start: ptr,
        pair_token: ptr,
        pair_of: ptr,
        pair_self: ptr,
        ntok: u32,
        n_used: u32,
        n_expert: u32,
    }
}

/// Threads per block of [`MOE_SWIGLU_Q8_1`] and [`MOE_COMBINE`].
pub const MOE_GLUE_THREADS: u32 = 256;
/// Floats each thread of [`MOE_SWIGLU_Q8_1`] and [`MOE_COMBINE`] handles (16-byte loads).
pub const MOE_GLUE_PER_THREAD: u32 = 4;

/// `moe_swiglu_q8_1(gate: *const f32, up: *const f32, act: *mut BlockQ8_1, n_pairs, ff,
/// layout)`: `h[p][i] = silu(gate[p][i])·up[p][i]` (`moe_gate_up_*`'s formula and `silu`)
/// quantized to q8_1 exactly as `quantize_q8_1` quantizes floats (CUDA `s = Σh`): `act` is
/// `n_pairs` rows of `ff/32` blocks, the `x` of the down projection. `gate` and `up` are
/// `n_pairs × ff` floats, pair-major (the two `mmq_moe` outputs); with `layout`
/// [`super::GATE_UP_MERGED`] `gate` is `n_pairs × 2·ff` (pair `p`'s `ff` gate values, then
/// its `ff` up values: one `mmq_moe` over a merged `ffn_gate_up_exps`) and `up` is not read.
/// `ff` a positive multiple of 32. An item is one output value: launch `n_pairs·ff` items.
pub const MOE_SWIGLU_Q8_1: Kernel<MoeSwigluArgs> = Kernel::new(
    "moe_swiglu_q8_1",
    [MOE_GLUE_THREADS, 1, 1],
    MOE_GLUE_THREADS * MOE_GLUE_PER_THREAD,
    0,
);

signature! {
    /// The arguments of [`MOE_SWIGLU_Q8_1`].
    MoeSwigluArgs { gate: ptr, up: ptr, act: ptr, n_pairs: u32, ff: u32, layout: u32 }
}

/// `moe_combine(sel: *const ExpertSelection, pair_of: *const u32, down: *const f32, shared:
/// *const f32, resid: *const f32, y: *mut f32, n_embd, ntok, n_used)`:
/// `y[t][i] = resid[t][i] + ((Σ_s w_s·down[pair_of[t·n_used + s]][i]) + shared[t][i])` with
/// `w_s = sel[t].weights[s]`, the slot sum starting from 0 and adding in slot order `s = 0, 1,
/// …` (each term `w_s·down` rounded, then added): the CPU backend's order, bit for bit. `down`
/// is `n_pairs × n_embd` floats in sorted-pair order (the down `mmq_moe` output), `shared` and
/// `resid` `ntok × n_embd` token-major; `y` may be `resid`. A `pair_of` entry past the pairs
/// reads pair `ntok·n_used − 1` (clamped). `n_embd` a positive multiple of 4. An item is one
/// output float: launch `ntok·n_embd` items.
pub const MOE_COMBINE: Kernel<MoeCombineArgs> = Kernel::new(
    "moe_combine",
    [MOE_GLUE_THREADS, 1, 1],
    MOE_GLUE_THREADS * MOE_GLUE_PER_THREAD,
    0,
);

signature! {
    /// The arguments of [`MOE_COMBINE`].
    MoeCombineArgs {
        sel: ptr,
        pair_of: ptr,
        down: ptr,
        shared: ptr,
        resid: ptr,
        y: ptr,
        n_embd: u32,
        ntok: u32,
        n_used: u32,
    }
}

/// The kernels of this family.
pub const ALL: &[KernelDesc] = &[MOE_PAIRS.desc, MOE_SWIGLU_Q8_1.desc, MOE_COMBINE.desc];
