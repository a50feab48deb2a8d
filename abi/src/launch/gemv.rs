//! Matrix-vector products for batch-1 decode: quantized weights times a q8_1 activation vector
//! (per weight type a plain, a grouped, a grouped with q8_1 output and a two-matrix kernel, named
//! and described per type by `crate::weight_types::GemvType`; the fused lm_head + argmax kernels
//! are in `head`), an f32 gemv for the MoE router, and the `M`-column Q4_K gemv of a speculative
//! verify ([`GEMV_COLS_Q4K`]).
//!
//! Thread mapping shared by the quantized kernels: a group of [`gemv_lanes_per_row`] lanes
//! computes one output row (a whole warp for rows of 1024 weights or more; fewer lanes, several
//! rows per warp, for short rows such as `attn_k_b`'s 128). A warp computes its rows in
//! [`gemv_passes`] passes, so a block of [`GEMV_BLOCK_WARPS`] warps covers at least
//! [`gemv_min_block_rows`] consecutive rows ([`gemv_block_rows`]). An item is one **warp**:
//! launch `ceil(nrows / gemv_rows_per_warp(..))` items, [`GEMV_BLOCK_WARPS`] per block.
//!
//! Activation staging: a block first copies the q8_1 blocks its rows read into shared memory
//! (at most [`GEMV_STAGE_BLOCKS`], see [`gemv_stage_blocks`]), and every row reads them from
//! there, so the activation crosses the memory system once per block instead of once per row:
//! bytes read / weight bytes ≈ `1 + activation / (block rows · row bytes)`, which
//! [`gemv_min_block_rows`] keeps ≤ 1.10 for every type and width. The activation must not be
//! written by the same launch (it is read with `ld.global.nc`).
//!
//! Row `r` of a grouped kernel reads the activation blocks starting at q8_1 block
//! `(r / rows_per_group) · x_group_stride` of `x`: MLA absorption multiplies each head's
//! `rows_per_group` rows by that head's slice of a wider vector (`attn_k_b`: 16 heads × 512 rows
//! against each head's 128 `q_nope` values, stride 6 blocks = 192 floats; `attn_v_b`: 16 × 128
//! rows against each head's 512 latent outputs, stride 16 blocks). The plain kernels are the
//! grouped ones with a single group. The two-matrix kernels run two matrices of one type and
//! width against one `x` in one launch (`attn_q` and `attn_kv_a_mqa`).

use super::{signature, Kernel, KernelDesc, Signature, GEMV_WARPS, WARP_SIZE};

/// Warps per block of the quantized gemv kernels (plain, grouped, two-matrix, with the rope
/// tail, with the argmax, with the q8_1 epilogue). Eight, so a block of a few dozen rows keeps
/// many warps in flight per SM, and the rope tail of `gemv2_rope_*` runs with the block of
/// `rope_kv_q8_1` (`ROPE_KV_THREADS`).
pub const GEMV_BLOCK_WARPS: u32 = 8;
/// A launch reads at most `1 + 1/GEMV_WEIGHT_PER_ACT` (1.10) times the bytes it must:
/// a block's weight bytes are at least this many times what it reads beyond them (the staged
/// activation plus the type's re-alignment reads, [`GemvUnit::read_bytes`]).
pub const GEMV_WEIGHT_PER_ACT: u32 = 10;
/// [`GEMV_WEIGHT_PER_ACT`] of the two-matrix kernels (`GemvType::pair`, and with the rope tail):
/// a read bound of 1.125. Their launches are the projections before attention, issue-bound and
/// of few blocks at every shape of the family: V2-Lite's 3,648 Q4_K rows of 2,048 are 152
/// blocks of 24 rows at 1.10 (the 20 past an H200's 132 SMs double the busiest SM's rows, 48)
/// and 228 of 16 here (32); the low-rank-query models' 1,344-2,112 rows (GLM-4.7-Flash, V3) are
/// 56-88 blocks at 1.10 and 84-132 here. The extra activation reads come from L2.
pub const GEMV_PAIR_WEIGHT_PER_ACT: u32 = 8;
/// q8_1 blocks a gemv block can stage in shared memory: 16384 activations (every hidden width of
/// the family, 7168 for V3, and V2-Lite's dense `ffn_down` rows of 10944); the stage holds their
/// quant ints (32 B each) and `ds` words (4 B), 18 KB, which leaves 5 blocks of 8 warps per SM
/// on an sm_86 (100 KB), no fewer than 64 registers per thread leave.
pub const GEMV_STAGE_BLOCKS: u32 = 512;
/// Units a lane group loads per iteration of the gemv's weight-streaming loop (the device's
/// `units_dot_lane` issues both loads before either dot product, so two units' bytes are in
/// flight). One iteration of a warp covers `GEMV_UNITS_IN_FLIGHT · 32 / lanes_per_unit` units,
/// which turns the loop's SASS count into instructions per weight (the kernel bench).
pub const GEMV_UNITS_IN_FLIGHT: u32 = 2;

