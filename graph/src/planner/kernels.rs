//! Kernel names, launch sizes and availability of the launches the plan makes, in one place.
//!
//! Names and parameter lists follow `ingot_abi::launch`. Where a fused kernel is not in the
//! committed PTX (the embedding fetch, the q8_1-writing variants of rmsnorm, rope_kv,
//! attn_merge and the grouped gemv, the paired gemv, the lm_head argmax), the builder falls
//! back to the unfused kernels or to a host step the plan records
//! ([`crate::Plan::host_embedding`], [`crate::Plan::device_argmax`]); [`crate::Plan::check`]
//! verifies every node against the table before anything runs.

use ingot_abi::launch::{
    gemv_rows_per_warp, GemvUnit, GEMV_KQUANT_LANES, GEMV_KQUANT_QK, GEMV_PAIR_LANES, GEMV_PAIR_QK,
    GEMV_Q3K_LANES, GEMV_Q3K_READ_BYTES, GEMV_Q6K_READ_BYTES,
};
use ingot_gguf::GgmlType;

/// Whether the committed PTX exports kernel `name` and the launch table describes it.
pub fn available(name: &str) -> bool {
    ingot_kernels::kernel(name).is_some() && ingot_kernels::PTX.contains(&format!(".entry {name}("))
}

/// The kernel-name spelling of a weight type: `Q4_K` → `q4k`, `Q5_0` → `q5_0`, `IQ4_NL` →
/// `iq4_nl`.
pub fn type_tag(ty: GgmlType) -> String {
    ty.name().to_ascii_lowercase().replace("_k", "k")
}

/// Weight types the quantized gemv, grouped gemv and MoE kernels read (q8_1 activations).
pub fn gemv_type(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q4_0
            | GgmlType::Q5_0
            | GgmlType::Q5_1
            | GgmlType::Q8_0
            | GgmlType::Iq4Nl
            | GgmlType::Q3K
            | GgmlType::Q4K
            | GgmlType::Q5K
            | GgmlType::Q6K
    )
}

fn is_kquant(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q3K | GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q6K
    )
}

/// Weights per unit of the gemv thread mapping, and the row multiple of the fused FFN kernels:
/// 64 for the 32-element types (a lane takes a pair of blocks), 256 for k-quants.
pub fn row_multiple(ty: GgmlType) -> usize {
    if is_kquant(ty) {
        GEMV_KQUANT_QK as usize
    } else {
        GEMV_PAIR_QK as usize
    }
}

/// Row lengths the plain, grouped and paired gemv kernels accept are multiples of this: one
/// quant block (32, or 256 for k-quants; an odd number of 32-element blocks ends in an
/// unpaired block the kernels handle).
pub fn gemv_row_multiple(ty: GgmlType) -> usize {
    if is_kquant(ty) {
        GEMV_KQUANT_QK as usize
    } else {
        ingot_abi::blocks::QK8_1
    }
}

/// Work items (warps) of a gemv over `nrows` rows of `ncols` weights of type `ty`: the same
/// formula as the kernels' thread mapping (`ingot_abi::launch::gemv_rows_per_warp`).
pub fn gemv_items(ty: GgmlType, ncols: usize, nrows: usize) -> usize {
    let lanes = match ty {
        GgmlType::Q3K => GEMV_Q3K_LANES,
        t if is_kquant(t) => GEMV_KQUANT_LANES,
        _ => GEMV_PAIR_LANES,
    };
    let elems = row_multiple(ty);
    let bytes = (ty.type_size() * elems as u64 / ty.block_size()) as u32;
    let unit = GemvUnit {
        lanes,
        elems: elems as u32,
        bytes,
        read_bytes: match ty {
            GgmlType::Q3K => GEMV_Q3K_READ_BYTES,
            GgmlType::Q6K => GEMV_Q6K_READ_BYTES,
            _ => bytes,
        },
    };
    let units = u32::try_from(ncols / elems).unwrap_or(u32::MAX);
    nrows.div_ceil(gemv_rows_per_warp(units, unit) as usize)
}

/// `(w, x, y, ncols, nrows)`: `y = W·x` with `x` q8_1.
pub fn gemv(ty: GgmlType) -> String {
    format!("gemv_{}_q8_1", type_tag(ty))
}

