//! Checked launches of the gemv family (`ingot_abi::launch` family `gemv`): quantized weights
//! times q8_1 activations (plain, grouped, grouped with a q8_1 epilogue, two-matrix), and the
//! f32 gemv of the MoE router.

use super::{bytes, launch, need, q8_1_bytes, shape, to_u32};
use crate::backend::{Accelerator, KArg};
use crate::Result;
use ingot_abi::blocks::{
    BlockIq4Nl, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K, BlockQ8_0,
    BlockQ8_1, QK8_1,
};
use ingot_abi::launch::{
    gemv_block_rows, gemv_rows_per_warp, gemv_stage_blocks, GemvUnit, KernelDesc,
    GEMV2_IQ4_NL_Q8_1, GEMV2_Q3K_Q8_1, GEMV2_Q4K_Q8_1, GEMV2_Q4_0_Q8_1, GEMV2_Q5K_Q8_1,
    GEMV2_Q5_0_Q8_1, GEMV2_Q5_1_Q8_1, GEMV2_Q6K_Q8_1, GEMV2_Q8_0_Q8_1, GEMV2_ROPE_IQ4_NL_Q8_1,
    GEMV2_ROPE_Q3K_Q8_1, GEMV2_ROPE_Q4K_Q8_1, GEMV2_ROPE_Q4_0_Q8_1, GEMV2_ROPE_Q5K_Q8_1,
    GEMV2_ROPE_Q5_0_Q8_1, GEMV2_ROPE_Q5_1_Q8_1, GEMV2_ROPE_Q6K_Q8_1, GEMV2_ROPE_Q8_0_Q8_1,
    GEMV_F32, GEMV_GROUPED_IQ4_NL_Q8_1, GEMV_GROUPED_IQ4_NL_Q8_1_OUT, GEMV_GROUPED_Q3K_Q8_1,
    GEMV_GROUPED_Q3K_Q8_1_OUT, GEMV_GROUPED_Q4K_Q8_1, GEMV_GROUPED_Q4K_Q8_1_OUT,
    GEMV_GROUPED_Q4_0_Q8_1, GEMV_GROUPED_Q4_0_Q8_1_OUT, GEMV_GROUPED_Q5K_Q8_1,
    GEMV_GROUPED_Q5K_Q8_1_OUT, GEMV_GROUPED_Q5_0_Q8_1, GEMV_GROUPED_Q5_0_Q8_1_OUT,
    GEMV_GROUPED_Q5_1_Q8_1, GEMV_GROUPED_Q5_1_Q8_1_OUT, GEMV_GROUPED_Q6K_Q8_1,
    GEMV_GROUPED_Q6K_Q8_1_OUT, GEMV_GROUPED_Q8_0_Q8_1, GEMV_GROUPED_Q8_0_Q8_1_OUT,
    GEMV_IQ4_NL_Q8_1, GEMV_KQUANT_LANES, GEMV_KQUANT_QK, GEMV_PAIR_LANES, GEMV_PAIR_QK,
    GEMV_Q3K_LANES, GEMV_Q3K_Q8_1, GEMV_Q3K_READ_BYTES, GEMV_Q4K_Q8_1, GEMV_Q4_0_Q8_1,
    GEMV_Q5K_Q8_1, GEMV_Q5_0_Q8_1, GEMV_Q5_1_Q8_1, GEMV_Q6K_Q8_1, GEMV_Q6K_READ_BYTES,
    GEMV_Q8_0_Q8_1, GEMV_STAGE_BLOCKS,
};
use ingot_abi::launch::{
    ATTN_MERGE_V_B_IQ4_NL, ATTN_MERGE_V_B_Q3K, ATTN_MERGE_V_B_Q4K, ATTN_MERGE_V_B_Q4_0,
    ATTN_MERGE_V_B_Q5K, ATTN_MERGE_V_B_Q5_0, ATTN_MERGE_V_B_Q5_1, ATTN_MERGE_V_B_Q6K,
    ATTN_MERGE_V_B_Q8_0,
};
use std::mem::size_of;