/// Lanes that compute one row of `units` units when `lanes_per_unit` (a power of two ≤ 32)
/// lanes share a unit: the smallest power of two covering every unit once, at least
/// `lanes_per_unit`, at most a warp. Device and host both call this, so the thread mapping and
/// the grid cannot disagree. Loop-free (a count of leading zeros), so the kernels that compute
/// it at run time carry no loop for it.
#[inline]
pub const fn gemv_lanes_per_row(units: u32, lanes_per_unit: u32) -> u32 {
    let need = units.saturating_mul(lanes_per_unit);
    if need >= WARP_SIZE {
        return WARP_SIZE;
    }
    // The next power of two ≥ need, for 0 < need < 32 (1 for need ≤ 1).
    let pow2 = if need <= 1 {
        1
    } else {
        1 << (32 - (need - 1).leading_zeros())
    };
    if pow2 > lanes_per_unit {
        pow2
    } else {
        lanes_per_unit
    }
}

/// Rows one warp computes in one pass (see [`gemv_lanes_per_row`]).
#[inline]
pub const fn gemv_rows_per_pass(units: u32, lanes_per_unit: u32) -> u32 {
    WARP_SIZE / gemv_lanes_per_row(units, lanes_per_unit)
}

/// The thread mapping of one quantized weight type (each type's is in its
/// `crate::weight_types` row): a unit is `elems` weights in `bytes` bytes (a block pair of a
/// 32-element type, whose rows may end in one unpaired block; a k-quant super-block), shared by
/// `lanes` lanes, which read `read_bytes` of weights per unit (`bytes`, or more for the 2-byte
/// aligned Q3_K and Q6_K blocks, whose lanes read the aligned words around them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemvUnit {
    pub lanes: u32,
    pub elems: u32,
    pub bytes: u32,
    pub read_bytes: u32,
}

/// Rows whose weights are [`GEMV_WEIGHT_PER_ACT`] times what their block reads beyond them: the
/// staged activation (36 bytes per 32 weights, once per block) and the re-alignment reads
/// (per row). Whatever the row length: Q8_0 11, Q5_0 and Q5_K 17, Q4_0 and Q4_K 20, Q6_K 23,
/// Q3_K 42.
#[inline]
pub const fn gemv_min_block_rows(unit: GemvUnit) -> u32 {
    min_block_rows(unit, GEMV_WEIGHT_PER_ACT)
}

/// [`gemv_min_block_rows`] with `weight_per_act` in place of [`GEMV_WEIGHT_PER_ACT`].
#[inline]
const fn min_block_rows(unit: GemvUnit, weight_per_act: u32) -> u32 {
    let act = 36 * unit.elems / 32;
    let extra = unit.read_bytes - unit.bytes;
    (weight_per_act * act).div_ceil(unit.bytes - weight_per_act * extra)
}

/// Passes a warp makes over its rows of `units` units: the fewest with which a block covers
/// [`gemv_min_block_rows`] rows (one when a single pass of the block's warps already does), so
/// a launch keeps as many blocks as the 1.10 bound allows.
#[inline]
pub const fn gemv_passes(units: u32, unit: GemvUnit) -> u32 {
    passes(units, unit, GEMV_WEIGHT_PER_ACT)
}

/// [`gemv_passes`] of the two-matrix kernels, at [`GEMV_PAIR_WEIGHT_PER_ACT`].
#[inline]
pub const fn gemv_pair_passes(units: u32, unit: GemvUnit) -> u32 {
    passes(units, unit, GEMV_PAIR_WEIGHT_PER_ACT)
}

/// [`gemv_passes`] at `weight_per_act`.
#[inline]
const fn passes(units: u32, unit: GemvUnit, weight_per_act: u32) -> u32 {
    let per_pass = GEMV_BLOCK_WARPS * gemv_rows_per_pass(units, unit.lanes);
    min_block_rows(unit, weight_per_act).div_ceil(per_pass)
}

/// Rows one warp computes over all its passes: a gemv item.
#[inline]
pub const fn gemv_rows_per_warp(units: u32, unit: GemvUnit) -> u32 {
    gemv_rows_per_pass(units, unit.lanes) * gemv_passes(units, unit)
}

