//! Quantized matrix-matrix products for prefill on int8 tensor cores (`ingot_abi::launch` family
//! `mmq`, llama.cpp's `mmq`): `y[t][r] = Σ_k W[r][k]·x_t[k]` for a tile of `MMQ_ROWS` weight
//! rows × `MMQ_TOKENS` tokens per block.
//!
//! Per step of 256 weights (one k-quant super-block, or eight 32-weight blocks, of each row),
//! the block stages in shared memory:
//! * the weight tile: each row's 256 levels as s8, and per 32-weight sub-block `j` an 8-byte
//!   pair of the row's factors for it (`MmqWeights::stage`, per type: Q4_K's `(scale, min)`,
//!   Q6_K's `d` and two group scales, the 32-weight types' `d`, Q4_1's and Q5_1's `(d, −m)`);
//! * the activation tile: each token's 8 q8_1 blocks as s8, and per block `(d, d·Σq)` in f32
//!   (the integer sum, as the decode gemv's min correction uses).
//!
//! Then warp `w` multiplies rows `16·(w % 4) ..+16` by tokens `32·(w / 4) ..+32`: per sub-block
//! one `ldmatrix` of the weights and two of the activations, and per 8-token column the type's
//! `MmqWeights::fold`: `mma.m16n8k32` (the integer dot products of 16 rows × 8 tokens over
//! the sub-block, exact) folded into f32 accumulators with the pairs, by the decode gemv's
//! per-sub-block formula, so the result differs from the gemv's only in the order of the f32
//! additions.
//!
//! Edges: rows past `nrows` and tokens past `ntok` are staged from zero bytes (predicated loads:
//! zero scales, so they add zeros), and so are the sub-blocks of the last step past the row's
//! `ncols/32` when `ncols` is not a multiple of 256 (32-weight types only: weights and activations
//! both, so each adds an exact zero), so the step loop is the same straight-line code on every
//! tile; only the final stores are predicated. Each row's staged bytes sit at a stride of 272 =
//! 17·16 bytes, so the eight rows of every `ldmatrix` matrix fall in eight different 16-byte bank
//! groups.

mod legacy;
mod q3k;
mod q4k;
mod q5k;
mod q6k;

use crate::intrinsics::{
    bid, dp4a, f16_to_f32, global, ld_u32_if, ldmatrix_x4, lds_v2, lds_v4_f32, shfl_idx, st_f32_if,
    sts_v2_f32, sts_v4, tid, warp_max_u32,
};
use crate::vecdot::Q8_BYTES;
use core::arch::{asm, global_asm, nvptx};
use core::mem::{offset_of, size_of};
use ingot_abi::blocks::{
    BlockIq4Nl, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K,
    BlockQ8_0, BlockQ8_1, QK8_1,
};
use ingot_abi::launch::{
    mmq_moe_first_slot, mmq_moe_pair_slots, mmq_token_tiles, MMQ_K_STEP, MMQ_MOE_PAIRS, MMQ_ROWS,
    MMQ_THREADS, MMQ_TOKENS, MMQ_WARP_TOKENS, WARP_SIZE,
};
use legacy::{Iq4Nl, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0};
use q3k::Q3K;
use q4k::Q4K;
use q5k::Q5K;
use q6k::Q6K;

/// Sub-blocks of 32 weights (and q8_1 blocks) per step.
const SUBS: u32 = MMQ_K_STEP / QK8_1 as u32;
/// Bytes between staged rows: a step's 256 s8 values and 16 bytes of padding.
const STRIDE: u32 = MMQ_K_STEP + 16;
/// Warps along the rows (16 rows each) and `mma` columns (8 tokens each) per warp.
const ROW_WARPS: u32 = MMQ_ROWS / 16;
const N_TILES: usize = (MMQ_WARP_TOKENS / 8) as usize;

