//! Mixture-of-experts FFN: expert routing, the fused gate/up/SwiGLU pass over the selected and
//! shared experts, and the weighted down projection with the residual add
//! (docs/decode-math.md#moe-ffn).
//!
//! The routing result lives in device memory as an [`ExpertSelection`]: the later kernels read
//! the expert ids and weights from it, never from launch arguments, so a captured graph replays
//! unchanged token after token.

use super::{signature, Kernel, KernelDesc, WARP_SIZE};

/// Most experts a router may choose per token (`expert_used_count`; V2-Lite 6, V3 and
/// Kimi-K2 8, GLM-4.7-Flash 4). The router keeps choice `r` in lane `r`, so this may not pass
/// `WARP_SIZE`.
pub const MAX_EXPERTS_USED: usize = 16;
/// Most routed experts a layer may have (`expert_count`; V2-Lite 64, V3 256, Kimi-K2 384). The
/// router holds `ROUTER_MAX_EXPERTS / WARP_SIZE` (16) scores per lane in registers.
pub const ROUTER_MAX_EXPERTS: u32 = 512;
/// Most expert groups (`expert_group_count`): the router keeps one group score per lane.
pub const ROUTER_MAX_GROUPS: u32 = WARP_SIZE;

/// The router's output, one per token: `ids[i]` / `weights[i]` for `i < n_used`, in selection
/// order (best first). Entries past `n_used` are left as they were. 128 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ExpertSelection {
    /// Routed expert index, `< n_expert`.
    pub ids: [u32; MAX_EXPERTS_USED],
    /// Gating weight of `ids[i]` after normalization and scaling.
    pub weights: [f32; MAX_EXPERTS_USED],
}

const _: () = assert!(core::mem::size_of::<ExpertSelection>() == 128);
const _: () = assert!(MAX_EXPERTS_USED <= WARP_SIZE as usize);
const _: () = assert!(ROUTER_MAX_EXPERTS.is_multiple_of(WARP_SIZE));

/// Router flag: sigmoid gating (V3) instead of softmax (V2).
pub const ROUTE_SIGMOID: u32 = 1;
/// Router flag: add `bias[e]` (V3 `exp_probs_b`) to the scores used for selection only.
pub const ROUTE_BIAS: u32 = 2;
/// Router flag: divide the chosen weights by their sum (`expert_weights_norm`).
pub const ROUTE_NORMALIZE: u32 = 4;

/// `moe_route(logits: *const f32, bias: *const f32, sel: *mut ExpertSelection, n_expert: u32,
/// n_used: u32, n_group: u32, n_group_used: u32, flags: u32, scale: f32)`.
///
/// Scores `softmax(logits)` (or `sigmoid`, flag [`ROUTE_SIGMOID`]); selection scores add `bias`
/// when flag [`ROUTE_BIAS`] is set (`bias` is never read otherwise); with `n_group > 1` only the
/// `n_group_used` best groups of `n_expert / n_group` consecutive experts stay eligible (a group
/// scores the sum of its two best selection scores with sigmoid gating, as DeepSeek-V3; its best
/// one with softmax, as HF DeepSeek-V2: llama.cpp uses the top-2 sum for both); the `n_used` best
/// eligible experts are chosen, lower index first on equal scores; their unbiased scores are
/// renormalized (flag [`ROUTE_NORMALIZE`]) and multiplied by `scale`. One warp; the single item is
/// the token.
pub const MOE_ROUTE: Kernel<MoeRouteArgs> = Kernel::new("moe_route", [WARP_SIZE, 1, 1], 1, 0);

signature! {
    /// The arguments of [`MOE_ROUTE`].
    MoeRouteArgs {
        logits: ptr,
        bias: ptr,
        sel: ptr,
        n_expert: u32,
        n_used: u32,
        n_group: u32,
        n_group_used: u32,
        flags: u32,
        scale: f32,
    }
}

