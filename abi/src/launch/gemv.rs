//! Matrix-vector products for batch-1 decode: quantized weights times a q8_1 activation vector
//! (per weight type a plain, a grouped and a two-matrix kernel; the fused lm_head + argmax
//! kernels are in `head`), and an f32 gemv for the MoE router.
//!
//! Thread mapping shared by the quantized kernels: a group of [`gemv_lanes_per_row`] lanes
//! computes one output row (a whole warp for rows of 1024 weights or more; fewer lanes, several
//! rows per warp, for short rows such as `attn_k_b`'s 128). An item is one **warp**: launch
//! `ceil(nrows / gemv_rows_per_warp(..))` items, [`GEMV_WARPS`] per block.
//!
//! Row `r` of a grouped kernel reads the activation blocks starting at q8_1 block
//! `(r / rows_per_group) · x_group_stride` of `x`: MLA absorption multiplies each head's
//! `rows_per_group` rows by that head's slice of a wider vector (`attn_k_b`: 16 heads × 512 rows
//! against each head's 128 `q_nope` values, stride 6 blocks = 192 floats; `attn_v_b`: 16 × 128
//! rows against each head's 512 latent outputs, stride 16 blocks). The plain kernels are the
//! grouped ones with a single group. The two-matrix kernels run two matrices of one type and
//! width against one `x` in one launch (`attn_q` and `attn_kv_a_mqa`).

use super::{ptr, u32_, KernelDesc, GEMV_WARPS, WARP_SIZE};

/// Weights per unit of a 32-element quant type: a lane takes two consecutive blocks. Rows of
/// these types hold a multiple of 32 weights; an odd last block is handled after the unit loop.
pub const GEMV_PAIR_QK: u32 = 64;
/// Weights per unit of a k-quant type (one super-block).
pub const GEMV_KQUANT_QK: u32 = 256;
/// Lanes per unit of the 32-element types (one lane per block pair).
pub const GEMV_PAIR_LANES: u32 = 1;
/// Lanes per Q3_K super-block.
pub const GEMV_Q3K_LANES: u32 = 4;
/// Lanes per Q4_K, Q5_K and Q6_K super-block.
pub const GEMV_KQUANT_LANES: u32 = 8;

/// Lanes that compute one row of `units` units when `lanes_per_unit` lanes share a unit: the
/// smallest power of two covering every unit once, at least `lanes_per_unit`, at most a warp.
/// Device and host both call this, so the thread mapping and the grid cannot disagree.
pub const fn gemv_lanes_per_row(units: u32, lanes_per_unit: u32) -> u32 {
    let mut lanes = lanes_per_unit;
    while lanes < WARP_SIZE && lanes < units.saturating_mul(lanes_per_unit) {
        lanes *= 2;
    }
    lanes
}

/// Rows one warp computes (see [`gemv_lanes_per_row`]).
pub const fn gemv_rows_per_warp(units: u32, lanes_per_unit: u32) -> u32 {
    WARP_SIZE / gemv_lanes_per_row(units, lanes_per_unit)
}

const PLAIN_PARAMS: &[super::Param] = &[ptr("w"), ptr("x"), ptr("y"), u32_("ncols"), u32_("nrows")];

const GROUPED_PARAMS: &[super::Param] = &[
    ptr("w"),
    ptr("x"),
    ptr("y"),
    u32_("ncols"),
    u32_("nrows"),
    u32_("rows_per_group"),
    u32_("x_group_stride"),
];

const PAIR_PARAMS: &[super::Param] = &[
    ptr("w0"),
    ptr("w1"),
    ptr("x"),
    ptr("y0"),
    ptr("y1"),
    u32_("ncols"),
    u32_("nrows0"),
    u32_("nrows1"),
];

const fn gemv_desc(name: &'static str, params: &'static [super::Param]) -> KernelDesc {
    KernelDesc {
        name,
        params,
        block: [GEMV_WARPS * WARP_SIZE, 1, 1],
        items_per_block: GEMV_WARPS,
        shared_bytes: 0,
    }
}

const fn q8_1_out_desc(name: &'static str) -> KernelDesc {
    KernelDesc {
        name,
        params: GROUPED_PARAMS,
        block: [GEMV_WARPS * WARP_SIZE, 1, 1],
        items_per_block: 1,
        shared_bytes: 0,
    }
}

macro_rules! q8_1_out {
    ($($desc:ident, $name:literal, $ty:literal;)*) => {$(
        #[doc = concat!("`", $name, "(w, x, y, ncols, nrows, rows_per_group, x_group_stride)`: ",
            "the grouped ", $ty, " gemv with `y` as q8_1 blocks (CUDA variant, `s = Σ`, the ",
            "bits of `quantize_q8_1` of the f32 result). An item is one output block: 32 ",
            "consecutive rows, so `nrows` is a multiple of 32 and the grid is `nrows / 32` ",
            "blocks of [`GEMV_WARPS`] warps (`attn_v_b` feeding `attn_output`).")]
        pub const $desc: KernelDesc = q8_1_out_desc($name);
    )*};
}