/// Shared layout (offsets from `mmq_smem`): the weight and activation tiles (rows at
/// `STRIDE`), then the per-sub-block pairs, sub-block-major (`[j][row]`, `[j][token]`, 8 bytes
/// each), so the compute loop's lanes read consecutive pairs. The sub-blocks are padded apart
/// so the staging stores, whose lanes write several sub-blocks, hit distinct banks: a weight
/// pair store's 16 lanes are 4 rows × sub-blocks `2q` (q = 0..4), bank pair `4q + r` mod 16
/// with 66 pairs per sub-block; an activation pair store's are 8 tokens × 2 sub-blocks, bank
/// pair `8j + token` mod 16 with 72.
const W_PAIR_STRIDE: u32 = (MMQ_ROWS + 2) * 8;
const X_PAIR_STRIDE: u32 = (MMQ_TOKENS + 8) * 8;
const W_TILE: u32 = 0;
const X_TILE: u32 = W_TILE + MMQ_ROWS * STRIDE;
const W_PAIRS: u32 = X_TILE + MMQ_TOKENS * STRIDE;
const X_PAIRS: u32 = W_PAIRS + SUBS * W_PAIR_STRIDE;
const SMEM_BYTES: u32 = X_PAIRS + SUBS * X_PAIR_STRIDE;
const _: () = assert!(W_PAIR_STRIDE.is_multiple_of(16) && X_PAIR_STRIDE.is_multiple_of(16));
const _: () = assert!(STRIDE.is_multiple_of(16) && (STRIDE / 16) % 2 == 1);
const _: () = assert!(SMEM_BYTES <= 48 * 1024);

global_asm!(
    ".shared .align 16 .b8 mmq_smem[{bytes}];",
    bytes = const SMEM_BYTES,
);

#[inline(always)]
fn smem_base() -> u32 {
    let a: u32;
    // SAFETY: reads the address of a module-scope shared array.
    unsafe {
        asm!("mov.u32 {a}, mmq_smem;", a = out(reg32) a, options(pure, nomem, nostack));
    }
    a
}

/// A weight type's share of a step: every thread of the block calls `stage` once per step.
pub trait MmqWeights {
    /// Weights of one block: `MMQ_K_STEP` (k-quants; `ncols` a multiple of it) or `QK8_1`
    /// (32-weight types; `ncols` a multiple of 32, the last step possibly partial).
    const BLOCK_WEIGHTS: u32;
    /// Bytes of one block.
    const BLOCK_BYTES: u32;
    /// Stages thread `tid`'s share of one step (`MMQ_K_STEP` weights) of each of the tile's
    /// rows: `w` is the step's global address in the tile's first row, rows are `row_bytes`
    /// apart, rows `rows ..` of the tile lie past the matrix and sub-blocks `subs ..` of the
    /// step past the row (`subs ≥ 1`; below `SUBS` only for 32-weight types): they read
    /// nothing and are staged from zero bytes, whose pairs make `fold` add zeros. Writes levels
    /// to `tile + r·STRIDE + k` and pairs to `pairs + j·W_PAIR_STRIDE + r·8`.
    unsafe fn stage(w: u64, row_bytes: u64, rows: u32, subs: u32, tid: u32, tile: u32, pairs: u32);
    /// Adds one sub-block's products of the warp's 16 rows (weight fragment `a`; the staged
    /// pairs `pa` of row `g` and `pb` of row `g+8`) with one 8-token column (activation
    /// fragment `b`; `x` = `(d, d·Σq)` of tokens `2t` and `2t+1`) to the column's accumulators
    /// `acc`, elements `(g, 2t)`, `(g, 2t+1)`, `(g+8, 2t)`, `(g+8, 2t+1)`. Every lane of the
    /// warp must call it (it runs `mma`).
    fn fold(acc: &mut [f32; 4], a: [u32; 4], b: [u32; 2], pa: [u32; 2], pb: [u32; 2], x: [f32; 4]);
}

/// q8_1 blocks of a step per thread (`MMQ_TOKENS·SUBS` in all).
const X_ITEMS: usize = (MMQ_TOKENS * SUBS / MMQ_THREADS) as usize;
const _: () = assert!(SUBS == 8 && MMQ_TOKENS.is_multiple_of(8));
const _: () = assert!(MMQ_TOKENS * SUBS == X_ITEMS as u32 * MMQ_THREADS);
const _: () = assert!(size_of::<BlockQ8_1>() == 36 && offset_of!(BlockQ8_1, qs) == 4);

