//! `moe_gate_up_*`: the first half of a (mixture-of-experts) SwiGLU FFN for one token:
//! `h = silu(gate·x) ⊙ (up·x)` for the rows of every selected expert and of the shared experts,
//! written as q8_1 blocks for the down kernels (docs/decode-math.md#moe-ffn, ik_llama's fused
//! `moe_up_gate`).
//!
//! Thread mapping: a block computes `MOE_GATE_UP_ROWS` = 32 consecutive rows of one expert
//! slot, i.e. exactly one q8_1 output block. Block `b < n_used·ff/32` belongs to routed slot
//! `b / (ff/32)`, whose expert id it reads from the device-resident [`ExpertSelection`]; the
//! remaining blocks cover the shared experts' `ff_sh` rows. Warp `w` computes rows
//! `4w .. 4w+4` of the block, two rows per pass: the gate and up dots of both rows together
//! ([`rows_dot_lane4`], per-type math from `crate::vecdot`; the four row dots share each
//! activation load), reduces them over the warp and puts `h` in shared memory; warp 0 then
//! quantizes the 32 values exactly as `quantize_q8_1` does (`d = amax/127`, `q = roundf(h/d)`,
//! `s = Σh` by the same butterfly), so the down kernel sees what a separate quantize pass would
//! have produced.
//!
//! The activation vector is quantized once, before this kernel, and every block reads it (through
//! the read-only cache). A block finds its expert's gate and up rows through the expert tables
//! (`ingot_abi::launch::moe`: entry `e` is where expert `e`'s slab starts, in the stacked tensor,
//! a VRAM slot or host-mapped memory), one 8-byte load per table and block, outside the row loops;
//! with one merged tensor (`GATE_UP_MERGED`) an expert's up rows follow its `ff` gate rows. Expert
//! ids are clamped to `n_expert − 1`, so a corrupt selection cannot read past the tables.
//!
//! Two entry points per type pair: `moe_gate_up_*` ([`gate_up`]: block `b` is row block `b`,
//! `sel` holds the routing before the launch) and `moe_gate_up_router_*` ([`gate_up_router`]:
//! the router runs in the launch, blocks take tickets, routed blocks wait for the routing).
//! The router's code is compiled into the second only: ptxas sizes a kernel's registers for
//! every path in it, and the first keeps its occupancy for the models that route apart.

use crate::chain::{ticket_at, wait_then_pass};
use crate::intrinsics::{
    bid, f32_to_f16, global, ld_shared_f32, ld_u32, ld_u32_relaxed, ld_u64, red_release_add_u32_if,
    round_away, shfl_idx_u32, silu, st_u32, sts_f32, tid, warp_max_f32, warp_sum,
};
use crate::moe_dot::rows_dot_lane4;
use crate::prefetch::prefetch_then_wait;
use crate::router::{router_row_then_route, Routing};
use crate::vecdot::{self, GlobalAct, WeightType, Q8_BYTES};
use core::arch::{asm, global_asm, nvptx};
use core::mem::offset_of;
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::moe::{
    gate_up_router_blocks, ExpertSelection, GATE_UP_MERGED, GATE_UP_ROUTER_MAX_EXPERTS,
    MOE_GATE_UP_ROWS, MOE_GATE_UP_ROWS_PER_WARP, MOE_GATE_UP_WARPS, ROUTE_CTL_COUNT,
    ROUTE_CTL_PASSED, ROUTE_CTL_READY, ROUTE_CTL_TICKET,
};
use ingot_abi::launch::{ROUTER_WARPS, WARP_SIZE};

const _: () = assert!(MOE_GATE_UP_ROWS == QK8_1 as u32 && MOE_GATE_UP_ROWS == WARP_SIZE);
const _: () = assert!(offset_of!(BlockQ8_1, d) == 0 && offset_of!(BlockQ8_1, s) == 2);
const _: () = assert!(offset_of!(BlockQ8_1, qs) == 4);

