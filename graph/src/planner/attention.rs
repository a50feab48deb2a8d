//! Absorbed MLA attention of one layer (docs/decode-math.md#mla-attention): norm, projections,
//! rope + cache write, split-K attention over the latent cache, the per-head up-projection and
//! `attn_output` with the residual add.

use ingot_abi::launch::{
    flash_handoff_bytes, flash_items, merge_items, CacheType, ATTN_MAX_ROPE, ATTN_MERGE_Q8_1,
    FLASH_HANDOFF_MAX_BYTES, FLASH_LATENT_MMA, FLASH_LATENT_MMA_Q8_0, FLASH_MAX_HEADS,
    FLASH_MAX_LORA, FLASH_MAX_ROW, ROPE_KV_Q8_1, TEMPERATURE_NONE, TEMPERATURE_TABLE,
};
use ingot_abi::launch::{merge_v_b_fits, merge_v_b_items, merge_v_b_pairs, MERGE_V_B_SPLIT};
use ingot_abi::launch::{merge_v_b_o_items, MergeVbOArgs, CHAIN_CTL_WORDS};
use ingot_abi::launch::{
    AttnMergeQ8_1Args, FlashLatentArgs, GemvGroupedArgs, MergeVbArgs, RopeKvQ8_1Args,
};
use ingot_gguf::GgmlType;
use ingot_model::AttnLayout;

use super::builder::{buf, u32a, Builder};
use super::kernels as k;
use super::nodes::{ffn_weight, gemv_add_residual, is_f32, rmsnorm_q8, DownFfn, NextNorm};
use super::projections::{projections, Kb, Rope, Tail};
use crate::error::PlanError;
use crate::node::BufRef;
use crate::recipe::Recipe;

/// L2 of the smallest card ingot targets (RTX 3090, A6000: 6 MiB).
const SMALLEST_L2_BYTES: u64 = 6 << 20;

/// The weights the flash launch hands ahead ([`FlashLatentArgs`]'s `next_a`, `next_b`), which
/// depend on nothing and are read from the start of their launch: the first rows of layer `il`'s
/// FFN gate and up matrices (the shared expert's in a MoE layer, the dense FFN's otherwise),
/// past the merge's launch, whose `attn_output` is read evict-first ([`crate::Node::l2_streaming`])
/// so the handed lines keep their L2 room beside its `attn_v_b`; but the merge's own
/// (`attn_v_b`, `attn_output`) where `attn_v_b` and the handoff ([`FLASH_HANDOFF_MAX_BYTES`])
/// together would not fit the smallest L2. A small merge's launch is set by its two dependent
/// parts more than by its bytes (docs/prediction-model.md), the FFN's streams throughout. `None`
/// for a layer without them. `v_b`: the layer's `attn_v_b` (a derived buffer in the legacy
/// layout, declared once).
fn weights_ahead(
    b: &mut Builder<'_>,
    il: usize,
    v_b: crate::BufId,
) -> Result<Option<[crate::BufId; 2]>, PlanError> {
    let name = |s: &str| format!("blk.{il}.{s}");
    if b.tensor(&name("attn_output.weight")).is_ok()
        && b.buffer_bytes(v_b) + u64::from(FLASH_HANDOFF_MAX_BYTES) > SMALLEST_L2_BYTES
    {
        let (w_o, _) = b.weight(&name("attn_output.weight"), "gemv", &k::gemv_type)?;
        return Ok(Some([v_b, w_o]));
    }
    // The roles the FFN's planner names them by, so a refusal reads the same.
    for (gate, up, role) in [
        (
            "ffn_gate_shexp.weight",
            "ffn_up_shexp.weight",
            "shared expert",
        ),
        ("ffn_gate.weight", "ffn_up.weight", "dense FFN"),
    ] {
        if b.tensor(&name(gate)).is_ok() && b.tensor(&name(up)).is_ok() {
            let (g, _) = b.weight(&name(gate), role, &k::gemv_type)?;
            let (u, _) = b.weight(&name(up), role, &k::gemv_type)?;
            return Ok(Some([g, u]));
        }
    }
    Ok(None)
}

