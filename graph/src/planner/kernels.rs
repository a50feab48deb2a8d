//! Kernel names, launch sizes and availability of the launches the plan makes, in one place.
//!
//! Each launch is a `Launch` typed by its kernel's `ingot_abi::launch` signature, so
//! `Builder::node` takes exactly that signature's argument struct. The committed PTX exports
//! exactly the launch table's kernels (`kernels/tests/launch_table.rs`), so a fixed name or a
//! registry name of a gemv type is always there; [`available`] only decides where the table has no
//! kernel for a type: the embedding fetch (else a host step, [`crate::Plan::host_embedding`]) and
//! the lm_head gemv with the argmax folded in (else the plain gemv and `argmax_step`).
//! [`crate::Plan::check`] verifies every node against the table before anything runs.

use std::marker::PhantomData;

use ingot_abi::launch::{
    gemv2_norm_blocks, gemv2_rope_kb_blocks, gemv_pair_rows_per_warp, gemv_rows_per_warp, DownArgs,
    EmbedArgs, GateUpArgs, GateUpRouterArgs, Gemv2Args, Gemv2NormArgs, Gemv2NormRopeKbArgs,
    Gemv2RopeArgs, Gemv2RopeKbArgs, GemvArgmaxArgs, GemvArgs, GemvGroupedArgs, GemvUnit, Kernel,
    MergeVbArgs, MergeVbOArgs, MmqArgs, MmqMoeArgs, MoeFfnArgs, MoeFfnRopeKbArgs,
};
use ingot_abi::weight_types::GemvType;
use ingot_gguf::GgmlType;

/// The kernel of a planned launch, typed by its signature `S` (so the node's arguments are an
/// `S::Args`): a descriptor's name, or for a type without that kernel a name no PTX exports
/// (`"<kind> for <type>"`), which [`crate::Plan::check`] then reports as missing.
pub(crate) struct Launch<S> {
    pub name: String,
    sig: PhantomData<fn() -> S>,
}

impl<S> Launch<S> {
    fn named(name: String) -> Self {
        Launch {
            name,
            sig: PhantomData,
        }
    }
}

/// A launch of the fixed kernel `k`.
pub(crate) fn fixed<S>(k: &Kernel<S>) -> Launch<S> {
    Launch::named(k.name.to_string())
}

/// Whether the launch table describes kernel `name`, and so whether the committed PTX exports it
/// (the two are one set: `kernels/tests/launch_table.rs`). A table lookup, not a search of the PTX.
pub fn available(name: &str) -> bool {
    ingot_kernels::kernel(name).is_some()
}

/// The kernel-name spelling of a type: the registry's tag for the gemv types (`Q4_K` → `q4k`,
/// `Q5_0` → `q5_0`, `IQ4_NL` → `iq4_nl`), the same rule for the embedding's float types.
pub fn type_tag(ty: GgmlType) -> String {
    match gemv_ty(ty) {
        Some(t) => t.tag().to_string(),
        None => ty.name().to_ascii_lowercase().replace("_k", "k"),
    }
}

/// The registry's row for `ty`, if the gemv and MoE kernels take it (quantized or float).
pub fn gemv_ty(ty: GgmlType) -> Option<GemvType> {
    GemvType::from_ggml_id(ty.id())
}

/// Weight types the gemv, grouped gemv and MoE kernels read (q8_1 activations).
pub fn gemv_type(ty: GgmlType) -> bool {
    gemv_ty(ty).is_some()
}

/// Weights per unit of the gemv thread mapping, and the row multiple of the fused FFN kernels:
/// 64 for the 32-element quant types (a lane takes a pair of blocks), 32 for the float types,
/// 256 for k-quants and IQ4_XS (1 for a type without kernels, which the planner refuses before
/// asking).
pub fn row_multiple(ty: GgmlType) -> usize {
    gemv_ty(ty).map_or(1, GemvType::row_multiple)
}

/// Row lengths the plain, grouped and paired gemv kernels accept are multiples of this: one
/// quant block (32, or 256 for k-quants; an odd number of 32-element blocks ends in an
/// unpaired block the kernels handle).
pub fn gemv_row_multiple(ty: GgmlType) -> usize {
    gemv_ty(ty).map_or(1, GemvType::gemv_row_multiple)
}

