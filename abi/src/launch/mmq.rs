//! Quantized matrix-matrix products for prefill (llama.cpp's `mmq`): a weight matrix times the
//! q8_1 activations of many tokens on int8 tensor cores (`mma.m16n8k32.s32.s8.s8.s32`).
//!
//! `y[t][r] = Σ_k W[r][k]·x_t[k]` for `ntok` tokens: `W` is `nrows` rows of `ncols` weights
//! (row-major quant blocks), `x` is `ntok` rows of `ncols/32` q8_1 blocks (token-major, the
//! blocks the decode gemv reads for one token), `y` is `ntok × nrows` floats, **token-major**
//! (token `t`'s outputs are `y[t·nrows .. t·nrows + nrows]`, the next layer's input rows).
//!
//! Tiling: a block computes [`MMQ_ROWS`] rows × [`MMQ_TOKENS`] tokens, walking the row in steps of
//! [`MMQ_K_STEP`] = 256 weights. Per step it stages in shared memory the tile's weights unpacked to
//! s8 with each 32-weight sub-block's factors (scale and min, `d` and group scales, or `d` and `m`)
//! and the activations (s8, with each q8_1 block's `d` and `d·Σq`); each of [`MMQ_WARPS`] warps
//! then multiplies a 16-row slice by a [`MMQ_WARP_TOKENS`]-token slice, one `mma` per 32-deep
//! sub-block and 8-token column (Q6_K, Q3_K: two, one per 16-weight scale group). Every weight byte
//! is read once per token tile and every activation byte once per row tile (a 2-byte-aligned Q6_K
//! or Q3_K block is read as the aligned words that hold it); rows past `nrows` and tokens past
//! `ntok` are staged from zero bytes and never stored.
//!
//! `ncols`: a positive multiple of 256 for the k-quant kernels, of 32 for the 32-weight types
//! (V2-Lite's `ffn_down_exps` rows are 1408 = 44·32 weights). A row of the latter may end inside
//! its last step: the blocks past `ncols/32` are staged as zeros by predicated-off loads (no bytes
//! read), so they add exact zeros and the step loop has no branch.
//!
//! Per type (`mmq_<tag>`, the registry's types with `mmq` rows: `GemvType::mmq`): the decode
//! gemv's formula per token (docs/quant-formats.md#gpu-dot-products) with the f32 additions in
//! another order; offsets (Q5_0's 16, Q4_0's 8) are folded into the staged levels, mins (Q4_K,
//! Q5_K, Q4_1, Q5_1) into a `d·Σq8` term, IQ4_NL's levels staged as its code book's values.
//!
//! One block per tile ([`mmq_items`]): block `b` computes token tile `b % mmq_token_tiles(ntok)`
//! of row tile `b / mmq_token_tiles(ntok)`, so blocks that run together share a weight tile.

use super::{signature, Kernel, WARP_SIZE};

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

signature! {
    /// The arguments of the dense products (`crate::weight_types::GemvType::mmq`).
    MmqArgs { w: ptr, x: ptr, y: ptr, ncols: u32, nrows: u32, ntok: u32 }
}

/// The descriptor of a dense product `mmq_<tag>(w, x, y, ncols, nrows, ntok)`
/// (`crate::weight_types::GemvType::mmq`): the module's product for the type's weights.
pub(crate) const fn mmq_kernel(name: &'static str) -> Kernel<MmqArgs> {
    Kernel::new(name, [MMQ_THREADS, 1, 1], 1, 0)
}

/// Pairs (routed `(token, expert)` pairs) one block of an expert-grouped launch computes: the
/// token tile, each tile column one pair.
pub const MMQ_MOE_PAIRS: u32 = MMQ_TOKENS;

/// Pair-tile slots of an expert-grouped launch over `n_pairs` pairs routed to `n_expert`
/// experts; `None` when the count exceeds `u32`.
///
/// The counts per expert are produced on the device (routing), so the grid cannot depend on
/// them: expert `e`'s tiles take the slots `first(e) .. first(e) + ceil(count_e / 64)` with
/// `first(e) = floor(expert_start[e] / 64) + e`. Those ranges are disjoint and ordered for any
/// sorted pair list (with `s = expert_start[e] = 64a + b`, `b < 64`:
/// `a + ceil(count_e/64) ≤ a + floor((b + count_e)/64) + 1 = floor(expert_start[e+1]/64) + 1`),
/// and the last ends by `floor(n_pairs / 64) + n_expert`, so that many slots cover every
/// routing. A block finds its expert as the last `e` with `first(e) ≤ slot` from the
/// `expert_start` words alone (no prefix sum, no host round trip) and exits when its slot is
/// past its expert's pairs. Cost: at most `n_expert` such empty slots per row tile beyond the
/// `Σ_e ceil(count_e / 64)` busy ones (each reads the `n_expert + 1` offsets and stops), e.g.
/// 64 on V2-Lite's 64 experts, where a 512-token chunk (3072 pairs) keeps at least 48 busy.
#[inline]
pub const fn mmq_moe_pair_slots(n_pairs: u32, n_expert: u32) -> Option<u32> {
    (n_pairs / MMQ_MOE_PAIRS).checked_add(n_expert)
}

