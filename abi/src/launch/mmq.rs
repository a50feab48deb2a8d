//! Quantized matrix-matrix products for prefill (llama.cpp's `mmq`): a weight matrix times the
//! q8_1 activations of many tokens on int8 tensor cores (`mma.m16n8k32.s32.s8.s8.s32`).
//!
//! `y[t][r] = Σ_k W[r][k]·x_t[k]` for `ntok` tokens: `W` is `nrows` rows of `ncols` weights
//! (row-major quant blocks), `x` is `ntok` rows of `ncols/32` q8_1 blocks (token-major, the
//! blocks the decode gemv reads for one token), `y` is `ntok × nrows` floats, **token-major**
//! (token `t`'s outputs are `y[t·nrows .. t·nrows + nrows]`, the layout of the next layer's
//! input rows).
//!
//! Tiling: a thread block computes one tile of [`MMQ_ROWS`] rows × [`MMQ_TOKENS`] tokens. It
//! walks the row in super-blocks of 256 weights: it stages the tile's weights (unpacked to s8,
//! with each 32-weight sub-block's factors: Q4_K's scale and min, Q6_K's `d` and two group
//! scales) and the tile's activations (s8, with each q8_1 block's `d` and `d·Σq`) in shared
//! memory, then each of its [`MMQ_WARPS`] warps multiplies a 16-row slice by a
//! [`MMQ_WARP_TOKENS`]-token slice with `mma` per 32-deep sub-block and 8-token column (Q6_K:
//! two, one per 16-weight scale group). So every weight byte is read once per token tile (a
//! Q6_K block that starts 2 bytes off a 4-byte word also reads the 2 bytes before it and 2 of
//! `d` again) and every activation byte once per row tile. Rows past `nrows` and tokens past
//! `ntok` are staged from zero bytes and never stored.
//!
//! An item is one tile: launch [`mmq_items`] items, one per block; block `b` computes token
//! tile `b % mmq_token_tiles(ntok)` of row tile `b / mmq_token_tiles(ntok)` (the blocks that
//! run together share a weight tile).

use super::{ptr, u32_, KernelDesc, WARP_SIZE};

/// Weight rows one block computes.
pub const MMQ_ROWS: u32 = 64;
/// Tokens one block computes.
pub const MMQ_TOKENS: u32 = 64;
/// Warps per block: `MMQ_ROWS / 16` row slices (the `M = 16` of the `mma`) times two token
/// halves.
pub const MMQ_WARPS: u32 = 8;
/// Tokens one warp computes: `MMQ_WARP_TOKENS / 8` `mma` columns (`N = 8`).
pub const MMQ_WARP_TOKENS: u32 = MMQ_TOKENS * (MMQ_ROWS / 16) / MMQ_WARPS;
/// Threads per block.
pub const MMQ_THREADS: u32 = MMQ_WARPS * WARP_SIZE;
/// Weights of one staged step of the row (a k-quant super-block).
pub const MMQ_K_STEP: u32 = 256;

const _: () = assert!((MMQ_ROWS / 16) * (MMQ_TOKENS / MMQ_WARP_TOKENS) == MMQ_WARPS);
const _: () = assert!(MMQ_WARP_TOKENS.is_multiple_of(16));

/// Token tiles of a launch over `ntok` tokens.
#[inline]
pub const fn mmq_token_tiles(ntok: u32) -> u32 {
    ntok.div_ceil(MMQ_TOKENS)
}

/// Work items (tiles, one per block) of a launch over `nrows` rows and `ntok` tokens; `None`
/// when the count exceeds `u32`.
#[inline]
pub const fn mmq_items(nrows: u32, ntok: u32) -> Option<u32> {
    nrows.div_ceil(MMQ_ROWS).checked_mul(mmq_token_tiles(ntok))
}

const PARAMS: &[super::Param] = &[
    ptr("w"),
    ptr("x"),
    ptr("y"),
    u32_("ncols"),
    u32_("nrows"),
    u32_("ntok"),
];

const fn mmq_desc(name: &'static str) -> KernelDesc {
    KernelDesc {
        name,
        params: PARAMS,
        block: [MMQ_THREADS, 1, 1],
        items_per_block: 1,
        shared_bytes: 0,
    }
}

/// `mmq_q4k(w: *const BlockQ4K, x: *const BlockQ8_1, y: *mut f32, ncols, nrows, ntok)`: the
/// module's product for Q4_K weights, `ncols` a positive multiple of 256. The result is the
/// decode gemv's formula per token (`d·Σ d8·sc·Σq·q8 − dmin·Σ d8·m·Σq8` per super-block), with
/// the f32 additions in another order.
pub const MMQ_Q4K: KernelDesc = mmq_desc("mmq_q4k");

/// `mmq_q6k(w: *const BlockQ6K, x, y, ncols, nrows, ntok)`: as [`MMQ_Q4K`] for Q6_K weights
/// (`d·Σ d8·sc·Σ(q − 32)·q8` per super-block, the decode gemv's formula).
pub const MMQ_Q6K: KernelDesc = mmq_desc("mmq_q6k");

/// The kernels of this family.
pub const ALL: &[KernelDesc] = &[MMQ_Q4K, MMQ_Q6K];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_cover_rows_and_tokens() {
        assert_eq!(MMQ_WARP_TOKENS, 32);
        assert_eq!(mmq_token_tiles(1), 1);
        assert_eq!(mmq_token_tiles(64), 1);
        assert_eq!(mmq_token_tiles(130), 3);
        assert_eq!(mmq_items(100, 130), Some(2 * 3));
        assert_eq!(mmq_items(576, 512), Some(9 * 8));
        assert_eq!(mmq_items(u32::MAX, u32::MAX), None);
    }
}
