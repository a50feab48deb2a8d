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

use crate::intrinsics::{
    bid, f32_to_f16, global, ld_shared_f32, ld_u32, ld_u64, round_away, shfl_idx_u32, silu, st_u32,
    sts_f32, tid, warp_max_f32, warp_sum,
};
use crate::moe_dot::rows_dot_lane4;
use crate::prefetch::prefetch_then_wait;
use crate::vecdot::{self, GlobalAct, WeightType, Q8_BYTES};
use core::arch::{asm, global_asm, nvptx};
use core::mem::offset_of;
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::moe::{
    ExpertSelection, GATE_UP_MERGED, MOE_GATE_UP_ROWS, MOE_GATE_UP_ROWS_PER_WARP, MOE_GATE_UP_WARPS,
};
use ingot_abi::launch::WARP_SIZE;

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
const GATE_UP_PREFETCH_LINES: u32 = 2;

/// See `ingot_abi::launch::moe` (`MOE_GATE_UP_*`). Preconditions (checked by the host launcher):
/// `ncols` a multiple of `R::QK` and `S::QK`, `ff` and `ff_sh` multiples of 32, grid =
/// `n_used·ff/32 + ff_sh/32` blocks, `n_expert ≥ 1`. `gate` and `up` are expert tables
/// (`ingot_abi::launch::moe`): `n_expert` addresses of `[ff][ncols]` slabs, or with
/// `GATE_UP_MERGED` of `gate` `[2·ff][ncols]` slabs (`up`'s entry is then loaded but unused). The
/// routed experts' weights are of type `R`, the shared experts' of `S`; `MIXED` is `R ≠ S` (a block
/// reads one type, so the branch between the two is uniform per block; without `MIXED` only `R`'s
/// path exists).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gate_up<R: WeightType, S: WeightType, const MIXED: bool>(
    x: u64,
    sel: u64,
    gate: u64,
    up: u64,
    gate_sh: u64,
    up_sh: u64,
    act: u64,
    ncols: u32,
    ff: u32,
    n_used: u32,
    n_expert: u32,
    layout: u32,
) {
    let t = tid();
    let lane = t % WARP_SIZE;
    let warp = t / WARP_SIZE;
    let b = bid();
    let row_bytes = (ncols / R::QK) as u64 * R::UNIT_BYTES;

    // max(1): ff may be 0 for a dense FFN (n_used = 0); keeps the divisions below trap-free.
    let blocks_per_expert = (ff / MOE_GATE_UP_ROWS).max(1);
    let routed_blocks = n_used * blocks_per_expert;
    let routed = b < routed_blocks;
    // A shared block's 32 gate and 32 up rows are known from its index: prefetched before the
    // wait. A routed block's expert id is in `sel`, which the router (the predecessor) writes:
    // nothing of it may be read before the wait, so it prefetches nothing.
    let sh_row_bytes = if MIXED {
        (ncols / S::QK) as u64 * S::UNIT_BYTES
    } else {
        row_bytes
    };
    let sh_first = b.wrapping_sub(routed_blocks) as u64 * MOE_GATE_UP_ROWS as u64 * sh_row_bytes;
    let sh_bytes = if routed {
        0
    } else {
        MOE_GATE_UP_ROWS as u64 * sh_row_bytes
    };
    let (g_sh, u_sh) = (gate_sh + sh_first, up_sh + sh_first);
    prefetch_then_wait::<GATE_UP_PREFETCH_LINES, 2>(
        [(g_sh, g_sh + sh_bytes), (u_sh, u_sh + sh_bytes)],
        t,
        MOE_GATE_UP_WARPS * WARP_SIZE,
    );
    let (g_base, u_base, first_row) = if routed {
        let slot = b / blocks_per_expert;
        // One lane reads the id and broadcasts it: one 4-byte request per warp.
        let id = if lane == 0 {
            ld_u32(sel + offset_of!(ExpertSelection, ids) as u64 + 4 * slot as u64)
        } else {
            0
        };
        let e = shfl_idx_u32(id, 0).min(n_expert - 1) as u64;
        // Entry e of each table is the first byte of expert e's slab, wherever it lives;
        // merged, its up rows follow its `ff` gate rows. Both entries are loaded whatever the
        // layout, so the layout is a select, not a branch (a branch around the up load cost up
        // to 16 registers on sm_86).
        let (g, u) = (ld_u64(gate + 8 * e), ld_u64(up + 8 * e));
        let u = if layout & GATE_UP_MERGED != 0 {
            g + ff as u64 * row_bytes
        } else {
            u
        };
        (g, u, (b % blocks_per_expert) * MOE_GATE_UP_ROWS)
    } else {
        (gate_sh, up_sh, (b - routed_blocks) * MOE_GATE_UP_ROWS)
    };
    let first = first_row + warp * MOE_GATE_UP_ROWS_PER_WARP;
    if MIXED && !routed {
        swiglu_rows::<S>(x, g_base, u_base, first, ncols, lane, warp);
    } else {
        swiglu_rows::<R>(x, g_base, u_base, first, ncols, lane, warp);
    }
    nvptx::_syncthreads();
    if warp == 0 {
        let v = ld_shared_f32(h_addr() + 4 * lane);
        quantize_block(v, lane, act + b as u64 * Q8_BYTES);
    }
}

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
                _ff_sh: u32,
                n_expert: u32,
                layout: u32,
            ) {
                gate_up::<vecdot::$r, vecdot::$s, $mixed>(
                    global(x),
                    global(sel),
                    global(gate),
                    global(up),
                    global(gate_sh),
                    global(up_sh),
                    global(act),
                    ncols,
                    ff,
                    n_used,
                    n_expert,
                    layout,
                );
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
        )*
        $(
            gate_up_kernel!(ingot_abi::kernel_name!(gate_up, $rt, $st), $rv, $sv, true);
        )*
    };
}

ingot_abi::weight_types!(gate_up_kernels);