const _: () = assert!(
    MOE_GATE_UP_ROWS_PER_WARP.is_multiple_of(2),
    "rows go in pairs"
);

// The block's 32 SwiGLU outputs, row order.
global_asm!(".shared .align 16 .b8 moe_gate_up_h[128];");

#[inline(always)]
unsafe fn h_addr() -> u32 {
    let a: u32;
    asm!("mov.u32 {a}, moe_gate_up_h;", a = out(reg32) a, options(pure, nomem, nostack));
    a
}

/// Quantizes lane `lane`'s value `h` (element `lane` of the block) into the q8_1 block at
/// global address `out`. Bit-identical to `quantize_q8_1` on the same 32 floats (with
/// [`round_away`], not `round_away_i32`: see there).
#[inline(always)]
unsafe fn quantize_block(h: f32, lane: u32, out: u64) {
    let amax = warp_max_f32(h.abs());
    let sum = warp_sum(h);
    let d = amax / 127.0;
    let q = if amax == 0.0 {
        0
    } else {
        round_away(h / d) as i32
    };
    let byte = (q as u32) & 0xFF;
    // Lane 4i gathers bytes 4i..4i+4 and stores them as one word.
    let first = lane & !3;
    let word = shfl_idx_u32(byte, first)
        | (shfl_idx_u32(byte, first + 1) << 8)
        | (shfl_idx_u32(byte, first + 2) << 16)
        | (shfl_idx_u32(byte, first + 3) << 24);
    if lane.is_multiple_of(4) {
        st_u32(out + offset_of!(BlockQ8_1, qs) as u64 + lane as u64, word);
    }
    if lane == 0 {
        st_u32(out, f32_to_f16(d) | (f32_to_f16(sum) << 16));
    }
}

/// Lines each thread prefetches per matrix of a shared block ([`prefetch_then_wait`]): 2 · 256
/// threads · 128 B = 64 KiB, which covers the block's 32 rows up to 2,048 B per row (V2-Lite's
/// 2,048 columns: 1,152 B as Q4_K, 1,680 B as Q6_K). Wider rows are prefetched in part.
pub(crate) const GATE_UP_PREFETCH_LINES: u32 = 2;

/// The arguments every entry point takes (`ingot_abi::launch::moe::GateUpArgs`), pointers as
/// global addresses.
pub(crate) struct GateUp {
    pub x: u64,
    pub sel: u64,
    pub gate: u64,
    pub up: u64,
    pub gate_sh: u64,
    pub up_sh: u64,
    pub act: u64,
    pub ncols: u32,
    pub ff: u32,
    pub n_used: u32,
    pub ff_sh: u32,
    pub n_expert: u32,
    pub layout: u32,
}

/// What a block derives from its arguments before its work (per thread: `t`, `lane`, `warp`).
struct Block {
    t: u32,
    lane: u32,
    warp: u32,
    /// Bytes of a routed row (type `R`).
    row_bytes: u64,
    /// Row blocks per routed slot.
    blocks_per_expert: u32,
    /// Row blocks of the routed slots (`n_used` of them), before the shared experts'.
    routed_blocks: u32,
    /// Bytes of a shared-expert row (type `S` where `MIXED`, else `R`).
    sh_row_bytes: u64,
}

impl GateUp {
    /// Row blocks per routed slot. max(1): ff may be 0 for a dense FFN (n_used = 0); keeps
    /// the divisions by it trap-free.
    #[inline(always)]
    fn blocks_per_expert(&self) -> u32 {
        (self.ff / MOE_GATE_UP_ROWS).max(1)
    }

    /// Row blocks of the routed slots.
    #[inline(always)]
    pub(crate) fn routed_blocks(&self) -> u32 {
        self.n_used * self.blocks_per_expert()
    }

    /// Row blocks of the shared experts.
    #[inline(always)]
    pub(crate) fn shared_blocks(&self) -> u32 {
        self.ff_sh / MOE_GATE_UP_ROWS
    }