/// Work items (warps) of a gemv over `nrows` rows of `ncols` weights of type `ty`: the same
/// formula as the kernels' thread mapping (`ingot_abi::launch::gemv_rows_per_warp`).
pub fn gemv_items(ty: GgmlType, ncols: usize, nrows: usize) -> usize {
    items_at(ty, ncols, nrows, gemv_rows_per_warp)
}

/// Work items (warps) of a two-matrix gemv (`gemv2`, `gemv2_rope`) over `nrows` rows of both
/// matrices: `ingot_abi::launch::gemv_pair_rows_per_warp`.
pub fn gemv_pair_items(ty: GgmlType, ncols: usize, nrows: usize) -> usize {
    items_at(ty, ncols, nrows, gemv_pair_rows_per_warp)
}

/// `nrows` over the rows per warp `rows_per_warp(units, unit)` gives for `ty`'s rows of `ncols`.
fn items_at(
    ty: GgmlType,
    ncols: usize,
    nrows: usize,
    rows_per_warp: fn(u32, GemvUnit) -> u32,
) -> usize {
    let Some(t) = gemv_ty(ty) else {
        return nrows;
    };
    let units = u32::try_from(ncols / t.row_multiple()).unwrap_or(u32::MAX);
    nrows.div_ceil(rows_per_warp(units, t.unit()) as usize)
}

/// `ty`'s kernel of one kind (`kind` picks it from the registry row), or, for a type without
/// it, a name no PTX exports (`"<kind> for <type>"`), which [`crate::Plan::check`] then reports
/// as missing.
fn registry_name<S: 'static>(
    ty: GgmlType,
    kind: &str,
    pick: impl Fn(GemvType) -> Option<&'static Kernel<S>>,
) -> Launch<S> {
    match gemv_ty(ty).and_then(pick) {
        Some(d) => fixed(d),
        None => Launch::named(format!("{kind} for {}", ty.name())),
    }
}

/// `(w, x, y, ncols, nrows)`: `y = W·x` with `x` q8_1.
pub(crate) fn gemv(ty: GgmlType) -> Launch<GemvArgs> {
    registry_name(ty, "gemv", |t| Some(t.plain()))
}

/// `(w0, w1, x, y0, y1, ncols, nrows0, nrows1)`: two gemvs of one type and width against one
/// `x`; an item is a warp over the `nrows0 + nrows1` rows.
pub(crate) fn gemv2(ty: GgmlType) -> Launch<Gemv2Args> {
    registry_name(ty, "gemv2", |t| Some(t.pair()))
}

/// The two-matrix gemv with the rope tail (`GemvType::pair_rope`); same items as [`gemv2`].
pub(crate) fn gemv2_rope(ty: GgmlType) -> Launch<Gemv2RopeArgs> {
    registry_name(ty, "gemv2_rope", |t| Some(t.pair_rope()))
}

/// `gemv2_rope_*` of `ty` (`nrows` rows of `ncols`) and `attn_k_b`'s grouped gemv of `kb`
/// (`kb_rows` rows of `kb_cols`) in one chained launch (`ingot_abi::launch::Gemv2RopeKbArgs`),
/// where the registry has that row, with its items: blocks, the two parts' sum.
pub(crate) fn gemv2_rope_kb(
    (ty, kb): (GgmlType, GgmlType),
    (ncols, nrows): (usize, usize),
    (kb_cols, kb_rows): (usize, usize),
) -> Option<(Launch<Gemv2RopeKbArgs>, usize)> {
    let (t, k) = (gemv_ty(ty)?, gemv_ty(kb)?);
    let d = t.pair_rope_kb(k)?;
    let u = |x: usize| u32::try_from(x).ok();
    let (first, waiting) = gemv2_rope_kb_blocks(
        (t.unit(), u(ncols / t.row_multiple())?, u(nrows)?),
        (k.unit(), u(kb_cols / k.row_multiple())?, u(kb_rows)?),
    );
    Some((fixed(d), first as usize + waiting as usize))
}