/// A weight type the quantized gemv kernels take.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemvType {
    Q4_0,
    Q5_0,
    Q5_1,
    Q8_0,
    Iq4Nl,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
}

impl GemvType {
    /// Every type, in declaration order.
    pub const ALL: [GemvType; 9] = [
        GemvType::Q4_0,
        GemvType::Q5_0,
        GemvType::Q5_1,
        GemvType::Q8_0,
        GemvType::Iq4Nl,
        GemvType::Q3K,
        GemvType::Q4K,
        GemvType::Q5K,
        GemvType::Q6K,
    ];

    /// Weights per quant block (32, or 256 for k-quants).
    pub const fn block_elems(self) -> usize {
        if self.is_kquant() {
            256
        } else {
            32
        }
    }

    /// Bytes per quant block.
    pub const fn block_bytes(self) -> usize {
        match self {
            GemvType::Q4_0 => size_of::<BlockQ4_0>(),
            GemvType::Q5_0 => size_of::<BlockQ5_0>(),
            GemvType::Q5_1 => size_of::<BlockQ5_1>(),
            GemvType::Q8_0 => size_of::<BlockQ8_0>(),
            GemvType::Iq4Nl => size_of::<BlockIq4Nl>(),
            GemvType::Q3K => size_of::<BlockQ3K>(),
            GemvType::Q4K => size_of::<BlockQ4K>(),
            GemvType::Q5K => size_of::<BlockQ5K>(),
            GemvType::Q6K => size_of::<BlockQ6K>(),
        }
    }

    /// Row lengths of the gemv kernels must be multiples of this: one quant block (32, or 256
    /// for k-quants); a 32-element row of an odd number of blocks ends in an unpaired block.
    pub const fn gemv_row_multiple(self) -> usize {
        self.block_elems()
    }

    /// Weights per unit of the kernels' thread mapping: 64 for the 32-element types (a lane
    /// takes a pair of blocks), 256 for k-quants. The fused MoE kernels take rows of whole
    /// units only.
    pub const fn row_multiple(self) -> usize {
        if self.is_kquant() {
            GEMV_KQUANT_QK as usize
        } else {
            GEMV_PAIR_QK as usize
        }
    }

    const fn is_kquant(self) -> bool {
        matches!(
            self,
            GemvType::Q3K | GemvType::Q4K | GemvType::Q5K | GemvType::Q6K
        )
    }

    const fn lanes_per_unit(self) -> u32 {
        match self {
            GemvType::Q3K => GEMV_Q3K_LANES,
            GemvType::Q4K | GemvType::Q5K | GemvType::Q6K => GEMV_KQUANT_LANES,
            _ => GEMV_PAIR_LANES,
        }
    }

    /// The type's unit in the kernels' thread mapping (`ingot_abi::launch::gemv`).
    pub const fn unit(self) -> GemvUnit {
        let elems = self.row_multiple();
        let bytes = (self.block_bytes() * elems / self.block_elems()) as u32;
        GemvUnit {
            lanes: self.lanes_per_unit(),
            elems: elems as u32,
            bytes,
            read_bytes: match self {
                GemvType::Q3K => GEMV_Q3K_READ_BYTES,
                GemvType::Q6K => GEMV_Q6K_READ_BYTES,
                _ => bytes,
            },
        }
    }

    /// Rows one warp computes for rows of `ncols` weights.
    fn rows_per_warp(self, ncols: usize) -> u32 {
        gemv_rows_per_warp(self.units(ncols), self.unit())
    }

    /// Rows one thread block computes for rows of `ncols` weights.
    fn block_rows(self, ncols: usize) -> u32 {
        gemv_block_rows(self.units(ncols), self.unit())
    }

    fn units(self, ncols: usize) -> u32 {
        u32::try_from(ncols / self.row_multiple()).unwrap_or(u32::MAX)
    }

