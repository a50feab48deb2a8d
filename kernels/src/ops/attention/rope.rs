//! Checked launches of the rope kernels: `rope_kv`, `rope_kv_q8_1`, `rope_kv_q8_1_rows`, and the
//! two-matrix gemv with the rope tail (`gemv2_rope_*`); the shape is the attention's
//! [`AttnShape`].

use super::super::gemv::{check as check_gemv, check_rows, pair_rows_per_warp, GemvType};
use super::super::{bytes, launch, need, q8_1_bytes, shape, to_u32};
use super::AttnShape;
use crate::backend::Accelerator;
use crate::Result;
use ingot_abi::blocks::QK8_1;
use ingot_abi::launch::{
    Gemv2RopeArgs, KernelDesc, RopeKvArgs, RopeKvQ8_1Args, RopeKvRowsArgs, ROPE_KV, ROPE_KV_Q8_1,
    ROPE_KV_Q8_1_ROWS,
};
use ingot_abi::step::StepState;
use std::mem::size_of;

/// Buffers of [`rope_kv`].
pub struct RopeKvBufs<'a, T> {
    /// `n_head × (d_nope + n_rope)` f32 (`attn_q` output).
    pub q: &'a T,
    /// `kv_lora + n_rope` f32 (`attn_kv_a_mqa` output).
    pub kv: &'a T,
    /// `kv_lora` f32 (`attn_kv_a_norm`).
    pub kv_norm: &'a T,
    /// `n_rope / 2` f64: `θ_i / pos` per pair.
    pub rope_freq: &'a T,
    /// One `StepState`.
    pub state: &'a T,
    /// Out: `n_head × n_rope` f32.
    pub q_pe: &'a T,
    /// In/out: the layer's cache, `ctx` rows of [`AttnShape::row_bytes`].
    pub cache: &'a T,
}

/// Rotates the query rope parts into `q_pe` and writes cache row `pos` (see
/// `ingot_abi::launch::ROPE_KV`). `eps` is the latent rmsnorm epsilon, `mscale` the factor on
/// cos/sin (`RopeParams::rope_mscale`, 1 for V2-Lite).
pub fn rope_kv<B: Accelerator>(
    b: &mut B,
    s: &AttnShape,
    bufs: &RopeKvBufs<'_, B::Buf>,
    eps: f32,
    mscale: f32,
) -> Result<()> {
    let d = &ROPE_KV;
    check_rope(b, d, s, bufs, None, 1, eps, mscale)?;
    let r = rope_scalars(d, s, eps, mscale)?;
    let args = RopeKvArgs {
        q: bufs.q,
        kv: bufs.kv,
        kv_norm: bufs.kv_norm,
        rope_freq: bufs.rope_freq,
        state: bufs.state,
        q_pe: bufs.q_pe,
        cache: bufs.cache,
        n_head: r.n_head,
        d_nope: r.d_nope,
        kv_lora: r.kv_lora,
        n_rope: r.n_rope,
        ctx: r.ctx,
        eps: r.eps,
        mscale: r.mscale,
        cache_type: r.cache_type,
    };
    launch(b, d, 1, args)
}

/// [`rope_kv`] that also writes every head's query nope part into `q_nope_q8` as q8_1 blocks
/// (`n_head · d_nope / 32` of them, head `h` at block `h · d_nope / 32`), the bits
/// `quantize_q8_1` gives for each head's slice (see `ingot_abi::launch::ROPE_KV_Q8_1`).
/// `d_nope` must be a multiple of 32 and `n_rope` of 4.
pub fn rope_kv_q8_1<B: Accelerator>(
    b: &mut B,
    s: &AttnShape,
    bufs: &RopeKvBufs<'_, B::Buf>,
    q_nope_q8: &B::Buf,
    eps: f32,
    mscale: f32,
) -> Result<()> {
    let d = &ROPE_KV_Q8_1;
    check_rope(b, d, s, bufs, Some(q_nope_q8), 1, eps, mscale)?;
    let r = rope_scalars(d, s, eps, mscale)?;
    let args = RopeKvQ8_1Args {
        q: bufs.q,
        kv: bufs.kv,
        kv_norm: bufs.kv_norm,
        rope_freq: bufs.rope_freq,
        state: bufs.state,
        q_pe: bufs.q_pe,
        q_nope_q8,
        cache: bufs.cache,
        n_head: r.n_head,
        d_nope: r.d_nope,
        kv_lora: r.kv_lora,
        n_rope: r.n_rope,
        ctx: r.ctx,
        eps: r.eps,
        mscale: r.mscale,
        cache_type: r.cache_type,
    };
    launch(b, d, 1, args)
}