/// [`gemv_rows_per_warp`] of the two-matrix kernels ([`gemv_pair_passes`]).
#[inline]
pub const fn gemv_pair_rows_per_warp(units: u32, unit: GemvUnit) -> u32 {
    gemv_rows_per_pass(units, unit.lanes) * gemv_pair_passes(units, unit)
}

/// Consecutive rows one block of [`GEMV_BLOCK_WARPS`] warps computes.
#[inline]
pub const fn gemv_block_rows(units: u32, unit: GemvUnit) -> u32 {
    GEMV_BLOCK_WARPS * gemv_rows_per_warp(units, unit)
}

/// The most q8_1 blocks one block of `block_rows` rows stages, for `nrows` rows of `ncols`
/// weights in groups of `rows_per_group ≥ 1` rows whose slices are `x_group_stride` blocks
/// apart: the groups a block's rows touch span `(last − first) · stride + ncols/32` blocks, and
/// `block_rows` consecutive rows cross at most `(block_rows + rows_per_group − 2) /
/// rows_per_group` group boundaries. A launch needs this ≤ [`GEMV_STAGE_BLOCKS`].
pub const fn gemv_stage_blocks(
    block_rows: u32,
    nrows: u32,
    ncols: u32,
    rows_per_group: u32,
    x_group_stride: u32,
) -> u64 {
    let rpg = rows_per_group as u64;
    let crossed = (block_rows as u64 + rpg - 2) / rpg;
    let groups = (nrows as u64).saturating_sub(1) / rpg;
    let crossed = if crossed < groups { crossed } else { groups };
    crossed * x_group_stride as u64 + ncols as u64 / 32
}

signature! {
    /// The arguments of the plain gemvs (`crate::weight_types::GemvType::plain`) and
    /// [`GEMV_F32`].
    GemvArgs { w: ptr, x: ptr, y: ptr, ncols: u32, nrows: u32 }
}

signature! {
    /// The arguments of the grouped gemvs (`crate::weight_types::GemvType::grouped`, and
    /// `grouped_q8_1_out`).
    GemvGroupedArgs {
        w: ptr,
        x: ptr,
        y: ptr,
        ncols: u32,
        nrows: u32,
        rows_per_group: u32,
        x_group_stride: u32,
    }
}

signature! {
    /// The arguments of the two-matrix gemvs (`crate::weight_types::GemvType::pair`).
    Gemv2Args { w0: ptr, w1: ptr, x: ptr, y0: ptr, y1: ptr, ncols: u32, nrows0: u32, nrows1: u32 }
}

/// A quantized gemv of signature `S` (an item is a warp, [`GEMV_BLOCK_WARPS`] per block).
pub(crate) const fn gemv_kernel<S: Signature>(name: &'static str) -> Kernel<S> {
    Kernel::new(
        name,
        [GEMV_BLOCK_WARPS * WARP_SIZE, 1, 1],
        GEMV_BLOCK_WARPS,
        0,
    )
}

/// The grouped gemv with the q8_1 epilogue: an item is one output block of 32 rows.
pub(crate) const fn q8_1_out_kernel(name: &'static str) -> Kernel<GemvGroupedArgs> {
    Kernel::new(name, [GEMV_BLOCK_WARPS * WARP_SIZE, 1, 1], 1, 0)
}

/// `gemv_f32(w: *const f32, x: *const f32, y: *mut f32, ncols: u32, nrows: u32)`:
/// `y[r] = Σ_c W[r][c]·x[c]`, all f32 (the MoE router, `ffn_gate_inp` 64 × 2048); `ncols` a
/// multiple of 4. One warp per row; an item is a row.
pub const GEMV_F32: Kernel<GemvArgs> =
    Kernel::new("gemv_f32", [GEMV_WARPS * WARP_SIZE, 1, 1], GEMV_WARPS, 0);

/// `gemv_colsM_q4k(w, x, y, ncols, nrows)`, `M` = 2, 3, 4 ([`GEMV_COLS_MIN`] + index): one Q4_K
/// weight stream against `M` q8_1 columns, `y[c·nrows + r] = Σ W[r]·x_c` with column `c` of `x`
/// from q8_1 block `c·ncols/32` on: a speculative verify's gemv. The plain Q4_K gemv's launch
/// shape and thread mapping (an item is a warp), each column's bits the plain gemv's; the block
/// stages every column, so `M·ncols/32 ≤` [`GEMV_STAGE_BLOCKS`].
pub const GEMV_COLS_Q4K: [Kernel<GemvArgs>; 3] = [
    gemv_kernel("gemv_cols2_q4k"),
    gemv_kernel("gemv_cols3_q4k"),
    gemv_kernel("gemv_cols4_q4k"),
];
/// Columns of [`GEMV_COLS_Q4K`]`[0]`.
pub const GEMV_COLS_MIN: usize = 2;