/// Where this thread's activation blocks are: global address at step 0, whether the token
/// exists, and the staged token and sub-block.
#[derive(Clone, Copy)]
struct XItem {
    at: u64,
    live: bool,
    tok: u32,
    j: u32,
}

/// Bytes of one row of `ncols` weights of type `T` (the launcher checks that it fits `u32`).
#[inline(always)]
fn row_bytes<T: MmqWeights>(ncols: u32) -> u64 {
    ((ncols / T::BLOCK_WEIGHTS) * T::BLOCK_BYTES) as u64
}

/// Stages one q8_1 block: its 32 quants into the activation tile, `(d, d·Σq)` into the pairs.
/// `live`: whether the block exists (its token does, and it lies within the row); if not it
/// reads nothing and stages zeros.
#[inline(always)]
unsafe fn stage_x(it: XItem, live: bool, step: u32, base: u32) {
    let a = it.at + (step * SUBS) as u64 * Q8_BYTES;
    let ds = ld_u32_if(live, a);
    let mut q = [0u32; 8];
    let mut sum = 0;
    let mut k = 0;
    while k < 8 {
        q[k] = ld_u32_if(live, a + 4 + 4 * k as u64);
        sum = dp4a(0x0101_0101, q[k], sum);
        k += 1;
    }
    let dst = base + X_TILE + it.tok * STRIDE + 32 * it.j;
    sts_v4(dst, [q[0], q[1], q[2], q[3]]);
    sts_v4(dst + 16, [q[4], q[5], q[6], q[7]]);
    let d = f16_to_f32(ds);
    sts_v2_f32(
        base + X_PAIRS + it.j * X_PAIR_STRIDE + it.tok * 8,
        [d, d * sum as f32],
    );
}