/// `moe_route_rows(logits: *const f32, bias: *const f32, rows: *const u32, sel: *mut
/// ExpertSelection, n_expert, n_used, n_group, n_group_used, flags, scale, ntok)`: [`MOE_ROUTE`]
/// for the tokens of a prefill chunk: token `t` routes logits row `t` (`n_expert` floats,
/// token-major at stride `n_expert`) into `sel[t]`, the bits [`MOE_ROUTE`] gives for that row
/// (same parameters and requirements). `ntok` (a launch argument) sizes the grid and the
/// buffers; `rows` is one device `u32` holding the chunk's token count `n`, and tokens
/// `t ≥ min(n, ntok)` write nothing, so a graph captured for a bucket of `ntok` tokens runs a
/// chunk of `n ≤ ntok` (as `super::ROPE_KV_Q8_1_ROWS`). One block of one warp per token: an
/// item is a token.
pub const MOE_ROUTE_ROWS: Kernel<MoeRouteRowsArgs> =
    Kernel::new("moe_route_rows", [WARP_SIZE, 1, 1], 1, 0);

signature! {
    /// The arguments of [`MOE_ROUTE_ROWS`].
    MoeRouteRowsArgs {
        logits: ptr,
        bias: ptr,
        rows: ptr,
        sel: ptr,
        n_expert: u32,
        n_used: u32,
        n_group: u32,
        n_group_used: u32,
        flags: u32,
        scale: f32,
        ntok: u32,
    }
}

/// Tokens one [`MOE_ROUTER_LOGITS_ROWS`] warp computes a router row for: each weight chunk is
/// loaded once per tile of this many tokens (eight accumulators per lane, in registers).
pub const ROUTER_ROWS_TOKENS: u32 = 8;
/// Warps per [`MOE_ROUTER_LOGITS_ROWS`] block.
pub const ROUTER_ROWS_WARPS: u32 = 4;

/// Items (warps) of [`MOE_ROUTER_LOGITS_ROWS`]: one per (router row, tile of
/// [`ROUTER_ROWS_TOKENS`] tokens); `None` on u32 overflow.
pub const fn router_logits_rows_items(n_expert: u32, ntok: u32) -> Option<u32> {
    n_expert.checked_mul(ntok.div_ceil(ROUTER_ROWS_TOKENS))
}

/// `moe_router_logits_rows(w: *const f32, x: *const f32, rows: *const u32, logits: *mut f32,
/// ncols, n_expert, ntok)`: the f32 router logits of a prefill chunk, `logits[t][e] =
/// Σ_k W[e][k]·x[t][k]` (`W` `n_expert × ncols`, `x` `ntok × ncols` token-major, `logits`
/// `ntok × n_expert` token-major, `ncols` a multiple of 4): each logit is the bits the f32 gemv
/// of [`MOE_ROUTER_F32`] gives for that token (same per-lane chunks, order and butterfly).
/// Warp `g` computes row `g % n_expert` for tokens `ROUTER_ROWS_TOKENS·(g / n_expert) ..` of
/// the tile; `rows` holds the chunk's token count `n` as for [`MOE_ROUTE_ROWS`], and tokens
/// `t ≥ min(n, ntok)` are not written. An item is a warp: [`router_logits_rows_items`].
pub const MOE_ROUTER_LOGITS_ROWS: Kernel<RouterLogitsRowsArgs> = Kernel::new(
    "moe_router_logits_rows",
    [ROUTER_ROWS_WARPS * WARP_SIZE, 1, 1],
    ROUTER_ROWS_WARPS,
    0,
);

signature! {
    /// The arguments of [`MOE_ROUTER_LOGITS_ROWS`].
    RouterLogitsRowsArgs {
        w: ptr,
        x: ptr,
        rows: ptr,
        logits: ptr,
        ncols: u32,
        n_expert: u32,
        ntok: u32,
    }
}

/// `moe_router_f32(w: *const f32, x: *const f32, logits: *mut f32, bias: *const f32, sel: *mut
/// ExpertSelection, count: *mut u32, ncols: u32, n_expert: u32, n_used: u32, n_group: u32,
/// n_group_used: u32, flags: u32, scale: f32)`: the f32 router gemv `logits = W·x` (`W`
/// `n_expert × ncols` floats, `ncols` a multiple of 4; the thread mapping of
/// [`super::GEMV_F32`]: one warp per row) fused with [`MOE_ROUTE`] (same routing parameters and
/// result in `sel`). Each warp writes its row's logit, then fences (`fence.acq_rel.gpu`) and
/// counts itself in `*count` with one atomic add; the warp that counts last (old value
/// `grid·ROUTER_WARPS − 1`) runs the routing of `moe_route` on all `n_expert` logits and resets
/// `*count` to 0. Invariant: `*count` is 0 before the first launch and 0 after every launch
/// (a replayed graph needs no reset); launches sharing one counter must not overlap. An item
/// is a row.
pub const MOE_ROUTER_F32: Kernel<MoeRouterArgs> = Kernel::new(
    "moe_router_f32",
    [ROUTER_WARPS * WARP_SIZE, 1, 1],
    ROUTER_WARPS,
    0,
);

