//! Checked launches of the MLA attention kernels (`rope_kv`, `flash_latent`, `attn_merge`); the
//! buffer layouts are documented on their descriptors in `ingot_abi::launch`.
//!
//! One decode step of a layer runs, after the `attn_q` and `attn_kv_a_mqa` gemvs:
//! [`rope_kv`] (or both gemvs and the rope in one launch, [`gemv2_rope_q8_1`]) →
//! (grouped `attn_k_b` gemv of the query nope parts into `q_abs`) →
//! [`flash_latent`] → [`attn_merge`] → (grouped `attn_v_b` gemv of `o_lat`).
//! Nothing here depends on the token: the position is read from the `StepState` buffer.
//!
//! For prefill, [`flash_latent_prefill`] is the causal attention of a chunk of tokens (each
//! token's `q_abs`/`q_pe` as above, token-major), normalized per (token, head), no merge.

use super::gemv::GemvType;
use super::{bytes, launch, need, q8_1_bytes, shape, to_u32};
use crate::backend::Accelerator;
use crate::Result;
use ingot_abi::blocks::QK8_1;
pub use ingot_abi::launch::CacheType;
use ingot_abi::launch::{
    flash_handoff_bytes, flash_prefill_items, FLASH_LATENT_PREFILL, FLASH_LATENT_PREFILL_Q8_0,
    FLASH_PREFILL_MAX_TOKENS,
};
use ingot_abi::launch::{
    flash_items, flash_segments, merge_items, FlashSplit, KernelDesc, ATTN_MAX_ROPE, ATTN_MERGE,
    ATTN_MERGE_Q8_1, FLASH_LATENT, FLASH_LATENT_MMA, FLASH_LATENT_MMA_Q8_0, FLASH_LATENT_Q8_0,
    FLASH_MAX_HEADS, FLASH_MAX_LORA, FLASH_MAX_ROW, TEMPERATURE_NONE, TEMPERATURE_TABLE,
};
use ingot_abi::launch::{
    merge_v_b_fits, merge_v_b_items, merge_v_b_pairs, MERGE_V_B_KV_LORA, MERGE_V_B_MIN_ROWS,
    MERGE_V_B_SPLIT,
};
use ingot_abi::launch::{
    AttnMergeArgs, AttnMergeQ8_1Args, FlashLatentArgs, FlashPrefillArgs, Kernel, MergeVbArgs,
};
use ingot_abi::step::StepState;
use std::mem::size_of;

mod merge_out;
mod rope;
pub(crate) mod rope_kb;
pub use merge_out::{attn_merge_v_b_o, attn_merge_v_b_o_cols, MergeOutStrides, OutputBufs};
pub use rope::{
    gemv2_rope_q8_1, gemv_rope_q8_1, rope_kv, rope_kv_q8_1, rope_kv_q8_1_rows, RopeKvBufs,
};
pub use rope_kb::{gemv2_norm_rope_kb_q8_1, gemv2_rope_kb_q8_1, KbBufs, NormBufs};

/// Most segments one step may be split into (bounds `part_o` to 1 GiB at V2-Lite shapes).
pub const MAX_SEGMENTS: usize = 1 << 16;

/// Most heads [`rope_kv`] accepts (keeps its u32 index math far from overflow).
pub const MAX_ROPE_HEADS: usize = 1024;

/// Shape of one layer's absorbed MLA attention (V2-Lite is 16 heads, `d_nope` 128, `kv_lora`
/// 512, `n_rope` 64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttnShape {
    pub n_head: usize,
    /// Non-rotated query dims per head (`qk_nope_head_dim`).
    pub d_nope: usize,
    /// Latent width (`kv_lora_rank`).
    pub kv_lora: usize,
    /// Rotated dims per head and of the shared rope key (`rope.dimension_count`).
    pub n_rope: usize,
    /// Cache capacity in rows (positions `0..ctx`).
    pub ctx: usize,
    /// How a cache row is stored: the rope kernels write it so, and the flash launchers pick
    /// the kernels that read it.
    pub cache: CacheType,
}

impl AttnShape {
    /// Values per cache row (`kv_lora + n_rope`).
    pub fn row(&self) -> usize {
        self.kv_lora + self.n_rope
    }

    /// Bytes of one cache row ([`CacheType::row_bytes`]).
    pub fn row_bytes(&self) -> Option<usize> {
        let width = u32::try_from(self.row())
            .ok()
            .filter(|&w| w <= u32::MAX / 4)?;
        Some(self.cache.row_bytes(width) as usize)
    }

