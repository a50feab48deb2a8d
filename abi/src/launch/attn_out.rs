//! `attn_merge_v_b_o_*`: the attention's last two launches of a layer in one. The blocks of
//! `attn_merge_v_b_*` ([`super::attention`]) and of `attn_output` (the `moe_down_*` kernel of
//! the same type with no routed slots, its residual add and `ffn_norm` tail, [`super::moe`])
//! share a grid; a block's work is the ticket it draws when it starts (word
//! [`CHAIN_CTL_TICKET`]): the merge's items first, then `attn_output`'s row blocks. A merge
//! block counts itself in word [`CHAIN_CTL_DONE`] (a release add) once its stores are made;
//! an `attn_output` block prefetches its weight rows, then waits (an acquire spin) until every
//! merge block has counted, so its q8_1 input is complete, and counts itself in word
//! [`CHAIN_CTL_PASSED`]; the last to pass sets both back to 0. A lower ticket was drawn by a
//! block that has started, so every wait ends (docs/ptx-sim.md, "Blocks that wait on each
//! other"). Invariant: the [`CHAIN_CTL_WORDS`] words are 0 before the first launch and after
//! every launch; launches sharing them must not overlap.
//!
//! The output is the bits of the two launches it replaces: each part runs the code of its
//! unfused kernel on the block its ticket names.

use super::moe::{MOE_DOWN_BLOCK_ROWS, MOE_DOWN_STAGE_BYTES, MOE_DOWN_WARPS};
use super::{signature, Kernel, KernelDesc, MERGE_THREADS, WARP_SIZE};

/// Control words of one chained launch (`u32`s).
pub const CHAIN_CTL_WORDS: u32 = 4;
/// Word of the next ticket; the block that draws the last sets it back to 0.
pub const CHAIN_CTL_TICKET: u32 = 0;
/// Word the first part's blocks count themselves in when their stores are made.
pub const CHAIN_CTL_DONE: u32 = 1;
/// Word the second part's blocks count themselves in once they have seen the first part done.
pub const CHAIN_CTL_PASSED: u32 = 2;

signature! {
    /// The arguments of every `attn_merge_v_b_o_*` kernel: `attn_merge_v_b_*`'s (its q8_1
    /// output `y` is `attn_output`'s input), then `attn_output`'s weight `w_o` (`nrows` rows of
    /// `n_head·d_v` columns), residual stream (read at `resid`, written at `out`), its norm
    /// tail's (as `moe_down_*`'s) and the [`CHAIN_CTL_WORDS`] control words.
    MergeVbOArgs {
        part_o: ptr,
        part_ml: ptr,
        state: ptr,
        w: ptr,
        y: ptr,
        scratch: ptr,
        pair_count: ptr,
        n_head: u32,
        d_v: u32,
        ctx: u32,
        max_segments: u32,
        w_o: ptr,
        resid: ptr,
        out: ptr,
        nrows: u32,
        norm_w: ptr,
        norm_q8: ptr,
        norm_f32: ptr,
        count: ptr,
        norm: u32,
        eps: f32,
        chain_ctl: ptr,
    }
}

/// Blocks of `attn_output`'s part: [`MOE_DOWN_BLOCK_ROWS`] rows each.
pub const fn merge_v_b_o_out_blocks(nrows: u32) -> u32 {
    nrows.div_ceil(MOE_DOWN_BLOCK_ROWS)
}

/// Blocks of an `attn_merge_v_b_o_*` launch: the merge's [`super::merge_v_b_items`], then
/// [`merge_v_b_o_out_blocks`]. An item is a block.
pub const fn merge_v_b_o_items(n_head: u32, d_v: u32, nrows: u32) -> u32 {
    super::merge_v_b_items(n_head, d_v) + merge_v_b_o_out_blocks(nrows)
}

/// The descriptor of an `attn_merge_v_b_o_*` kernel (`crate::weight_types::GemvType::merge_v_b_o`,
/// one per type: `attn_v_b` and `attn_output` of that type). Requires what both parts require:
/// [`super::merge_v_b_fits`] for the merge, `n_head·d_v` a multiple of the type's block and
/// [`super::moe_down_stage_fits`]`(0, 0, n_head·d_v)` for `attn_output`, `nrows % 32 == 0`
/// with a norm tail. Grid: [`merge_v_b_o_items`] blocks.
pub(crate) const fn merge_v_b_o_kernel(name: &'static str) -> Kernel<MergeVbOArgs> {
    Kernel::new(name, [MERGE_THREADS, 1, 1], 1, 0)
}
const _: () = assert!(MERGE_THREADS == MOE_DOWN_WARPS * WARP_SIZE);