/// `(w0, w1, x, y0, y1, ncols, nrows0, nrows1)`: two gemvs of one type and width against one
/// `x`; an item is a warp over the `nrows0 + nrows1` rows.
pub fn gemv2(ty: GgmlType) -> String {
    format!("gemv2_{}_q8_1", type_tag(ty))
}

/// The two-matrix gemv with the rope tail (`ingot_abi::launch::GEMV2_ROPE_Q4K_Q8_1` and its siblings); same items as
/// [`gemv2`].
pub fn gemv2_rope(ty: GgmlType) -> String {
    format!("gemv2_rope_{}_q8_1", type_tag(ty))
}

/// `(w, x, y, ncols, nrows, rows_per_group, x_group_stride)`.
pub fn gemv_grouped(ty: GgmlType) -> String {
    format!("gemv_grouped_{}_q8_1", type_tag(ty))
}

/// The grouped gemv with a q8_1 epilogue, same parameters as [`gemv_grouped`]; an item is one
/// output block of 32 rows.
pub fn gemv_grouped_q8_out(ty: GgmlType) -> String {
    format!("gemv_grouped_{}_q8_1_out", type_tag(ty))
}

/// `attn_merge_q8_1` and [`gemv_grouped_q8_out`] in one launch `(part_o, part_ml, state, w, y,
/// scratch, pair_count, n_head, d_v, ctx, max_segments)`; an item is a block
/// (`ingot_abi::launch::merge_v_b_items`).
pub fn merge_v_b(ty: GgmlType) -> String {
    format!("attn_merge_v_b_{}", type_tag(ty))
}

/// The f32 router gemv `(w, x, y, ncols, nrows)`; an item is a row.
pub const GEMV_F32: &str = ingot_abi::launch::GEMV_F32.name;

/// `(x, w, y, n, eps)` over rows; an item is a row.
pub const RMSNORM_F32: &str = ingot_abi::launch::RMSNORM_F32.name;

/// `(x, y, n)`; an item is an input float.
pub const QUANTIZE_Q8_1: &str = ingot_abi::launch::QUANTIZE_Q8_1.name;

/// Fused rmsnorm + q8_1 `(x, w, y_q8, n, eps)`, one item per row, used when the PTX has it.
pub const RMSNORM_Q8_1: &str = "rmsnorm_q8_1";

/// Fused rmsnorm + q8_1 that also writes the normalized f32 row `(x, w, y_q8, y_f32, n, eps)`
/// (the MoE router's input), one item per row, used when the PTX has it.
pub const RMSNORM_Q8_1_F32: &str = "rmsnorm_q8_1_f32";

/// Embedding fetch `(table, state, y, n, n_vocab)` of row `state.token`, one item per output
/// float, used when the PTX has it.
pub fn embed(ty: GgmlType) -> String {
    format!("embed_{}", type_tag(ty))
}

/// `(w, x, y, ncols, nrows, acc)`: the lm_head gemv that also folds every row into the 64-bit
/// argmax key `acc` (see `ingot_abi::launch::head`); an item is a warp, as for [`gemv`].
pub fn gemv_argmax(ty: GgmlType) -> String {
    format!("gemv_argmax_{}_q8_1", type_tag(ty))
}

/// `(x, sel, gate, up, gate_sh, up_sh, act, ncols, ff, n_used, ff_sh, n_expert, layout)`; an
/// item is an output row of `n_used·ff + ff_sh`.
pub fn moe_gate_up(ty: GgmlType) -> String {
    format!("moe_gate_up_{}", type_tag(ty))
}

/// [`moe_gate_up`] reading the routed experts through slot tables (issue 18).
pub fn moe_gate_up_slots(ty: GgmlType) -> String {
    format!("moe_gate_up_slots_{}", type_tag(ty))
}

/// [`moe_down`] reading the routed experts through a slot table (issue 18).
pub fn moe_down_slots(routed: GgmlType, shared: GgmlType) -> String {
    format!("moe_down_slots_{}_{}", type_tag(routed), type_tag(shared))
}

/// `(act, sel, down, down_sh, resid, y, nrows, ff, n_used, ff_sh, n_expert)`; an item is an
/// output row.
pub fn moe_down(routed: GgmlType, shared: GgmlType) -> String {
    format!("moe_down_{}_{}", type_tag(routed), type_tag(shared))
}