signature! {
    /// The arguments of [`MOE_ROUTER_F32`].
    MoeRouterArgs {
        w: ptr,
        x: ptr,
        logits: ptr,
        bias: ptr,
        sel: ptr,
        count: ptr,
        ncols: u32,
        n_expert: u32,
        n_used: u32,
        n_group: u32,
        n_group_used: u32,
        flags: u32,
        scale: f32,
    }
}

/// Warps (= router rows) per [`MOE_ROUTER_F32`] block. Two, not the f32 gemv's four: V2-Lite's
/// 64 experts then stream their 512 KB of router rows from 32 SMs instead of 16, and the
/// routing tail is one warp's work however the rows are grouped.
pub const ROUTER_WARPS: u32 = 2;

/// Warps per block of the `moe_gate_up_*` kernels.
pub const MOE_GATE_UP_WARPS: u32 = 8;
/// Output rows per `moe_gate_up_*` block: one q8_1 block of the SwiGLU output, so a block
/// quantizes its own rows and the FFN widths must be multiples of 32.
pub const MOE_GATE_UP_ROWS: u32 = 32;
/// Rows each warp of a `moe_gate_up_*` block computes (gate and up row of each).
pub const MOE_GATE_UP_ROWS_PER_WARP: u32 = MOE_GATE_UP_ROWS / MOE_GATE_UP_WARPS;
const _: () = assert!(MOE_GATE_UP_ROWS.is_multiple_of(MOE_GATE_UP_WARPS));

/// Warps per block of the `moe_down_*` kernels. Eight: the norm tail, which the last block runs
/// alone, has twice the threads of a 4-warp block for the same work (its Σx² keeps the order of
/// 128 threads, `norm_q8::TAIL_ORDER` in the device crate, so its bits do not depend on this),
/// and each block copies the activation stage once for 8 rows instead of 4.
pub const MOE_DOWN_WARPS: u32 = 8;
/// Output rows each `moe_down_*` warp computes. One: a row per warp gives the card twice the
/// warps of two rows per warp (V2-Lite's 2,048 rows: 2,048 warps, 16 resident per SM on an
/// H200 instead of 8, where the warps' latency, not DRAM, bounded the kernel), for about 5%
/// more instructions (the activations come from the block's shared stage, so two rows sharing
/// a warp saved only shared-memory loads). Each row's sum is the same, bit for bit, either way.
pub const MOE_DOWN_ROWS_PER_WARP: u32 = 1;
/// Consecutive output rows one `moe_down_*` block computes (an item is a row).
pub const MOE_DOWN_BLOCK_ROWS: u32 = MOE_DOWN_WARPS * MOE_DOWN_ROWS_PER_WARP;
/// q8_1 blocks a `moe_down_*` block can stage in shared memory ([`moe_down_stage_blocks`]):
/// 18,432 activations, which hold V3's and Kimi-K2's MoE layer (8 slots of 2,048 + 2,048
/// shared), their dense FFN (18,432) and attention output (16,384), and every smaller family
/// member (V2-Lite 6·1,408 + 2,816, GLM-4.7-Flash 4·1,536 + 1,536). 20,736 bytes: a static
/// array, no opt-in above 48 KiB; 4 blocks per SM fit an sm_86's 100 KiB, as many as the
/// V2-Lite kernels' registers allow (3 or 4 blocks of 4 warps at 127 to 144 per thread). 16
/// slots of 2,048 (1,088 blocks, 39 KiB) would also fit 48 KiB but leave 2 blocks per sm_86 SM.
pub const MOE_DOWN_STAGE_BLOCKS: u32 = 576;
/// Bytes of the `moe_down_*` stage: [`MOE_DOWN_STAGE_BLOCKS`] q8_1 blocks of 36 bytes.
pub const MOE_DOWN_STAGE_BYTES: u32 = MOE_DOWN_STAGE_BLOCKS * 36;
const _: () = assert!(
    MOE_DOWN_STAGE_BYTES <= 48 * 1024,
    "more needs an opt-in launch attribute"
);