/// Appends layer `il`'s attention; the residual buffer holds `x + attn(x)` afterwards, and the
/// norm buffers its `ffn_norm` (the `attn_output` launch's tail).
pub(crate) fn layer(b: &mut Builder<'_>, il: usize) -> Result<(), PlanError> {
    let c = b.c;
    check_shapes(b)?;
    let name = |s: &str| format!("blk.{il}.{s}");
    let label = |s: &str| format!("blk.{il} {s}");
    let layer = Some(il);
    let (norm_q8, step) = (b.acts.norm_q8, b.acts.step);

    // Later layers find their attn_norm written by the previous FFN's down launch, the first
    // by the embedding fetch's tail where it has one.
    if il == 0 && !b.first_norm_written {
        let (attn_norm, _) = b.weight(&name("attn_norm.weight"), "rmsnorm", &is_f32)?;
        rmsnorm_q8(b, attn_norm, label("attn_norm"), layer, false)?;
    }

    let q_len = c.n_head * c.d_qk();
    let q = b.f32_act("act.q", q_len)?;
    let kv = b.f32_act("act.kv", c.cache_row())?;
    let (kv_norm, _) = b.weight(&name("attn_kv_a_norm.weight"), "rmsnorm", &is_f32)?;
    let rope_freq = rope_table(b);
    let q_pe = b.f32_act("act.q_pe", c.n_head * c.d_rope)?;
    let cache = b.kv_cache(il)?;
    // q_abs[h] = W_UK[h]·q_nope[h]. The grouped gemv reads head h's activation blocks at block
    // h·stride; the rope writes them itself (packed, stride d_nope/32).
    let q_nope_q8 = b.q8_act("act.q_nope_q8", c.n_head * c.d_nope)?;
    let rope = Rope {
        kv_norm: buf(kv_norm),
        rope_freq: buf(rope_freq),
        state: buf(step),
        q_pe: buf(q_pe),
        q_nope_q8: buf(q_nope_q8),
        cache: buf(cache),
        n_head: u32a(c.n_head),
        d_nope: u32a(c.d_nope),
        kv_lora: u32a(c.kv_lora),
        n_rope: u32a(c.d_rope),
        ctx: u32a(b.opts.ctx),
        eps: c.rms_eps,
        mscale: c.rope.rope_mscale(),
        cache_type: b.opts.cache_type.code(),
    };
    // q_abs[h] = W_UK[h]·q_nope[h] (`attn_k_b`), chained into the projections' launch where
    // the registry has the pair.
    let (k_b, k_b_ty) = absorbed_weight(b, il, Absorbed::K)?;
    check_grouped_row(b, k_b, k_b_ty, c.d_nope)?;
    let q_abs = b.f32_act("act.q_abs", c.n_head * c.kv_lora)?;
    let kb = Kb {
        w: k_b,
        ty: k_b_ty,
        q_abs,
    };
    // The paired attn_q + attn_kv_a_mqa launch runs the rope as its last block's tail
    // (`gemv2_rope_*`) when it can; otherwise the rope is a node of its own.
    let count = b.act("act.rope_count", 4)?;
    let tail = projections(b, il, norm_q8, (q, kv), Some((rope, count, kb)))?;
    if tail == Tail::None {
        let args = RopeKvQ8_1Args {
            q: buf(q),
            kv: buf(kv),
            kv_norm: rope.kv_norm,
            rope_freq: rope.rope_freq,
            state: rope.state,
            q_pe: rope.q_pe,
            q_nope_q8: rope.q_nope_q8,
            cache: rope.cache,
            n_head: rope.n_head,
            d_nope: rope.d_nope,
            kv_lora: rope.kv_lora,
            n_rope: rope.n_rope,
            ctx: rope.ctx,
            eps: rope.eps,
            mscale: rope.mscale,
            cache_type: rope.cache_type,
        };
        b.node(k::fixed(&ROPE_KV_Q8_1), label("rope_kv"), layer, 1, args)?;
    }

    if tail != Tail::RopeKb {
        let stride = c.d_nope / 32;
        grouped(
            b,
            (k_b, k_b_ty),
            q_nope_q8,
            q_abs,
            (c.d_nope, c.n_head * c.kv_lora, c.kv_lora, stride),
            label("attn_k_b"),
            il,
        )?;
    }

    let segs = b.opts.flash_split(b.c.n_head);
    let part_o = b.f16_act("act.part_o", segs * c.n_head * c.kv_lora)?;
    let part_ml = b.f32_act("act.part_ml", segs * c.n_head * 2)?;
    // Tensor cores, heads in groups of 16 rows of the mma tile, one block per (group, segment);
    // a last partial group (GLM-4.7-Flash's 20 heads) runs its missing heads as zero rows.
    let temperature = temperature_table(b);
    let flash = match b.opts.cache_type {
        CacheType::F16 => &FLASH_LATENT_MMA,
        CacheType::Q8_0 => &FLASH_LATENT_MMA_Q8_0,
    };
    let (temp, temperature) = temperature_args(temperature, q_abs);
    let (v_b, v_b_ty) = absorbed_weight(b, il, Absorbed::V)?;
    let ahead = weights_ahead(b, il, v_b)?;
    let ahead_bytes = |i: usize| ahead.map_or(0, |a| b.buffer_bytes(a[i]));
    let [next_a_bytes, next_b_bytes] = flash_handoff_bytes(ahead_bytes(0), ahead_bytes(1));
    let args = FlashLatentArgs {
        q_abs: buf(q_abs),
        q_pe: buf(q_pe),
        cache: buf(cache),
        state: buf(step),
        part_o: buf(part_o),
        part_ml: buf(part_ml),
        n_head: u32a(c.n_head),
        kv_lora: u32a(c.kv_lora),
        n_rope: u32a(c.d_rope),
        ctx: u32a(b.opts.ctx),
        max_segments: u32a(segs),
        kq_scale: c.kq_scale,
        temp,
        temperature,
        // Nothing handed ahead: 0 bytes of the query.
        next_a: buf(ahead.map_or(q_abs, |a| a[0])),
        next_a_bytes,
        next_b: buf(ahead.map_or(q_abs, |a| a[1])),
        next_b_bytes,
    };
    b.node(
        k::fixed(flash),
        label("flash_latent"),
        layer,
        flash_items(c.n_head as u32, segs as u32) as usize,
        args,
    )?;
    let n_o = c.n_head * c.d_v;
    let o_q8 = b.q8_act("act.o_q8", n_o)?;
    let merge_args = [part_o, part_ml, step];
    // The merge and attn_v_b in one launch when the shape fits it.
    let fits = merge_v_b_fits(
        c.kv_lora as u32,
        c.d_v as u32,
        k::row_multiple(v_b_ty) as u32,
    );
    if fits {
        check_grouped_row(b, v_b, v_b_ty, c.kv_lora)?;
        let halves = b.f32_act("act.v_b_halves", n_o * MERGE_V_B_SPLIT as usize)?;
        let pairs = merge_v_b_pairs(c.n_head as u32, c.d_v as u32);
        let pair_count = b.act("act.v_b_pair_count", u64::from(pairs) * 4)?;
        let args = MergeVbArgs {
            part_o: buf(merge_args[0]),
            part_ml: buf(merge_args[1]),
            state: buf(merge_args[2]),
            w: buf(v_b),
            y: buf(o_q8),
            scratch: buf(halves),
            pair_count: buf(pair_count),
            n_head: u32a(c.n_head),
            d_v: u32a(c.d_v),
            ctx: u32a(b.opts.ctx),
            max_segments: u32a(segs),
        };
        if merge_v_b_o(b, il, (v_b_ty, o_q8), args)? {
            return Ok(());
        }
        b.node(
            k::merge_v_b(v_b_ty),
            label("attn_merge+attn_v_b"),
            layer,
            merge_v_b_items(c.n_head as u32, c.d_v as u32) as usize,
            args,
        )?;
    } else {
        merge_then_v_b(b, il, (v_b, v_b_ty), merge_args, o_q8)?;
    }
    let next = NextNorm::ffn(b, il)?;
    gemv_add_residual(
        b,
        &name("attn_output.weight"),
        o_q8,
        (label("attn_output"), il),
        next,
    )?;
    // Read once, as in the chained launch (`merge_v_b_o`).
    let (w_o, _) = b.weight(&name("attn_output.weight"), "gemv", &k::gemv_type)?;
    b.stream_in_l2(w_o);
    Ok(())
}

