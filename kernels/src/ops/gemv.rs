//! Checked launches of the gemv family (`ingot_abi::launch` family `gemv`): quantized weights
//! times q8_1 activations (plain, grouped, grouped with a q8_1 epilogue, two-matrix), and the
//! f32 gemv of the MoE router.

use super::{bytes, launch, need, q8_1_bytes, shape, to_u32};
use crate::backend::Accelerator;
use crate::Result;
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::{
    gemv_block_rows, gemv_pair_rows_per_warp, gemv_rows_per_warp, gemv_stage_blocks, Gemv2Args,
    Gemv2NormArgs, GemvArgs, GemvGroupedArgs, KernelDesc, GEMV_COLS_MIN, GEMV_COLS_Q4K, GEMV_F32,
    GEMV_STAGE_BLOCKS,
};
pub use ingot_abi::weight_types::GemvType;
use std::mem::size_of;

/// Units of `ty` in a row of `ncols` weights.
fn units(ty: GemvType, ncols: usize) -> u32 {
    u32::try_from(ncols / ty.row_multiple()).unwrap_or(u32::MAX)
}

/// Rows one warp computes for rows of `ncols` weights of `ty`.
fn rows_per_warp(ty: GemvType, ncols: usize) -> u32 {
    gemv_rows_per_warp(units(ty, ncols), ty.unit())
}

/// Rows one warp of a two-matrix kernel (`GemvType::pair`, and with the rope tail) computes.
pub(super) fn pair_rows_per_warp(ty: GemvType, ncols: usize) -> u32 {
    gemv_pair_rows_per_warp(units(ty, ncols), ty.unit())
}

/// Rows one thread block computes for rows of `ncols` weights of `ty`.
pub(super) fn block_rows(ty: GemvType, ncols: usize) -> u32 {
    gemv_block_rows(units(ty, ncols), ty.unit())
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
    Ok((ncols32, nrows32, nrows32.div_ceil(rows_per_warp(ty, ncols))))
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
        GemvArgs {
            w,
            x,
            y,
            ncols: ncols32,
            nrows: nrows32,
        },
    )
}