/// `gemv2_norm_*` (`norm_rows` rows of `norm_cols`) in front of [`gemv2_rope_kb`] (a low-rank
/// query's `attn_q_b` alone, `nrows` rows of `ncols`), every product before `attn_k_b` of `ty`,
/// in one chained launch (`ingot_abi::launch::Gemv2NormRopeKbArgs`), where the registry has that
/// row, with its items: blocks, the three parts' sum.
pub(crate) fn gemv2_norm_rope_kb(
    (ty, kb): (GgmlType, GgmlType),
    (norm_cols, norm_rows): (usize, usize),
    (ncols, nrows): (usize, usize),
    (kb_cols, kb_rows): (usize, usize),
) -> Option<(Launch<Gemv2NormRopeKbArgs>, usize)> {
    let (t, k) = (gemv_ty(ty)?, gemv_ty(kb)?);
    let d = t.pair_norm_rope_kb(k)?;
    let (_, parts) = gemv2_rope_kb((ty, kb), (ncols, nrows), (kb_cols, kb_rows))?;
    let u = |x: usize| u32::try_from(x).ok();
    let norm = gemv2_norm_blocks(t.unit(), u(norm_cols / t.row_multiple())?, u(norm_rows)?);
    Some((fixed(d), norm as usize + parts))
}

/// The two-matrix gemv with the norm of its first output as the tail (`gemv2_norm_*`).
pub(crate) fn gemv2_norm(ty: GgmlType) -> Launch<Gemv2NormArgs> {
    registry_name(ty, "gemv2_norm", |t| Some(t.pair_norm()))
}

/// `(w, x, y, ncols, nrows, rows_per_group, x_group_stride)`.
pub(crate) fn gemv_grouped(ty: GgmlType) -> Launch<GemvGroupedArgs> {
    registry_name(ty, "gemv_grouped", |t| Some(t.grouped()))
}

/// The grouped gemv with a q8_1 epilogue, same parameters as [`gemv_grouped`]; an item is one
/// output block of 32 rows.
pub(crate) fn gemv_grouped_q8_out(ty: GgmlType) -> Launch<GemvGroupedArgs> {
    registry_name(ty, "gemv_grouped_q8_1_out", |t| Some(t.grouped_q8_1_out()))
}

/// `attn_merge_q8_1` and [`gemv_grouped_q8_out`] in one launch `(part_o, part_ml, state, w, y,
/// scratch, pair_count, n_head, d_v, ctx, max_segments)`; an item is a block
/// (`ingot_abi::launch::merge_v_b_items`).
pub(crate) fn merge_v_b(ty: GgmlType) -> Launch<MergeVbArgs> {
    registry_name(ty, "attn_merge_v_b", |t| Some(t.merge_v_b()))
}

/// [`merge_v_b`] and `attn_output` (the down kernel of the type, no routed slots) in one chained
/// launch (`ingot_abi::launch::MergeVbOArgs`); an item is a block
/// (`ingot_abi::launch::merge_v_b_o_items`).
pub(crate) fn merge_v_b_o(ty: GgmlType) -> Launch<MergeVbOArgs> {
    registry_name(ty, "attn_merge_v_b_o", |t| Some(t.merge_v_b_o()))
}

/// Embedding fetch `(table, state, y, n, n_vocab)` of row `state.token`, one item per output
/// float; the table has it for the float types and some quant types ([`available`] says which).
pub(crate) fn embed(ty: GgmlType) -> Launch<EmbedArgs> {
    Launch::named(format!("embed_{}", type_tag(ty)))
}

/// The dense prefill product `(w, x, y, ncols, nrows, ntok)` of `ty` (`GemvType::mmq`); an item
/// is a 64 × 64 tile (`ingot_abi::launch::mmq_items`).
pub(crate) fn mmq(ty: GemvType) -> Launch<MmqArgs> {
    match ty.mmq() {
        Some(d) => fixed(d),
        None => Launch::named(format!("mmq for {ty:?}")),
    }
}

/// The expert-grouped prefill product of `ty` (`GemvType::mmq_moe`); an item is a tile
/// (`ingot_abi::launch::mmq_moe_items`).
pub(crate) fn mmq_moe(ty: GemvType) -> Launch<MmqMoeArgs> {
    match ty.mmq_moe() {
        Some(d) => fixed(d),
        None => Launch::named(format!("mmq_moe for {ty:?}")),
    }
}