/// `attn_merge_v_b` (arguments `merge`, weights of `v_b_ty`, output `o_q8`) and `attn_output`
/// with its residual add and `ffn_norm` tail as one chained launch
/// (`ingot_abi::launch::attn_out`), where `attn_output` has `v_b_ty` too and takes the merge's
/// output whole; `false` (no node added) where it does not, and the caller plans the two
/// launches.
fn merge_v_b_o(
    b: &mut Builder<'_>,
    il: usize,
    (v_b_ty, o_q8): (GgmlType, crate::BufId),
    merge: MergeVbArgs<BufRef>,
) -> Result<bool, PlanError> {
    let c = b.c;
    let (w, info, ncols, nrows) = ffn_weight(b, &format!("blk.{il}.attn_output.weight"), "gemv")?;
    if info.ty != v_b_ty || ncols != c.n_head * c.d_v {
        return Ok(false);
    }
    let ffn = DownFfn::dense(b, o_q8, w, (ncols, nrows))?;
    let d = NextNorm::ffn(b, il)?.down_args(b, ffn)?;
    let chain_ctl = b.act("act.chain_ctl", u64::from(CHAIN_CTL_WORDS) * 4)?;
    let args = MergeVbOArgs {
        part_o: merge.part_o,
        part_ml: merge.part_ml,
        state: merge.state,
        w: merge.w,
        y: merge.y,
        scratch: merge.scratch,
        pair_count: merge.pair_count,
        n_head: merge.n_head,
        d_v: merge.d_v,
        ctx: merge.ctx,
        max_segments: merge.max_segments,
        w_o: d.down_sh,
        resid: d.resid,
        out: d.y,
        nrows: d.nrows,
        norm_w: d.norm_w,
        norm_q8: d.norm_q8,
        norm_f32: d.norm_f32,
        count: d.count,
        norm: d.norm,
        eps: d.eps,
        chain_ctl: buf(chain_ctl),
    };
    let items = merge_v_b_o_items(merge.n_head, merge.d_v, d.nrows);
    b.node(
        k::merge_v_b_o(v_b_ty),
        format!("blk.{il} attn_merge+attn_v_b+attn_output"),
        Some(il),
        items as usize,
        args,
    )?;
    // Its largest stream, read once: the lines the flash launch handed ahead to the FFN past
    // this launch stay in L2 while it runs (`weights_ahead`).
    b.stream_in_l2(w);
    Ok(true)
}

