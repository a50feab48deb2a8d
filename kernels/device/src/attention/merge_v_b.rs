//! `attn_merge_v_b_*`: `attn_merge_q8_1` and the grouped `attn_v_b` gemv with its q8_1
//! epilogue in one launch (`ingot_abi::launch::ATTN_MERGE_V_B_Q4K`), which saves the step a
//! node per layer.
//!
//! Block `b` is half `b % 2` of pair `b / 2`; a pair is one head `h` and `rows` of its `d_v` rows
//! (`merge_v_b_rows`: 64, or 32 where 64-row blocks would not fill a large GPU).
//! 1. Merge: the block merges its half of head `h`'s latent (256 of `MERGE_V_B_KV_LORA` = 512
//!    dims, two `MERGE_DIMS` slices) with `attn_merge`'s `merge4`, so every dim has the bits
//!    `attn_merge` gives it, and warp 0 quantizes them into q8_1 blocks in shared memory as
//!    `attn_merge_q8_1` does: the activation the gemv reads is bit for bit the one the unfused
//!    path writes to global memory.
//! 2. Half gemv: the `rows` rows' dots over that half (the gemv's thread mapping for a row of
//!    256 weights: `row_dot_lane` reading the stage), parked in `scratch`. The width is a
//!    constant so the unit loop's remainder rounds resolve at compile time (no guard).
//! 3. The pair's second block to finish (its done counter in `pair_count`) adds half 0 and
//!    half 1 in that order and quantizes the `rows` sums into the rows' q8_1 blocks of `y`.
//!
//! Why halves: each of the 4 gemv blocks of a V2-Lite head re-merging the whole head would read
//! the partials 4 times (8 MB per layer at depth 4096); a block per head would leave 16 blocks
//! to stream `attn_v_b`. Halves read the partials once per row block in all.
//! The sum `half 0 + half 1` is a different f32 association than the unfused gemv's lanes, so
//! the output is that of the unfused path up to f32 rounding, not to the bit.

use super::merge::{merge4, SMEM_BYTES as MERGE_BYTES};
use crate::intrinsics::{bid, global, ld_v4_f32_relaxed_if, st_f32_if, sub_sum, tid};
use crate::last_block::{last_of, reset};
use crate::norm_q8::{quantize_store, quantize_store_shared};
use crate::vecdot::{self, row_bytes, row_dot_lane, SharedAct, WeightType, Q8_BYTES};
use core::arch::{asm, global_asm, nvptx};
use core::mem::size_of;
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::{
    gemv_lanes_per_row, merge_v_b_rows, GEMV_BLOCK_WARPS, MERGE_DIMS, MERGE_V_B_KV_LORA,
    MERGE_V_B_ROWS as MAX_ROWS, MERGE_V_B_SPLIT as SPLIT, WARP_SIZE,
};
use ingot_abi::step::StepState;

/// Shared memory: two merge buffers (consecutive slices alternate, see `merge4`), then the
/// half's q8_1 blocks.
const MERGE_BUF: u32 = MERGE_BYTES.next_multiple_of(16);
const STAGE: u32 = 2 * MERGE_BUF;
const STAGE_BLOCKS: u32 = MERGE_V_B_KV_LORA / SPLIT / QK8_1 as u32;
const SMEM: u32 = STAGE + STAGE_BLOCKS * Q8_BYTES as u32;
global_asm!(
    ".shared .align 16 .b8 attn_merge_v_b_smem[{bytes}];",
    bytes = const SMEM,
);
const _: () = assert!(SPLIT == 2, "the tail adds exactly two halves");
const _: () = assert!(
    MAX_ROWS / 4 <= WARP_SIZE,
    "warp 0 quantizes the pair's rows"
);

#[inline(always)]
unsafe fn smem_base() -> u32 {
    let a: u32;
    asm!("mov.u32 {a}, attn_merge_v_b_smem;", a = out(reg32) a, options(pure, nomem, nostack));
    a
}