/// [`rope_kv_q8_1`] for a prefill chunk: token `t < min(n, ntok)` (`n` the `u32` in `rows`)
/// reads row `t` of `bufs.q` and `bufs.kv`, writes row `t` of `bufs.q_pe` and `q_nope_q8` and
/// cache row `pos0 + t` (`pos0` from `bufs.state`); see `ingot_abi::launch::ROPE_KV_Q8_1_ROWS`.
/// The row buffers must hold `ntok` rows; `ntok ≥ 1`.
pub fn rope_kv_q8_1_rows<B: Accelerator>(
    b: &mut B,
    s: &AttnShape,
    bufs: &RopeKvBufs<'_, B::Buf>,
    q_nope_q8: &B::Buf,
    rows: &B::Buf,
    ntok: usize,
    eps: f32,
    mscale: f32,
) -> Result<()> {
    let d = &ROPE_KV_Q8_1_ROWS;
    check_rope(b, d, s, bufs, Some(q_nope_q8), ntok, eps, mscale)?;
    need(b, d, "rows", rows, Some(4))?;
    let ntok32 = to_u32(d, "ntok", ntok)?;
    let r = rope_scalars(d, s, eps, mscale)?;
    let args = RopeKvRowsArgs {
        q: bufs.q,
        kv: bufs.kv,
        kv_norm: bufs.kv_norm,
        rope_freq: bufs.rope_freq,
        state: bufs.state,
        rows,
        q_pe: bufs.q_pe,
        q_nope_q8,
        cache: bufs.cache,
        n_head: r.n_head,
        d_nope: r.d_nope,
        kv_lora: r.kv_lora,
        n_rope: r.n_rope,
        ctx: r.ctx,
        eps: r.eps,
        mscale: r.mscale,
        cache_type: r.cache_type,
        ntok: ntok32,
    };
    launch(b, d, ntok32, args)
}

/// `attn_q` (`w0`, into `bufs.q`) and `attn_kv_a_mqa` (`w1`, into `bufs.kv`), two matrices of type
/// `ty` and width `ncols` against the q8_1 `x`, then [`rope_kv_q8_1`] on their outputs in the
/// launch's last block (`ingot_abi::launch::GEMV2_ROPE_Q4K_Q8_1` and its siblings). `count` is the
/// tail's done counter: a `u32` that is 0 before the launch and is 0 again after it.
pub fn gemv2_rope_q8_1<B: Accelerator>(
    b: &mut B,
    ty: GemvType,
    (w0, w1): (&B::Buf, &B::Buf),
    x: &B::Buf,
    ncols: usize,
    s: &AttnShape,
    bufs: &RopeKvBufs<'_, B::Buf>,
    (q_nope_q8, count): (&B::Buf, &B::Buf),
    eps: f32,
    mscale: f32,
) -> Result<()> {
    let (w, t) = ((w0, Some(w1)), (q_nope_q8, count));
    gemv_rope(b, ty, w, x, ncols, s, bufs, t, eps, mscale)
}

/// A low-rank query's `attn_q_b` (`w`, into `bufs.q`) against the q8_1 `x` (`ncols` wide), then
/// [`rope_kv_q8_1`] on `bufs.q` and the `bufs.kv` an earlier launch wrote, in the launch's last
/// block: the kernel of [`gemv2_rope_q8_1`] with no second matrix (`nrows1 = 0`). `count` as
/// there.
#[allow(clippy::too_many_arguments)]
pub fn gemv_rope_q8_1<B: Accelerator>(
    b: &mut B,
    ty: GemvType,
    w: &B::Buf,
    x: &B::Buf,
    ncols: usize,
    s: &AttnShape,
    bufs: &RopeKvBufs<'_, B::Buf>,
    tail: (&B::Buf, &B::Buf),
    eps: f32,
    mscale: f32,
) -> Result<()> {
    gemv_rope(b, ty, (w, None), x, ncols, s, bufs, tail, eps, mscale)
}

#[allow(clippy::too_many_arguments)]
fn gemv_rope<B: Accelerator>(
    b: &mut B,
    ty: GemvType,
    w: (&B::Buf, Option<&B::Buf>),
    x: &B::Buf,
    ncols: usize,
    s: &AttnShape,
    bufs: &RopeKvBufs<'_, B::Buf>,
    tail: (&B::Buf, &B::Buf),
    eps: f32,
    mscale: f32,
) -> Result<()> {
    let d = ty.pair_rope();
    let (args, warps) = gemv_rope_args(b, d, ty, w, x, ncols, s, bufs, tail, (eps, mscale))?;
    launch(b, d, warps, args)
}

