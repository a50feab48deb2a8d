//! The chained launches of `gemv2_rope_*` and `attn_k_b`'s grouped gemv
//! (`ingot_abi::launch::projections`, `gemv2_rope_kb_*`), and of `gemv2_norm_*` in front of
//! those (`gemv2_norm_rope_kb_*`).

use super::rope::gemv_rope_args;
use super::{AttnShape, RopeKvBufs};
use crate::backend::Accelerator;
use crate::ops::gemv::{
    block_rows, check as check_gemv, check_grouping, gemv2_norm_args, GemvType, Grouping,
};
use crate::ops::{bytes, launch, need, shape};
use crate::Result;
use ingot_abi::blocks::QK8_1;
use ingot_abi::launch::{
    gemv2_norm_blocks, gemv2_rope_kb_blocks, Gemv2NormRopeKbArgs, Gemv2RopeKbArgs, KernelDesc,
    CHAIN_CTL_WORDS,
};

/// `attn_k_b`'s buffers in [`gemv2_rope_kb_q8_1`].
pub struct KbBufs<'a, T> {
    /// `n_head·kv_lora` rows of `d_nope` weights of the `kb` type, head `h`'s from row
    /// `h·kv_lora`.
    pub w: &'a T,
    /// Out: `n_head·kv_lora` f32, `q_abs[h] = W_kb[h]·q_nope[h]`.
    pub q_abs: &'a T,
    /// [`CHAIN_CTL_WORDS`] `u32`s holding 0 (the launch leaves them 0 again).
    pub chain_ctl: &'a T,
}

/// [`super::gemv2_rope_q8_1`] (or, with `w1 = None`, [`super::gemv_rope_q8_1`]) of weight type
/// `ty`, then `attn_k_b` of type `kb` on the q8_1 of each head's `q_nope`, in one chained launch:
/// the bits of those two launches in `q`, `kv`, `q_pe`, the cache and `q_abs` (`attn_k_b` as the
/// grouped gemv with groups of `kv_lora` rows reading `d_nope/32` blocks `d_nope/32` apart,
/// quantized by its blocks from `q`). `tail.0` (`q_nope_q8`) is checked but not written.
#[allow(clippy::too_many_arguments)]
pub fn gemv2_rope_kb_q8_1<B: Accelerator>(
    b: &mut B,
    (ty, kb): (GemvType, GemvType),
    w: (&B::Buf, Option<&B::Buf>),
    x: &B::Buf,
    ncols: usize,
    s: &AttnShape,
    bufs: &RopeKvBufs<'_, B::Buf>,
    tail: (&B::Buf, &B::Buf),
    scales: (f32, f32),
    k: &KbBufs<'_, B::Buf>,
) -> Result<()> {
    let Some(kernel) = ty.pair_rope_kb(kb) else {
        return Err(no_chain(ty, kb));
    };
    let (args, (first, waiting)) = rope_kb_args(
        b,
        &kernel.desc,
        (ty, kb),
        w,
        (x, ncols),
        s,
        bufs,
        tail,
        scales,
        k,
    )?;
    let d = &kernel.desc;
    let Some(items) = first.checked_add(waiting) else {
        return Err(shape(d, format!("{first} + {waiting} blocks")));
    };
    launch(b, kernel, items, args)
}

/// The first products and their norm in [`gemv2_norm_rope_kb_q8_1`] (see
/// [`crate::ops::gemv::gemv2_norm_q8_1`]).
pub struct NormBufs<'a, T> {
    /// `attn_q_a` and `attn_kv_a_mqa`: `nrows.0` and `nrows.1` rows of `ncols` weights of the
    /// chain's type.
    pub w: (&'a T, &'a T),
    /// The normed token (`ncols/32` q8_1 blocks).
    pub x: &'a T,
    /// Out: `attn_q_a·x` (`nrows.0` f32); `attn_kv_a_mqa·x` goes to the rope's `kv`.
    pub q_a: &'a T,
    pub nrows: (usize, usize),
    pub ncols: usize,
    /// `attn_q_a_norm`'s weight (`nrows.0` f32).
    pub norm_w: &'a T,
    /// The norm tail's done counter: a `u32` holding 0 (the launch leaves it 0 again).
    pub count: &'a T,
    /// [`CHAIN_CTL_WORDS`] `u32`s holding 0 (the launch leaves them 0 again).
    pub ctl: &'a T,
}

