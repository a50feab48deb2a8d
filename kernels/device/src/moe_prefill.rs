//! The mixture-of-experts glue of a prefill chunk (`ingot_abi::launch` family `moe_prefill`):
//! `moe_pairs` sorts the chunk's expert choices into the pair list of the expert-grouped
//! products, `moe_swiglu_q8_1` turns their gate and up outputs into the down product's q8_1
//! input, and `moe_combine` adds each token's weighted expert outputs, its shared experts'
//! output and its residual.
//!
//! `moe_pairs` is a stable counting sort in one block, without atomics, so its output depends
//! on the selections alone. The choices `j = t·n_used + s` are cut into
//! `MOE_PAIRS_WARPS` contiguous segments (a multiple of 32 choices each), warp `w` owning
//! segment `w` and the shared-memory row `hist[w][0 .. 512]`:
//! 1. each warp walks its segment 32 choices at a time and adds to `hist[w][e]` the number of
//!    its lanes that chose `e`;
//! 2. thread `e` turns column `e` into the exclusive prefix over the segments and the block
//!    scans the column totals into `expert_start`; then `hist[w][e] = expert_start[e] +`
//!    (choices of `e` in segments before `w`);
//! 3. each warp walks its segment again: a lane's pair goes to `hist[w][e]` plus the number of
//!    lower lanes with the same expert, and the lowest such lane then adds their count.
//!
//! So pairs keep choice order within an expert: segments in order, 32-choice steps in order
//! within a segment, lanes in order within a step. The lanes with a lane's expert are found
//! with one warp vote per bit of the (clamped) id: `match.any` emulated by ballots.

use crate::intrinsics::{
    ballot, bid, global, ld_u32, ld_u32_if, ld_v4_f32, ld_v4_f32_coherent, lds_u32, shfl_idx, silu,
    st_u32, st_v4_f32, sts_u32, syncwarp, tid,
};
use crate::norm_q8::quantize_store;
use core::arch::{asm, global_asm, nvptx};
use core::mem::{offset_of, size_of};
use ingot_abi::blocks::QK8_1;
use ingot_abi::launch::moe::{ExpertSelection, GATE_UP_MERGED, ROUTER_MAX_EXPERTS};
use ingot_abi::launch::{
    MOE_GLUE_PER_THREAD as PER_THREAD, MOE_GLUE_THREADS, MOE_PAIRS_THREADS, MOE_PAIRS_WARPS,
    WARP_SIZE,
};

/// Columns of a warp's count row: every expert a layer may have.
const COLS: u32 = ROUTER_MAX_EXPERTS;
const _: () = assert!(MOE_PAIRS_THREADS == COLS, "thread e scans column e");
const _: () = assert!(size_of::<ExpertSelection>() == 128);
const _: () = assert!(PER_THREAD == 4 && (QK8_1 as u32).is_multiple_of(PER_THREAD));

// `hist[w][e]`, u32, row-major: warp w's counts (steps 1-2), then its next slot per expert
// (step 3); and the per-warp totals of step 2's block scan.
global_asm!(
    ".shared .align 16 .b8 moe_pairs_hist[{bytes}];",
    bytes = const MOE_PAIRS_WARPS * COLS * 4,
);
global_asm!(
    ".shared .align 16 .b8 moe_pairs_warp_sums[{bytes}];",
    bytes = const MOE_PAIRS_WARPS * 4,
);

#[inline(always)]
fn hist_addr() -> u32 {
    let a: u32;
    // SAFETY: reads the address of a module-scope shared array.
    unsafe {
        asm!("mov.u32 {a}, moe_pairs_hist;", a = out(reg32) a, options(pure, nomem, nostack));
    }
    a
}

#[inline(always)]
fn warp_sums_addr() -> u32 {
    let a: u32;
    // SAFETY: reads the address of a module-scope shared array.
    unsafe {
        asm!("mov.u32 {a}, moe_pairs_warp_sums;", a = out(reg32) a,
             options(pure, nomem, nostack));
    }
    a
}

/// The three pair lists the placing walk (`walk::<true>`) writes; the counting walk writes
/// none of them.
#[derive(Clone, Copy)]
struct Place {
    pair_token: u64,
    pair_of: u64,
    pair_self: u64,
}

