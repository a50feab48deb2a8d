//! Kernel launch descriptors shared by the device crate, the host launcher and the tests.
//!
//! Each kernel's exported name, parameter order and launch shape is written down exactly once,
//! here. The device crate reads the constants (threads per block, rows per block) so its thread
//! mapping cannot drift from what the host launches; the host reads the parameter lists to check
//! argument kinds before a launch and [`KernelDesc::grid`] to size the grid.
//!
//! One file per kernel family; each exports its descriptors and an `ALL` list, and
//! `crate::kernel_table::KERNELS` lists the families. A new family adds its module and one entry
//! there. The kernels instantiated once per weight type are named and described by the registry,
//! `crate::weight_types`, which builds its descriptors from this module's constructors.

pub(crate) mod attention;
pub(crate) mod attn_out;
pub(crate) mod basic;
pub(crate) mod embed;
pub(crate) mod ffn_rope_kb;
pub(crate) mod flash_split;
pub(crate) mod gemv;
pub(crate) mod head;
pub(crate) mod mmq;
pub mod moe;
pub(crate) mod moe_ffn;
pub(crate) mod moe_prefill;
pub(crate) mod norm;
pub(crate) mod projections;
mod sig;

pub use attention::{
    flash_handoff_bytes, flash_head_groups, flash_items, flash_smem, merge_items, ATTN_MAX_ROPE,
    ATTN_MERGE, ATTN_MERGE_Q8_1, FLASH_GROUP_HEADS, FLASH_LATENT, FLASH_MAX_HEADS, FLASH_MAX_LORA,
    FLASH_MAX_ROW, FLASH_MIN_SEGMENT_TILES, FLASH_THREADS, FLASH_TILE, MERGE_DIMS, MERGE_THREADS,
    MERGE_WARPS, ROPE_KV, ROPE_KV_Q8_1, ROPE_KV_Q8_1_ROWS, ROPE_KV_THREADS, TEMPERATURE_NONE,
    TEMPERATURE_TABLE,
};
pub use attention::{
    flash_mma_smem, FLASH_LATENT_MMA, FLASH_MMA_HEADS, FLASH_MMA_ROW_STRIDE, FLASH_MMA_THREADS,
};
pub use attention::{
    flash_prefill_items, flash_prefill_smem, FLASH_LATENT_PREFILL, FLASH_LATENT_PREFILL_Q8_0,
    FLASH_PREFILL_MAX_TOKENS, FLASH_PREFILL_ROWS, FLASH_PREFILL_TOKENS,
};
pub use attention::{
    merge_v_b_fits, merge_v_b_items, merge_v_b_pairs, merge_v_b_rows, MERGE_V_B_FILL_BLOCKS,
    MERGE_V_B_KV_LORA, MERGE_V_B_MIN_ROWS, MERGE_V_B_ROWS, MERGE_V_B_SPLIT,
};
pub use attention::{
    AttnMergeArgs, AttnMergeQ8_1Args, FlashLatentArgs, FlashPrefillArgs, MergeVbArgs, RopeKvArgs,
    RopeKvQ8_1Args, RopeKvRowsArgs,
};
pub use attention::{
    CacheType, FLASH_HANDOFF_LINES_PER_THREAD, FLASH_HANDOFF_MAX_BYTES, FLASH_LATENT_MMA_Q8_0,
    FLASH_LATENT_Q8_0,
};
pub use attn_out::{
    merge_v_b_o_cols_fit, merge_v_b_o_cols_items, merge_v_b_o_cols_stage_stride, merge_v_b_o_items,
    merge_v_b_o_out_blocks, MergeVbOArgs, MergeVbOColsArgs, CHAIN_CTL_DONE, CHAIN_CTL_PASSED,
    CHAIN_CTL_TICKET, CHAIN_CTL_WORDS, MERGE_V_B_O_COLS_MIN, MERGE_V_B_O_COLS_Q4K,
};
pub use basic::*;
pub use embed::{
    EmbedArgs, EMBED_BF16, EMBED_F16, EMBED_F32, EMBED_IQ4_NL, EMBED_PER_THREAD, EMBED_Q3K,
    EMBED_Q4K, EMBED_Q4_0, EMBED_Q5K, EMBED_Q5_0, EMBED_Q5_1, EMBED_Q6K, EMBED_Q8_0, EMBED_THREADS,
};
pub use ffn_rope_kb::MoeFfnRopeKbArgs;
pub use flash_split::{flash_block, flash_block_heads, flash_segments, FlashBlock, FlashSplit};
pub use gemv::{
    gemv_block_rows, gemv_lanes_per_row, gemv_min_block_rows, gemv_pair_passes,
    gemv_pair_rows_per_warp, gemv_passes, gemv_rows_per_pass, gemv_rows_per_warp,
    gemv_stage_blocks, Gemv2Args, GemvArgs, GemvGroupedArgs, GemvUnit, GEMV_BLOCK_WARPS,
    GEMV_COLS_MIN, GEMV_COLS_Q4K, GEMV_F32, GEMV_PAIR_WEIGHT_PER_ACT, GEMV_STAGE_BLOCKS,
    GEMV_UNITS_IN_FLIGHT, GEMV_WEIGHT_PER_ACT,
};
pub use head::{
    ArgmaxStepArgs, GemvArgmaxArgs, GemvArgmaxColsArgs, ARGMAX_STEP, ARGMAX_THREADS,
    GEMV_ARGMAX_COLS_MIN, GEMV_ARGMAX_COLS_Q6K, GEMV_ARGMAX_COLS_Q8_0,
};
pub use mmq::{
    mmq_items, mmq_moe_first_slot, mmq_moe_items, mmq_moe_pair_slots, mmq_token_tiles, MmqArgs,
    MmqMoeArgs, MMQ_K_STEP, MMQ_MOE_PAIRS, MMQ_ROWS, MMQ_THREADS, MMQ_TOKENS, MMQ_WARPS,
    MMQ_WARP_TOKENS,
};
pub use moe::{
    gate_up_items, gate_up_router_blocks, gate_up_router_items, moe_down_stage_blocks,
    moe_down_stage_bytes, moe_down_stage_fits, router_logits_rows_items, stacked_expert, DownArgs,
    ExpertSelection, GateUpArgs, GateUpRouterArgs, MoeRouteArgs, MoeRouteRowsArgs, MoeRouterArgs,
    RouterLogitsRowsArgs, RouterPart, DOWN_NORM_NONE, DOWN_NORM_Q8_1_F32, EXPERT_TABLE_ENTRY_BYTES,
    GATE_UP_MERGED, GATE_UP_ROUTER_MAX_EXPERTS, GATE_UP_SEPARATE, MAX_EXPERTS_USED,
    MOE_DOWN_BLOCK_ROWS, MOE_DOWN_STAGE_BLOCKS, MOE_DOWN_STAGE_BYTES, MOE_ROUTE, MOE_ROUTER_F32,
    MOE_ROUTER_LOGITS_ROWS, MOE_ROUTE_ROWS, ROUTER_MAX_EXPERTS, ROUTER_MAX_GROUPS,
    ROUTER_ROWS_TOKENS, ROUTER_ROWS_WARPS, ROUTER_WARPS, ROUTE_BIAS, ROUTE_CTL_COUNT,
    ROUTE_CTL_PASSED, ROUTE_CTL_READY, ROUTE_CTL_TICKET, ROUTE_CTL_WORDS, ROUTE_NORMALIZE,
    ROUTE_SIGMOID,
};
pub use moe_ffn::{moe_ffn_items, MoeFfnArgs};
pub use moe_prefill::{
    MoeCombineArgs, MoePairsArgs, MoeSwigluArgs, MOE_COMBINE, MOE_GLUE_PER_THREAD,
    MOE_GLUE_THREADS, MOE_PAIRS, MOE_PAIRS_THREADS, MOE_PAIRS_WARPS, MOE_SWIGLU_Q8_1,
};
pub use norm::{RmsnormQ8_1F32Args, RMSNORM_Q8_1, RMSNORM_Q8_1_F32, RMSNORM_Q8_1_THREADS};
pub use projections::{
    gemv2_norm_blocks, gemv2_rope_kb_blocks, Gemv2NormArgs, Gemv2NormRopeKbArgs, Gemv2RopeArgs,
    Gemv2RopeKbArgs,
};
pub(crate) use sig::signature;
pub use sig::{Arg, Kernel, Signature};