    /// Blocks of the router in a `moe_gate_up_router_*` launch.
    #[inline(always)]
    pub(crate) fn router_blocks(&self) -> u32 {
        gate_up_router_blocks(self.n_expert)
    }

    #[inline(always)]
    unsafe fn block<R: WeightType, S: WeightType, const MIXED: bool>(&self) -> Block {
        let t = tid();
        let row_bytes = (self.ncols / R::QK) as u64 * R::UNIT_BYTES;
        let blocks_per_expert = self.blocks_per_expert();
        Block {
            t,
            lane: t % WARP_SIZE,
            warp: t / WARP_SIZE,
            row_bytes,
            blocks_per_expert,
            routed_blocks: self.n_used * blocks_per_expert,
            sh_row_bytes: if MIXED {
                (self.ncols / S::QK) as u64 * S::UNIT_BYTES
            } else {
                row_bytes
            },
        }
    }
}

/// The router a `moe_gate_up_router_*` launch runs first (see `ingot_abi::launch::moe`): its
/// f32 weights `w` and input `x` (global addresses), its logits buffer, the `route_ctl` words,
/// and the routing parameters with `sel` as the output.
pub(crate) struct FusedRouter {
    pub w: u64,
    pub x: u64,
    pub logits: u64,
    pub ctl: u64,
    pub routing: Routing,
}

/// `moe_gate_up_*`: see `ingot_abi::launch::moe` (`MOE_GATE_UP_*`). Preconditions (checked by
/// the host launcher): `ncols` a multiple of `R::QK` and `S::QK`, `ff` and `ff_sh` multiples
/// of 32, grid = `gate_up_items(..) / 32` blocks, `n_expert ≥ 1`. `gate` and `up` are expert
/// tables (`ingot_abi::launch::moe`): `n_expert` addresses of `[ff][ncols]` slabs, or with
/// `GATE_UP_MERGED` of `gate` `[2·ff][ncols]` slabs (`up`'s entry is then loaded but unused).
/// The routed experts' weights are of type `R`, the shared experts' of `S`; `MIXED` is `R ≠ S`
/// (a block reads one type, so the branch between the two is uniform per block; without
/// `MIXED` only `R`'s path exists). Block `b` computes row block `b`: the routed slots' first,
/// then the shared experts'; `sel` holds the routing before the launch.
#[inline(always)]
unsafe fn gate_up<R: WeightType, S: WeightType, const MIXED: bool>(a: &GateUp) {
    let blk = a.block::<R, S, MIXED>();
    let b = bid();
    // A shared block's 32 gate and 32 up rows are known from its index: prefetched before the
    // wait. A routed block's expert id is in `sel`, which the router (the predecessor) writes:
    // nothing of it may be read before the wait, so it prefetches nothing.
    let sh_first =
        b.wrapping_sub(blk.routed_blocks) as u64 * MOE_GATE_UP_ROWS as u64 * blk.sh_row_bytes;
    let sh_bytes = if b < blk.routed_blocks {
        0
    } else {
        MOE_GATE_UP_ROWS as u64 * blk.sh_row_bytes
    };
    let (g_sh, u_sh) = (a.gate_sh + sh_first, a.up_sh + sh_first);
    prefetch_then_wait::<GATE_UP_PREFETCH_LINES, 2>(
        [(g_sh, g_sh + sh_bytes), (u_sh, u_sh + sh_bytes)],
        blk.t,
        MOE_GATE_UP_WARPS * WARP_SIZE,
    );
    row_block::<R, S, MIXED, false>(a, &blk, b);
}

