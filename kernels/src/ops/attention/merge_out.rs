//! The chained launch of `attn_merge_v_b_*` and `attn_output` (`ingot_abi::launch::attn_out`).

use super::{merge_v_b_args, part_ml_bytes, part_o_bytes, AttnShape, MergeVbBufs};
use crate::backend::Accelerator;
use crate::ops::gemv::GemvType;
use crate::ops::moe::{down_norm_args, row_multiple, weight_bytes, DownNorm};
use crate::ops::{bytes, launch, need, q8_1_bytes, shape, to_u32};
use crate::Result;
use ingot_abi::launch::{
    merge_v_b_items, merge_v_b_o_cols_fit, merge_v_b_o_out_blocks, merge_v_b_pairs,
    moe_down_stage_fits, KernelDesc, MergeVbOArgs, MergeVbOColsArgs, CHAIN_CTL_WORDS,
    DOWN_NORM_NONE, MERGE_V_B_O_COLS_MIN, MERGE_V_B_SPLIT,
};
use ingot_abi::step::StepState;
use std::mem::size_of;

/// `attn_output`'s buffers in [`attn_merge_v_b_o`].
pub struct OutputBufs<'a, T> {
    /// `n_embd` rows of `n_head · d_v` weights, the `attn_v_b` weights' type.
    pub w_o: &'a T,
    /// `n_embd` floats: the residual stream before the attention.
    pub resid: &'a T,
    /// `n_embd` floats: after it (may be `resid` itself).
    pub out: &'a T,
    /// The norm tail on `out` (as [`crate::ops::moe::moe_down`]'s).
    pub norm: Option<DownNorm<'a, T>>,
    /// [`CHAIN_CTL_WORDS`] `u32`s holding 0 (the launch leaves them 0 again).
    pub chain_ctl: &'a T,
}

/// [`super::attn_merge_v_b`] then `out = resid + w_o · y` (with the norm tail) in one chained
/// launch: the bits of those two launches (`attn_output` as the down kernel of `ty` with no
/// routed slots). `y` (`merge.y`) is the merge's output and `attn_output`'s input.
pub fn attn_merge_v_b_o<B: Accelerator>(
    b: &mut B,
    ty: GemvType,
    (s, d_v, max_segments): (&AttnShape, usize, usize),
    merge: &MergeVbBufs<'_, B::Buf>,
    n_embd: usize,
    out: &OutputBufs<'_, B::Buf>,
) -> Result<()> {
    let d = ty.merge_v_b_o();
    let (args, ncols) = merge_out_args(b, d, ty, (s, d_v, max_segments), merge, n_embd, out)?;
    let ncols32 = u32::try_from(ncols).unwrap_or(u32::MAX);
    if !moe_down_stage_fits(0, 0, ncols32) {
        return Err(shape(
            d,
            format!("attn_output's {ncols} columns exceed the down kernel's shared stage"),
        ));
    }
    need(b, d, "resid", out.resid, bytes(n_embd, 4, 1))?;
    need(b, d, "out", out.out, bytes(n_embd, 4, 1))?;
    let items =
        merge_v_b_items(args.n_head, args.d_v).checked_add(merge_v_b_o_out_blocks(args.nrows));
    let Some(items) = items else {
        return Err(shape(d, format!("n_embd = {n_embd} rows")));
    };
    launch(b, d, items, args)
}

/// The checks and arguments both `attn_merge_v_b_o` launchers share, on behalf of kernel `d`:
/// the merge's, `attn_output`'s weight and row count, the control words and the norm tail (its
/// per-position buffers at one column); the width `n_head·d_v`.
fn merge_out_args<'a, B: Accelerator>(
    b: &B,
    d: &KernelDesc,
    ty: GemvType,
    (s, d_v, max_segments): (&AttnShape, usize, usize),
    merge: &MergeVbBufs<'a, B::Buf>,
    n_embd: usize,
    out: &OutputBufs<'a, B::Buf>,
) -> Result<(MergeVbOArgs<&'a B::Buf>, usize)> {
    let (_, m) = merge_v_b_args(b, d, ty, s, d_v, merge, max_segments)?;
    let ncols = s.n_head * d_v;
    row_multiple(d, "n_head·d_v", ty, ncols)?;
    let nrows = u32::try_from(n_embd).unwrap_or(0);
    if nrows == 0 {
        return Err(shape(d, format!("n_embd = {n_embd} rows")));
    }
    need(b, d, "w_o", out.w_o, weight_bytes(ty, 1, n_embd, ncols))?;
    need(
        b,
        d,
        "chain_ctl",
        out.chain_ctl,
        bytes(CHAIN_CTL_WORDS as usize, 4, 1),
    )?;
    let (norm_w, norm_q8, norm_f32, count, norm, eps) =
        down_norm_args(b, d, n_embd, out.norm.as_ref(), out.w_o)?;
    let args = MergeVbOArgs {
        part_o: m.part_o,
        part_ml: m.part_ml,
        state: m.state,
        w: m.w,
        y: m.y,
        scratch: m.scratch,
        pair_count: m.pair_count,
        n_head: m.n_head,
        d_v: m.d_v,
        ctx: m.ctx,
        max_segments: m.max_segments,
        w_o: out.w_o,
        resid: out.resid,
        out: out.out,
        nrows,
        norm_w,
        norm_q8,
        norm_f32,
        count,
        norm,
        eps,
        chain_ctl: out.chain_ctl,
    };
    Ok((args, ncols))
}