/// `attn_merge` and `attn_v_b` as separate launches (a type or shape `attn_merge_v_b_*` does
/// not take): the merge writes `o_lat`, `attn_v_b` reads it and writes `o_q8`. `merge_args`:
/// the merge's `(part_o, part_ml, state)`.
fn merge_then_v_b(
    b: &mut Builder<'_>,
    il: usize,
    (v_b, v_b_ty): (crate::BufId, GgmlType),
    merge_args: [crate::BufId; 3],
    o_q8: crate::BufId,
) -> Result<(), PlanError> {
    let c = b.c;
    let label = |s: &str| format!("blk.{il} {s}");
    let layer = Some(il);
    let segs = b.opts.flash_split(b.c.n_head);
    // attn_merge writes attn_v_b's q8_1 input itself (its q8_1 epilogue).
    let n_lat = c.n_head * c.kv_lora;
    let o_lat_q8 = b.q8_act("act.o_lat_q8", n_lat)?;
    let args = AttnMergeQ8_1Args {
        part_o: buf(merge_args[0]),
        part_ml: buf(merge_args[1]),
        state: buf(merge_args[2]),
        o_lat_q8: buf(o_lat_q8),
        n_head: u32a(c.n_head),
        kv_lora: u32a(c.kv_lora),
        ctx: u32a(b.opts.ctx),
        max_segments: u32a(segs),
    };
    b.node(
        k::fixed(&ATTN_MERGE_Q8_1),
        label("attn_merge"),
        layer,
        merge_items(c.n_head as u32, c.kv_lora as u32) as usize,
        args,
    )?;

    // attn_v_b writes attn_output's q8_1 input itself (its q8_1 epilogue; its rows, n_head·d_v,
    // are whole q8_1 blocks: d_v is checked to be a multiple of 32).
    let n_o = c.n_head * c.d_v;
    check_grouped_row(b, v_b, v_b_ty, c.kv_lora)?;
    b.node(
        k::gemv_grouped_q8_out(v_b_ty),
        label("attn_v_b"),
        layer,
        n_o / 32,
        GemvGroupedArgs {
            w: buf(v_b),
            x: buf(o_lat_q8),
            y: buf(o_q8),
            ncols: u32a(c.kv_lora),
            nrows: u32a(n_o),
            rows_per_group: u32a(c.d_v),
            x_group_stride: u32a(c.kv_lora / 32),
        },
    )
}