/// One walk of a warp's segment `[first, end)` of the choices, 32 at a time, over its count row
/// at shared address `row`. Lane `l` of a step takes choice `j = base + l`; `peers` is the
/// mask of live lanes whose clamped expert equals its own. The lowest peer adds their count
/// to `row[e]`; with `P`, each lane first writes its pair at `row[e]` plus its rank among its
/// peers. `bits`: bits of the largest clamped id (`top`); `n_used ≥ 1`. The whole warp runs
/// every step (`first` and `end` are warp-uniform).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn walk<const P: bool>(
    sel: u64,
    row: u32,
    first: u32,
    end: u32,
    n_used: u32,
    top: u32,
    bits: u32,
    out: Place,
) {
    let lane = tid() % WARP_SIZE;
    let below = (1u32 << lane) - 1;
    let mut base = first;
    while base < end {
        let j = base + lane;
        let live = j < end;
        let tok = j / n_used;
        let slot = j - tok * n_used;
        let at = sel
            + tok as u64 * size_of::<ExpertSelection>() as u64
            + offset_of!(ExpertSelection, ids) as u64
            + 4 * slot as u64;
        let e = ld_u32_if(live, at).min(top);
        let mut peers = ballot(live);
        let mut b = 0;
        while b < bits {
            let set = (e >> b) & 1 != 0;
            let votes = ballot(set);
            peers &= if set { votes } else { !votes };
            b += 1;
        }
        let slot_at = row + 4 * e;
        let next = lds_u32(slot_at);
        syncwarp();
        if live && peers & below == 0 {
            sts_u32(slot_at, next + peers.count_ones());
        }
        syncwarp();
        if P && live {
            let p = next + (peers & below).count_ones();
            st_u32(out.pair_token + 4 * p as u64, tok);
            st_u32(out.pair_of + 4 * j as u64, p);
            st_u32(out.pair_self + 4 * j as u64, j);
        }
        base += WARP_SIZE;
    }
}

/// `v`'s exclusive prefix sum over the block's threads in thread order (all
/// `MOE_PAIRS_THREADS` must call it; it holds a barrier).
#[inline(always)]
unsafe fn block_exclusive_scan(v: u32) -> u32 {
    let t = tid();
    let lane = t % WARP_SIZE;
    let warp = t / WARP_SIZE;
    let mut inc = v;
    let mut k = 1;
    while k < WARP_SIZE {
        let o = shfl_idx(inc, lane.wrapping_sub(k) % WARP_SIZE);
        if lane >= k {
            inc += o;
        }
        k *= 2;
    }
    let sums = warp_sums_addr();
    if lane == WARP_SIZE - 1 {
        sts_u32(sums + 4 * warp, inc);
    }
    nvptx::_syncthreads();
    let mut before = 0;
    let mut w = 0;
    while w < warp {
        before += lds_u32(sums + 4 * w);
        w += 1;
    }
    before + inc - v
}

/// See `ingot_abi::launch::MOE_PAIRS`. Preconditions (checked by the host launcher): one block,
/// `ntok ≥ 1`, `1 ≤ n_used ≤ MAX_EXPERTS_USED`, `1 ≤ n_expert ≤ ROUTER_MAX_EXPERTS`,
/// `ntok·n_used` within `u32`; `expert_start` holds `n_expert + 1` words, the three lists
/// `ntok·n_used` words each.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn moe_pairs(
    sel: *const ExpertSelection,
    expert_start: *mut u32,
    pair_token: *mut u32,
    pair_of: *mut u32,
    pair_self: *mut u32,
    ntok: u32,
    n_used: u32,
    n_expert: u32,
) {
    let sel = global(sel);
    let t = tid();
    let warp = t / WARP_SIZE;
    // max(1): the launcher rejects 0, and the divisions and the shift below stay trap-free.
    let n_used = n_used.max(1);
    let top = n_expert.max(1) - 1;
    let bits = u32::BITS - top.leading_zeros();
    let n_pairs = ntok * n_used;
    let seg = n_pairs.div_ceil(MOE_PAIRS_WARPS * WARP_SIZE) * WARP_SIZE;
    let first = (warp * seg).min(n_pairs);
    let end = (first + seg).min(n_pairs);
    let hist = hist_addr();
    let row = hist + warp * COLS * 4;

    let mut w = 0;
    while w < MOE_PAIRS_WARPS {
        sts_u32(hist + 4 * (w * COLS + t), 0);
        w += 1;
    }
    nvptx::_syncthreads();
    let none = Place {
        pair_token: 0,
        pair_of: 0,
        pair_self: 0,
    };
    walk::<false>(sel, row, first, end, n_used, top, bits, none);
    nvptx::_syncthreads();

    // Thread t owns expert t's column.
    let mut total = 0;
    let mut w = 0;
    while w < MOE_PAIRS_WARPS {
        let a = hist + 4 * (w * COLS + t);
        let c = lds_u32(a);
        sts_u32(a, total);
        total += c;
        w += 1;
    }
    let start = block_exclusive_scan(total);
    let starts = global(expert_start);
    if t < n_expert {
        st_u32(starts + 4 * t as u64, start);
    }
    if t == 0 {
        st_u32(starts + 4 * n_expert as u64, n_pairs);
    }
    let mut w = 0;
    while w < MOE_PAIRS_WARPS {
        let a = hist + 4 * (w * COLS + t);
        sts_u32(a, lds_u32(a) + start);
        w += 1;
    }
    nvptx::_syncthreads();
    let out = Place {
        pair_token: global(pair_token),
        pair_of: global(pair_of),
        pair_self: global(pair_self),
    };
    walk::<true>(sel, row, first, end, n_used, top, bits, out);
}

