//! `moe_route`, and `moe_router_f32` (the f32 router gemv fused with it): expert selection for
//! one token from its router logits (docs/decode-math.md#moe-ffn, llama.cpp `build_moe_ffn`,
//! ingot-model's `routing::Router`).
//!
//! Thread mapping: one warp. Expert `e` lives in lane `e % 32`, register slot `e / 32`, so the
//! logits load is coalesced and every per-expert step is a fully unrolled loop over
//! `SLOTS` registers (constant indices only: no local memory), 2, 4, 8 or 16 of them: the
//! fewest that hold the model's experts.
//!
//! Selection compares `order_key`s, a `u32` total order on the scores in which NaN sits below
//! −inf, −0 equals +0, and 0 means "not selectable" (past `n_expert`, or already chosen). Each of
//! the `n_used` rounds takes the warp maximum key, then the lowest expert index holding it, so
//! equal scores go to the lower index, the oracle's tie rule.
//!
//! Precision: softmax and sigmoid use `ex2.approx` and an f32 sum where the oracle works in f64;
//! a score differs from the oracle's by at most about 1e-5 relative (see the test for the band).
//! Given the scores, the weights are bit-identical to the oracle's: the normalizing sum is added
//! in selection order, clamped, divided and scaled as the oracle does.

use crate::gemv::{dot4, f32_row_dot};
use crate::intrinsics::{
    bid, exp, fence_acq_rel_gpu, fence_atom_add_u32_if, global, ld_u32, ld_u32_relaxed, ld_v4_f32,
    nblocks, shfl_idx_f32, shfl_idx_u32, shfl_xor_f32, st_f32, st_u32, tid, warp_max_f32,
    warp_max_u32, warp_min_u32, warp_sum,
};
use core::mem::offset_of;
use ingot_abi::launch::{
    ExpertSelection, ROUTER_MAX_EXPERTS, ROUTER_ROWS_TOKENS, ROUTER_ROWS_WARPS, ROUTER_WARPS,
    ROUTE_BIAS, ROUTE_NORMALIZE, ROUTE_SIGMOID, WARP_SIZE,
};

/// Scores per lane at the largest expert count.
const MAX_SLOTS: usize = (ROUTER_MAX_EXPERTS / WARP_SIZE) as usize;
const _: () = assert!(MAX_SLOTS == 16, "route_any dispatches 2, 4, 8 or 16 slots");

/// llama.cpp clamps the weight sum from below before renormalizing
/// (`ggml_clamp(sum, 6.103515625e-5, inf)`).
const MIN_WEIGHT_SUM: f32 = 6.103_515_6e-5;

/// Key of a score that can still be chosen: larger score, larger key; NaN is 1, below every
/// number (−inf maps to 0x007F_FFFF). 0 is reserved for "not selectable". Selects only, no
/// branches, so the per-slot loops stay small enough to unroll fully (registers, not local
/// memory).
#[inline(always)]
fn order_key(s: f32) -> u32 {
    // −0 and +0 compare equal in the oracle; give them one key.
    let b = if s == 0.0 { 0 } else { s.to_bits() };
    let k = if b & 0x8000_0000 != 0 {
        !b
    } else {
        b | 0x8000_0000
    };
    if s.is_nan() {
        1
    } else {
        k
    }
}

/// The two largest non-NaN values among `v[j]` of the experts `lo <= e < hi` (expert `e` of
/// slot `j` is `32·j + lane`), merged over the warp; `−inf` fills missing places (a group of one
/// expert scores `x + −inf`, as in the oracle).
#[inline(always)]
fn warp_top2<const SLOTS: usize>(v: &[f32; SLOTS], lane: u32, lo: u32, hi: u32) -> (f32, f32) {
    let mut first = f32::NEG_INFINITY;
    let mut second = f32::NEG_INFINITY;
    let mut j = 0;
    while j < SLOTS {
        // Branch-free top-two update; NaN and non-members enter as −inf (ignored).
        let e = j as u32 * WARP_SIZE + lane;
        let x = if e >= lo && e < hi && !v[j].is_nan() {
            v[j]
        } else {
            f32::NEG_INFINITY
        };
        second = second.max(first.min(x));
        first = first.max(x);
        j += 1;
    }
    // The top two of a multiset are the top two of the union of any partition's top twos.
    let mut m = WARP_SIZE / 2;
    while m > 0 {
        let of = shfl_xor_f32(first, m);
        let os = shfl_xor_f32(second, m);
        second = first.min(of).max(second.max(os));
        first = first.max(of);
        m >>= 1;
    }
    (first, second)
}