/// The block's tile: `T` weights from `w0` (the tile's first row; `rows` rows of the matrix
/// from there, `row_bytes` apart), the activation rows of its `MMQ_TOKENS` columns
/// (`x_row(c)`: column `c`'s token, a row of `x`, and whether it exists), then every computed
/// `(row, column)` of the tile (local indices) is stored where `out(r, col(c))` says, if it
/// says so (`col` runs once per column a thread holds, in the epilogue: what a column's
/// stores share, e.g. a list entry to read once). `ncols` a positive multiple of
/// `T::BLOCK_WEIGHTS`. The one body of `mmq` and `mmq_moe`: they differ only in where a
/// block's weight rows and activation rows come from and where its outputs go.
#[inline(always)]
unsafe fn mmq_tile<T: MmqWeights, K: Copy>(
    w0: u64,
    rows: u32,
    x: u64,
    ncols: u32,
    x_row: impl Fn(u32) -> (u32, bool),
    col: impl Fn(u32) -> K,
    out: impl Fn(u32, K) -> (bool, u64),
) {
    let tid = tid();
    let (lane, warp) = (tid % WARP_SIZE, tid / WARP_SIZE);
    let (g, t) = (lane / 4, lane % 4);
    let (wr, wt) = (warp % ROW_WARPS, warp / ROW_WARPS);
    // Whole k-quant steps, or 32-weight blocks in steps of SUBS, the last one possibly
    // partial: `nsub − SUBS·s` of its sub-blocks exist.
    let whole = T::BLOCK_WEIGHTS == MMQ_K_STEP;
    let steps = if whole {
        ncols / MMQ_K_STEP
    } else {
        ncols.div_ceil(MMQ_K_STEP)
    };
    let nsub = ncols / QK8_1 as u32;
    let step_bytes = MMQ_K_STEP / T::BLOCK_WEIGHTS * T::BLOCK_BYTES;
    let row_bytes = if whole {
        (steps * T::BLOCK_BYTES) as u64
    } else {
        row_bytes::<T>(ncols)
    };
    let base = smem_base();

    let mut xs = [XItem {
        at: 0,
        live: false,
        tok: 0,
        j: 0,
    }; X_ITEMS];
    let mut h = 0;
    while h < X_ITEMS {
        // Lanes 8k .. 8k+8 of a warp take 8 consecutive tokens at one sub-block: their tile
        // stores fall in 8 bank groups (token rows are 17 16-byte units apart), and a warp's
        // loads still cover 4 consecutive q8_1 blocks of each of 8 tokens.
        let i = tid + h as u32 * MMQ_THREADS;
        let (tok, j) = (i % 8 + 8 * (i / 64), (i / 8) % SUBS);
        let (row, live) = x_row(tok);
        xs[h] = XItem {
            at: x + (row as u64 * (ncols / QK8_1 as u32) as u64 + j as u64) * Q8_BYTES,
            live,
            tok,
            j,
        };
        h += 1;
    }

    // ldmatrix sources: lane L gives row L%8 of matrix L/8. Weights: matrices (rows 0-7,
    // bytes 0-15), (rows 8-15, 0-15), (0-7, 16-31), (8-15, 16-31) = a[0..4]. Activations, per
    // pair of 8-token columns: (tokens 0-7, bytes 0-15), (0-7, 16-31), (8-15, 0-15),
    // (8-15, 16-31) = b of the first column, then of the second.
    let a_src =
        base + W_TILE + (16 * wr + 8 * ((lane / 8) % 2) + lane % 8) * STRIDE + 16 * (lane / 16);
    let b_src = base
        + X_TILE
        + (MMQ_WARP_TOKENS * wt + 8 * (lane / 16) + lane % 8) * STRIDE
        + 16 * ((lane / 8) % 2);
    let w_pair = base + W_PAIRS + (16 * wr + g) * 8;
    let x_pair = base + X_PAIRS + (MMQ_WARP_TOKENS * wt + 2 * t) * 8;

    let mut acc = [[0f32; 4]; N_TILES];
    let mut s = 0;
    while s < steps {
        // The whole step (staging included) is hot: the audit checks it for guards and traps.
        asm!("// ingot:hot", options(nomem, nostack, preserves_flags));
        let subs = nsub - SUBS * s;
        T::stage(
            w0 + (s * step_bytes) as u64,
            row_bytes,
            rows,
            subs,
            tid,
            base + W_TILE,
            base + W_PAIRS,
        );
        let mut h = 0;
        while h < X_ITEMS {
            // A k-quant row has whole steps: the test folds away for them.
            let inside = whole || xs[h].j < subs;
            stage_x(xs[h], xs[h].live && inside, s, base);
            h += 1;
        }
        nvptx::_syncthreads();
        let mut j = 0;
        while j < SUBS {
            let a = ldmatrix_x4(a_src + 32 * j);
            let pa = lds_v2(w_pair + j * W_PAIR_STRIDE);
            let pb = lds_v2(w_pair + j * W_PAIR_STRIDE + 8 * 8);
            let mut n = 0;
            while n < N_TILES {
                let b = ldmatrix_x4(b_src + 32 * j + (8 * n as u32) * STRIDE);
                let x0 = lds_v4_f32(x_pair + j * X_PAIR_STRIDE + 8 * n as u32 * 8);
                let x1 = lds_v4_f32(x_pair + j * X_PAIR_STRIDE + 8 * (n as u32 + 1) * 8);
                T::fold(&mut acc[n], a, [b[0], b[1]], pa, pb, x0);
                T::fold(&mut acc[n + 1], a, [b[2], b[3]], pa, pb, x1);
                n += 2;
            }
            j += 1;
        }
        nvptx::_syncthreads();
        s += 1;
    }

    // Element `e` of column accumulator `n` is row `g + 8·(e/2)`, column `2t + e%2` of the
    // warp's 16 × 8 slice: the thread's two columns of it, two rows each.
    let mut n = 0;
    while n < N_TILES {
        let c0 = MMQ_WARP_TOKENS * wt + 8 * n as u32 + 2 * t;
        let k = [col(c0), col(c0 + 1)];
        let mut e = 0;
        while e < 4 {
            let r = 16 * wr + g + 8 * (e as u32 / 2);
            let (live, at) = out(r, k[e % 2]);
            st_f32_if(live, at, acc[n][e]);
            e += 1;
        }
        n += 1;
    }
}