signature! {
    /// The arguments of the [`MERGE_V_B_O_COLS_Q4K`] kernels: [`MergeVbOArgs`]' with every
    /// per-position buffer at its column 0, then the bytes between consecutive columns' copies
    /// of each of those buffers (`chain_ctl`, `count` and the weights are the launch's own).
    MergeVbOColsArgs {
        part_o: ptr,
        part_ml: ptr,
        state: ptr,
        w: ptr,
        y: ptr,
        scratch: ptr,
        pair_count: ptr,
        n_head: u32,
        d_v: u32,
        ctx: u32,
        max_segments: u32,
        w_o: ptr,
        resid: ptr,
        out: ptr,
        nrows: u32,
        norm_w: ptr,
        norm_q8: ptr,
        norm_f32: ptr,
        count: ptr,
        norm: u32,
        eps: f32,
        chain_ctl: ptr,
        part_o_stride: u32,
        part_ml_stride: u32,
        state_stride: u32,
        y_stride: u32,
        scratch_stride: u32,
        pair_count_stride: u32,
        resid_stride: u32,
        out_stride: u32,
        norm_q8_stride: u32,
        norm_f32_stride: u32,
    }
}

impl<P> MergeVbOColsArgs<P> {
    /// The one-column launch's arguments `a` (every per-position buffer at column 0) on columns
    /// `strides` bytes apart, in the order of the stride parameters: `part_o`, `part_ml`,
    /// `state`, `y`, `scratch`, `pair_count`, `resid`, `out`, `norm_q8`, `norm_f32`.
    pub fn on_columns(a: MergeVbOArgs<P>, strides: [u32; 10]) -> Self {
        let [part_o_stride, part_ml_stride, state_stride, y_stride, scratch_stride, pair_count_stride, resid_stride, out_stride, norm_q8_stride, norm_f32_stride] =
            strides;
        MergeVbOColsArgs {
            part_o: a.part_o,
            part_ml: a.part_ml,
            state: a.state,
            w: a.w,
            y: a.y,
            scratch: a.scratch,
            pair_count: a.pair_count,
            n_head: a.n_head,
            d_v: a.d_v,
            ctx: a.ctx,
            max_segments: a.max_segments,
            w_o: a.w_o,
            resid: a.resid,
            out: a.out,
            nrows: a.nrows,
            norm_w: a.norm_w,
            norm_q8: a.norm_q8,
            norm_f32: a.norm_f32,
            count: a.count,
            norm: a.norm,
            eps: a.eps,
            chain_ctl: a.chain_ctl,
            part_o_stride,
            part_ml_stride,
            state_stride,
            y_stride,
            scratch_stride,
            pair_count_stride,
            resid_stride,
            out_stride,
            norm_q8_stride,
            norm_f32_stride,
        }
    }
}

/// `attn_merge_v_b_o_colsM_q4k`, `M` = 2, 3, 4 ([`MERGE_V_B_O_COLS_MIN`] + index): the
/// `attn_merge_v_b_o_q4k` launch on the `M` positions of a speculative verify, each position a
/// column with its own copy of every per-position buffer (at column 0's address plus `c` times
/// its stride, [`MergeVbOColsArgs`]). Tickets `c·items + i` (`items` =
/// [`super::merge_v_b_items`]) are item `i` of column `c`'s merge; then [`MOE_DOWN_BLOCK_ROWS`]
/// `attn_output` rows a block, each warp's row dotted with every column's staged activation from
/// one weight stream; the block that finishes last runs each column's norm tail in column order.
/// Each column's outputs are the one-column launch's bits. Requires what that launch requires,
/// and [`merge_v_b_o_cols_fit`]. Grid: [`merge_v_b_o_cols_items`] blocks.
pub const MERGE_V_B_O_COLS_Q4K: [Kernel<MergeVbOColsArgs>; 3] = [
    Kernel::new("attn_merge_v_b_o_cols2_q4k", [MERGE_THREADS, 1, 1], 1, 0),
    Kernel::new("attn_merge_v_b_o_cols3_q4k", [MERGE_THREADS, 1, 1], 1, 0),
    Kernel::new("attn_merge_v_b_o_cols4_q4k", [MERGE_THREADS, 1, 1], 1, 0),
];

/// Columns of the first multi-column `attn_merge_v_b_o` kernel.
pub const MERGE_V_B_O_COLS_MIN: usize = 2;

/// Blocks of an `attn_merge_v_b_o_colsM_*` launch: `m` merges, then [`merge_v_b_o_out_blocks`].
pub const fn merge_v_b_o_cols_items(m: u32, n_head: u32, d_v: u32, nrows: u32) -> u32 {
    m * super::merge_v_b_items(n_head, d_v) + merge_v_b_o_out_blocks(nrows)
}

/// Bytes of one column's q8_1 activation (`ncols` values) in the down stage: its blocks,
/// rounded up to 16 so the next column's copy starts 16-byte aligned (the stage's vector stores).
pub const fn merge_v_b_o_cols_stage_stride(ncols: u32) -> u32 {
    (ncols / 32 * 36).next_multiple_of(16)
}

/// Whether `m` columns of `ncols` values fit the down stage ([`MOE_DOWN_STAGE_BYTES`]).
pub const fn merge_v_b_o_cols_fit(m: u32, ncols: u32) -> bool {
    m as u64 * merge_v_b_o_cols_stage_stride(ncols) as u64 <= MOE_DOWN_STAGE_BYTES as u64
}

/// The kernels of this family beside the registry's one-column `attn_merge_v_b_o_*`.
pub const ALL: &[KernelDesc] = &[
    MERGE_V_B_O_COLS_Q4K[0].desc,
    MERGE_V_B_O_COLS_Q4K[1].desc,
    MERGE_V_B_O_COLS_Q4K[2].desc,
];