/// Index of the warp-wide best key (lowest index among equals); the whole warp gets it.
#[inline(always)]
fn warp_argmax<const N: usize>(key: &[u32; N], lane: u32) -> u32 {
    let mut local = 0;
    let mut j = 0;
    while j < N {
        local = local.max(key[j]);
        j += 1;
    }
    let best = warp_max_u32(local);
    let mut idx = u32::MAX;
    let mut j = N;
    while j > 0 {
        j -= 1;
        if key[j] == best {
            idx = j as u32 * WARP_SIZE + lane;
        }
    }
    warp_min_u32(idx)
}

/// See [`ingot_abi::launch::MOE_ROUTE`]. Preconditions (checked by the host launcher):
/// `1 ≤ n_used ≤ min(MAX_EXPERTS_USED, n_expert)`, `n_expert ≤ ROUTER_MAX_EXPERTS`, and when
/// `n_group > 1`: `n_group ≤ ROUTER_MAX_GROUPS`, `n_expert % n_group == 0`,
/// `1 ≤ n_group_used ≤ n_group`. Launch: one block of one warp.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn moe_route(
    logits: *const f32,
    bias: *const f32,
    sel: *mut ExpertSelection,
    n_expert: u32,
    n_used: u32,
    n_group: u32,
    n_group_used: u32,
    flags: u32,
    scale: f32,
) {
    route_any::<MAX_SLOTS>(
        global(logits),
        |a| ld_u32(a),
        tid(),
        bias,
        sel,
        n_expert,
        n_used,
        n_group,
        n_group_used,
        flags,
        scale,
    );
}

/// See [`ingot_abi::launch::MOE_ROUTE_ROWS`]: [`moe_route`] for the tokens of a prefill chunk,
/// block `t` (one warp) routing logits row `t` (`n_expert` floats at stride `n_expert`) into
/// `sel[t]` with the same body, so `sel[t]` is the bits `moe_route` gives for that row. Blocks
/// `t ≥ min(*rows, ntok)` write nothing. Preconditions as for [`moe_route`]. Launch: `ntok`
/// blocks of one warp.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn moe_route_rows(
    logits: *const f32,
    bias: *const f32,
    rows: *const u32,
    sel: *mut ExpertSelection,
    n_expert: u32,
    n_used: u32,
    n_group: u32,
    n_group_used: u32,
    flags: u32,
    scale: f32,
    ntok: u32,
) {
    let tok = bid();
    // Block-uniform: the whole warp leaves together, before any shuffle.
    if tok >= ld_u32(global(rows)).min(ntok) {
        return;
    }
    route_any::<MAX_SLOTS>(
        global(logits) + tok as u64 * n_expert as u64 * 4,
        |a| ld_u32(a),
        tid(),
        bias,
        sel.add(tok as usize),
        n_expert,
        n_used,
        n_group,
        n_group_used,
        flags,
        scale,
    );
}