/// Bytes between consecutive columns' copies of each per-position buffer of
/// [`attn_merge_v_b_o_cols`] (`merge`'s and `out`'s; the weights, `count` and `chain_ctl` are
/// the launch's own).
#[derive(Clone, Copy, Debug)]
pub struct MergeOutStrides {
    pub part_o: usize,
    pub part_ml: usize,
    pub state: usize,
    pub y: usize,
    pub scratch: usize,
    pub pair_count: usize,
    pub resid: usize,
    pub out: usize,
    pub norm_q8: usize,
    pub norm_f32: usize,
}

/// [`attn_merge_v_b_o`] on `m` columns (2 to 4) in one launch
/// (`ingot_abi::launch::attn_out::MERGE_V_B_O_COLS_Q4K`): column `c` reads and writes each
/// per-position buffer of `merge` and `out` (and the norm tail's `q8` and `f32`) at
/// `c · strides.<buffer>` bytes into it; `attn_output`'s rows stream once for all columns. Each
/// column's outputs are what [`attn_merge_v_b_o`] gives it alone. A type without the kernel,
/// columns that overflow the down stage, or a stride shorter than its column or not 16-byte
/// aligned are a [`crate::KernelError::Shape`] error.
pub fn attn_merge_v_b_o_cols<B: Accelerator>(
    b: &mut B,
    ty: GemvType,
    m: usize,
    (s, d_v, max_segments): (&AttnShape, usize, usize),
    merge: &MergeVbBufs<'_, B::Buf>,
    n_embd: usize,
    out: &OutputBufs<'_, B::Buf>,
    strides: MergeOutStrides,
) -> Result<()> {
    let one = ty.merge_v_b_o();
    let k = ty.merge_v_b_o_cols(m).ok_or_else(|| {
        shape(
            one,
            format!(
                "no {m}-column attn_merge_v_b_o for {ty:?} (the kernels take {MERGE_V_B_O_COLS_MIN} \
                 to {} columns of Q4_K)",
                MERGE_V_B_O_COLS_MIN + 2
            ),
        )
    })?;
    let d = &k.desc;
    let (a, ncols) = merge_out_args(b, d, ty, (s, d_v, max_segments), merge, n_embd, out)?;
    if !merge_v_b_o_cols_fit(m as u32, u32::try_from(ncols).unwrap_or(u32::MAX)) {
        return Err(shape(
            d,
            format!("{m} columns of attn_output's {ncols}: more than the down kernel's stage"),
        ));
    }
    let pairs = merge_v_b_pairs(a.n_head, a.d_v) as usize;
    let f32s = bytes(n_embd, 4, 1);
    let columns = [
        (
            "part_o",
            strides.part_o,
            part_o_bytes(s, max_segments),
            merge.part_o,
        ),
        (
            "part_ml",
            strides.part_ml,
            part_ml_bytes(s, max_segments),
            merge.part_ml,
        ),
        (
            "state",
            strides.state,
            Some(size_of::<StepState>()),
            merge.state,
        ),
        ("y", strides.y, q8_1_bytes(1, ncols), merge.y),
        (
            "scratch",
            strides.scratch,
            bytes(ncols, MERGE_V_B_SPLIT as usize, 4),
            merge.scratch,
        ),
        (
            "pair_count",
            strides.pair_count,
            bytes(pairs, 1, 4),
            merge.pair_count,
        ),
        ("resid", strides.resid, f32s, out.resid),
        ("out", strides.out, f32s, out.out),
        ("norm_q8", strides.norm_q8, q8_1_bytes(1, n_embd), a.norm_q8),
        ("norm_f32", strides.norm_f32, f32s, a.norm_f32),
    ];
    let mut scalars = [0u32; 10];
    for (i, (what, stride, len, buf)) in columns.into_iter().enumerate() {
        let len = len.unwrap_or(usize::MAX);
        // Without a norm tail its buffers stand in for nothing: no column of them is read.
        let unused = a.norm == DOWN_NORM_NONE && what.starts_with("norm_");
        if !unused && (stride < len || !stride.is_multiple_of(16)) {
            return Err(shape(
                d,
                format!("{what} stride {stride}: a column takes {len} bytes, 16-aligned"),
            ));
        }
        let span = stride.checked_mul(m - 1).and_then(|a| a.checked_add(len));
        if !unused {
            need(b, d, what, buf, span)?;
        }
        scalars[i] = to_u32(d, what, stride)?;
    }
    // `merge_v_b_o_cols_items`, checked.
    let items = (merge_v_b_items(a.n_head, a.d_v).checked_mul(m as u32))
        .and_then(|i| i.checked_add(merge_v_b_o_out_blocks(a.nrows)));
    let Some(items) = items else {
        return Err(shape(d, format!("{m} columns, n_embd = {n_embd} rows")));
    };
    launch(b, k, items, MergeVbOColsArgs::on_columns(a, scalars))
}
