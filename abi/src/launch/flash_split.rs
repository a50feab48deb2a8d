//! How a flash launch divides a step's attention: the context into segments
//! ([`flash_segments`]) and a segment's heads over its head group's blocks ([`flash_block`]).
//! Device and host derive both from the same inputs, so neither needs a buffer to agree.

use super::attention::FLASH_GROUP_HEADS;
use super::attention::{FLASH_MIN_SEGMENT_TILES, FLASH_TILE};

/// How `flash_latent` splits a context of `len` rows (`tiles` tiles of [`FLASH_TILE`] rows):
/// `count` segments of whole tiles, as even as whole tiles allow ([`FlashSplit::rows`]). Device
/// and host derive it from the same inputs, so the merge knows how many segments hold work
/// without any extra buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashSplit {
    pub count: u32,
    pub tiles: u32,
}

impl FlashSplit {
    /// Rows `t0 .. t1` of segment `seg < count` of a context of `len` rows: tiles
    /// `⌊seg·tiles/count⌋ .. ⌊(seg+1)·tiles/count⌋`, so segments differ by at most one tile, none
    /// is empty (`count ≤ tiles`), and the last ends at `len`. The products fit `u64`.
    pub const fn rows(self, seg: u32, len: u32) -> (u32, u32) {
        let t0 = self.first_tile(seg).saturating_mul(FLASH_TILE);
        let t1 = self.first_tile(seg + 1).saturating_mul(FLASH_TILE);
        (
            if t0 < len { t0 } else { len },
            if t1 < len { t1 } else { len },
        )
    }

    /// The first tile of segment `seg` (`tiles` for `seg = count`).
    const fn first_tile(self, seg: u32) -> u32 {
        let count = if self.count == 0 { 1 } else { self.count };
        (seg as u64 * self.tiles as u64 / count as u64) as u32
    }
}

/// The split of a context of `len` rows (`pos + 1`) over at most `max_segments` blocks.
///
/// Segments are whole tiles. While [`flash_block_heads`] can still share each segment's heads
/// among spare blocks (`2·count ≤ max_segments`), a segment holds
/// [`FLASH_MIN_SEGMENT_TILES`] tiles unless the context is shorter, so a short context is one
/// segment (one merge input). Past that, every block takes a segment (`count = max_segments`,
/// or one tile each while there are fewer tiles): a segment then holds `⌈tiles/max_segments⌉`
/// tiles at most, as many as the busiest block held with fewer segments, so no block streams
/// more rows, and the step's cache bytes are streamed by every SM at once (at 4,096 rows on 82
/// SMs: 82 segments of 1-2 tiles, where 2-tile segments left 17 SMs idle). That is what keeps a
/// deep context's attention cost proportional to its bytes (docs/decode-math.md#split-k-attention).
/// `max_segments = 0` counts as 1.
pub const fn flash_segments(len: u32, max_segments: u32) -> FlashSplit {
    let max_segments = if max_segments == 0 { 1 } else { max_segments };
    let tiles = if len == 0 {
        1
    } else {
        len.div_ceil(FLASH_TILE)
    };
    let short = tiles.div_ceil(FLASH_MIN_SEGMENT_TILES);
    let count = if (short as u64) * 2 <= max_segments as u64 {
        short
    } else if tiles < max_segments {
        tiles
    } else {
        max_segments
    };
    FlashSplit { count, tiles }
}

/// What one block of a flash launch serves: segment `seg` of the split, heads `h0 .. h0 + heads`
/// (consecutive rows of `q_abs`, `q_pe`, `part_o` and `part_ml`; `1 ≤ heads ≤ 16`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashBlock {
    pub seg: u32,
    pub h0: u32,
    pub heads: u32,
}

/// Heads per block of a head group while the split holds `count` segments: `16 >> s`, where
/// `2^s` blocks share each segment, the most (up to 16, one head each) that `count` segments
/// leave room for in the group's `max_segments` blocks. A short context (one or a few segments)
/// would otherwise run in one block per group while the group's other blocks exit: its query
/// (16 heads × 2.3 KB) and partial output (16 × 1 KB) then move through one SM. Split, each
/// block stages, attends and stores only its heads; every head's arithmetic is the same (rows of
/// the score and value products are independent), so the output does not depend on the split.
/// A long context (`2·count > max_segments`) keeps 16 heads a block: each block streams its
/// segment's rows once for all of them.
pub const fn flash_block_heads(count: u32, max_segments: u32) -> u32 {
    FLASH_GROUP_HEADS >> flash_head_shift(count, max_segments)
}

/// `log2` of the blocks that share a segment (see [`flash_block_heads`]): shifts, so the device
/// code divides by nothing it cannot prove non-zero.
const fn flash_head_shift(count: u32, max_segments: u32) -> u32 {
    let mut shift = 0;
    while shift < FLASH_GROUP_HEADS.trailing_zeros()
        && (count as u64) << (shift + 1) <= max_segments as u64
    {
        shift += 1;
    }
    shift
}
const _: () = assert!(FLASH_GROUP_HEADS.is_power_of_two());

/// The work of block `b` of a flash launch over `n_head` heads
/// ([`flash_items`](super::flash_items) blocks, the group's `max_segments` of them consecutive)
/// at the split `split`; `None` for a block without work. Within a group, block `j` serves
/// segment `j % count` and the `j / count`-th run of [`flash_block_heads`] heads; the blocks past
/// `count · 16 / heads` and those whose heads are all past `n_head` (a last partial group) have
/// none.
pub const fn flash_block(
    b: u32,
    n_head: u32,
    max_segments: u32,
    split: FlashSplit,
) -> Option<FlashBlock> {
    let ms = if max_segments == 0 { 1 } else { max_segments };
    let count = if split.count == 0 { 1 } else { split.count };
    let shift = flash_head_shift(count, ms);
    let per = FLASH_GROUP_HEADS >> shift;
    let j = b % ms;
    let sub = j / count;
    if sub >= 1 << shift {
        return None;
    }
    let h0 = b / ms * FLASH_GROUP_HEADS + sub * per;
    if h0 >= n_head {
        return None;
    }
    let left = n_head - h0;
    Some(FlashBlock {
        seg: j % count,
        h0,
        heads: if left < per { left } else { per },
    })
}