/// A grouped gemv `(ncols, nrows, rows_per_group, x_group_stride)` over a weight buffer whose
/// rows the caller has checked ([`check_grouped_row`]).
fn grouped(
    b: &mut Builder<'_>,
    (w, ty): (crate::BufId, GgmlType),
    x: crate::BufId,
    y: crate::BufId,
    (ncols, nrows, rows_per_group, stride): (usize, usize, usize, usize),
    label: String,
    il: usize,
) -> Result<(), PlanError> {
    b.node(
        k::gemv_grouped(ty),
        label,
        Some(il),
        k::gemv_items(ty, ncols, nrows),
        GemvGroupedArgs {
            w: buf(w),
            x: buf(x),
            y: buf(y),
            ncols: u32a(ncols),
            nrows: u32a(nrows),
            rows_per_group: u32a(rows_per_group),
            x_group_stride: u32a(stride),
        },
    )
}

/// The grouped gemv kernels read rows of whole quant blocks (32 or 256 weights).
fn check_grouped_row(
    b: &Builder<'_>,
    w: crate::BufId,
    ty: GgmlType,
    ncols: usize,
) -> Result<(), PlanError> {
    let m = k::gemv_row_multiple(ty);
    if ncols.is_multiple_of(m) {
        return Ok(());
    }
    Err(PlanError::UnsupportedShape {
        name: b.buffer_name(w),
        reason: format!(
            "rows of {ncols} {} weights; the grouped gemv needs a multiple of {m}",
            ty.name()
        ),
    })
}

/// The kernels' compile-time limits, checked once per layer (cheap) so the error names them.
pub(crate) fn check_shapes(b: &Builder<'_>) -> Result<(), PlanError> {
    let c = b.c;
    let fail = |what: String| Err(PlanError::UnsupportedModel(what));
    if c.n_head as u32 > FLASH_MAX_HEADS {
        return fail(format!(
            "{} heads (flash_latent serves at most {FLASH_MAX_HEADS})",
            c.n_head
        ));
    }
    if c.d_rope as u32 > ATTN_MAX_ROPE {
        return fail(format!(
            "rope width {} (rope_kv supports at most {ATTN_MAX_ROPE})",
            c.d_rope
        ));
    }
    if c.kv_lora as u32 > FLASH_MAX_LORA || c.cache_row() as u32 > FLASH_MAX_ROW {
        return fail(format!(
            "latent width {} + rope {} (flash_latent supports kv_lora <= {FLASH_MAX_LORA}, row <= {FLASH_MAX_ROW})",
            c.kv_lora, c.d_rope
        ));
    }
    for (what, v) in [("kv_lora", c.kv_lora), ("d_nope", c.d_nope), ("d_v", c.d_v)] {
        if !v.is_multiple_of(32) {
            return fail(format!(
                "{what} = {v} is not a multiple of 32 (q8_1 blocks)"
            ));
        }
    }
    if !c.d_rope.is_multiple_of(8) {
        return fail(format!("rope width {} is not a multiple of 8", c.d_rope));
    }
    Ok(())
}