    /// Bytes of one layer's latent cache (`ctx` rows).
    pub fn cache_bytes(&self) -> Option<usize> {
        bytes(self.ctx, self.row_bytes()?, 1)
    }

    /// Checks what every attention kernel relies on; `flash` adds `flash_latent`'s limits.
    fn check(&self, d: &KernelDesc, flash: bool) -> Result<()> {
        let s = self;
        let max_heads = if flash {
            FLASH_MAX_HEADS as usize
        } else {
            MAX_ROPE_HEADS
        };
        if s.n_head == 0 || s.n_head > max_heads {
            return Err(shape(
                d,
                format!("n_head = {} is not in 1..={max_heads}", s.n_head),
            ));
        }
        if s.kv_lora == 0 || !s.kv_lora.is_multiple_of(8) || s.kv_lora > FLASH_MAX_LORA as usize {
            return Err(shape(
                d,
                format!(
                    "kv_lora = {} is not a positive multiple of 8 up to {FLASH_MAX_LORA}",
                    s.kv_lora
                ),
            ));
        }
        if s.n_rope == 0 || !s.n_rope.is_multiple_of(8) || s.n_rope > ATTN_MAX_ROPE as usize {
            return Err(shape(
                d,
                format!(
                    "n_rope = {} is not a positive multiple of 8 up to {ATTN_MAX_ROPE}",
                    s.n_rope
                ),
            ));
        }
        if flash && s.row() > FLASH_MAX_ROW as usize {
            return Err(shape(
                d,
                format!(
                    "cache row kv_lora + n_rope = {} exceeds {FLASH_MAX_ROW}",
                    s.row()
                ),
            ));
        }
        if !s.d_nope.is_multiple_of(2) || s.d_nope > u16::MAX as usize {
            return Err(shape(
                d,
                format!("d_nope = {} is not even and below 65536", s.d_nope),
            ));
        }
        if s.ctx == 0 || s.ctx >= u32::MAX as usize {
            return Err(shape(
                d,
                format!("ctx = {} is not in 1..{}", s.ctx, u32::MAX),
            ));
        }
        Ok(())
    }
}

/// Bytes of `part_o` (f16) for `max_segments` segments.
pub fn part_o_bytes(s: &AttnShape, max_segments: usize) -> Option<usize> {
    bytes(max_segments, s.n_head, s.kv_lora.checked_mul(2)?)
}

/// Bytes of `part_ml` for `max_segments` segments.
pub fn part_ml_bytes(s: &AttnShape, max_segments: usize) -> Option<usize> {
    bytes(max_segments, s.n_head, 8)
}

/// How a step at position `pos` is split (the same function the kernels evaluate).
pub fn split_at(pos: u32, max_segments: u32) -> FlashSplit {
    flash_segments(pos.saturating_add(1), max_segments)
}

/// Buffers of [`flash_latent`].
pub struct FlashBufs<'a, T> {
    /// `n_head × kv_lora` f32 (grouped `attn_k_b` gemv output).
    pub q_abs: &'a T,
    /// `n_head × n_rope` f32 ([`rope_kv`] output).
    pub q_pe: &'a T,
    /// The layer's cache, `ctx` rows of [`AttnShape::row_bytes`].
    pub cache: &'a T,
    /// One `StepState`.
    pub state: &'a T,
    /// Out: [`part_o_bytes`].
    pub part_o: &'a T,
    /// Out: [`part_ml_bytes`].
    pub part_ml: &'a T,
    /// `ctx` f32 attention-temperature factors, one per position (the logit scale at `pos` is
    /// `kq_scale · temperature[pos]`), or `None` for models without a temperature.
    pub temperature: Option<&'a T>,
    /// Weights the next launches read (`attn_v_b`, `attn_output`), which the launch prefetches
    /// into L2 (their first bytes, `ingot_abi::launch::flash_handoff_bytes`); a hint that
    /// changes no output. `[None, None]`: nothing.
    pub ahead: [Option<&'a T>; 2],
}

fn check_segments(d: &KernelDesc, max_segments: usize) -> Result<u32> {
    if max_segments == 0 || max_segments > MAX_SEGMENTS {
        return Err(shape(
            d,
            format!("max_segments = {max_segments} is not in 1..={MAX_SEGMENTS}"),
        ));
    }
    to_u32(d, "max_segments", max_segments)
}