    /// The plain kernel (`w, x, y, ncols, nrows`).
    pub const fn plain(self) -> &'static KernelDesc {
        match self {
            GemvType::Q4_0 => &GEMV_Q4_0_Q8_1,
            GemvType::Q5_0 => &GEMV_Q5_0_Q8_1,
            GemvType::Q5_1 => &GEMV_Q5_1_Q8_1,
            GemvType::Q8_0 => &GEMV_Q8_0_Q8_1,
            GemvType::Iq4Nl => &GEMV_IQ4_NL_Q8_1,
            GemvType::Q3K => &GEMV_Q3K_Q8_1,
            GemvType::Q4K => &GEMV_Q4K_Q8_1,
            GemvType::Q5K => &GEMV_Q5K_Q8_1,
            GemvType::Q6K => &GEMV_Q6K_Q8_1,
        }
    }

    /// The grouped kernel (`… , rows_per_group, x_group_stride`).
    pub const fn grouped(self) -> &'static KernelDesc {
        match self {
            GemvType::Q4_0 => &GEMV_GROUPED_Q4_0_Q8_1,
            GemvType::Q5_0 => &GEMV_GROUPED_Q5_0_Q8_1,
            GemvType::Q5_1 => &GEMV_GROUPED_Q5_1_Q8_1,
            GemvType::Q8_0 => &GEMV_GROUPED_Q8_0_Q8_1,
            GemvType::Iq4Nl => &GEMV_GROUPED_IQ4_NL_Q8_1,
            GemvType::Q3K => &GEMV_GROUPED_Q3K_Q8_1,
            GemvType::Q4K => &GEMV_GROUPED_Q4K_Q8_1,
            GemvType::Q5K => &GEMV_GROUPED_Q5K_Q8_1,
            GemvType::Q6K => &GEMV_GROUPED_Q6K_Q8_1,
        }
    }
}

impl GemvType {
    /// The grouped kernel with a q8_1 epilogue (grouped parameters, `y` as q8_1 blocks).
    pub const fn grouped_q8_1_out(self) -> &'static KernelDesc {
        match self {
            GemvType::Q4_0 => &GEMV_GROUPED_Q4_0_Q8_1_OUT,
            GemvType::Q5_0 => &GEMV_GROUPED_Q5_0_Q8_1_OUT,
            GemvType::Q5_1 => &GEMV_GROUPED_Q5_1_Q8_1_OUT,
            GemvType::Q8_0 => &GEMV_GROUPED_Q8_0_Q8_1_OUT,
            GemvType::Iq4Nl => &GEMV_GROUPED_IQ4_NL_Q8_1_OUT,
            GemvType::Q3K => &GEMV_GROUPED_Q3K_Q8_1_OUT,
            GemvType::Q4K => &GEMV_GROUPED_Q4K_Q8_1_OUT,
            GemvType::Q5K => &GEMV_GROUPED_Q5K_Q8_1_OUT,
            GemvType::Q6K => &GEMV_GROUPED_Q6K_Q8_1_OUT,
        }
    }

    /// `attn_merge_q8_1` and the grouped gemv with the q8_1 epilogue in one launch
    /// (`ingot_abi::launch::ATTN_MERGE_V_B_Q4K` and its siblings).
    pub const fn merge_v_b(self) -> &'static KernelDesc {
        match self {
            GemvType::Q4_0 => &ATTN_MERGE_V_B_Q4_0,
            GemvType::Q5_0 => &ATTN_MERGE_V_B_Q5_0,
            GemvType::Q5_1 => &ATTN_MERGE_V_B_Q5_1,
            GemvType::Q8_0 => &ATTN_MERGE_V_B_Q8_0,
            GemvType::Iq4Nl => &ATTN_MERGE_V_B_IQ4_NL,
            GemvType::Q3K => &ATTN_MERGE_V_B_Q3K,
            GemvType::Q4K => &ATTN_MERGE_V_B_Q4K,
            GemvType::Q5K => &ATTN_MERGE_V_B_Q5K,
            GemvType::Q6K => &ATTN_MERGE_V_B_Q6K,
        }
    }

    /// The two-matrix kernel (`w0, w1, x, y0, y1, ncols, nrows0, nrows1`).
    pub const fn pair(self) -> &'static KernelDesc {
        match self {
            GemvType::Q4_0 => &GEMV2_Q4_0_Q8_1,
            GemvType::Q5_0 => &GEMV2_Q5_0_Q8_1,
            GemvType::Q5_1 => &GEMV2_Q5_1_Q8_1,
            GemvType::Q8_0 => &GEMV2_Q8_0_Q8_1,
            GemvType::Iq4Nl => &GEMV2_IQ4_NL_Q8_1,
            GemvType::Q3K => &GEMV2_Q3K_Q8_1,
            GemvType::Q4K => &GEMV2_Q4K_Q8_1,
            GemvType::Q5K => &GEMV2_Q5K_Q8_1,
            GemvType::Q6K => &GEMV2_Q6K_Q8_1,
        }
    }

    /// The two-matrix kernel with the `rope_kv_q8_1` tail (`ingot_abi::launch::GEMV2_ROPE_Q4K_Q8_1` and its siblings).
    pub const fn pair_rope(self) -> &'static KernelDesc {
        match self {
            GemvType::Q4_0 => &GEMV2_ROPE_Q4_0_Q8_1,
            GemvType::Q5_0 => &GEMV2_ROPE_Q5_0_Q8_1,
            GemvType::Q5_1 => &GEMV2_ROPE_Q5_1_Q8_1,
            GemvType::Q8_0 => &GEMV2_ROPE_Q8_0_Q8_1,
            GemvType::Iq4Nl => &GEMV2_ROPE_IQ4_NL_Q8_1,
            GemvType::Q3K => &GEMV2_ROPE_Q3K_Q8_1,
            GemvType::Q4K => &GEMV2_ROPE_Q4K_Q8_1,
            GemvType::Q5K => &GEMV2_ROPE_Q5K_Q8_1,
            GemvType::Q6K => &GEMV2_ROPE_Q6K_Q8_1,
        }
    }
}