/// See [`ingot_abi::launch::MOE_ROUTER_LOGITS_ROWS`]: the f32 router logits of a prefill
/// chunk, `logits[t][e] = W[e]·x[t]`. Warp `g` (block `g / ROUTER_ROWS_WARPS`) computes row
/// `g % n_expert` for the `ROUTER_ROWS_TOKENS` tokens of tile `g / n_expert`: lane `l` loads
/// each of its float4 weight chunks `l, l + 32, …` once and adds its dot with every token's
/// chunk into that token's accumulator, in [`f32_row_dot`]'s order (`((a0·b0 + a1·b1) +
/// a2·b2) + a3·b3` per chunk, chunks in order, then the same xor butterfly), so every logit is
/// the bits `gemv_f32` / `moe_router_f32` give for that token. Tokens `t ≥ min(*rows, ntok)`
/// are neither stored nor read: a tile's missing tokens reuse its last live token's row.
/// Launch: `n_expert · ceil(ntok / ROUTER_ROWS_TOKENS)` items (warps).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe_router_logits_rows(
    w: *const f32,
    x: *const f32,
    rows: *const u32,
    logits: *mut f32,
    ncols: u32,
    n_expert: u32,
    ntok: u32,
) {
    const T: usize = ROUTER_ROWS_TOKENS as usize;
    let t = tid();
    let lane = t % WARP_SIZE;
    let g = bid() * ROUTER_ROWS_WARPS + t / WARP_SIZE;
    let live = ld_u32(global(rows)).min(ntok);
    // `n_expert ≥ 1` (launcher); `max(1)` keeps the division trap-free.
    let ne = n_expert.max(1);
    let row = g % ne;
    let first = (g / ne) * ROUTER_ROWS_TOKENS;
    // Warp-uniform: warps past the last tile, or whose tile has no live token, leave.
    if first >= live {
        return;
    }
    let (wg, xg) = (global(w), global(x));
    let wrow = wg + row as u64 * ncols as u64 * 4;
    let xrow = |j: usize| xg + (first + j as u32).min(live - 1) as u64 * ncols as u64 * 4;
    let chunks = ncols / 4;
    let mut acc = [0.0f32; T];
    let mut c = lane;
    while c < chunks {
        let a = ld_v4_f32(wrow + c as u64 * 16);
        let mut j = 0;
        while j < T {
            let b = ld_v4_f32(xrow(j) + c as u64 * 16);
            acc[j] += dot4(a, b);
            j += 1;
        }
        c += WARP_SIZE;
    }
    let lg = global(logits);
    let mut j = 0;
    while j < T {
        let total = warp_sum(acc[j]);
        let tok = first + j as u32;
        if lane == 0 && tok < live {
            st_f32(lg + (tok as u64 * n_expert as u64 + row as u64) * 4, total);
        }
        j += 1;
    }
}

/// See [`ingot_abi::launch::MOE_ROUTER_F32`]: the f32 router gemv, and the warp that finishes
/// last routes. Preconditions as for [`moe_route`], plus `ncols % 4 == 0` and `*count == 0`
/// at launch (it is 0 again when the launch ends). Launch: `n_expert` items (rows).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn moe_router_f32(
    w: *const f32,
    x: *const f32,
    logits: *mut f32,
    bias: *const f32,
    sel: *mut ExpertSelection,
    count: *mut u32,
    ncols: u32,
    n_expert: u32,
    n_used: u32,
    n_group: u32,
    n_group_used: u32,
    flags: u32,
    scale: f32,
) {
    let t = tid();
    let r = Routing {
        bias,
        sel,
        n_expert,
        n_used,
        n_group,
        n_group_used,
        flags,
        scale,
    };
    let row = bid() * ROUTER_WARPS + t / WARP_SIZE;
    let warps = nblocks() * ROUTER_WARPS;
    router_row_then_route::<MAX_SLOTS>(
        global(w),
        global(x),
        ncols,
        global(logits),
        global(count),
        warps,
        row,
        &r,
    );
}

/// The routing parameters of [`moe_route`], and where the selection goes.
pub(crate) struct Routing {
    pub bias: *const f32,
    pub sel: *mut ExpertSelection,
    pub n_expert: u32,
    pub n_used: u32,
    pub n_group: u32,
    pub n_group_used: u32,
    pub flags: u32,
    pub scale: f32,
}

/// The body of [`moe_router_f32`] for one full warp: router row `row` (when `< r.n_expert`)
/// `W[row]·x` into `logits[row]` (global addresses `w`, `x`, `lg`; `ncols % 4 == 0`), then the
/// warp counts itself in the done counter at `count`; the warp that counts last of `warps`
/// routes all the logits into `r.sel` (`r.n_expert ≤ 32·UPTO`, see [`route_any`]) and sets the
/// counter back to 0. Returns whether this warp routed: lane `k < r.n_used` then stored entry
/// `k` of the selection.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn router_row_then_route<const UPTO: usize>(
    w: u64,
    x: u64,
    ncols: u32,
    lg: u64,
    count: u64,
    warps: u32,
    row: u32,
    r: &Routing,
) -> bool {
    let lane = tid() % WARP_SIZE;
    // Warp-uniform; warps past the last row only count themselves.
    if row < r.n_expert {
        let total = f32_row_dot(w, x, ncols, row, lane);
        if lane == 0 {
            st_f32(lg + row as u64 * 4, total);
        }
    }
    // Lane 0 (which stored the logit) fences, publishing it, then counts the warp; the warp
    // that sees every other warp counted reads all the logits after an acquiring fence.
    let old = shfl_idx_u32(fence_atom_add_u32_if(lane == 0, count, 1), 0);
    if old != warps - 1 {
        return false;
    }
    fence_acq_rel_gpu();
    route_any::<UPTO>(
        lg,
        |a| ld_u32_relaxed(a),
        lane,
        r.bias,
        r.sel,
        r.n_expert,
        r.n_used,
        r.n_group,
        r.n_group_used,
        r.flags,
        r.scale,
    );
    // Every warp has counted: nothing else touches the counter in this launch.
    if lane == 0 {
        st_u32(count, 0);
    }
    true
}