/// Split-K attention of every head over cache rows `0..=pos` into per-segment partials (see
/// `ingot_abi::launch::FLASH_LATENT`). `kq_scale` is the logit scale of
/// docs/decode-math.md#logit-scale (`RopeParams::kq_scale(d_nope + n_rope)`); `max_segments`
/// is fixed for a captured graph.
pub fn flash_latent<B: Accelerator>(
    b: &mut B,
    s: &AttnShape,
    bufs: &FlashBufs<'_, B::Buf>,
    max_segments: usize,
    kq_scale: f32,
) -> Result<()> {
    let d = match s.cache {
        CacheType::F16 => &FLASH_LATENT,
        CacheType::Q8_0 => &FLASH_LATENT_Q8_0,
    };
    launch_flash(b, d, s, bufs, max_segments, kq_scale)
}

/// The checks and launch shared by [`flash_latent`] and [`flash_latent_mma`] (same parameters,
/// same buffers).
fn launch_flash<B: Accelerator>(
    b: &mut B,
    d: &Kernel<FlashLatentArgs>,
    s: &AttnShape,
    bufs: &FlashBufs<'_, B::Buf>,
    max_segments: usize,
    kq_scale: f32,
) -> Result<()> {
    s.check(d, true)?;
    let segs = check_segments(d, max_segments)?;
    if !kq_scale.is_finite() {
        return Err(shape(d, format!("kq_scale = {kq_scale} is not finite")));
    }
    need(b, d, "q_abs", bufs.q_abs, bytes(s.n_head, s.kv_lora, 4))?;
    need(b, d, "q_pe", bufs.q_pe, bytes(s.n_head, s.n_rope, 4))?;
    need(b, d, "cache", bufs.cache, s.cache_bytes())?;
    need(b, d, "state", bufs.state, Some(size_of::<StepState>()))?;
    need(b, d, "part_o", bufs.part_o, part_o_bytes(s, max_segments))?;
    need(
        b,
        d,
        "part_ml",
        bufs.part_ml,
        part_ml_bytes(s, max_segments),
    )?;
    if let Some(t) = bufs.temperature {
        need(b, d, "temperature", t, s.ctx.checked_mul(4))?;
    }
    let n_head = to_u32(d, "n_head", s.n_head)?;
    let len = |x: Option<&B::Buf>| x.map_or(0, |x| b.buf_len(x) as u64);
    let [next_a_bytes, next_b_bytes] = flash_handoff_bytes(len(bufs.ahead[0]), len(bufs.ahead[1]));
    launch(
        b,
        d,
        flash_items(n_head, segs),
        FlashLatentArgs {
            q_abs: bufs.q_abs,
            q_pe: bufs.q_pe,
            cache: bufs.cache,
            state: bufs.state,
            part_o: bufs.part_o,
            part_ml: bufs.part_ml,
            n_head,
            kv_lora: to_u32(d, "kv_lora", s.kv_lora)?,
            n_rope: to_u32(d, "n_rope", s.n_rope)?,
            ctx: to_u32(d, "ctx", s.ctx)?,
            max_segments: segs,
            kq_scale,
            // Without a table the kernel never reads `temp`; the query stands in as a valid
            // pointer.
            temp: bufs.temperature.unwrap_or(bufs.q_abs),
            temperature: if bufs.temperature.is_some() {
                TEMPERATURE_TABLE
            } else {
                TEMPERATURE_NONE
            },
            // A span of 0 bytes prefetches nothing: the query stands in as its pointer.
            next_a: bufs.ahead[0].unwrap_or(bufs.q_abs),
            next_a_bytes,
            next_b: bufs.ahead[1].unwrap_or(bufs.q_abs),
            next_b_bytes,
        },
    )
}

/// [`flash_latent`] on tensor cores (see `ingot_abi::launch::FLASH_LATENT_MMA`): same buffers,
/// segments and output, so [`attn_merge`] follows it unchanged. Heads in groups of 16, the last
/// one partial when `n_head` is not a multiple of 16 (GLM-4.7-Flash's 20). The query and the
/// probabilities enter the tensor cores as f16.
pub fn flash_latent_mma<B: Accelerator>(
    b: &mut B,
    s: &AttnShape,
    bufs: &FlashBufs<'_, B::Buf>,
    max_segments: usize,
    kq_scale: f32,
) -> Result<()> {
    let d = match s.cache {
        CacheType::F16 => &FLASH_LATENT_MMA,
        CacheType::Q8_0 => &FLASH_LATENT_MMA_Q8_0,
    };
    launch_flash(b, d, s, bufs, max_segments, kq_scale)
}

