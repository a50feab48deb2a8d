//! `moe_down_*`: the second half of a (mixture-of-experts) SwiGLU FFN for one token, with the
//! residual add: `y[r] = resid[r] + Σ_k w_k·(down_{e_k}[r]·act_k) + down_sh[r]·act_sh`
//! (docs/decode-math.md#moe-ffn), reading expert ids and weights from the device-resident
//! [`ExpertSelection`] and the q8_1 activations the gate/up kernel wrote.
//!
//! Thread mapping: one warp per output row, `MOE_DOWN_WARPS` warps per block. The warp walks the
//! routed experts two at a time ([`rows_dot_lane2`]: the row of both experts in one pass, two
//! units in flight per lane), then the shared experts' row, accumulating `w_k·partial` per lane,
//! and reduces the row once at the end. The routed and shared weights may have different types
//! (`R`, `S`): real files store the 1408-wide expert rows in a 32-element fallback type and the
//! 2816-wide shared rows as a k-quant.
//!
//! Activations: after its grid-dependency wait the block copies the whole `act` (every slot's
//! q8_1 blocks, then the shared experts') into a shared-memory stage ([`stage_act_wide`]), and the
//! warps read it there ([`SharedAct`]): `act` is read once per block, not once per warp.
//!
//! The routed weights are an expert table (`ingot_abi::launch::moe`): entry `e` is where expert
//! `e`'s `[nrows][ff]` slab starts (the stacked tensor, a VRAM slot or host-mapped memory), read by
//! lane `k` for slot `k` with the selection, before the row loops. Expert ids are clamped to
//! `n_expert − 1`, so a corrupt selection cannot read past the table.
//!
//! Norm tail: with `norm` set, the block that finishes last ([`last_block_done`]) normalizes
//! the updated stream `y` with its eight warps ([`rmsnorm_tail`], the math of `rmsnorm_q8_1`)
//! into the next gemv's q8_1 input and the router's f32 input, which saves the norm its own
//! launch; it reads the other blocks' `y` with `.relaxed.gpu` loads.

use crate::intrinsics::{
    bid, global, ld_f32_coherent, ld_u32, ld_u32_relaxed, ld_u64, nblocks, shfl_idx_f32,
    shfl_idx_u32, st_f32, tid, warp_sum,
};
use crate::last_block::{last_of, reset};
use crate::moe_dot::{rows_dot_lane1, rows_dot_lane2, staged_row_dot, UNIT_STAGE_BYTES};
use crate::norm_q8::rmsnorm_tail;
use crate::prefetch::prefetch_then_wait;
use crate::vecdot::{self, stage_act_wide, SharedAct, WeightType, Q8_BYTES};
use core::arch::{asm, global_asm};
use core::mem::offset_of;
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::moe::{
    ExpertSelection, DOWN_NORM_NONE, MOE_DOWN_BLOCK_ROWS, MOE_DOWN_ROWS_PER_WARP,
    MOE_DOWN_STAGE_BYTES, MOE_DOWN_WARPS,
};
use ingot_abi::launch::WARP_SIZE;

global_asm!(
    ".shared .align 16 .b8 moe_down_unit_stage[{bytes}];",
    bytes = const MOE_DOWN_WARPS * UNIT_STAGE_BYTES,
);

/// Shared address of this warp's unit stage ([`staged_row_dot`]).
#[inline(always)]
fn unit_stage(warp: u32) -> u32 {
    let a: u32;
    unsafe {
        asm!("mov.u32 {a}, moe_down_unit_stage;", a = out(reg32) a, options(pure, nomem, nostack));
    }
    a + warp * UNIT_STAGE_BYTES
}

/// Shared address of the activation stage's block 0: the gemv kernels' stage, sized for this
/// kernel's [`MOE_DOWN_STAGE_BYTES`] too (`crate::vecdot::STAGE_BYTES`).
#[inline(always)]
fn stage_base() -> u32 {
    vecdot::stage_base()
}
const _: () = assert!(vecdot::STAGE_BYTES >= MOE_DOWN_STAGE_BYTES);

/// Threads of a block.
pub(crate) const THREADS: u32 = MOE_DOWN_WARPS * WARP_SIZE;