/// q8_1 blocks of the activations one `moe_down_*` block stages: every routed slot's `ff/32`
/// and the shared experts' `ff_sh/32`, the whole `act` buffer (`ff`, `ff_sh` multiples of 32).
/// A launch needs this ≤ [`MOE_DOWN_STAGE_BLOCKS`]; the launcher and the planner refuse more.
pub const fn moe_down_stage_blocks(n_used: u32, ff: u32, ff_sh: u32) -> u64 {
    (n_used as u64 * ff as u64 + ff_sh as u64) / 32
}

/// Shared-memory bytes the stage of a `moe_down_*` block fills at this shape (of its
/// [`MOE_DOWN_STAGE_BYTES`]).
pub const fn moe_down_stage_bytes(n_used: u32, ff: u32, ff_sh: u32) -> u64 {
    moe_down_stage_blocks(n_used, ff, ff_sh) * 36
}

/// Whether a `moe_down_*` launch of this shape fits its stage.
pub const fn moe_down_stage_fits(n_used: u32, ff: u32, ff_sh: u32) -> bool {
    moe_down_stage_blocks(n_used, ff, ff_sh) <= MOE_DOWN_STAGE_BLOCKS as u64
}

signature! {
    /// The arguments of every `moe_gate_up_*` kernel (`gate_up_kernel`).
    GateUpArgs {
        x: ptr,
        sel: ptr,
        gate: ptr,
        up: ptr,
        gate_sh: ptr,
        up_sh: ptr,
        act: ptr,
        ncols: u32,
        ff: u32,
        n_used: u32,
        ff_sh: u32,
        n_expert: u32,
        layout: u32,
    }
}

signature! {
    /// The arguments of every `moe_gate_up_router_*` kernel (`gate_up_router_kernel`):
    /// [`GateUpArgs`], then the router's ([`RouterPart`]).
    GateUpRouterArgs {
        x: ptr,
        sel: ptr,
        gate: ptr,
        up: ptr,
        gate_sh: ptr,
        up_sh: ptr,
        act: ptr,
        ncols: u32,
        ff: u32,
        n_used: u32,
        ff_sh: u32,
        n_expert: u32,
        layout: u32,
        rw: ptr,
        rx: ptr,
        logits: ptr,
        bias: ptr,
        route_ctl: ptr,
        n_group: u32,
        n_group_used: u32,
        route_flags: u32,
        scale: f32,
    }
}

/// The router's arguments of a `moe_gate_up_router_*` launch ([`GateUpRouterArgs`] after
/// [`GateUpArgs`]'s): [`MOE_ROUTER_F32`]'s `w`, `x`, `logits` and `bias` as `rw`, `rx`,
/// `logits`, `bias`, the [`ROUTE_CTL_WORDS`] control words, and its routing scalars.
#[derive(Clone, Copy, Debug)]
pub struct RouterPart<P> {
    pub rw: P,
    pub rx: P,
    pub logits: P,
    pub bias: P,
    pub route_ctl: P,
    pub n_group: u32,
    pub n_group_used: u32,
    pub route_flags: u32,
    pub scale: f32,
}

impl<P: Copy> GateUpRouterArgs<P> {
    /// The arguments of a fused launch: `g`'s, then the router's `r`.
    pub const fn new(g: GateUpArgs<P>, r: RouterPart<P>) -> Self {
        GateUpRouterArgs {
            x: g.x,
            sel: g.sel,
            gate: g.gate,
            up: g.up,
            gate_sh: g.gate_sh,
            up_sh: g.up_sh,
            act: g.act,
            ncols: g.ncols,
            ff: g.ff,
            n_used: g.n_used,
            ff_sh: g.ff_sh,
            n_expert: g.n_expert,
            layout: g.layout,
            rw: r.rw,
            rx: r.rx,
            logits: r.logits,
            bias: r.bias,
            route_ctl: r.route_ctl,
            n_group: r.n_group,
            n_group_used: r.n_group_used,
            route_flags: r.route_flags,
            scale: r.scale,
        }
    }
}

/// Bytes of one expert-table entry: a `u64` device address (see `gate_up_kernel`).
pub const EXPERT_TABLE_ENTRY_BYTES: u64 = 8;