q8_1_out! {
    GEMV_GROUPED_Q4_0_Q8_1_OUT, "gemv_grouped_q4_0_q8_1_out", "Q4_0";
    GEMV_GROUPED_Q5_0_Q8_1_OUT, "gemv_grouped_q5_0_q8_1_out", "Q5_0";
    GEMV_GROUPED_Q5_1_Q8_1_OUT, "gemv_grouped_q5_1_q8_1_out", "Q5_1";
    GEMV_GROUPED_Q8_0_Q8_1_OUT, "gemv_grouped_q8_0_q8_1_out", "Q8_0";
    GEMV_GROUPED_IQ4_NL_Q8_1_OUT, "gemv_grouped_iq4_nl_q8_1_out", "IQ4_NL";
    GEMV_GROUPED_Q3K_Q8_1_OUT, "gemv_grouped_q3k_q8_1_out", "Q3_K";
    GEMV_GROUPED_Q4K_Q8_1_OUT, "gemv_grouped_q4k_q8_1_out", "Q4_K";
    GEMV_GROUPED_Q5K_Q8_1_OUT, "gemv_grouped_q5k_q8_1_out", "Q5_K";
    GEMV_GROUPED_Q6K_Q8_1_OUT, "gemv_grouped_q6k_q8_1_out", "Q6_K";
}

macro_rules! quant_gemv {
    ($plain:ident, $pname:literal, $grouped:ident, $gname:literal, $pair:ident, $paname:literal,
     $ty:literal) => {
        #[doc = concat!("`", $pname, "(w, x, y, ncols, nrows)`: `y[r] = Σ_c W[r][c]·x[c]` with ",
                    $ty, " weight rows and q8_1 activations; an item is a warp (module docs).")]
        pub const $plain: KernelDesc = gemv_desc($pname, PLAIN_PARAMS);
        #[doc = concat!("`", $gname, "(w, x, y, ncols, nrows, rows_per_group, x_group_stride)`: ",
                    "as the plain ", $ty, " gemv, row `r` reading `x` from block ",
                    "`(r / rows_per_group)·x_group_stride`.")]
        pub const $grouped: KernelDesc = gemv_desc($gname, GROUPED_PARAMS);
        #[doc = concat!("`", $paname, "(w0, w1, x, y0, y1, ncols, nrows0, nrows1)`: the ", $ty,
            " gemvs `y0 = W0·x` (`nrows0` rows) and `y1 = W1·x` (`nrows1` rows) of one width in ",
            "one launch over `nrows0 + nrows1` rows (`attn_q` with `attn_kv_a_mqa`).")]
        pub const $pair: KernelDesc = gemv_desc($paname, PAIR_PARAMS);
    };
}

quant_gemv!(
    GEMV_Q4_0_Q8_1,
    "gemv_q4_0_q8_1",
    GEMV_GROUPED_Q4_0_Q8_1,
    "gemv_grouped_q4_0_q8_1",
    GEMV2_Q4_0_Q8_1,
    "gemv2_q4_0_q8_1",
    "Q4_0"
);
quant_gemv!(
    GEMV_Q5_0_Q8_1,
    "gemv_q5_0_q8_1",
    GEMV_GROUPED_Q5_0_Q8_1,
    "gemv_grouped_q5_0_q8_1",
    GEMV2_Q5_0_Q8_1,
    "gemv2_q5_0_q8_1",
    "Q5_0"
);
quant_gemv!(
    GEMV_Q5_1_Q8_1,
    "gemv_q5_1_q8_1",
    GEMV_GROUPED_Q5_1_Q8_1,
    "gemv_grouped_q5_1_q8_1",
    GEMV2_Q5_1_Q8_1,
    "gemv2_q5_1_q8_1",
    "Q5_1"
);
quant_gemv!(
    GEMV_Q8_0_Q8_1,
    "gemv_q8_0_q8_1",
    GEMV_GROUPED_Q8_0_Q8_1,
    "gemv_grouped_q8_0_q8_1",
    GEMV2_Q8_0_Q8_1,
    "gemv2_q8_0_q8_1",
    "Q8_0"
);
quant_gemv!(
    GEMV_IQ4_NL_Q8_1,
    "gemv_iq4_nl_q8_1",
    GEMV_GROUPED_IQ4_NL_Q8_1,
    "gemv_grouped_iq4_nl_q8_1",
    GEMV2_IQ4_NL_Q8_1,
    "gemv2_iq4_nl_q8_1",
    "IQ4_NL"
);
quant_gemv!(
    GEMV_Q5K_Q8_1,
    "gemv_q5k_q8_1",
    GEMV_GROUPED_Q5K_Q8_1,
    "gemv_grouped_q5k_q8_1",
    GEMV2_Q5K_Q8_1,
    "gemv2_q5k_q8_1",
    "Q5_K"
);
quant_gemv!(
    GEMV_Q6K_Q8_1,
    "gemv_q6k_q8_1",
    GEMV_GROUPED_Q6K_Q8_1,
    "gemv_grouped_q6k_q8_1",
    GEMV2_Q6K_Q8_1,
    "gemv2_q6k_q8_1",
    "Q6_K"
);
// The plain Q3_K / Q4_K kernels are described in `basic` (same parameters and block shape).
/// Grouped Q3_K gemv (see [`GEMV_GROUPED_Q4_0_Q8_1`]).
pub const GEMV_GROUPED_Q3K_Q8_1: KernelDesc = gemv_desc("gemv_grouped_q3k_q8_1", GROUPED_PARAMS);
/// Grouped Q4_K gemv (see [`GEMV_GROUPED_Q4_0_Q8_1`]).
pub const GEMV_GROUPED_Q4K_Q8_1: KernelDesc = gemv_desc("gemv_grouped_q4k_q8_1", GROUPED_PARAMS);
/// Two-matrix Q3_K gemv (see [`GEMV2_Q4_0_Q8_1`]).
pub const GEMV2_Q3K_Q8_1: KernelDesc = gemv_desc("gemv2_q3k_q8_1", PAIR_PARAMS);
/// Two-matrix Q4_K gemv (see [`GEMV2_Q4_0_Q8_1`]).
pub const GEMV2_Q4K_Q8_1: KernelDesc = gemv_desc("gemv2_q4k_q8_1", PAIR_PARAMS);