/// Threads per warp on every NVIDIA architecture this crate targets (sm_86, sm_90).
pub const WARP_SIZE: u32 = 32;

/// What a kernel parameter is at the PTX level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// A global-memory pointer (`.u64` in PTX). The buffer it points to must be 16-byte aligned.
    Ptr,
    /// A `.u32` scalar.
    U32,
    /// A `.s32` scalar.
    I32,
    /// A `.f32` scalar.
    F32,
    /// A `.u64` scalar.
    U64,
}

/// One kernel parameter, in declaration order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: &'static str,
    pub kind: ParamKind,
}

/// Name, parameters and launch shape of one kernel in `kernels/ptx/ingot.ptx`.
///
/// The grid is one-dimensional: a kernel covers `items` work items (rows, or elements for
/// element-wise kernels), `items_per_block` per thread block.
///
/// Done counters: a pointer parameter named `count` is a `u32` that counts the launch's warps
/// as they finish (a block may count all its warps at once). The launch that brings it to
/// `grid·warps per block` runs its tail (the work that needs every block's results) and sets
/// it back to 0, so it is 0 before and after every launch and a replayed graph needs no reset;
/// launches that share one counter must not overlap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelDesc {
    /// Exported (`#[no_mangle]`) symbol name in the PTX.
    pub name: &'static str,
    /// Parameters in PTX declaration order.
    pub params: &'static [Param],
    /// Threads per block, `[x, y, z]`.
    pub block: [u32; 3],
    /// Work items one block covers; see each kernel for what an item is.
    pub items_per_block: u32,
    /// Dynamic shared memory per block, in bytes.
    pub shared_bytes: u32,
}

impl KernelDesc {
    /// Grid covering `items` work items: `ceil(items / items_per_block)` blocks along x.
    pub const fn grid(&self, items: u32) -> [u32; 3] {
        [items.div_ceil(self.items_per_block), 1, 1]
    }

    /// Threads per block (product of `block`).
    pub const fn threads(&self) -> u32 {
        self.block[0] * self.block[1] * self.block[2]
    }
}