/// `moe_gate_up_router_*`: [`gate_up`] with the router in the launch (see
/// `ingot_abi::launch::moe`; `ncols` also a multiple of 4, `n_used ≥ 1`, `n_expert ≤
/// GATE_UP_ROUTER_MAX_EXPERTS`, grid = `gate_up_router_items(..) / 32` blocks). A block's
/// work is its ticket `k` ([`router_item`]); before the wait it prefetches the rows of the
/// work its index would draw ([`router_spans`]).
#[inline(always)]
unsafe fn gate_up_router<R: WeightType, S: WeightType, const MIXED: bool>(
    a: &GateUp,
    router: &FusedRouter,
) {
    prefetch_then_wait::<GATE_UP_PREFETCH_LINES, 2>(
        router_spans::<R, S, MIXED>(a, router, bid()),
        tid(),
        MOE_GATE_UP_WARPS * WARP_SIZE,
    );
    let k = ticket_at(router.ctl + 4 * ROUTE_CTL_TICKET as u64);
    router_item::<R, S, MIXED>(a, router, k, 0);
}

/// Blocks of a `moe_gate_up_router_*` launch's work: the router's, then the row blocks.
#[inline(always)]
pub(crate) fn router_launch_blocks(a: &GateUp) -> u32 {
    let per_expert = a.blocks_per_expert();
    a.router_blocks() + a.shared_blocks() + a.n_used * per_expert
}

/// The spans a block prefetches before its wait when its index `guess` is the ticket it would
/// draw (blocks mostly start in index order; a line prefetched for another block's rows is
/// still read by the launch): a router block's f32 rows, a shared block's 32 gate and 32 up
/// rows; a routed block's expert id is the router's output, so it prefetches nothing, nor
/// does a `guess` past the launch's work.
#[inline(always)]
pub(crate) unsafe fn router_spans<R: WeightType, S: WeightType, const MIXED: bool>(
    a: &GateUp,
    router: &FusedRouter,
    guess: u32,
) -> [(u64, u64); 2] {
    let sh_row_bytes = a.block::<R, S, MIXED>().sh_row_bytes;
    let (router_blocks, shared_blocks) = (a.router_blocks(), a.shared_blocks());
    let router_guess = guess < router_blocks;
    let j = guess.wrapping_sub(router_blocks);
    let sh_guess = !router_guess && j < shared_blocks;
    let sh_first = j as u64 * MOE_GATE_UP_ROWS as u64 * sh_row_bytes;
    let sh_bytes = if sh_guess {
        MOE_GATE_UP_ROWS as u64 * sh_row_bytes
    } else {
        0
    };
    let (g_sh, u_sh) = (a.gate_sh + sh_first, a.up_sh + sh_first);
    // A router block's rows: `ROUTER_WARPS` f32 rows of `ncols`, from row
    // `ROUTER_WARPS·guess`, in the span of `gate_sh`'s place.
    let rw_bytes = a.ncols as u64 * 4;
    let rw_first = router.w + (guess * ROUTER_WARPS) as u64 * rw_bytes;
    let rw_rows = a
        .n_expert
        .saturating_sub(guess * ROUTER_WARPS)
        .min(ROUTER_WARPS);
    let first_span = if router_guess {
        (rw_first, rw_first + rw_rows as u64 * rw_bytes)
    } else {
        (g_sh, g_sh + sh_bytes)
    };
    [first_span, (u_sh, u_sh + sh_bytes)]
}