/// `rope_freq[i] = θ_i(pos) / pos` as f64, the YaRN-blended angular frequency of pair `i`
/// (θ is linear in the position), shared by all layers.
pub(crate) fn rope_table(b: &mut Builder<'_>) -> crate::BufId {
    const NAME: &str = "const.rope_freq";
    if let Some(id) = b.existing(NAME) {
        return id;
    }
    let data: Vec<u8> = (0..b.c.d_rope / 2)
        .flat_map(|i| b.c.rope.theta(1, i).to_le_bytes())
        .collect();
    b.constant(NAME, data)
}

/// The attention temperature's factor at every position of the context (llama.cpp's formula,
/// evaluated on the host as the CPU backends do), shared by all layers; `None` without one.
pub(crate) fn temperature_table(b: &mut Builder<'_>) -> Option<crate::BufId> {
    const NAME: &str = "const.attn_temperature";
    let t = b.c.attn_temperature.as_ref()?;
    if let Some(id) = b.existing(NAME) {
        return Some(id);
    }
    let data: Vec<u8> = (0..b.opts.ctx)
        .flat_map(|pos| t.factor(pos).to_le_bytes())
        .collect();
    Some(b.constant(NAME, data))
}

/// The attention kernels' `(temp, temperature)` arguments: the table and its flag, or with no
/// table the flag off and `unread` (any valid buffer) in its place.
pub(crate) fn temperature_args(table: Option<crate::BufId>, unread: crate::BufId) -> (BufRef, u32) {
    match table {
        Some(t) => (buf(t), TEMPERATURE_TABLE),
        None => (buf(unread), TEMPERATURE_NONE),
    }
}

pub(crate) enum Absorbed {
    K,
    V,
}

/// `attn_k_b`/`attn_v_b` of layer `il`: the file's tensor for MLA-layout files, or derived from
/// `attn_kv_b` at load for legacy files (k_b transposed and stored Q8_0 as ik_llama.cpp does;
/// v_b rows gathered in the file's own type).
pub(crate) fn absorbed_weight(
    b: &mut Builder<'_>,
    il: usize,
    which: Absorbed,
) -> Result<(crate::BufId, GgmlType), PlanError> {
    let c = b.c;
    let suffix = match which {
        Absorbed::K => "attn_k_b.weight",
        Absorbed::V => "attn_v_b.weight",
    };
    let name = format!("blk.{il}.{suffix}");
    match c.layout {
        AttnLayout::Mla => {
            let (id, info) = b.weight(&name, "grouped gemv", &k::gemv_type)?;
            Ok((id, info.ty))
        }
        AttnLayout::Legacy => {
            let from = format!("blk.{il}.attn_kv_b.weight");
            let info = b.tensor(&from)?;
            let geometry = crate::recipe::KvbGeometry {
                n_head: c.n_head,
                d_nope: c.d_nope,
                d_v: c.d_v,
                kv_lora: c.kv_lora,
            };
            let (recipe, ty) = match which {
                Absorbed::K => (Recipe::KFromKvb(geometry), GgmlType::Q8_0),
                Absorbed::V => (Recipe::VFromKvb(geometry), info.ty),
            };
            if !k::gemv_type(ty) || !ingot_quant::can_dequantize(info.ty) {
                return Err(PlanError::UnsupportedType {
                    name: from,
                    ty: info.ty.name(),
                    role: "absorbed attention (legacy attn_kv_b)",
                    supported: "types with a q8_1 gemv".into(),
                });
            }
            let bytes = recipe
                .output_bytes(ty)
                .ok_or_else(|| PlanError::UnsupportedShape {
                    name: from.clone(),
                    reason: format!("rows do not split into {} blocks", ty.name()),
                })?;
            Ok((b.derived(&name, &from, ty, recipe, bytes), ty))
        }
    }
}