/// `y[t][r] = Σ_k W[r][k]·x_t[k]`: `T` weights `w`, q8_1 activations `x`, f32 outputs `y`
/// (token-major), see `ingot_abi::launch::MMQ_Q4K`. `ncols` a positive multiple of
/// `T::BLOCK_WEIGHTS`, `ntok ≥ 1` (the launcher checks both and every buffer size). Block `b`
/// computes token tile `b % tiles` of row tile `b / tiles`.
#[inline(always)]
unsafe fn mmq<T: MmqWeights>(w: u64, x: u64, y: u64, ncols: u32, nrows: u32, ntok: u32) {
    let tiles = mmq_token_tiles(ntok).max(1);
    let row0 = bid() / tiles * MMQ_ROWS;
    let tok0 = bid() % tiles * MMQ_TOKENS;
    mmq_tile::<T, _>(
        w + row0 as u64 * row_bytes::<T>(ncols),
        nrows - row0,
        x,
        ncols,
        |c| (tok0 + c, tok0 + c < ntok),
        |c| tok0 + c,
        |r, tk| {
            let r = row0 + r;
            (
                r < nrows && tk < ntok,
                y + (tk as u64 * nrows as u64 + r as u64) * 4,
            )
        },
    );
}

/// The output row of pair `p`: `pair_row[p]` clamped to `n_pairs − 1` (so any list contents
/// store inside `y`), read only for a pair that exists (`p < end`; 0 otherwise, and the store
/// is off). A tile runs only when `pair0 < end ≤ n_pairs`, so `n_pairs ≥ 1`.
#[inline(always)]
unsafe fn out_row(pair_row: u64, p: u32, end: u32, n_pairs: u32) -> u32 {
    ld_u32_if(p < end, pair_row + 4 * p as u64).min(n_pairs - 1)
}

/// The expert-grouped product (`ingot_abi::launch::MMQ_MOE_Q4K`): block `b` takes pair-tile
/// slot `b % slots` of row tile `b / slots` (`slots = mmq_moe_pair_slots(n_pairs, n_expert)`),
/// finds its expert `e` as the last with `mmq_moe_first_slot(expert_start[e], e) ≤ slot` (the
/// first slots increase with `e`, so every lane tests its experts and one warp maximum picks
/// it; each warp does so on its own, no shared memory or barrier), exits when the slot is past
/// `e`'s pairs, and runs the tile body on `e`'s rows `row0 ..` and its pairs
/// `expert_start[e] + 64·tile ..`; pair `p`'s outputs go to row `pair_row[p]` of `y`. Offsets
/// are clamped to `n_pairs`, output rows to `n_pairs − 1`, and tokens `≥ ntok` read nothing,
/// so any list contents stay inside the buffers the launcher checked.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn mmq_moe<T: MmqWeights>(
    w: u64,
    x: u64,
    pair_token: u64,
    expert_start: u64,
    pair_row: u64,
    y: u64,
    [ncols, rows, ntok, n_pairs, n_expert]: [u32; 5],
) {
    let slots = mmq_moe_pair_slots(n_pairs, n_expert)
        .unwrap_or(u32::MAX)
        .max(1);
    let (slot, row0) = (bid() % slots, bid() / slots * MMQ_ROWS);
    let lane = tid() % WARP_SIZE;
    // The last expert whose first slot is at most `slot`, plus one (0: none).
    let mut found = 0;
    let mut e0 = 0;
    while e0 < n_expert {
        let e = e0 + lane;
        let start = ld_u32_if(e < n_expert, expert_start + 4 * e as u64).min(n_pairs);
        let hit = e < n_expert && mmq_moe_first_slot(start, e) <= slot;
        found = found.max(if hit { e + 1 } else { 0 });
        e0 += WARP_SIZE;
    }
    let found = warp_max_u32(found);
    if found == 0 {
        return;
    }
    let e = found - 1;
    // Lane 0 reads the expert's start, lane 1 its end.
    let off = ld_u32_if(lane < 2, expert_start + 4 * (e + lane) as u64).min(n_pairs);
    let (start, end) = (shfl_idx(off, 0), shfl_idx(off, 1));
    let pair0 = start + (slot - mmq_moe_first_slot(start, e)) * MMQ_MOE_PAIRS;
    if pair0 >= end || row0 >= rows {
        return;
    }
    mmq_tile::<T, _>(
        w + (e as u64 * rows as u64 + row0 as u64) * row_bytes::<T>(ncols),
        rows - row0,
        x,
        ncols,
        |c| {
            let p = pair0 + c;
            let tok = ld_u32_if(p < end, pair_token + 4 * p as u64);
            (tok, p < end && tok < ntok)
        },
        |c| {
            let p = pair0 + c;
            (p < end, out_row(pair_row, p, end, n_pairs))
        },
        |r, (live, row)| {
            let r = row0 + r;
            (
                r < rows && live,
                y + (row as u64 * rows as u64 + r as u64) * 4,
            )
        },
    );
}