/// See the module docs and `ingot_abi::launch::ATTN_MERGE_V_B_Q4K` for the contract; this
/// block computes item `blk` of the launch's `merge_v_b_items`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn merge_v_b<T: WeightType>(
    blk: u32,
    part_o: *const u16,
    part_ml: *const f32,
    state: *const StepState,
    w: u64,
    y: u64,
    scratch: u64,
    pair_count: u64,
    n_head: u32,
    d_v: u32,
    ctx: u32,
    max_segments: u32,
) {
    const KV_LORA: u32 = MERGE_V_B_KV_LORA;
    const HALF_COLS: u32 = KV_LORA / SPLIT;
    const SLICES: u32 = HALF_COLS / MERGE_DIMS;
    let pair = blk / SPLIT;
    let half = blk % SPLIT;
    let rows = merge_v_b_rows(n_head, d_v);
    let row_blocks = d_v / rows;
    let h = pair / row_blocks;
    let row0 = h * d_v + (pair % row_blocks) * rows;
    let t = tid();
    let lane = t % WARP_SIZE;
    let warp = t / WARP_SIZE;
    let smem = smem_base();

    // 1. This half's latent, as q8_1 blocks in the stage (warp 0 holds each slice's dims).
    let mut j = 0;
    while j < SLICES {
        let c = (half * SLICES + j) * (MERGE_DIMS / 4) + lane;
        let buf = smem + (j % 2) * MERGE_BUF;
        let merged = merge4(
            part_o,
            part_ml,
            state,
            n_head,
            KV_LORA,
            ctx,
            max_segments,
            h,
            c,
            buf,
        );
        if let Some(v) = merged {
            quantize_store_shared(v, smem + STAGE, j * (MERGE_DIMS / 4) + lane);
        }
        j += 1;
    }
    nvptx::_syncthreads();

    // 2. The pair's `rows` rows over this half, in `scratch[pair][half][row]`.
    let lanes = gemv_lanes_per_row(HALF_COLS / T::QK, T::LANES);
    let rows_per_warp = WARP_SIZE / lanes;
    let sub = lane % lanes;
    let row_stride = row_bytes::<T>(KV_LORA);
    let w_half = w + half as u64 * row_bytes::<T>(HALF_COLS);
    let pair_rows = scratch + (pair * SPLIT * rows) as u64 * 4;
    let mut first = warp * rows_per_warp;
    while first < rows {
        let k = first + lane / lanes;
        let total = sub_sum(
            row_dot_lane::<T, SharedAct>(
                w_half + (row0 + k) as u64 * row_stride,
                SharedAct(smem + STAGE),
                HALF_COLS,
                sub,
                lanes,
            ),
            lanes,
        );
        // Predicated, not branched: with one unit per half row (k-quants) this is the
        // innermost loop.
        st_f32_if(sub == 0, pair_rows + ((half * rows + k) * 4) as u64, total);
        first += GEMV_BLOCK_WARPS * rows_per_warp;
    }

    // 3. The pair's last block: half 0 + half 1, quantized; lane `l < rows/4` owns rows 4l .. 4l+4.
    let count = pair_count + pair as u64 * 4;
    if !last_of(count, GEMV_BLOCK_WARPS, SPLIT) {
        return;
    }
    if warp == 0 {
        let own = lane < rows / 4;
        let a = ld_v4_f32_relaxed_if(own, pair_rows + 16 * lane as u64);
        let b = ld_v4_f32_relaxed_if(own, pair_rows + (rows * 4 + 16 * lane) as u64);
        let v = [a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]];
        let out = y + (row0 / QK8_1 as u32) as u64 * size_of::<BlockQ8_1>() as u64;
        quantize_store(v, out, lane, own);
    }
    reset(count);
}

macro_rules! merge_v_b_kernels {
    (types { $($v:ident $tag:ident $block:ident $($col:literal)* [$($f16:literal),*];)* } $($rest:tt)*) => {$(
        const _: () = {
            /// See `ingot_abi::weight_types::GemvType::merge_v_b` and the module docs.
            #[export_name = ingot_abi::kernel_name!(merge_v_b, $tag)]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "ptx-kernel" fn kernel(
                part_o: *const u16,
                part_ml: *const f32,
                state: *const StepState,
                w: *const ingot_abi::blocks::$block,
                y: *mut BlockQ8_1,
                scratch: *mut f32,
                pair_count: *mut u32,
                n_head: u32,
                d_v: u32,
                ctx: u32,
                max_segments: u32,
            ) {
                merge_v_b::<vecdot::$v>(
                    bid(),
                    part_o,
                    part_ml,
                    state,
                    global(w),
                    global(y),
                    global(scratch),
                    global(pair_count),
                    n_head,
                    d_v,
                    ctx,
                    max_segments,
                );
            }
        };
    )*};
}

ingot_abi::weight_types!(merge_v_b_kernels);