/// `y_c = W·x_c` for `m` columns (2 to 4) against one Q4_K weight stream
/// ([`GEMV_COLS_Q4K`]): `W` as for [`gemv_q8_1`], `x` the `m` columns' q8_1 blocks one after
/// the other (`ncols/32` each), `y` `m·nrows` floats, column `c` from float `c·nrows`. Each
/// column's values are [`gemv_q8_1`]'s bits on that column.
pub fn gemv_cols_q4k<B: Accelerator>(
    b: &mut B,
    m: usize,
    (w, x, y): (&B::Buf, &B::Buf, &B::Buf),
    nrows: usize,
    ncols: usize,
) -> Result<()> {
    let ty = GemvType::Q4K;
    let Some(k) = m
        .checked_sub(GEMV_COLS_MIN)
        .and_then(|i| GEMV_COLS_Q4K.get(i))
    else {
        return Err(shape(
            &GEMV_COLS_Q4K[0],
            format!(
                "{m} columns: the kernels take {GEMV_COLS_MIN} to {}",
                GEMV_COLS_MIN + GEMV_COLS_Q4K.len() - 1
            ),
        ));
    };
    let (ncols32, nrows32, warps) = check_rows(k, ty, nrows, ncols)?;
    if m * (ncols / QK8_1) > GEMV_STAGE_BLOCKS as usize {
        return Err(shape(
            k,
            format!(
                "{m} columns of {ncols}: a block stages at most {GEMV_STAGE_BLOCKS} q8_1 blocks"
            ),
        ));
    }
    need(
        b,
        k,
        "w",
        w,
        bytes(nrows, ncols / ty.block_elems(), ty.block_bytes()),
    )?;
    need(b, k, "x", x, q8_1_bytes(m, ncols))?;
    need(
        b,
        k,
        "y",
        y,
        nrows.checked_mul(m).and_then(|n| bytes(n, 4, 1)),
    )?;
    launch(
        b,
        k,
        warps,
        GemvArgs {
            w,
            x,
            y,
            ncols: ncols32,
            nrows: nrows32,
        },
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
    let (rpg, stride) = check_grouping(b, d, x, (nrows, ncols), g, block_rows(ty, ncols))?;
    launch(
        b,
        d,
        warps,
        GemvGroupedArgs {
            w,
            x,
            y,
            ncols: ncols32,
            nrows: nrows32,
            rows_per_group: rpg,
            x_group_stride: stride,
        },
    )
}

/// Checks `g`, that `x` holds every group's slice and that the slices one thread block of
/// `block_rows` rows reads fit its stage; returns `(rows_per_group, x_group_stride)` as launch
/// scalars. `nrows > 0` and `ncols` (checked before).
pub(super) fn check_grouping<B: Accelerator>(
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
        GemvGroupedArgs {
            w,
            x,
            y,
            ncols: ncols32,
            nrows: nrows32,
            rows_per_group: rpg,
            x_group_stride: stride,
        },
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
    let (ncols32, warps) = check_pair(b, d, ty, (w0, w1, x), (y0, y1), (nrows0, nrows1), ncols)?;
    launch(
        b,
        d,
        warps,
        Gemv2Args {
            w0,
            w1,
            x,
            y0,
            y1,
            ncols: ncols32,
            nrows0: to_u32(d, "nrows0", nrows0)?,
            nrows1: to_u32(d, "nrows1", nrows1)?,
        },
    )
}

/// The checks of a two-matrix launch `d`: each matrix against its output, the rows together
/// and `x`; returns `ncols` as `u32` and the launch's warps.
fn check_pair<B: Accelerator>(
    b: &B,
    d: &KernelDesc,
    ty: GemvType,
    (w0, w1, x): (&B::Buf, &B::Buf, &B::Buf),
    (y0, y1): (&B::Buf, &B::Buf),
    (nrows0, nrows1): (usize, usize),
    ncols: usize,
) -> Result<(u32, u32)> {
    check(b, d, ty, (w0, y0), nrows0, ncols)?;
    check(b, d, ty, (w1, y1), nrows1, ncols)?;
    let total = nrows0
        .checked_add(nrows1)
        .ok_or_else(|| shape(d, "nrows0 + nrows1 overflows".into()))?;
    let (ncols32, nrows32, _) = check_rows(d, ty, total, ncols)?;
    need(b, d, "x", x, q8_1_bytes(1, ncols))?;
    Ok((ncols32, nrows32.div_ceil(pair_rows_per_warp(ty, ncols))))
}

/// [`gemv2_q8_1`] whose last block also writes `y0_q8 = q8_1(rmsnorm(y0)·norm_w)` (`nrows0`
/// floats of `norm_w`, `nrows0` a multiple of 32), the bits of `rmsnorm_q8_1` on `y0` (a
/// low-rank query's `attn_q_a` with its norm, and `attn_kv_a_mqa`). `count` is the tail's done
/// counter: a `u32` that is 0 before the launch and 0 again after it.
#[allow(clippy::too_many_arguments)]
pub fn gemv2_norm_q8_1<B: Accelerator>(
    b: &mut B,
    ty: GemvType,
    w: (&B::Buf, &B::Buf),
    x: &B::Buf,
    y: (&B::Buf, &B::Buf),
    nrows: (usize, usize),
    ncols: usize,
    tail: (&B::Buf, &B::Buf, &B::Buf),
    eps: f32,
) -> Result<()> {
    let d = ty.pair_norm();
    let (args, warps) = gemv2_norm_args(b, &d.desc, ty, w, x, y, nrows, ncols, tail, eps)?;
    launch(b, d, warps, args)
}

/// [`gemv2_norm_q8_1`]'s arguments checked against the descriptor `d` it is launched (or
/// chained) as, and the launch's warps.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemv2_norm_args<'a, B: Accelerator>(
    b: &B,
    d: &KernelDesc,
    ty: GemvType,
    (w0, w1): (&'a B::Buf, &'a B::Buf),
    x: &'a B::Buf,
    (y0, y1): (&'a B::Buf, &'a B::Buf),
    (nrows0, nrows1): (usize, usize),
    ncols: usize,
    (norm_w, y0_q8, count): (&'a B::Buf, &'a B::Buf, &'a B::Buf),
    eps: f32,
) -> Result<(Gemv2NormArgs<&'a B::Buf>, u32)> {
    let (ncols32, warps) = check_pair(b, d, ty, (w0, w1, x), (y0, y1), (nrows0, nrows1), ncols)?;
    if nrows0 == 0 || !nrows0.is_multiple_of(32) {
        return Err(shape(
            d,
            format!("nrows0 = {nrows0} is not a positive multiple of 32 (q8_1 blocks)"),
        ));
    }
    if !eps.is_finite() || eps < 0.0 {
        return Err(shape(
            d,
            format!("eps = {eps} is not a finite non-negative number"),
        ));
    }
    need(b, d, "norm_w", norm_w, Some(nrows0 * 4))?;
    need(b, d, "y0_q8", y0_q8, q8_1_bytes(1, nrows0))?;
    need(b, d, "count", count, Some(4))?;
    let args = Gemv2NormArgs {
        w0,
        w1,
        x,
        y0,
        y1,
        ncols: ncols32,
        nrows0: to_u32(d, "nrows0", nrows0)?,
        nrows1: to_u32(d, "nrows1", nrows1)?,
        norm_w,
        y0_q8,
        count,
        eps,
    };
    Ok((args, warps))
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
        GemvArgs {
            w,
            x,
            y,
            ncols: ncols32,
            nrows: nrows32,
        },
    )
}