/// The checked arguments of a `gemv2_rope_*` launch (`d` names the kernel in errors) and its
/// warps.
#[allow(clippy::too_many_arguments)]
pub(super) fn gemv_rope_args<'a, B: Accelerator>(
    b: &B,
    d: &KernelDesc,
    ty: GemvType,
    (w0, w1): (&'a B::Buf, Option<&'a B::Buf>),
    x: &'a B::Buf,
    ncols: usize,
    s: &AttnShape,
    bufs: &RopeKvBufs<'a, B::Buf>,
    (q_nope_q8, count): (&'a B::Buf, &'a B::Buf),
    (eps, mscale): (f32, f32),
) -> Result<(Gemv2RopeArgs<&'a B::Buf>, u32)> {
    check_rope(b, d, s, bufs, Some(q_nope_q8), 1, eps, mscale)?;
    let (nrows0, nrows1) = (s.n_head * (s.d_nope + s.n_rope), s.row());
    check_gemv(b, d, ty, (w0, bufs.q), nrows0, ncols)?;
    // Without a second matrix the launch computes no kv row (the rope reads `kv` as given),
    // and `w0` fills `w1`'s slot, never read.
    let (w1, nrows1) = match w1 {
        Some(w1) => {
            check_gemv(b, d, ty, (w1, bufs.kv), nrows1, ncols)?;
            (w1, nrows1)
        }
        None => (w0, 0),
    };
    let (ncols32, nrows32, _) = check_rows(d, ty, nrows0 + nrows1, ncols)?;
    let warps = nrows32.div_ceil(pair_rows_per_warp(ty, ncols));
    need(b, d, "x", x, q8_1_bytes(1, ncols))?;
    need(b, d, "count", count, Some(4))?;
    let (nrows0, nrows1) = (to_u32(d, "nrows0", nrows0)?, to_u32(d, "nrows1", nrows1)?);
    let r = rope_scalars(d, s, eps, mscale)?;
    let args = Gemv2RopeArgs {
        w0,
        w1,
        x,
        q: bufs.q,
        kv: bufs.kv,
        ncols: ncols32,
        nrows0,
        nrows1,
        kv_norm: bufs.kv_norm,
        rope_freq: bufs.rope_freq,
        state: bufs.state,
        q_pe: bufs.q_pe,
        q_nope_q8,
        cache: bufs.cache,
        count,
        n_head: r.n_head,
        d_nope: r.d_nope,
        kv_lora: r.kv_lora,
        n_rope: r.n_rope,
        ctx: r.ctx,
        eps: r.eps,
        mscale: r.mscale,
        cache_type: r.cache_type,
    };
    Ok((args, warps))
}

/// The shape, scalar and buffer checks of the rope (`q_nope_q8` only for the q8_1 variants);
/// `q`, `kv`, `q_pe` and `q_nope_q8` hold `ntok` token rows.
fn check_rope<B: Accelerator>(
    b: &B,
    d: &KernelDesc,
    s: &AttnShape,
    bufs: &RopeKvBufs<'_, B::Buf>,
    q_nope_q8: Option<&B::Buf>,
    ntok: usize,
    eps: f32,
    mscale: f32,
) -> Result<()> {
    s.check(d, false)?;
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(shape(d, format!("eps = {eps} is not finite and >= 0")));
    }
    if !mscale.is_finite() {
        return Err(shape(d, format!("mscale = {mscale} is not finite")));
    }
    let q_floats = s.n_head.checked_mul(s.d_nope + s.n_rope);
    need(b, d, "q", bufs.q, q_floats.and_then(|n| bytes(ntok, n, 4)))?;
    need(b, d, "kv", bufs.kv, bytes(ntok, s.row(), 4))?;
    need(b, d, "kv_norm", bufs.kv_norm, bytes(s.kv_lora, 4, 1))?;
    need(b, d, "rope_freq", bufs.rope_freq, bytes(s.n_rope / 2, 8, 1))?;
    need(b, d, "state", bufs.state, Some(size_of::<StepState>()))?;
    need(b, d, "q_pe", bufs.q_pe, bytes(ntok, s.n_head, s.n_rope * 4))?;
    need(b, d, "cache", bufs.cache, s.cache_bytes())?;
    if let Some(q8) = q_nope_q8 {
        if !s.d_nope.is_multiple_of(QK8_1) || !s.n_rope.is_multiple_of(4) {
            return Err(shape(
                d,
                format!(
                    "d_nope = {} must be a multiple of {QK8_1} and n_rope = {} of 4",
                    s.d_nope, s.n_rope
                ),
            ));
        }
        let q8_rows = s.n_head.checked_mul(ntok);
        need(
            b,
            d,
            "q_nope_q8",
            q8,
            q8_rows.and_then(|r| q8_1_bytes(r, s.d_nope)),
        )?;
    }
    Ok(())
}

/// The scalars every rope kernel takes, as launch values.
struct RopeScalars {
    n_head: u32,
    d_nope: u32,
    kv_lora: u32,
    n_rope: u32,
    ctx: u32,
    eps: f32,
    mscale: f32,
    cache_type: u32,
}

fn rope_scalars(d: &KernelDesc, s: &AttnShape, eps: f32, mscale: f32) -> Result<RopeScalars> {
    Ok(RopeScalars {
        n_head: to_u32(d, "n_head", s.n_head)?,
        d_nope: to_u32(d, "d_nope", s.d_nope)?,
        kv_lora: to_u32(d, "kv_lora", s.kv_lora)?,
        n_rope: to_u32(d, "n_rope", s.n_rope)?,
        ctx: to_u32(d, "ctx", s.ctx)?,
        eps,
        mscale,
        cache_type: s.cache.code(),
    })
}