/// The selection, spread over the warp: lane `k < n_used` holds the address of slot `k`'s
/// expert (its entry of the expert table at `down`, the id clamped to `n_expert − 1`) and its
/// weight, read with one coalesced request per field before any row work, so no expert waits on
/// a table load of its own.
/// `CHAINED`: the router ran in this launch, so `sel` is read with `.relaxed.gpu` loads.
#[inline(always)]
pub(crate) unsafe fn load_selection<const CHAINED: bool>(
    sel: u64,
    down: u64,
    lane: u32,
    n_used: u32,
    n_expert: u32,
) -> (u64, f32) {
    if lane < n_used {
        let (id, w) = (
            sel + offset_of!(ExpertSelection, ids) as u64 + 4 * lane as u64,
            sel + offset_of!(ExpertSelection, weights) as u64 + 4 * lane as u64,
        );
        let (id, w) = if CHAINED {
            (ld_u32_relaxed(id), ld_u32_relaxed(w))
        } else {
            (ld_u32(id), ld_u32(w))
        };
        let e = id.min(n_expert - 1) as u64;
        (ld_u64(down + 8 * e), f32::from_bits(w))
    } else {
        (0, 0.0)
    }
}

/// Address of routed slot `k`'s expert and its gating weight, broadcast from lane `k`.
#[inline(always)]
unsafe fn slot(mine: (u64, f32), k: u32) -> (u64, f32) {
    let lo = shfl_idx_u32(mine.0 as u32, k) as u64;
    let hi = shfl_idx_u32((mine.0 >> 32) as u32, k) as u64;
    (hi << 32 | lo, shfl_idx_f32(mine.1, k))
}

/// Lines each thread prefetches of its block's shared rows ([`prefetch_then_wait`]): 128
/// threads · 128 B = 16 KiB, which covers the block's 4 rows up to 4 KiB per row (V2-Lite's
/// attention output, 2,048 columns, and shared experts, 2,816 columns, as Q4_K..Q8_0); the
/// dense FFN's 10,944-column rows are prefetched in part.
pub(crate) const DOWN_PREFETCH_LINES: u32 = 1;
const _: () = assert!(
    MOE_DOWN_ROWS_PER_WARP == 1,
    "the row loop below is written out for one row per warp"
);