/// How the rows of a grouped gemv read the activation vector: row `r` reads `ncols/32` q8_1
/// blocks starting at block `(r / rows_per_group) · x_group_stride`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grouping {
    /// Consecutive rows sharing one activation slice (≥ 1).
    pub rows_per_group: usize,
    /// Distance between the groups' slices, in q8_1 blocks (32 activations each).
    pub x_group_stride: usize,
}

/// Checks the shape and buffers shared by the plain and grouped launches; returns
/// `(ncols, nrows, warps)` as launch scalars.
pub(super) fn check<B: Accelerator>(
    b: &B,
    d: &KernelDesc,
    ty: GemvType,
    (w, y): (&B::Buf, &B::Buf),
    nrows: usize,
    ncols: usize,
) -> Result<(u32, u32, u32)> {
    let scalars = check_rows(d, ty, nrows, ncols)?;
    need(
        b,
        d,
        "w",
        w,
        bytes(nrows, ncols / ty.block_elems(), ty.block_bytes()),
    )?;
    need(b, d, "y", y, bytes(nrows, 4, 1))?;
    Ok(scalars)
}

/// Checks `ncols` against the type's row multiple and the activation stage, and `nrows > 0`;
/// returns `(ncols, nrows, warps)` as launch scalars.
pub(super) fn check_rows(
    d: &KernelDesc,
    ty: GemvType,
    nrows: usize,
    ncols: usize,
) -> Result<(u32, u32, u32)> {
    let m = ty.gemv_row_multiple();
    if ncols == 0 || !ncols.is_multiple_of(m) {
        return Err(shape(
            d,
            format!("ncols = {ncols} is not a positive multiple of {m} for {ty:?}"),
        ));
    }
    if ncols / QK8_1 > GEMV_STAGE_BLOCKS as usize {
        return Err(shape(
            d,
            format!(
                "ncols = {ncols}: a block stages at most {} activations",
                GEMV_STAGE_BLOCKS as usize * QK8_1
            ),
        ));
    }
    if nrows == 0 {
        return Err(shape(d, "nrows = 0".into()));
    }
    let ncols32 = to_u32(d, "ncols", ncols)?;
    let nrows32 = to_u32(d, "nrows", nrows)?;
    Ok((ncols32, nrows32, nrows32.div_ceil(ty.rows_per_warp(ncols))))
}