/// The kernels of this family (the per-type quantized ones are in `crate::weight_types`).
pub const ALL: &[KernelDesc] = &[
    GEMV_F32.desc,
    GEMV_COLS_Q4K[0].desc,
    GEMV_COLS_Q4K[1].desc,
    GEMV_COLS_Q4K[2].desc,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_per_row_covers_units_within_a_warp() {
        // attn_k_b in Q5_0: 128 weights = 2 pair units, one lane each → 2 lanes, 16 rows/warp.
        assert_eq!(gemv_lanes_per_row(2, 1), 2);
        assert_eq!(gemv_rows_per_pass(2, 1), 16);
        // 2048 weights of Q4_K: 8 super-blocks × 8 lanes = 64 > 32 → a whole warp.
        assert_eq!(gemv_lanes_per_row(8, 8), 32);
        // One super-block of Q3_K (4 lanes) → 4 lanes, never fewer than a unit needs.
        assert_eq!(gemv_lanes_per_row(1, 4), 4);
        assert_eq!(gemv_lanes_per_row(0, 8), 8);
        assert_eq!(gemv_lanes_per_row(3, 1), 4);
        // The loop-free form equals doubling from `lanes_per_unit` while it covers fewer units.
        for units in 0..100 {
            for lpu in [1, 2, 4, 8, 16, 32] {
                let mut lanes = lpu;
                while lanes < WARP_SIZE && lanes < units * lpu {
                    lanes *= 2;
                }
                assert_eq!(
                    gemv_lanes_per_row(units, lpu),
                    lanes,
                    "{units} units, {lpu}"
                );
            }
        }
    }

    use crate::weight_types::GemvType;

    const Q4K: GemvUnit = GemvType::Q4K.unit();
    const Q3K: GemvUnit = GemvType::Q3K.unit();
    const Q6K: GemvUnit = GemvType::Q6K.unit();
    const Q5_0: GemvUnit = GemvType::Q5_0.unit();

    #[test]
    fn blocks_cover_the_target_rows() {
        assert_eq!(gemv_min_block_rows(Q4K), 20);
        assert_eq!(gemv_min_block_rows(Q3K), 42);
        assert_eq!(gemv_min_block_rows(Q6K), 23);
        // Whole-warp rows (2048 weights): 3 passes of 8 warps for Q4_K and Q6_K, 6 for Q3_K.
        assert_eq!(gemv_block_rows(8, Q4K), 24);
        assert_eq!(gemv_block_rows(8, Q3K), 48);
        assert_eq!(gemv_block_rows(8, Q6K), 24);
        // attn_v_b in Q4_K (512 weights, 2 rows per warp and pass): 2 passes.
        assert_eq!(gemv_rows_per_warp(2, Q4K), 4);
        // attn_k_b in Q5_0 (16 rows per warp): one pass already covers 128 rows.
        assert_eq!(gemv_block_rows(2, Q5_0), 128);
        // Every block covers at least the target, for every row length, with at most one pass
        // more than needed.
        for units in 0..64 {
            for unit in [Q4K, Q3K, Q6K, Q5_0] {
                let rows = gemv_block_rows(units, unit);
                let per_pass = GEMV_BLOCK_WARPS * gemv_rows_per_pass(units, unit.lanes);
                assert!(rows >= gemv_min_block_rows(unit));
                assert!(rows < gemv_min_block_rows(unit) + per_pass);
            }
        }
    }

    #[test]
    fn stage_spans_the_groups_a_block_touches() {
        // One group: the row's own blocks.
        assert_eq!(gemv_stage_blocks(32, 3648, 2048, u32::MAX, 0), 64);
        // attn_k_b: 128-row blocks inside 512-row groups still may straddle one boundary.
        assert_eq!(gemv_stage_blocks(128, 8192, 128, 512, 6), 6 + 4);
        // A group per row: every row of the block its own slice, capped by the launch's groups.
        assert_eq!(gemv_stage_blocks(32, 32, 64, 1, 2), 31 * 2 + 2);
        assert_eq!(gemv_stage_blocks(32, 4, 64, 1, 2), 3 * 2 + 2);
    }
}