/// The routing of [`moe_route`] by one full warp (`lane` its lane), reading the `n_expert`
/// logits at global address `lg` with `load`, in the smallest of 2, 4, 8 or 16 slots per lane
/// that holds `n_expert` (`n_expert ≤ 32·UPTO`; the sizes above `UPTO` are not compiled, so a
/// kernel that routes few experts keeps the registers of few slots). Each size is its own fully
/// unrolled copy, so the routing's serial work scales with the model's experts (V2-Lite's 64: 2
/// slots), not with
/// [`ROUTER_MAX_EXPERTS`]: in `moe_router_f32` it runs as a tail after every other warp, on the
/// step's critical path.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn route_any<const UPTO: usize>(
    lg: u64,
    load: impl Fn(u64) -> u32 + Copy,
    lane: u32,
    bias: *const f32,
    sel: *mut ExpertSelection,
    n_expert: u32,
    n_used: u32,
    n_group: u32,
    n_group_used: u32,
    flags: u32,
    scale: f32,
) {
    macro_rules! route_in {
        ($slots:expr) => {
            route::<{ $slots }>(
                lg,
                load,
                lane,
                bias,
                sel,
                n_expert,
                n_used,
                n_group,
                n_group_used,
                flags,
                scale,
            )
        };
    }
    let slots = n_expert.div_ceil(WARP_SIZE);
    if slots <= 2 || UPTO <= 2 {
        route_in!(2);
    } else if slots <= 4 || UPTO <= 4 {
        route_in!(4);
    } else if slots <= 8 || UPTO <= 8 {
        route_in!(8);
    } else {
        route_in!(MAX_SLOTS);
    }
}