/// `(w, x, y, ncols, nrows, acc)`: the lm_head gemv that also folds every row into the 64-bit
/// argmax key `acc` (see `ingot_abi::launch::head`); an item is a warp, as for [`gemv`].
pub(crate) fn gemv_argmax(ty: GgmlType) -> Launch<GemvArgmaxArgs> {
    registry_name(ty, "gemv_argmax", GemvType::argmax)
}

/// `(x, sel, gate, up, gate_sh, up_sh, act, ncols, ff, n_used, ff_sh, n_expert, layout)`; an
/// item is an output row of `n_used·ff + ff_sh`.
pub(crate) fn moe_gate_up(ty: GgmlType) -> Launch<GateUpArgs> {
    registry_name(ty, "moe_gate_up", |t| Some(t.gate_up()))
}

/// [`moe_gate_up`] with routed and shared gate/up weights of the given types (the type's own
/// kernel when they are equal, else a `mixed_gate_up` row of the registry).
pub(crate) fn moe_gate_up_mixed(routed: GgmlType, shared: GgmlType) -> Launch<GateUpArgs> {
    let s = gemv_ty(shared);
    registry_name(
        routed,
        &format!("moe_gate_up with shared {}", shared.name()),
        |r| GemvType::gate_up_mixed(r, s?),
    )
}

/// [`moe_gate_up_mixed`] with the router in its launch (`GemvType::gate_up_router_mixed`: the
/// registry has one for every pair [`moe_gate_up_mixed`] has), `(.., layout, rw, rx, logits,
/// bias, route_ctl, n_group, n_group_used, route_flags, scale)`; an item is an output row or
/// a router block's share (`ingot_abi::launch::gate_up_router_items`).
pub(crate) fn moe_gate_up_router_mixed(
    routed: GgmlType,
    shared: GgmlType,
) -> Launch<GateUpRouterArgs> {
    let s = gemv_ty(shared);
    registry_name(
        routed,
        &format!("moe_gate_up_router with shared {}", shared.name()),
        |r| GemvType::gate_up_router_mixed(r, s?),
    )
}

/// The MoE FFN in one chained launch (`ingot_abi::launch::MoeFfnArgs`) for gate/up weights
/// `gate_up` and down weights `down` (routed, shared), where the registry has that row; an item
/// is a block (`ingot_abi::launch::moe_ffn_items`).
pub(crate) fn moe_ffn(
    gate_up: (GgmlType, GgmlType),
    down: (GgmlType, GgmlType),
) -> Option<Launch<MoeFfnArgs>> {
    let t = |g: (GgmlType, GgmlType)| Some((gemv_ty(g.0)?, gemv_ty(g.1)?));
    GemvType::moe_ffn(t(gate_up)?, t(down)?).map(fixed)
}

/// The MoE FFN of [`moe_ffn`] and the next layer's `gemv2_rope_kb_*` of `pair` (its pair's type
/// and `attn_k_b`'s) in one chained launch (`ingot_abi::launch::MoeFfnRopeKbArgs`), where the
/// registry has that row; an item is a block.
pub(crate) fn moe_ffn_rope_kb(
    (gate_up, down): ((GgmlType, GgmlType), (GgmlType, GgmlType)),
    pair: (GgmlType, GgmlType),
) -> Option<Launch<MoeFfnRopeKbArgs>> {
    let t = |g: (GgmlType, GgmlType)| Some((gemv_ty(g.0)?, gemv_ty(g.1)?));
    GemvType::moe_ffn_rope_kb(t(gate_up)?, t(down)?, t(pair)?).map(fixed)
}

/// `(act, sel, down, down_sh, resid, y, nrows, ff, n_used, ff_sh, n_expert)`; an item is an
/// output row.
pub(crate) fn moe_down(routed: GgmlType, shared: GgmlType) -> Launch<DownArgs> {
    let s = gemv_ty(shared);
    registry_name(
        routed,
        &format!("moe_down with shared {}", shared.name()),
        |r| GemvType::down(r, s?),
    )
}