/// [`crate::ops::gemv::gemv2_norm_q8_1`] (`n`, its norm written to `x`) and
/// [`gemv2_rope_kb_q8_1`] (`attn_q_b` alone, `w_q_b`, on `x`; its `kv` the first products')
/// in one chained launch of type `ty` for every product before `attn_k_b` (type `kb`): the bits
/// of those launches in `q_a`, `x`, `q`, `kv`, `q_pe`, the cache and `q_abs`. The norm's eps is
/// `scales.0`.
#[allow(clippy::too_many_arguments)]
pub fn gemv2_norm_rope_kb_q8_1<B: Accelerator>(
    b: &mut B,
    (ty, kb): (GemvType, GemvType),
    n: &NormBufs<'_, B::Buf>,
    (w_q_b, x, ncols): (&B::Buf, &B::Buf, usize),
    s: &AttnShape,
    bufs: &RopeKvBufs<'_, B::Buf>,
    tail: (&B::Buf, &B::Buf),
    scales: (f32, f32),
    k: &KbBufs<'_, B::Buf>,
) -> Result<()> {
    let Some(kernel) = ty.pair_norm_rope_kb(kb) else {
        return Err(no_chain(ty, kb));
    };
    let d = &kernel.desc;
    let w = (w_q_b, None);
    let (r, (first, waiting)) =
        rope_kb_args(b, d, (ty, kb), w, (x, ncols), s, bufs, tail, scales, k)?;
    let (norm, _) = gemv2_norm_args(
        b,
        d,
        ty,
        n.w,
        n.x,
        (n.q_a, bufs.kv),
        n.nrows,
        n.ncols,
        (n.norm_w, x, n.count),
        scales.0,
    )?;
    need(
        b,
        d,
        "norm_ctl",
        n.ctl,
        bytes(CHAIN_CTL_WORDS as usize, 4, 1),
    )?;
    let units = u32::try_from(n.ncols / ty.row_multiple()).unwrap_or(u32::MAX);
    let norm_blocks = gemv2_norm_blocks(ty.unit(), units, norm.nrows0 + norm.nrows1);
    let Some(items) = norm_blocks
        .checked_add(first)
        .and_then(|i| i.checked_add(waiting))
    else {
        return Err(shape(
            d,
            format!("{norm_blocks} + {first} + {waiting} blocks"),
        ));
    };
    // `norm` was checked with `x`, `bufs.kv` and `scales.0`: the rope part's.
    launch(b, kernel, items, Gemv2NormRopeKbArgs::new(norm, r, n.ctl))
}

fn no_chain(ty: GemvType, kb: GemvType) -> crate::KernelError {
    shape(
        ty.pair_rope(),
        format!("no chained kernel of {ty:?} with attn_k_b as {kb:?} (registry `chain_rope_kb`)"),
    )
}

/// A `gemv2_rope_kb_*` launch's arguments and its parts in blocks.
pub(crate) type RopeKb<'a, B> = (Gemv2RopeKbArgs<&'a <B as Accelerator>::Buf>, (u32, u32));

/// The `gemv2_rope_kb_*` arguments checked against the descriptor `d` they are launched (or
/// chained) as, and the chain's parts in blocks.
#[allow(clippy::too_many_arguments)]
pub(crate) fn rope_kb_args<'a, B: Accelerator>(
    b: &B,
    d: &KernelDesc,
    (ty, kb): (GemvType, GemvType),
    w: (&'a B::Buf, Option<&'a B::Buf>),
    (x, ncols): (&'a B::Buf, usize),
    s: &AttnShape,
    bufs: &RopeKvBufs<'a, B::Buf>,
    tail: (&'a B::Buf, &'a B::Buf),
    (eps, mscale): (f32, f32),
    k: &KbBufs<'a, B::Buf>,
) -> Result<RopeKb<'a, B>> {
    let (r, _) = gemv_rope_args(b, d, ty, w, x, ncols, s, bufs, tail, (eps, mscale))?;
    let kb_rows = s.n_head * s.kv_lora;
    check_gemv(b, d, kb, (k.w, k.q_abs), kb_rows, s.d_nope)?;
    let g = Grouping {
        rows_per_group: s.kv_lora,
        x_group_stride: s.d_nope / QK8_1,
    };
    check_grouping(
        b,
        d,
        tail.0,
        (kb_rows, s.d_nope),
        g,
        block_rows(kb, s.d_nope),
    )?;
    need(
        b,
        d,
        "chain_ctl",
        k.chain_ctl,
        bytes(CHAIN_CTL_WORDS as usize, 4, 1),
    )?;
    let units = |t: GemvType, n: usize| u32::try_from(n / t.row_multiple()).unwrap_or(u32::MAX);
    let parts = gemv2_rope_kb_blocks(
        (ty.unit(), units(ty, ncols), r.nrows0 + r.nrows1),
        (
            kb.unit(),
            units(kb, s.d_nope),
            u32::try_from(kb_rows).unwrap_or(u32::MAX),
        ),
    );
    Ok((Gemv2RopeKbArgs::new(r, (k.w, k.q_abs), k.chain_ctl), parts))
}