/// `gemv_f32(w: *const f32, x: *const f32, y: *mut f32, ncols: u32, nrows: u32)`:
/// `y[r] = Σ_c W[r][c]·x[c]`, all f32 (the MoE router, `ffn_gate_inp` 64 × 2048); `ncols` a
/// multiple of 4. One warp per row; an item is a row.
pub const GEMV_F32: KernelDesc = KernelDesc {
    name: "gemv_f32",
    params: PLAIN_PARAMS,
    block: [GEMV_WARPS * WARP_SIZE, 1, 1],
    items_per_block: GEMV_WARPS,
    shared_bytes: 0,
};

/// The kernels of this family.
pub const ALL: &[KernelDesc] = &[
    GEMV_Q4_0_Q8_1,
    GEMV_GROUPED_Q4_0_Q8_1,
    GEMV_Q5_0_Q8_1,
    GEMV_GROUPED_Q5_0_Q8_1,
    GEMV_Q5_1_Q8_1,
    GEMV_GROUPED_Q5_1_Q8_1,
    GEMV_Q8_0_Q8_1,
    GEMV_GROUPED_Q8_0_Q8_1,
    GEMV_IQ4_NL_Q8_1,
    GEMV_GROUPED_IQ4_NL_Q8_1,
    GEMV_GROUPED_Q3K_Q8_1,
    GEMV_GROUPED_Q4K_Q8_1,
    GEMV_Q5K_Q8_1,
    GEMV_GROUPED_Q5K_Q8_1,
    GEMV_Q6K_Q8_1,
    GEMV_GROUPED_Q6K_Q8_1,
    GEMV2_Q4_0_Q8_1,
    GEMV2_Q5_0_Q8_1,
    GEMV2_Q5_1_Q8_1,
    GEMV2_Q8_0_Q8_1,
    GEMV2_IQ4_NL_Q8_1,
    GEMV2_Q3K_Q8_1,
    GEMV2_Q4K_Q8_1,
    GEMV2_Q5K_Q8_1,
    GEMV2_Q6K_Q8_1,
    GEMV_F32,
    GEMV_GROUPED_Q4_0_Q8_1_OUT,
    GEMV_GROUPED_Q5_0_Q8_1_OUT,
    GEMV_GROUPED_Q5_1_Q8_1_OUT,
    GEMV_GROUPED_Q8_0_Q8_1_OUT,
    GEMV_GROUPED_IQ4_NL_Q8_1_OUT,
    GEMV_GROUPED_Q3K_Q8_1_OUT,
    GEMV_GROUPED_Q4K_Q8_1_OUT,
    GEMV_GROUPED_Q5K_Q8_1_OUT,
    GEMV_GROUPED_Q6K_Q8_1_OUT,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_per_row_covers_units_within_a_warp() {
        // attn_k_b in Q5_0: 128 weights = 2 pair units, one lane each → 2 lanes, 16 rows/warp.
        assert_eq!(gemv_lanes_per_row(2, 1), 2);
        assert_eq!(gemv_rows_per_warp(2, 1), 16);
        // 2048 weights of Q4_K: 8 super-blocks × 8 lanes = 64 > 32 → a whole warp.
        assert_eq!(gemv_lanes_per_row(8, 8), 32);
        // One super-block of Q3_K (4 lanes) → 4 lanes, never fewer than a unit needs.
        assert_eq!(gemv_lanes_per_row(1, 4), 4);
        assert_eq!(gemv_lanes_per_row(0, 8), 8);
        assert_eq!(gemv_lanes_per_row(3, 1), 4);
    }
}