/// The work of ticket `k` (below [`router_launch_blocks`]): router block `k` for the first
/// `router_blocks` tickets, then the row blocks of [`gate_up`], the shared experts' first (`b`
/// = `routed_blocks + k − router_blocks`), the routed slots' last, so the output is the bits of
/// the unfused launch. A routed block waits for the routing before it reads `sel`, counted in
/// word `ROUTE_CTL_PASSED` among `routed_blocks + extra_waiters` blocks (`extra_waiters`: the
/// launch's other blocks that wait for the routing). Some of a router block's warps return at
/// once: the caller must not meet them at a barrier after a router block's work.
#[inline(always)]
pub(crate) unsafe fn router_item<R: WeightType, S: WeightType, const MIXED: bool>(
    a: &GateUp,
    router: &FusedRouter,
    k: u32,
    extra_waiters: u32,
) {
    let blk = a.block::<R, S, MIXED>();
    let routed_blocks = blk.routed_blocks;
    let (router_blocks, shared_blocks) = (a.router_blocks(), a.shared_blocks());
    if k < router_blocks {
        // Warp-uniform: the warps beyond `ROUTER_WARPS` have no router row.
        if blk.warp >= ROUTER_WARPS {
            return;
        }
        let ctl = router.ctl;
        let routed = router_row_then_route::<FUSED_SLOTS>(
            router.w,
            router.x,
            a.ncols,
            router.logits,
            ctl + 4 * ROUTE_CTL_COUNT as u64,
            router_blocks * ROUTER_WARPS,
            k * ROUTER_WARPS + blk.warp,
            &router.routing,
        );
        // Each lane that stored an entry publishes it: `n_used` release adds in all.
        let publish = routed && blk.lane < a.n_used;
        red_release_add_u32_if(publish, ctl + 4 * ROUTE_CTL_READY as u64, 1);
        return;
    }
    let j = k - router_blocks;
    let b = if j < shared_blocks {
        routed_blocks + j
    } else {
        j - shared_blocks
    };
    if b < routed_blocks {
        wait_for_routing(router.ctl, a.n_used, routed_blocks + extra_waiters);
    }
    row_block::<R, S, MIXED, true>(a, &blk, b);
}

/// Thread 0 waits for the router's lanes to publish all `n_used` selection entries in word
/// `ROUTE_CTL_READY` of `ctl`, counted among `waiters` blocks ([`wait_then_pass`]).
#[inline(always)]
pub(crate) unsafe fn wait_for_routing(ctl: u64, n_used: u32, waiters: u32) {
    let (ready, passed) = (ROUTE_CTL_READY as u64, ROUTE_CTL_PASSED as u64);
    wait_then_pass(ctl + 4 * ready, n_used, ctl + 4 * passed, waiters);
}

/// Row block `b` of the launch, by the threads of `blk`: the 32 SwiGLU values of routed slot
/// `b / blocks_per_expert` (below `routed_blocks`) or of the shared experts' rows, quantized
/// into q8_1 block `b` of `act`. `FUSED`: another block of this launch wrote `sel` (read with
/// a relaxed load after the wait), else it was written before the launch (read-only cache).
#[inline(always)]
unsafe fn row_block<R: WeightType, S: WeightType, const MIXED: bool, const FUSED: bool>(
    a: &GateUp,
    blk: &Block,
    b: u32,
) {
    let (lane, warp) = (blk.lane, blk.warp);
    let (blocks_per_expert, routed_blocks) = (blk.blocks_per_expert, blk.routed_blocks);
    let routed = b < routed_blocks;
    let (g_base, u_base, first_row) = if routed {
        let slot = b / blocks_per_expert;
        // One lane reads the id and broadcasts it: one 4-byte request per warp.
        let id = if lane == 0 {
            let p = a.sel + offset_of!(ExpertSelection, ids) as u64 + 4 * slot as u64;
            if FUSED {
                ld_u32_relaxed(p)
            } else {
                ld_u32(p)
            }
        } else {
            0
        };
        let e = shfl_idx_u32(id, 0).min(a.n_expert - 1) as u64;
        // Entry e of each table is the first byte of expert e's slab, wherever it lives;
        // merged, its up rows follow its `ff` gate rows. Both entries are loaded whatever the
        // layout, so the layout is a select, not a branch (a branch around the up load cost up
        // to 16 registers on sm_86).
        let (g, u) = (ld_u64(a.gate + 8 * e), ld_u64(a.up + 8 * e));
        let u = if a.layout & GATE_UP_MERGED != 0 {
            g + a.ff as u64 * blk.row_bytes
        } else {
            u
        };
        (g, u, (b % blocks_per_expert) * MOE_GATE_UP_ROWS)
    } else {
        (a.gate_sh, a.up_sh, (b - routed_blocks) * MOE_GATE_UP_ROWS)
    };
    let first = first_row + warp * MOE_GATE_UP_ROWS_PER_WARP;
    if MIXED && !routed {
        swiglu_rows::<S>(a.x, g_base, u_base, first, a.ncols, lane, warp);
    } else {
        swiglu_rows::<R>(a.x, g_base, u_base, first, a.ncols, lane, warp);
    }
    nvptx::_syncthreads();
    if warp == 0 {
        let v = ld_shared_f32(h_addr() + 4 * lane);
        quantize_block(v, lane, a.act + b as u64 * Q8_BYTES);
    }
}