/// `y = W·x`: `W` is `nrows` rows of `ncols` weights of type `ty` (row-major blocks), `x` is
/// `ncols/32` q8_1 blocks (CUDA variant, `s = Σx`), `y` is `nrows` floats. `ncols` must be a
/// positive multiple of [`GemvType::gemv_row_multiple`].
pub fn gemv_q8_1<B: Accelerator>(
    b: &mut B,
    ty: GemvType,
    (w, x, y): (&B::Buf, &B::Buf, &B::Buf),
    nrows: usize,
    ncols: usize,
) -> Result<()> {
    let d = ty.plain();
    let (ncols32, nrows32, warps) = check(b, d, ty, (w, y), nrows, ncols)?;
    need(b, d, "x", x, q8_1_bytes(1, ncols))?;
    launch(
        b,
        d,
        warps,
        &[
            KArg::Buf(w),
            KArg::Buf(x),
            KArg::Buf(y),
            KArg::U32(ncols32),
            KArg::U32(nrows32),
        ],
    )
}

/// As [`gemv_q8_1`], row `r` reading its activations from the slice of group
/// `r / rows_per_group` (see [`Grouping`]); `x` must hold every group's slice.
pub fn gemv_grouped_q8_1<B: Accelerator>(
    b: &mut B,
    ty: GemvType,
    (w, x, y): (&B::Buf, &B::Buf, &B::Buf),
    nrows: usize,
    ncols: usize,
    g: Grouping,
) -> Result<()> {
    let d = ty.grouped();
    let (ncols32, nrows32, warps) = check(b, d, ty, (w, y), nrows, ncols)?;
    let (rpg, stride) = check_grouping(b, d, x, (nrows, ncols), g, ty.block_rows(ncols))?;
    launch(
        b,
        d,
        warps,
        &[
            KArg::Buf(w),
            KArg::Buf(x),
            KArg::Buf(y),
            KArg::U32(ncols32),
            KArg::U32(nrows32),
            KArg::U32(rpg),
            KArg::U32(stride),
        ],
    )
}

/// Checks `g`, that `x` holds every group's slice and that the slices one thread block of
/// `block_rows` rows reads fit its stage; returns `(rows_per_group, x_group_stride)` as launch
/// scalars. `nrows > 0` and `ncols` (checked before).
fn check_grouping<B: Accelerator>(
    b: &B,
    d: &KernelDesc,
    x: &B::Buf,
    (nrows, ncols): (usize, usize),
    g: Grouping,
    block_rows: u32,
) -> Result<(u32, u32)> {
    if g.rows_per_group == 0 {
        return Err(shape(d, "rows_per_group = 0".into()));
    }
    let rpg = to_u32(d, "rows_per_group", g.rows_per_group)?;
    let stride = to_u32(d, "x_group_stride", g.x_group_stride)?;
    let staged = gemv_stage_blocks(
        block_rows,
        to_u32(d, "nrows", nrows)?,
        to_u32(d, "ncols", ncols)?,
        rpg,
        stride,
    );
    if staged > u64::from(GEMV_STAGE_BLOCKS) {
        return Err(shape(
            d,
            format!(
                "a block of {block_rows} rows reads {staged} activation blocks of groups of {rpg} \
                 rows {stride} blocks apart; its stage holds {GEMV_STAGE_BLOCKS}"
            ),
        ));
    }
    let last_group = (nrows - 1) / g.rows_per_group;
    let x_blocks = last_group
        .checked_mul(g.x_group_stride)
        .and_then(|v| v.checked_add(ncols / QK8_1));
    need(
        b,
        d,
        "x",
        x,
        x_blocks.and_then(|n| bytes(n, size_of::<BlockQ8_1>(), 1)),
    )?;
    Ok((rpg, stride))
}