/// Buffers of [`flash_latent_prefill`].
pub struct PrefillBufs<'a, T> {
    /// `ntok × n_head × kv_lora` f32: each token's grouped `attn_k_b` output.
    pub q_abs: &'a T,
    /// `ntok × n_head × n_rope` f32: each token's rotated query rope parts.
    pub q_pe: &'a T,
    /// The layer's cache, `ctx` rows of [`AttnShape::row_bytes`], the chunk's rows written.
    pub cache: &'a T,
    /// One `StepState`; its `pos` is the chunk's first position.
    pub state: &'a T,
    /// Out: `ntok × n_head × kv_lora` f32, the normalized latent output per (token, head).
    pub o_lat: &'a T,
    /// `ctx` f32 attention-temperature factors, as [`FlashBufs::temperature`].
    pub temperature: Option<&'a T>,
}

/// Causal attention of a prefill chunk of `ntok` tokens at positions `pos0 .. pos0 + ntok`
/// (`pos0` read from `bufs.state`) on tensor cores, two tokens × 16 heads per block (see
/// `ingot_abi::launch::FLASH_LATENT_PREFILL`): normalized output, no merge. `n_head` up to 128
/// (a last group of fewer than 16 heads is partial), `ntok` in `1..=512`; `kq_scale` as for
/// [`flash_latent`].
pub fn flash_latent_prefill<B: Accelerator>(
    b: &mut B,
    s: &AttnShape,
    bufs: &PrefillBufs<'_, B::Buf>,
    ntok: usize,
    kq_scale: f32,
) -> Result<()> {
    let d = match s.cache {
        CacheType::F16 => &FLASH_LATENT_PREFILL,
        CacheType::Q8_0 => &FLASH_LATENT_PREFILL_Q8_0,
    };
    s.check(d, true)?;
    if ntok == 0 || ntok > FLASH_PREFILL_MAX_TOKENS as usize {
        return Err(shape(
            d,
            format!("ntok = {ntok} is not in 1..={FLASH_PREFILL_MAX_TOKENS}"),
        ));
    }
    if !kq_scale.is_finite() {
        return Err(shape(d, format!("kq_scale = {kq_scale} is not finite")));
    }
    let rows = ntok * s.n_head;
    need(b, d, "q_abs", bufs.q_abs, bytes(rows, s.kv_lora, 4))?;
    need(b, d, "q_pe", bufs.q_pe, bytes(rows, s.n_rope, 4))?;
    need(b, d, "cache", bufs.cache, s.cache_bytes())?;
    need(b, d, "state", bufs.state, Some(size_of::<StepState>()))?;
    need(b, d, "o_lat", bufs.o_lat, bytes(rows, s.kv_lora, 4))?;
    if let Some(t) = bufs.temperature {
        need(b, d, "temperature", t, s.ctx.checked_mul(4))?;
    }
    let n_head = to_u32(d, "n_head", s.n_head)?;
    let ntok = to_u32(d, "ntok", ntok)?;
    launch(
        b,
        d,
        flash_prefill_items(n_head, ntok),
        FlashPrefillArgs {
            q_abs: bufs.q_abs,
            q_pe: bufs.q_pe,
            cache: bufs.cache,
            state: bufs.state,
            o_lat: bufs.o_lat,
            n_head,
            kv_lora: to_u32(d, "kv_lora", s.kv_lora)?,
            n_rope: to_u32(d, "n_rope", s.n_rope)?,
            ctx: to_u32(d, "ctx", s.ctx)?,
            ntok,
            kq_scale,
            // Without a table the kernel never reads `temp`; the query stands in as a valid
            // pointer.
            temp: bufs.temperature.unwrap_or(bufs.q_abs),
            temperature: if bufs.temperature.is_some() {
                TEMPERATURE_TABLE
            } else {
                TEMPERATURE_NONE
            },
        },
    )
}