/// Scores per lane of the fused routing (`GATE_UP_ROUTER_MAX_EXPERTS`).
const FUSED_SLOTS: usize = (GATE_UP_ROUTER_MAX_EXPERTS / WARP_SIZE) as usize;

/// Warp `warp`'s `MOE_GATE_UP_ROWS_PER_WARP` SwiGLU values, rows `first..` of the gate and up
/// matrices at `g_base` and `u_base` (rows of `ncols` weights of `T`), into the block's shared
/// `h`. Two passes over x, each computing the gate and up dots of two rows (four row dots
/// sharing every activation load). Four rows in one pass would halve the activation reads
/// again but needs up to 255 registers and spills for the pair types.
#[inline(always)]
unsafe fn swiglu_rows<T: WeightType>(
    x: u64,
    g_base: u64,
    u_base: u64,
    first: u32,
    ncols: u32,
    lane: u32,
    warp: u32,
) {
    let nunits = ncols / T::QK;
    let row_bytes = nunits as u64 * T::UNIT_BYTES;
    let h = h_addr();
    let mut pass = 0;
    while pass < MOE_GATE_UP_ROWS_PER_WARP / 2 {
        let r = first + 2 * pass;
        let (r0, r1) = (r as u64 * row_bytes, (r + 1) as u64 * row_bytes);
        let p = rows_dot_lane4::<T, GlobalAct>(
            &[g_base + r0, u_base + r0, g_base + r1, u_base + r1],
            &[GlobalAct(x); 4],
            nunits,
            lane,
        );
        let h0 = silu(warp_sum(p[0])) * warp_sum(p[1]);
        let h1 = silu(warp_sum(p[2])) * warp_sum(p[3]);
        if lane == 0 {
            let slot = warp * MOE_GATE_UP_ROWS_PER_WARP + 2 * pass;
            sts_f32(h + 4 * slot, h0);
            sts_f32(h + 4 * (slot + 1), h1);
        }
        pass += 1;
    }
}

const _: () = assert!(MOE_GATE_UP_WARPS * MOE_GATE_UP_ROWS_PER_WARP == MOE_GATE_UP_ROWS);

// The `FusedRouter` of a router entry point's parameters.
macro_rules! fused_router {
    (
        $rw:ident, $rx:ident, $logits:ident, $ctl:ident, $bias:ident, $sel:ident,
        $n_expert:ident, $n_used:ident, $n_group:ident, $n_group_used:ident, $flags:ident,
        $scale:ident
    ) => {
        $crate::moe_gate_up::FusedRouter {
            w: global($rw),
            x: global($rx),
            logits: global($logits),
            ctl: global($ctl),
            routing: $crate::router::Routing {
                bias: $bias,
                sel: $sel as *mut ExpertSelection,
                n_expert: $n_expert,
                n_used: $n_used,
                n_group: $n_group,
                n_group_used: $n_group_used,
                flags: $flags,
                scale: $scale,
            },
        }
    };
}
pub(crate) use fused_router;