/// As [`gemv_grouped_q8_1`], with `y` receiving `nrows/32` q8_1 blocks (CUDA variant, `s = Σ`):
/// the bits `quantize_q8_1` gives for the f32 result of [`gemv_grouped_q8_1`]. `nrows` must be
/// a positive multiple of 32 (each thread block owns one output block of 32 rows); this feeds
/// `attn_output` straight from the `attn_v_b` gemv.
pub fn gemv_grouped_q8_1_out<B: Accelerator>(
    b: &mut B,
    ty: GemvType,
    (w, x, y): (&B::Buf, &B::Buf, &B::Buf),
    nrows: usize,
    ncols: usize,
    g: Grouping,
) -> Result<()> {
    let d = ty.grouped_q8_1_out();
    let (ncols32, nrows32, _) = check_rows(d, ty, nrows, ncols)?;
    if !nrows.is_multiple_of(QK8_1) {
        return Err(shape(
            d,
            format!("nrows = {nrows} is not a multiple of {QK8_1}"),
        ));
    }
    need(
        b,
        d,
        "w",
        w,
        bytes(nrows, ncols / ty.block_elems(), ty.block_bytes()),
    )?;
    need(b, d, "y", y, q8_1_bytes(1, nrows))?;
    let (rpg, stride) = check_grouping(b, d, x, (nrows, ncols), g, QK8_1 as u32)?;
    launch(
        b,
        d,
        nrows32 / QK8_1 as u32,
        &[
            KArg::Buf(w),
            KArg::Buf(x),
            KArg::Buf(y),
            KArg::U32(ncols32),
            KArg::U32(nrows32),
            KArg::U32(rpg),
            KArg::U32(stride),
        ],
    )
}

/// `y0 = W0·x` and `y1 = W1·x` in one launch: two matrices of type `ty` with `nrows0` and
/// `nrows1` rows of the same `ncols` (`attn_q` and `attn_kv_a_mqa` after `attn_norm`).
pub fn gemv2_q8_1<B: Accelerator>(
    b: &mut B,
    ty: GemvType,
    (w0, w1): (&B::Buf, &B::Buf),
    x: &B::Buf,
    (y0, y1): (&B::Buf, &B::Buf),
    (nrows0, nrows1): (usize, usize),
    ncols: usize,
) -> Result<()> {
    let d = ty.pair();
    check(b, d, ty, (w0, y0), nrows0, ncols)?;
    check(b, d, ty, (w1, y1), nrows1, ncols)?;
    let total = nrows0
        .checked_add(nrows1)
        .ok_or_else(|| shape(d, "nrows0 + nrows1 overflows".into()))?;
    let (ncols32, _, warps) = check_rows(d, ty, total, ncols)?;
    need(b, d, "x", x, q8_1_bytes(1, ncols))?;
    launch(
        b,
        d,
        warps,
        &[
            KArg::Buf(w0),
            KArg::Buf(w1),
            KArg::Buf(x),
            KArg::Buf(y0),
            KArg::Buf(y1),
            KArg::U32(ncols32),
            KArg::U32(to_u32(d, "nrows0", nrows0)?),
            KArg::U32(to_u32(d, "nrows1", nrows1)?),
        ],
    )
}

/// `y = W·x` in f32: `W` is `nrows × ncols` floats, `x` `ncols` floats, `y` `nrows` floats;
/// `ncols` a positive multiple of 4 (the MoE router: 64 × 2048).
pub fn gemv_f32<B: Accelerator>(
    b: &mut B,
    (w, x, y): (&B::Buf, &B::Buf, &B::Buf),
    nrows: usize,
    ncols: usize,
) -> Result<()> {
    let d = &GEMV_F32;
    if ncols == 0 || !ncols.is_multiple_of(4) {
        return Err(shape(
            d,
            format!("ncols = {ncols} is not a positive multiple of 4"),
        ));
    }
    let ncols32 = to_u32(d, "ncols", ncols)?;
    let nrows32 = to_u32(d, "nrows", nrows)?;
    need(b, d, "w", w, bytes(nrows, ncols, 4))?;
    need(b, d, "x", x, bytes(ncols, 4, 1))?;
    need(b, d, "y", y, bytes(nrows, 4, 1))?;
    launch(
        b,
        d,
        nrows32,
        &[
            KArg::Buf(w),
            KArg::Buf(x),
            KArg::Buf(y),
            KArg::U32(ncols32),
            KArg::U32(nrows32),
        ],
    )
}