/// The dense ([`mmq`]) and expert-grouped ([`mmq_moe`]) kernels of one weight type `$t`
/// (blocks `$block`), named `$dense` and `$moe` as their descriptors in `ingot_abi::launch`
/// are; `$what` is the type's GGUF name, for their doc lines.
macro_rules! mmq_kernels {
    ($t:ty, $block:ty, $dense:ident, $moe:ident, $what:literal) => {
        #[doc = concat!(
            "`y[t][r] = Σ_k W[r][k]·x_t[k]` for ", $what, " `w` (`nrows` rows of `ncols` \
             weights in `", stringify!($block), "`s), q8_1 `x` (`ntok × ncols/32` blocks) \
             and f32 `y` (`ntok × nrows`, token-major); descriptor \
             `ingot_abi::weight_types::GemvType::mmq`."
        )]
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $dense(
            w: *const $block,
            x: *const BlockQ8_1,
            y: *mut f32,
            ncols: u32,
            nrows: u32,
            ntok: u32,
        ) {
            mmq::<$t>(global(w), global(x), global(y), ncols, nrows, ntok);
        }

        #[doc = concat!(
            "`y[pair_row[p]] = W_e·x[pair_token[p]]` for every pair `p` routed to expert `e` \
             (pairs `expert_start[e] .. expert_start[e+1]`), ", $what, " `w` (`n_expert·rows` \
             rows of `ncols` weights in `", stringify!($block), "`s), q8_1 `x` \
             (`ntok × ncols/32` blocks), f32 `y` (`n_pairs × rows`, a row per pair); \
             descriptor `ingot_abi::weight_types::GemvType::mmq_moe`."
        )]
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $moe(
            w: *const $block,
            x: *const BlockQ8_1,
            pair_token: *const u32,
            expert_start: *const u32,
            pair_row: *const u32,
            y: *mut f32,
            ncols: u32,
            rows: u32,
            ntok: u32,
            n_pairs: u32,
            n_expert: u32,
        ) {
            mmq_moe::<$t>(
                global(w),
                global(x),
                global(pair_token),
                global(expert_start),
                global(pair_row),
                global(y),
                [ncols, rows, ntok, n_pairs, n_expert],
            );
        }
    };
}

mmq_kernels!(Q4K, BlockQ4K, mmq_q4k, mmq_moe_q4k, "Q4_K");
mmq_kernels!(Q6K, BlockQ6K, mmq_q6k, mmq_moe_q6k, "Q6_K");
mmq_kernels!(Q5K, BlockQ5K, mmq_q5k, mmq_moe_q5k, "Q5_K");
mmq_kernels!(Q3K, BlockQ3K, mmq_q3k, mmq_moe_q3k, "Q3_K");
mmq_kernels!(Q4_0, BlockQ4_0, mmq_q4_0, mmq_moe_q4_0, "Q4_0");
mmq_kernels!(Iq4Nl, BlockIq4Nl, mmq_iq4_nl, mmq_moe_iq4_nl, "IQ4_NL");
mmq_kernels!(Q5_0, BlockQ5_0, mmq_q5_0, mmq_moe_q5_0, "Q5_0");
mmq_kernels!(Q8_0, BlockQ8_0, mmq_q8_0, mmq_moe_q8_0, "Q8_0");
mmq_kernels!(Q4_1, BlockQ4_1, mmq_q4_1, mmq_moe_q4_1, "Q4_1");
mmq_kernels!(Q5_1, BlockQ5_1, mmq_q5_1, mmq_moe_q5_1, "Q5_1");