/// Buffers of [`attn_merge`].
pub struct MergeBufs<'a, T> {
    /// [`flash_latent`]'s partial outputs.
    pub part_o: &'a T,
    /// [`flash_latent`]'s `(m, l)` pairs.
    pub part_ml: &'a T,
    /// One `StepState`.
    pub state: &'a T,
    /// Out: `n_head × kv_lora` f32 ([`attn_merge`]) or their q8_1 blocks
    /// ([`attn_merge_q8_1`]).
    pub o_lat: &'a T,
}

/// Merges the segments of the step into `o_lat` (see `ingot_abi::launch::ATTN_MERGE`);
/// `max_segments` must be the value [`flash_latent`] ran with.
pub fn attn_merge<B: Accelerator>(
    b: &mut B,
    s: &AttnShape,
    bufs: &MergeBufs<'_, B::Buf>,
    max_segments: usize,
) -> Result<()> {
    let d = &ATTN_MERGE;
    let out = bytes(s.n_head, s.kv_lora, 4);
    let m = check_merge(b, d, s, bufs, max_segments, out)?;
    let args = AttnMergeArgs {
        part_o: bufs.part_o,
        part_ml: bufs.part_ml,
        state: bufs.state,
        o_lat: bufs.o_lat,
        n_head: m.n_head,
        kv_lora: m.kv_lora,
        ctx: m.ctx,
        max_segments: m.segs,
    };
    launch(b, d, merge_items(m.n_head, m.kv_lora), args)
}

/// [`attn_merge`] with `bufs.o_lat` receiving q8_1 blocks (`n_head · kv_lora / 32` of them,
/// the bits `quantize_q8_1` gives for [`attn_merge`]'s output); `kv_lora` must be a multiple
/// of 32 (see `ingot_abi::launch::ATTN_MERGE_Q8_1`).
pub fn attn_merge_q8_1<B: Accelerator>(
    b: &mut B,
    s: &AttnShape,
    bufs: &MergeBufs<'_, B::Buf>,
    max_segments: usize,
) -> Result<()> {
    let d = &ATTN_MERGE_Q8_1;
    if !s.kv_lora.is_multiple_of(QK8_1) {
        return Err(shape(
            d,
            format!("kv_lora = {} is not a multiple of {QK8_1}", s.kv_lora),
        ));
    }
    let out = q8_1_bytes(s.n_head, s.kv_lora);
    let m = check_merge(b, d, s, bufs, max_segments, out)?;
    let args = AttnMergeQ8_1Args {
        part_o: bufs.part_o,
        part_ml: bufs.part_ml,
        state: bufs.state,
        o_lat_q8: bufs.o_lat,
        n_head: m.n_head,
        kv_lora: m.kv_lora,
        ctx: m.ctx,
        max_segments: m.segs,
    };
    launch(b, d, merge_items(m.n_head, m.kv_lora), args)
}

/// Buffers of [`attn_merge_v_b`].
pub struct MergeVbBufs<'a, T> {
    /// [`flash_latent`]'s partial outputs.
    pub part_o: &'a T,
    /// [`flash_latent`]'s `(m, l)` pairs.
    pub part_ml: &'a T,
    /// One `StepState`.
    pub state: &'a T,
    /// `attn_v_b`: `n_head · d_v` rows of `kv_lora` weights, head `h`'s rows from `h · d_v` on.
    pub w: &'a T,
    /// Out: `n_head · d_v / 32` q8_1 blocks.
    pub y: &'a T,
    /// Scratch: `n_head · d_v · 2` f32 (each row's two half sums).
    pub scratch: &'a T,
    /// Done counters: one `u32` per block pair (`merge_v_b_pairs`), 0 before the launch and
    /// 0 again after it.
    pub pair_count: &'a T,
}

/// [`attn_merge_q8_1`] and the grouped `attn_v_b` gemv with the q8_1 epilogue in one launch
/// (`ingot_abi::launch::ATTN_MERGE_V_B_Q4K`): `y = q8_1(W_v_b[h] · o_lat[h])` per head, with
/// `d_v` value dims per head. `max_segments` must be the value [`flash_latent`] ran with.
pub fn attn_merge_v_b<B: Accelerator>(
    b: &mut B,
    ty: GemvType,
    s: &AttnShape,
    d_v: usize,
    bufs: &MergeVbBufs<'_, B::Buf>,
    max_segments: usize,
) -> Result<()> {
    let d = ty.merge_v_b();
    let (items, args) = merge_v_b_args(b, d, ty, s, d_v, bufs, max_segments)?;
    launch(b, d, items, args)
}