// The `GateUp` of an entry point's first 13 parameters.
macro_rules! gate_up_args {
    (
        $x:ident, $sel:ident, $gate:ident, $up:ident, $gate_sh:ident, $up_sh:ident, $act:ident,
        $ncols:ident, $ff:ident, $n_used:ident, $ff_sh:ident, $n_expert:ident, $layout:ident
    ) => {
        $crate::moe_gate_up::GateUp {
            x: global($x),
            sel: global($sel),
            gate: global($gate),
            up: global($up),
            gate_sh: global($gate_sh),
            up_sh: global($up_sh),
            act: global($act),
            ncols: $ncols,
            ff: $ff,
            n_used: $n_used,
            ff_sh: $ff_sh,
            n_expert: $n_expert,
            layout: $layout,
        }
    };
}
pub(crate) use gate_up_args;

macro_rules! gate_up_kernel {
    ($name:expr, $r:ident, $s:ident, $mixed:literal) => {
        const _: () = {
            /// See [`gate_up`] and `ingot_abi::launch::moe`.
            #[export_name = $name]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "ptx-kernel" fn kernel(
                x: *const BlockQ8_1,
                sel: *const ExpertSelection,
                gate: *const u8,
                up: *const u8,
                gate_sh: *const u8,
                up_sh: *const u8,
                act: *mut BlockQ8_1,
                ncols: u32,
                ff: u32,
                n_used: u32,
                ff_sh: u32,
                n_expert: u32,
                layout: u32,
            ) {
                let a = gate_up_args!(
                    x, sel, gate, up, gate_sh, up_sh, act, ncols, ff, n_used, ff_sh, n_expert,
                    layout
                );
                gate_up::<vecdot::$r, vecdot::$s, $mixed>(&a);
            }
        };
    };
}

macro_rules! gate_up_router_kernel {
    ($name:expr, $r:ident, $s:ident, $mixed:literal) => {
        const _: () = {
            /// See [`gate_up_router`] and `ingot_abi::launch::moe`.
            #[export_name = $name]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "ptx-kernel" fn kernel(
                x: *const BlockQ8_1,
                sel: *const ExpertSelection,
                gate: *const u8,
                up: *const u8,
                gate_sh: *const u8,
                up_sh: *const u8,
                act: *mut BlockQ8_1,
                ncols: u32,
                ff: u32,
                n_used: u32,
                ff_sh: u32,
                n_expert: u32,
                layout: u32,
                rw: *const f32,
                rx: *const f32,
                logits: *mut f32,
                bias: *const f32,
                route_ctl: *mut u32,
                n_group: u32,
                n_group_used: u32,
                route_flags: u32,
                scale: f32,
            ) {
                let router = fused_router!(
                    rw,
                    rx,
                    logits,
                    route_ctl,
                    bias,
                    sel,
                    n_expert,
                    n_used,
                    n_group,
                    n_group_used,
                    route_flags,
                    scale
                );
                let a = gate_up_args!(
                    x, sel, gate, up, gate_sh, up_sh, act, ncols, ff, n_used, ff_sh, n_expert,
                    layout
                );
                gate_up_router::<vecdot::$r, vecdot::$s, $mixed>(&a, &router);
            }
        };
    };
}

// Every type with itself (also every dense FFN: `n_used = 0`), then the registry's mixed pairs.
macro_rules! gate_up_kernels {
    (
        types { $($v:ident $tag:ident $block:ident $($col:literal)* [$($f16:literal),*];)* }
        mixed_down { $($down:tt)* }
        mixed_gate_up { $($rv:ident $rt:ident $sv:ident $st:ident;)* }
        $($rest:tt)*
    ) => {
        $(
            gate_up_kernel!(ingot_abi::kernel_name!(gate_up, $tag), $v, $v, false);
            gate_up_router_kernel!(ingot_abi::kernel_name!(gate_up_router, $tag), $v, $v, false);
        )*
        $(
            gate_up_kernel!(ingot_abi::kernel_name!(gate_up, $rt, $st), $rv, $sv, true);
            gate_up_router_kernel!(
                ingot_abi::kernel_name!(gate_up_router, $rt, $st),
                $rv,
                $sv,
                true
            );
        )*
    };
}

ingot_abi::weight_types!(gate_up_kernels);