/// Entry `e` of an identity expert table: where expert `e`'s slab of `slab` bytes starts in a
/// stacked tensor at device address `base` (`[n_expert][rows][cols]`, experts in order).
pub const fn stacked_expert(base: u64, slab: u64, e: u64) -> u64 {
    base + e * slab
}

/// `moe_gate_up_*` `layout` bits, 0: `gate` and `up` are the tables of separate `[ff][ncols]`
/// expert slabs (`ffn_gate_exps`, `ffn_up_exps`).
pub const GATE_UP_SEPARATE: u32 = 0;
/// `moe_gate_up_*` `layout` bit: `gate` is the table of merged `[2·ff][ncols]` expert slabs
/// (`ffn_gate_up_exps`: each expert's `ff` gate rows, then its `ff` up rows); `up` must still be
/// a table of `n_expert` entries (pass `gate`): the kernel loads its entry and does not use it.
pub const GATE_UP_MERGED: u32 = 1;
/// Most experts a `moe_gate_up_router_*` launch routes (V2-Lite, Moonlight and GLM-4.7-Flash
/// have 64): two scores per lane. The routing of more (V3's 256, Kimi-K2's 384) holds up to 48
/// more registers per thread, which the gate/up rows of every block of that launch would pay
/// in occupancy; those models keep the router in its own launch ([`MOE_ROUTER_F32`]) and the
/// plain `moe_gate_up_*` kernels, which hold no router code.
pub const GATE_UP_ROUTER_MAX_EXPERTS: u32 = 64;
/// `route_ctl` words (`u32`) of a `moe_gate_up_router_*` launch.
pub const ROUTE_CTL_WORDS: u32 = 4;
/// `route_ctl` word: the next ticket.
pub const ROUTE_CTL_TICKET: u32 = 0;
/// `route_ctl` word: router warps done.
pub const ROUTE_CTL_COUNT: u32 = 1;
/// `route_ctl` word: selection entries published (`n_used` when the routing is complete).
pub const ROUTE_CTL_READY: u32 = 2;
/// `route_ctl` word: routed blocks that have seen the routing.
pub const ROUTE_CTL_PASSED: u32 = 3;

/// Router blocks of a `moe_gate_up_router_*` launch: `ceil(n_expert / ROUTER_WARPS)`. Warp
/// `w < ROUTER_WARPS` of router block `k` computes router row `k·ROUTER_WARPS + w`, as in
/// [`MOE_ROUTER_F32`], and its other warps have no work: the router's 512 KB (V2-Lite) stream
/// from as many SMs as in that kernel.
pub const fn gate_up_router_blocks(n_expert: u32) -> u32 {
    n_expert.div_ceil(ROUTER_WARPS)
}

/// Items of a `moe_gate_up_*` launch: its `n_used·ff + ff_sh` output rows; `None` on overflow.
pub const fn gate_up_items(n_used: u32, ff: u32, ff_sh: u32) -> Option<u32> {
    match n_used.checked_mul(ff) {
        Some(r) => r.checked_add(ff_sh),
        None => None,
    }
}

/// Items of a `moe_gate_up_router_*` launch: [`gate_up_items`], and [`MOE_GATE_UP_ROWS`] more
/// per router block ([`gate_up_router_blocks`]); `None` on overflow.
pub const fn gate_up_router_items(n_used: u32, ff: u32, ff_sh: u32, n_expert: u32) -> Option<u32> {
    let rows = match gate_up_items(n_used, ff, ff_sh) {
        Some(r) => r,
        None => return None,
    };
    match gate_up_router_blocks(n_expert).checked_mul(MOE_GATE_UP_ROWS) {
        Some(r) => rows.checked_add(r),
        None => None,
    }
}

/// `moe_down_*` `norm` value: no norm tail (`norm_w`, `norm_q8`, `norm_f32`, `count` are never
/// read).
pub const DOWN_NORM_NONE: u32 = 0;
/// `moe_down_*` `norm` value: the last block writes `norm_q8 = q8_1(rmsnorm(y)·norm_w)` and
/// the normalized floats to `norm_f32` (the MoE router's input; one code path for both uses).
pub const DOWN_NORM_Q8_1_F32: u32 = 1;