/// See `ingot_abi::launch::MOE_SWIGLU_Q8_1`. Thread mapping as `quantize_q8_1`'s: thread `g`
/// (global index) takes output values `4g .. 4g+4` of the flattened `n_pairs × ff` matrix
/// (16-byte loads of gate and up), the 8 lanes `8b .. 8b+8` of a warp-aligned group form q8_1
/// block `b` and reduce its amax and `Σh` in `quantize_q8_1`'s order ([`quantize_store`]), so
/// the blocks are the bits `quantize_q8_1` makes of the same floats. `ff % 32 == 0` keeps a
/// group inside one pair's row. Threads past the end take part in the shuffles on zeros and
/// store nothing. Preconditions (checked by the host launcher): `ff` a positive multiple of
/// 32, `n_pairs·ff` within `u32`, grid as the descriptor.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn moe_swiglu_q8_1(
    gate: *const f32,
    up: *const f32,
    act: *mut ingot_abi::blocks::BlockQ8_1,
    n_pairs: u32,
    ff: u32,
    layout: u32,
) {
    let g = bid() * MOE_GLUE_THREADS + tid();
    let first = g as u64 * PER_THREAD as u64;
    let in_range = first < n_pairs as u64 * ff as u64;
    let h = if in_range {
        let ff = ff.max(1) as u64;
        let (p, i) = (first / ff, first % ff);
        let merged = layout & GATE_UP_MERGED != 0;
        let (g_at, u_at) = if merged {
            let at = global(gate) + (p * 2 * ff + i) * 4;
            (at, at + ff * 4)
        } else {
            (global(gate) + first * 4, global(up) + first * 4)
        };
        let (gv, uv) = (ld_v4_f32(g_at), ld_v4_f32(u_at));
        [
            silu(gv[0]) * uv[0],
            silu(gv[1]) * uv[1],
            silu(gv[2]) * uv[2],
            silu(gv[3]) * uv[3],
        ]
    } else {
        [0.0; 4]
    };
    quantize_store(h, global(act), g, in_range);
}

/// See `ingot_abi::launch::MOE_COMBINE`. Thread `g` (global index) computes output floats
/// `4g .. 4g+4` of the flattened `ntok × n_embd` matrix: token `t = 4g / n_embd`, reading its
/// `n_used` weights and `pair_of` entries (the same words for all of a token's threads) and one
/// 16-byte chunk of each chosen pair's down row. `resid` is read coherently: `y` may alias it.
/// Preconditions (checked by the host launcher): `n_embd` a positive multiple of 4, `ntok ≥ 1`,
/// `1 ≤ n_used ≤ MAX_EXPERTS_USED`, `ntok·n_embd` and `ntok·n_used` within `u32`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn moe_combine(
    sel: *const ExpertSelection,
    pair_of: *const u32,
    down: *const f32,
    shared: *const f32,
    resid: *const f32,
    y: *mut f32,
    n_embd: u32,
    ntok: u32,
    n_used: u32,
) {
    let chunks = (n_embd / PER_THREAD).max(1);
    let g = bid() * MOE_GLUE_THREADS + tid();
    if g >= ntok * chunks {
        return;
    }
    let t = g / chunks;
    let c = g - t * chunks;
    let last = (ntok * n_used).max(1) - 1;
    let w_at = global(sel)
        + t as u64 * size_of::<ExpertSelection>() as u64
        + offset_of!(ExpertSelection, weights) as u64;
    let of_at = global(pair_of) + 4 * (t * n_used) as u64;
    let col = 4 * (PER_THREAD * c) as u64;
    let down = global(down) + col;
    let mut acc = [0.0f32; 4];
    let mut s = 0;
    while s < n_used {
        let p = ld_u32(of_at + 4 * s as u64).min(last);
        let w = f32::from_bits(ld_u32(w_at + 4 * s as u64));
        let v = ld_v4_f32(down + p as u64 * n_embd as u64 * 4);
        acc = [
            acc[0] + w * v[0],
            acc[1] + w * v[1],
            acc[2] + w * v[2],
            acc[3] + w * v[3],
        ];
        s += 1;
    }
    let at = t as u64 * n_embd as u64 * 4 + col;
    let sh = ld_v4_f32(global(shared) + at);
    let r = ld_v4_f32_coherent(global(resid) + at);
    st_v4_f32(
        global(y) + at,
        [
            r[0] + (acc[0] + sh[0]),
            r[1] + (acc[1] + sh[1]),
            r[2] + (acc[2] + sh[2]),
            r[3] + (acc[3] + sh[3]),
        ],
    );
}
