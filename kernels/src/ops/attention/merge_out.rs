//! The chained launch of `attn_merge_v_b_*` and `attn_output` (`ingot_abi::launch::attn_out`).

use super::{merge_v_b_args, AttnShape, MergeVbBufs};
use crate::backend::Accelerator;
use crate::ops::gemv::GemvType;
use crate::ops::moe::{down_norm_args, row_multiple, weight_bytes, DownNorm};
use crate::ops::{bytes, launch, need, shape};
use crate::Result;
use ingot_abi::launch::{
    merge_v_b_items, merge_v_b_o_out_blocks, moe_down_stage_fits, MergeVbOArgs, CHAIN_CTL_WORDS,
};

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
    let (_, m) = merge_v_b_args(b, d, ty, s, d_v, merge, max_segments)?;
    let ncols = s.n_head * d_v;
    row_multiple(d, "n_head·d_v", ty, ncols)?;
    let ncols32 = u32::try_from(ncols).unwrap_or(u32::MAX);
    if !moe_down_stage_fits(0, 0, ncols32) {
        return Err(shape(
            d,
            format!("attn_output's {ncols} columns exceed the down kernel's shared stage"),
        ));
    }
    let nrows = u32::try_from(n_embd).unwrap_or(0);
    let items = merge_v_b_items(m.n_head, m.d_v).checked_add(merge_v_b_o_out_blocks(nrows));
    let Some(items) = items.filter(|_| nrows > 0) else {
        return Err(shape(d, format!("n_embd = {n_embd} rows")));
    };
    need(b, d, "w_o", out.w_o, weight_bytes(ty, 1, n_embd, ncols))?;
    need(b, d, "resid", out.resid, bytes(n_embd, 4, 1))?;
    need(b, d, "out", out.out, bytes(n_embd, 4, 1))?;
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
    launch(b, d, items, args)
}