signature! {
    /// The arguments of every `moe_down_*` kernel (`down_kernel`).
    DownArgs {
        act: ptr,
        sel: ptr,
        down: ptr,
        down_sh: ptr,
        resid: ptr,
        y: ptr,
        nrows: u32,
        ff: u32,
        n_used: u32,
        ff_sh: u32,
        n_expert: u32,
        norm_w: ptr,
        norm_q8: ptr,
        norm_f32: ptr,
        count: ptr,
        norm: u32,
        eps: f32,
    }
}

/// The descriptor of a `moe_gate_up_*` kernel (`crate::weight_types::GemvType::gate_up`):
/// `(x, sel, gate, up, gate_sh, up_sh, act, ncols, ff, n_used, ff_sh, n_expert, layout)`. For
/// slot `k < n_used` (expert `e = sel.ids[k]`) and row `r < ff`,
/// `h = silu(gate[e][r]·x)·(up[e][r]·x)`; for the shared experts (`ff_sh` rows of
/// `gate_sh`/`up_sh`, none if 0) likewise. `x`: `ncols/32` q8_1 blocks; `act` receives `h`
/// quantized to q8_1 (CUDA `s = Σh`): slot `k`'s `ff/32` blocks at block `k·ff/32`, then the
/// shared `ff_sh/32`. An item is an output row: launch `n_used·ff + ff_sh` items
/// ([`gate_up_items`]). `sel` must hold the routing before the launch. The dense FFN is
/// `n_used = 0` with `ff_sh` its width (the tables are then never read).
///
/// **Expert tables.** The routed weight arguments (`gate` and `up` here, `down` of
/// `down_kernel`) are tables of `n_expert` `u64` device addresses ([`EXPERT_TABLE_ENTRY_BYTES`]
/// each): entry `e` is the first byte of expert `e`'s slab (`ff` rows, `2·ff` merged rows
/// ([`GATE_UP_MERGED`]), or `nrows` down rows) wherever it lives. All experts in VRAM: the
/// identity table over the stacked tensor ([`stacked_expert`]), written once at load. Experts
/// beyond VRAM: a VRAM slot or the host-mapped slab, rewritten by the host between steps. A
/// block reads each entry it uses once, outside its row loops, so one entry point serves both.
pub(crate) const fn gate_up_kernel(name: &'static str) -> Kernel<GateUpArgs> {
    Kernel::new(
        name,
        [MOE_GATE_UP_WARPS * WARP_SIZE, 1, 1],
        MOE_GATE_UP_ROWS,
        0,
    )
}

/// The descriptor of a `moe_gate_up_router_*` kernel
/// (`crate::weight_types::GemvType::gate_up_router`): a `moe_gate_up_*` launch
/// ([`gate_up_kernel`], same first 13 parameters and output) that also runs the router
/// ([`MOE_ROUTER_F32`]'s gemv and routing, with `rw`, `rx`, `logits`, `bias` and the routing
/// scalars in its place, `sel` its output; [`RouterPart`]) in [`gate_up_router_blocks`] extra
/// blocks, so the MoE FFN's first half is one launch. Requires `1 ≤ n_used`, `n_expert ≤`
/// [`GATE_UP_ROUTER_MAX_EXPERTS`], `ncols` a multiple of 4; launch [`gate_up_router_items`].
///
/// Blocks claim their work in start order (a ticket, `route_ctl` word [`ROUTE_CTL_TICKET`]):
/// the router's blocks first, then the shared experts' (which need no routing), then the routed
/// slots'. A router warp counts itself in word [`ROUTE_CTL_COUNT`]; the warp that counts last
/// routes, and each lane that stores a selection entry adds 1 to word [`ROUTE_CTL_READY`] with
/// release semantics. A routed block waits until that word is `n_used` (an acquire spin; it only
/// waits on blocks with lower tickets, which have started, so every wait ends), then counts
/// itself in word [`ROUTE_CTL_PASSED`]; the last to pass sets both back to 0. Invariant: the
/// four words are 0 before and after every launch (a replayed graph needs no reset); launches
/// sharing them must not overlap.
pub(crate) const fn gate_up_router_kernel(name: &'static str) -> Kernel<GateUpRouterArgs> {
    Kernel::new(
        name,
        [MOE_GATE_UP_WARPS * WARP_SIZE, 1, 1],
        MOE_GATE_UP_ROWS,
        0,
    )
}