/// The checks of [`attn_merge_v_b`] on behalf of kernel `d` (it or a launch holding its
/// work): its item count and arguments.
pub(crate) fn merge_v_b_args<'a, B: Accelerator>(
    b: &B,
    d: &KernelDesc,
    ty: GemvType,
    s: &AttnShape,
    d_v: usize,
    bufs: &MergeVbBufs<'a, B::Buf>,
    max_segments: usize,
) -> Result<(u32, MergeVbArgs<&'a B::Buf>)> {
    s.check(d, true)?;
    let segs = check_segments(d, max_segments)?;
    let heads = to_u32(d, "n_head", s.n_head)?;
    let kv_lora = to_u32(d, "kv_lora", s.kv_lora)?;
    let d_v32 = to_u32(d, "d_v", d_v)?;
    if !merge_v_b_fits(kv_lora, d_v32, ty.row_multiple() as u32) {
        return Err(shape(
            d,
            format!(
                "kv_lora = {} and d_v = {d_v} do not split: the kernel takes kv_lora = \
                 {MERGE_V_B_KV_LORA} in halves of whole {}-weight units, and rows in whole \
                 {MERGE_V_B_MIN_ROWS}-row blocks",
                s.kv_lora,
                ty.row_multiple()
            ),
        ));
    }
    let rows = s.n_head.checked_mul(d_v);
    let w_bytes = rows.and_then(|r| bytes(r, s.kv_lora / ty.block_elems(), ty.block_bytes()));
    let pairs = merge_v_b_pairs(heads, d_v32) as usize;
    need_merge_inputs(
        b,
        d,
        s,
        (bufs.part_o, bufs.part_ml, bufs.state),
        max_segments,
    )?;
    need(b, d, "w", bufs.w, w_bytes)?;
    need(b, d, "y", bufs.y, rows.and_then(|r| q8_1_bytes(1, r)))?;
    need(
        b,
        d,
        "scratch",
        bufs.scratch,
        rows.and_then(|r| bytes(r, MERGE_V_B_SPLIT as usize, 4)),
    )?;
    need(b, d, "pair_count", bufs.pair_count, bytes(pairs, 1, 4))?;
    Ok((
        merge_v_b_items(heads, d_v32),
        MergeVbArgs {
            part_o: bufs.part_o,
            part_ml: bufs.part_ml,
            state: bufs.state,
            w: bufs.w,
            y: bufs.y,
            scratch: bufs.scratch,
            pair_count: bufs.pair_count,
            n_head: heads,
            d_v: d_v32,
            ctx: to_u32(d, "ctx", s.ctx)?,
            max_segments: segs,
        },
    ))
}

/// The merge kernels' inputs: `flash_latent`'s partials for `max_segments` segments and the
/// step state.
fn need_merge_inputs<B: Accelerator>(
    b: &B,
    d: &KernelDesc,
    s: &AttnShape,
    (part_o, part_ml, state): (&B::Buf, &B::Buf, &B::Buf),
    max_segments: usize,
) -> Result<()> {
    need(b, d, "part_o", part_o, part_o_bytes(s, max_segments))?;
    need(b, d, "part_ml", part_ml, part_ml_bytes(s, max_segments))?;
    need(b, d, "state", state, Some(size_of::<StepState>()))
}

/// The merge kernels' scalars, as launch values.
struct MergeScalars {
    n_head: u32,
    kv_lora: u32,
    ctx: u32,
    segs: u32,
}

/// The checks [`attn_merge`] and [`attn_merge_q8_1`] share (`o_lat` of `out_bytes`); returns
/// their scalars.
fn check_merge<B: Accelerator>(
    b: &B,
    d: &KernelDesc,
    s: &AttnShape,
    bufs: &MergeBufs<'_, B::Buf>,
    max_segments: usize,
    out_bytes: Option<usize>,
) -> Result<MergeScalars> {
    s.check(d, true)?;
    let segs = check_segments(d, max_segments)?;
    need_merge_inputs(
        b,
        d,
        s,
        (bufs.part_o, bufs.part_ml, bufs.state),
        max_segments,
    )?;
    need(b, d, "o_lat", bufs.o_lat, out_bytes)?;
    Ok(MergeScalars {
        n_head: to_u32(d, "n_head", s.n_head)?,
        kv_lora: to_u32(d, "kv_lora", s.kv_lora)?,
        ctx: to_u32(d, "ctx", s.ctx)?,
        segs,
    })
}