/// [`route_any`] with `SLOTS` scores per lane (`32·SLOTS >= n_expert`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn route<const SLOTS: usize>(
    lg: u64,
    load: impl Fn(u64) -> u32,
    lane: u32,
    bias: *const f32,
    sel: *mut ExpertSelection,
    n_expert: u32,
    n_used: u32,
    n_group: u32,
    n_group_used: u32,
    flags: u32,
    scale: f32,
) {
    // Expert `32·j + lane` of slot `j` exists when it is below `n_expert`; the others keep
    // −inf logits, score 0 and key 0 (never chosen). No per-slot flag array: every slot loop
    // recomputes the bound, which keeps the arrays in registers.
    let exists = |j: usize| j as u32 * WARP_SIZE + lane < n_expert;
    // Gating scores p (the weights), from the logits in place.
    let mut p = [f32::NEG_INFINITY; SLOTS];
    let mut j = 0;
    while j < SLOTS {
        if exists(j) {
            p[j] = f32::from_bits(load(lg + 4 * (j as u32 * WARP_SIZE + lane) as u64));
        }
        j += 1;
    }
    if flags & ROUTE_SIGMOID != 0 {
        let mut j = 0;
        while j < SLOTS {
            p[j] = 1.0 / (1.0 + exp(-p[j]));
            j += 1;
        }
    } else {
        let mut local = f32::NEG_INFINITY;
        let mut j = 0;
        while j < SLOTS {
            local = local.max(p[j]);
            j += 1;
        }
        let max = warp_max_f32(local);
        let mut part = 0.0f32;
        let mut j = 0;
        while j < SLOTS {
            p[j] = if exists(j) { exp(p[j] - max) } else { 0.0 };
            part += p[j];
            j += 1;
        }
        let sum = warp_sum(part);
        let mut j = 0;
        while j < SLOTS {
            p[j] /= sum;
            j += 1;
        }
    }
    // Selection scores s: p plus the bias when there is one.
    let mut s = p;
    if flags & ROUTE_BIAS != 0 {
        let bg = global(bias);
        let mut j = 0;
        while j < SLOTS {
            if exists(j) {
                let e = j as u32 * WARP_SIZE + lane;
                s[j] += f32::from_bits(ld_u32(bg + 4 * e as u64));
            }
            j += 1;
        }
    }

    if n_group > 1 {
        limit_groups(
            &mut s,
            lane,
            n_expert,
            n_group,
            n_group_used,
            flags & ROUTE_SIGMOID != 0,
        );
    }

    // Key 0 (not selectable) past n_expert, by a mask: the loop stays branch-free. Two loops of
    // SLOTS / 2: LLVM unrolls each fully, while one loop of 16 exceeds its full-unroll size
    // budget, stays a loop, and puts `s` and `key` in local memory.
    let mut key = [0u32; SLOTS];
    let mut j = 0;
    while j < SLOTS / 2 {
        key[j] = order_key(s[j]) & (exists(j) as u32).wrapping_neg();
        j += 1;
    }
    while j < SLOTS {
        key[j] = order_key(s[j]) & (exists(j) as u32).wrapping_neg();
        j += 1;
    }

    // Lane r keeps the r-th choice; every lane accumulates the weight sum in selection order.
    let mut my_id = 0u32;
    let mut my_w = 0.0f32;
    let mut sum = 0.0f32;
    let mut r = 0;
    while r < n_used {
        let e = warp_argmax(&key, lane);
        let owner = e % WARP_SIZE;
        // The owner lane takes its weight and marks the expert taken (selects, no branches).
        let mut own_w = 0.0f32;
        let mut j = 0;
        while j < SLOTS {
            let hit = lane == owner && j as u32 == e / WARP_SIZE;
            own_w = if hit { p[j] } else { own_w };
            key[j] = if hit { 0 } else { key[j] };
            j += 1;
        }
        let w = shfl_idx_f32(own_w, owner);
        sum += w;
        my_id = if lane == r { e } else { my_id };
        my_w = if lane == r { w } else { my_w };
        r += 1;
    }

    if flags & ROUTE_NORMALIZE != 0 {
        my_w /= sum.max(MIN_WEIGHT_SUM);
    }
    my_w *= scale;
    if lane < n_used {
        let base = global(sel);
        st_u32(
            base + (offset_of!(ExpertSelection, ids) as u64) + 4 * lane as u64,
            my_id,
        );
        st_f32(
            base + (offset_of!(ExpertSelection, weights) as u64) + 4 * lane as u64,
            my_w,
        );
    }
}

/// Masks to −inf every expert outside the `n_group_used` best-scoring groups (ties: lower group
/// index). A group scores the sum of its two best selection scores when `top_two` (DeepSeek-V3,
/// sigmoid gating), else its best one (HF DeepSeek-V2, softmax gating), as the oracle's
/// `GatingFunc::group_score` does. Group `g` holds experts `g·per_group .. (g+1)·per_group`.
#[inline(always)]
fn limit_groups<const SLOTS: usize>(
    s: &mut [f32; SLOTS],
    lane: u32,
    n_expert: u32,
    n_group: u32,
    n_group_used: u32,
    top_two: bool,
) {
    // The launcher guarantees n_group ≤ n_expert; max(1) keeps the division trap-free anyway.
    let per_group = (n_expert / n_group).max(1);
    // Lane g ends up holding group g's score key.
    let mut gkey = [0u32; 1];
    let mut g = 0;
    while g < n_group {
        let lo = g * per_group;
        let (first, second) = warp_top2(s, lane, lo, lo + per_group);
        if lane == g {
            gkey[0] = order_key(if top_two { first + second } else { first });
        }
        g += 1;
    }
    let mut keep = 0u32;
    let mut r = 0;
    while r < n_group_used {
        let g = warp_argmax(&gkey, lane);
        keep |= 1 << g;
        if lane == g {
            gkey[0] = 0;
        }
        r += 1;
    }
    let mut j = 0;
    while j < SLOTS {
        // An existing expert's group is below n_group ≤ 32; the others are never chosen, and
        // `& 31` keeps their shift in range.
        let group = (j as u32 * WARP_SIZE + lane) / per_group;
        if (keep >> (group & 31)) & 1 == 0 {
            s[j] = f32::NEG_INFINITY;
        }
        j += 1;
    }
}