/// The descriptor of a `moe_down_*` kernel (`crate::weight_types::GemvType::down`): `(act, sel,
/// down, down_sh, resid, y, nrows, ff, n_used, ff_sh, n_expert, norm_w, norm_q8, norm_f32, count,
/// norm, eps)`: `y[r] = resid[r] + Σ_k sel.weights[k]·(down[sel.ids[k]][r]·act_k) +
/// down_sh[r]·act_sh`, `act` laid out as the gate/up kernels write it; `down`: the expert table
/// of `[nrows][ff]` slabs (see `gate_up_kernel`), `down_sh`: `[nrows][ff_sh]`. `y` may be
/// `resid`. An item is an output row: launch `nrows` items, [`MOE_DOWN_BLOCK_ROWS`] per block.
/// Routed and shared weights have one type, or a pair of the llama.cpp mixes (routed rows of
/// 1408 fall back to a 32-element type while the shared rows, 2816 = 11·256, keep the k-quant;
/// docs/deepseek2-model.md#quant-mixes).
///
/// Activation stage: each block copies the whole `act` ([`moe_down_stage_blocks`] q8_1 blocks,
/// at most [`MOE_DOWN_STAGE_BLOCKS`]) into shared memory after its grid-dependency wait, and
/// its warps read every slot's activation there, so `act` crosses the memory system once per
/// block instead of once per warp. `act` is read with `ld.global.nc`: no launch may write it.
///
/// Norm tail `(norm_w, norm_q8, norm_f32, count, norm, eps)`: with `norm`
/// [`DOWN_NORM_Q8_1_F32`] (`nrows` a multiple of 32) the block that finishes last also writes
/// the next norm of the updated stream, `norm_q8 = q8_1(y·(1/sqrt(mean(y²) + eps))·norm_w)`
/// (`nrows/32` blocks, as [`super::RMSNORM_Q8_1`]) and the normalized floats to `norm_f32`
/// (`nrows` floats), so the norm after `attn_output` and after the FFN needs no launch of its
/// own. `count` is a done counter (see [`super::KernelDesc`]): 0 before and after every launch.
/// With [`DOWN_NORM_NONE`] there is no tail.
pub(crate) const fn down_kernel(name: &'static str) -> Kernel<DownArgs> {
    Kernel::new(
        name,
        [MOE_DOWN_WARPS * WARP_SIZE, 1, 1],
        MOE_DOWN_BLOCK_ROWS,
        0,
    )
}

/// The kernels of this family (the per-type ones are in `crate::weight_types`).
pub const ALL: &[KernelDesc] = &[
    MOE_ROUTE.desc,
    MOE_ROUTE_ROWS.desc,
    MOE_ROUTER_F32.desc,
    MOE_ROUTER_LOGITS_ROWS.desc,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every family member's MoE layer, dense FFN and attention output (`n_used = 0`) fits the
    /// stage; 16 slots of V3's width do not, and are refused by the launcher and the planner.
    #[test]
    fn the_stage_holds_every_known_shape() {
        // (n_used, ff, ff_sh): V2-Lite, V3 and Kimi-K2, GLM-4.7-Flash; dense FFNs; attention
        // outputs (V3 128 heads of 128, V2-Lite 16 of 128).
        let fit = [
            (6, 1408, 2816),
            (8, 2048, 2048),
            (4, 1536, 1536),
            (0, 0, 10944),
            (0, 0, 18432),
            (0, 0, 16384),
            (0, 0, 2048),
        ];
        for (n_used, ff, ff_sh) in fit {
            assert!(
                moe_down_stage_fits(n_used, ff, ff_sh),
                "{n_used} x {ff} + {ff_sh}"
            );
        }
        assert_eq!(moe_down_stage_blocks(6, 1408, 2816), 352);
        assert_eq!(
            moe_down_stage_bytes(8, 2048, 2048),
            MOE_DOWN_STAGE_BYTES as u64
        );
        assert!(!moe_down_stage_fits(MAX_EXPERTS_USED as u32, 2048, 2048));
        assert!(!moe_down_stage_fits(0, 0, 18464));
        // No u32 overflow inside the count.
        assert!(!moe_down_stage_fits(u32::MAX, u32::MAX, u32::MAX));
    }
}