/// See `ingot_abi::launch::moe` (`MOE_DOWN_*`). Preconditions (checked by the host launcher):
/// `ff` a multiple of `R::QK` (or `n_used = 0`), `ff_sh` a multiple of `S::QK` (0: no shared
/// experts), `moe_down_stage_fits(n_used, ff, ff_sh)`, `ceil(nrows / MOE_DOWN_BLOCK_ROWS)`
/// row blocks, of which this block computes `blk`, `n_expert ≥ 1`. `CHAINED`: a chained launch
/// (`crate::attention::merge_v_b_o`) has prefetched the block's rows and waited for `act`,
/// which another block of the launch wrote.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn rows<R: WeightType, S: WeightType, const CHAINED: bool>(
    blk: u32,
    act: u64,
    sel: u64,
    down: u64,
    down_sh: u64,
    resid: u64,
    y: u64,
    nrows: u32,
    ff: u32,
    n_used: u32,
    ff_sh: u32,
    n_expert: u32,
) {
    let t = tid();
    let lane = t % WARP_SIZE;
    // A warp past the last row computes the last row again and stores nothing: every warp
    // stays to the end (the norm tail's barriers), and without an early exit ptxas keeps the
    // row loops at the registers they had before the tail (an exit path to a barrier raised
    // them from 96 to 165 on sm_86).
    let first = blk * MOE_DOWN_BLOCK_ROWS + t / WARP_SIZE;
    let valid = first < nrows;
    let r = if valid { first } else { nrows - 1 };
    let nunits = ff / R::QK;
    let row_bytes = nunits as u64 * R::UNIT_BYTES;
    let off = r as u64 * row_bytes;
    let sh_units = ff_sh / S::QK;
    let sh_row_bytes = sh_units as u64 * S::UNIT_BYTES;

    // The block's shared-expert rows (a dense projection's whole rows, with `n_used = 0`) are
    // known from its index: prefetched before the wait. The routed experts' ids are in `sel`,
    // which the router writes: they cannot be known before the wait.
    if !CHAINED {
        let span = shared_rows::<S>(blk, down_sh, nrows, ff_sh);
        prefetch_then_wait::<DOWN_PREFETCH_LINES, 1>([span], t, THREADS);
    }

    let (e0, w0) = load_selection::<CHAINED>(sel, down, lane, n_used, n_expert);
    // The activations are the predecessor's output: staged after the wait (the selection's
    // loads are in flight meanwhile). In shared addresses, slot `k` starts `k·act_per_slot`
    // bytes into the stage and the shared experts' blocks after the last slot.
    let slot_blocks = ff / QK8_1 as u32;
    let stage = stage_base();
    stage_act_wide::<CHAINED>(
        stage,
        act,
        n_used * slot_blocks + ff_sh / QK8_1 as u32,
        THREADS,
    );
    let act_per_slot = slot_blocks * Q8_BYTES as u32;
    // Lane k holds row r of slot k's expert.
    let mine = (e0 + off, w0);
    let xs = SharedAct(stage + n_used * act_per_slot);
    let sh_row = down_sh + r as u64 * sh_row_bytes;
    let units = unit_stage(t / WARP_SIZE);
    let mut acc = 0.0f32;
    let mut k = 0;
    while k + 1 < n_used {
        let (ea, ga) = slot(mine, k);
        let (eb, gb) = slot(mine, k + 1);
        let xa = SharedAct(stage + k * act_per_slot);
        let xb = SharedAct(xa.0 + act_per_slot);
        let p = pair_dot::<R>([ea, eb], [xa, xb], nunits, lane, units);
        acc += ga * p[0] + gb * p[1];
        k += 2;
    }
    if k < n_used {
        let (ea, ga) = slot(mine, k);
        let xa = SharedAct(stage + k * act_per_slot);
        acc += ga * row_dot::<R>(ea, xa, nunits, lane, units);
    }
    let p = row_dot::<S>(sh_row, xs, sh_units, lane, units);
    let y_r = warp_sum(acc + p);
    if lane == 0 && valid {
        let a = r as u64 * 4;
        st_f32(y + a, ld_f32_coherent(resid + a) + y_r);
    }
}

// The 32-element types (`WeightType::STAGED`, a constant: one path is compiled per type) read
// each round of units through the warp's unit stage `units`; the others read global memory
// directly. Both add the same products in the same order.

/// Lane `lane`'s partial sum of one row of `T` against `x` (see above).
#[inline(always)]
unsafe fn row_dot<T: WeightType>(w: u64, x: SharedAct, nunits: u32, lane: u32, units: u32) -> f32 {
    if T::STAGED {
        staged_row_dot::<T, SharedAct>(w, x, nunits, lane, units)
    } else {
        rows_dot_lane1::<T, SharedAct>(&[w], &[x], nunits, lane)[0]
    }
}

/// Lane `lane`'s partial sums of the same row of two experts (see above): staged rows one after
/// the other through the one unit stage, the others in lockstep ([`rows_dot_lane2`]: two units
/// in flight per lane).
#[inline(always)]
unsafe fn pair_dot<T: WeightType>(
    w: [u64; 2],
    x: [SharedAct; 2],
    nunits: u32,
    lane: u32,
    units: u32,
) -> [f32; 2] {
    if T::STAGED {
        [
            staged_row_dot::<T, SharedAct>(w[0], x[0], nunits, lane, units),
            staged_row_dot::<T, SharedAct>(w[1], x[1], nunits, lane, units),
        ]
    } else {
        rows_dot_lane2::<T, SharedAct>(&w, &x, nunits, lane)
    }
}

/// The span of row block `blk`'s rows of the shared (or dense) matrix at `down_sh` (rows of
/// `ff_sh` weights of `S`), `nrows` rows in all: what the block prefetches before its wait.
#[inline(always)]
pub(crate) fn shared_rows<S: WeightType>(
    blk: u32,
    down_sh: u64,
    nrows: u32,
    ff_sh: u32,
) -> (u64, u64) {
    let sh_row_bytes = (ff_sh / S::QK) as u64 * S::UNIT_BYTES;
    let first = (blk * MOE_DOWN_BLOCK_ROWS).min(nrows);
    let end = (first + MOE_DOWN_BLOCK_ROWS).min(nrows);
    (
        down_sh + first as u64 * sh_row_bytes,
        down_sh + end as u64 * sh_row_bytes,
    )
}