/// First pair-tile slot of an expert whose pairs start at `expert_start` in the sorted list
/// (`e` its index): see [`mmq_moe_pair_slots`].
#[inline]
pub const fn mmq_moe_first_slot(expert_start: u32, e: u32) -> u32 {
    expert_start / MMQ_MOE_PAIRS + e
}

/// Work items (tiles, one per block) of an expert-grouped launch: `rows` rows per expert
/// times [`mmq_moe_pair_slots`]; `None` when the count exceeds `u32`. Block `b` takes slot
/// `b % slots` of row tile `b / slots`.
#[inline]
pub const fn mmq_moe_items(rows: u32, n_pairs: u32, n_expert: u32) -> Option<u32> {
    match mmq_moe_pair_slots(n_pairs, n_expert) {
        Some(s) => rows.div_ceil(MMQ_ROWS).checked_mul(s),
        None => None,
    }
}

signature! {
    /// The arguments of the expert-grouped products (`crate::weight_types::GemvType::mmq_moe`).
    MmqMoeArgs {
        w: ptr,
        x: ptr,
        pair_token: ptr,
        expert_start: ptr,
        pair_row: ptr,
        y: ptr,
        ncols: u32,
        rows: u32,
        ntok: u32,
        n_pairs: u32,
        n_expert: u32,
    }
}

/// The descriptor of an expert-grouped product `mmq_moe_<tag>(w: *const Block, x: *const
/// BlockQ8_1, pair_token: *const u32, expert_start: *const u32, pair_row: *const u32, y: *mut f32,
/// ncols, rows, ntok, n_pairs, n_expert)` (`crate::weight_types::GemvType::mmq_moe`): the
/// expert-grouped product of prefill's routed experts. `w` stacks `n_expert` matrices of
/// `rows × ncols` weights (expert `e`'s rows follow expert `e − 1`'s); the pair list is sorted by
/// expert: pairs `expert_start[e] .. expert_start[e + 1]` are routed to `e`, pair `p` reads token
/// `pair_token[p]`'s q8_1 row of `x` (`ntok` rows, as the dense product) and writes row
/// `pair_row[p]` of `y` (`n_pairs × rows` floats): `y[pair_row[p]] = W_e · x[pair_token[p]]`.
/// With the identity list (`moe_pairs`' `pair_self`) `y` is pair-major in the sorted order; with
/// a permutation it is in that order (the per-head products of MLA attention, heads as experts
/// and pairs sorted by head, pass the list that `pair_token` is, so their outputs come out
/// token-major). A block computes 64 rows of one expert × 64 of its pairs with the dense tile
/// body of the type, so each expert's weight tile is read once per tile of 64 of its pairs; the
/// grid is [`mmq_moe_items`]. Bad list contents cannot reach outside the buffers: offsets are
/// clamped to `n_pairs`, a pair whose token is `≥ ntok` reads zeros, and an output row
/// `≥ n_pairs` is row `n_pairs − 1` (two pairs with one output row store to it in no fixed
/// order).
pub(crate) const fn mmq_moe_kernel(name: &'static str) -> Kernel<MmqMoeArgs> {
    Kernel::new(name, [MMQ_THREADS, 1, 1], 1, 0)
}

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

    /// Every sorted routing's tiles land in distinct slots below the slot count.
    #[test]
    fn moe_slots_cover_every_routing() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for n_expert in [1u32, 2, 8, 64] {
            for round in 0..200 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let mut counts = [0u32; 64];
                for (e, c) in counts.iter_mut().enumerate().take(n_expert as usize) {
                    let cap = [1, 2, 63, 64, 65, 200][e % 6];
                    *c = ((seed >> (e % 60)) as u32 ^ round) % cap;
                }
                counts[round as usize % n_expert as usize] += round;
                let counts = &counts[..n_expert as usize];
                let n_pairs: u32 = counts.iter().sum();
                let slots = mmq_moe_pair_slots(n_pairs, n_expert).unwrap();
                let (mut start, mut next) = (0, 0);
                for (e, &c) in counts.iter().enumerate() {
                    let first = mmq_moe_first_slot(start, e as u32);
                    assert!(first >= next, "expert {e}: slot {first} overlaps {next}");
                    next = first + c.div_ceil(MMQ_MOE_PAIRS);
                    start += c;
                }
                assert!(next <= slots, "{next} slots used > {slots}");
            }
        }
        assert_eq!(mmq_moe_items(64, 130 * 6, 64), Some(780 / 64 + 64));
        assert_eq!(mmq_moe_items(u32::MAX, u32::MAX, 2), None);
    }
}
