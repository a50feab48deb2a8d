//! The chained launch of `gemv2_rope_*` and `attn_k_b`'s grouped gemv
//! (`ingot_abi::launch::projections`, `gemv2_rope_kb_*`).

use super::rope::gemv_rope_args;
use super::{AttnShape, RopeKvBufs};
use crate::backend::Accelerator;
use crate::ops::gemv::{block_rows, check as check_gemv, check_grouping, GemvType, Grouping};
use crate::ops::{bytes, launch, need, shape};
use crate::Result;
use ingot_abi::blocks::QK8_1;
use ingot_abi::launch::{gemv2_rope_kb_blocks, Gemv2RopeKbArgs, CHAIN_CTL_WORDS};

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
    (eps, mscale): (f32, f32),
    k: &KbBufs<'_, B::Buf>,
) -> Result<()> {
    let Some(kernel) = ty.pair_rope_kb(kb) else {
        let d = ty.pair_rope();
        return Err(shape(
            d,
            format!(
                "no chained kernel of {ty:?} with attn_k_b as {kb:?} (registry `chain_rope_kb`)"
            ),
        ));
    };
    let d = &kernel.desc;
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
    let (first, waiting) = gemv2_rope_kb_blocks(
        (ty.unit(), units(ty, ncols), r.nrows0 + r.nrows1),
        (
            kb.unit(),
            units(kb, s.d_nope),
            u32::try_from(kb_rows).unwrap_or(u32::MAX),
        ),
    );
    let Some(items) = first.checked_add(waiting) else {
        return Err(shape(d, format!("{first} + {waiting} blocks")));
    };
    launch(
        b,
        kernel,
        items,
        Gemv2RopeKbArgs::new(r, (k.w, k.q_abs), k.chain_ctl),
    )
}