/// The norm tail's arguments (see `ingot_abi::launch::moe`, `MOE_DOWN_*`), still as pointer
/// parameters: converting them only inside the tail keeps them out of the row loops'
/// registers.
pub(crate) struct NormTail {
    pub w: *const f32,
    pub q8: *mut BlockQ8_1,
    pub f32: *mut f32,
    pub count: *mut u32,
    pub mode: u32,
    pub eps: f32,
}

impl NormTail {
    /// The tail of a down entry point's `norm_*`, `count`, `norm` and `eps` parameters.
    #[inline(always)]
    pub(crate) fn new(
        w: *const f32,
        q8: *mut BlockQ8_1,
        f32: *mut f32,
        count: *mut u32,
        mode: u32,
        eps: f32,
    ) -> Self {
        NormTail {
            w,
            q8,
            f32,
            count,
            mode,
            eps,
        }
    }
}

/// The rows of row block `blk` of `blocks`, then the norm tail in the block that finishes last;
/// whether this block ran it (block-uniform). Preconditions as [`rows`], plus
/// `nrows % 32 == 0` when `tail.mode` is not `DOWN_NORM_NONE`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn down<R: WeightType, S: WeightType, const CHAINED: bool>(
    (blk, blocks): (u32, u32),
    act: u64,
    sel: u64,
    down: u64,
    down_sh: u64,
    resid: u64,
    y: u64,
    (nrows, ff, n_used, ff_sh, n_expert): (u32, u32, u32, u32, u32),
    tail: NormTail,
) -> bool {
    rows::<R, S, CHAINED>(
        blk, act, sel, down, down_sh, resid, y, nrows, ff, n_used, ff_sh, n_expert,
    );
    // Launch-uniform: without a tail no block waits for the others.
    if tail.mode == DOWN_NORM_NONE {
        return false;
    }
    let count = global(tail.count as *const u32);
    if !last_of(count, MOE_DOWN_WARPS, blocks) {
        return false;
    }
    rmsnorm_tail::<{ MOE_DOWN_WARPS * WARP_SIZE }>(
        y,
        global(tail.w),
        global(tail.q8),
        global(tail.f32),
        nrows,
        tail.eps,
    );
    reset(count);
    true
}

macro_rules! down_kernel {
    ($name:expr, $r:ident, $s:ident) => {
        const _: () = {
            /// See [`down`] and `ingot_abi::launch::moe`.
            #[export_name = $name]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "ptx-kernel" fn kernel(
                act: *const BlockQ8_1,
                sel: *const ExpertSelection,
                down_w: *const u8,
                down_sh: *const u8,
                resid: *const f32,
                y: *mut f32,
                nrows: u32,
                ff: u32,
                n_used: u32,
                ff_sh: u32,
                n_expert: u32,
                norm_w: *const f32,
                norm_q8: *mut BlockQ8_1,
                norm_f32: *mut f32,
                count: *mut u32,
                norm: u32,
                eps: f32,
            ) {
                down::<vecdot::$r, vecdot::$s, false>(
                    (bid(), nblocks()),
                    global(act),
                    global(sel),
                    global(down_w),
                    global(down_sh),
                    global(resid),
                    global(y),
                    (nrows, ff, n_used, ff_sh, n_expert),
                    NormTail::new(norm_w, norm_q8, norm_f32, count, norm, eps),
                );
            }
        };
    };
}

// Every type with itself (also every dense FFN: `n_used = 0`), then the registry's mixed pairs.
macro_rules! down_kernels {
    (
        types { $($v:ident $tag:ident $block:ident $($col:literal)* [$($f16:literal),*];)* }
        mixed_down { $($rv:ident $rt:ident $sv:ident $st:ident;)* }
        $($rest:tt)*
    ) => {
        $(
            down_kernel!(ingot_abi::kernel_name!(down, $tag, $tag), $v, $v);
        )*
        $(
            down_kernel!(ingot_abi::kernel_name!(down, $rt, $st), $rv, $sv);
        )*
    };
}

ingot_abi::weight_types!(down_kernels);
