//! MLA attention for one decode token (docs/decode-math.md#mla-attention steps 4-10,
//! docs/decode-math.md#split-k-attention): rope + latent cache write, split-K `flash_latent` over
//! the latent cache, and the log-sum-exp merge of its segments.
//!
//! # Data layouts (all buffers 16-byte aligned, little-endian)
//! * `q`: `n_head × (d_nope + n_rope)` f32, the `attn_q` gemv output; head `h`'s rope part is
//!   `q[h·(d_nope+n_rope) + d_nope ..][..n_rope]`.
//! * `kv`: `kv_lora + n_rope` f32, the `attn_kv_a_mqa` gemv output (`c | k_pe`).
//! * `rope_freq`: `n_rope/2` f64, `rope_freq[i] = θ_i / pos`, i.e. the YaRN-blended angular
//!   frequency of pair `i` (θ is linear in the position for every ggml rope mode). Computed once
//!   at load time by the host (`ingot_model::RopeParams::theta(1, i)`).
//! * `q_pe`: `n_head × n_rope` f32, the rotated query rope parts.
//! * `cache`: the layer's latent KV cache, `ctx` rows of [`CacheType::row_bytes`] each; row `t`
//!   holds the `kv_lora + n_rope` values `[rmsnorm(c_t) | rope(k_pe_t)]` (newest mainline order,
//!   docs/decode-math.md#mla-attention step 6) as f16 or as q8_0 blocks (see [`CacheType`]).
//! * `q_abs`: `n_head × kv_lora` f32, the output of the grouped `attn_k_b` gemv.
//! * `part_o`: `max_segments × n_head × kv_lora` f16, each segment's normalized output
//!   `ō = Σ_t 2^(s_t − m)·c_t / l` (a convex combination of cache values: within f16 range);
//!   `part_ml`: `max_segments × n_head × 2` f32, `(m, l)` per segment and head, with `m` the
//!   running maximum of the base-2 scores `s_t = kq_scale·log2(e)·(Q·K_t)`, `l = Σ_t 2^(s_t − m)`.
//! * `o_lat`: `n_head × kv_lora` f32, `softmax(s)·c` per head (the input of the grouped
//!   `attn_v_b` gemv; head `h`'s slice starts at `h·kv_lora`, a whole number of q8_1 blocks
//!   when `kv_lora` is a multiple of 32, so `quantize_q8_1` over all `n_head·kv_lora` floats
//!   gives each head its own blocks).
//!
//! # Per-token values
//! The position comes from [`crate::step::StepState::pos`] in device memory; `ctx` (cache rows)
//! and `max_segments` are fixed when a graph is captured. A step with `pos ≥ ctx` writes no cache
//! row and the merge writes NaN to `o_lat`, so an overflowing context is visible, never silent.

#[cfg(doc)]
use super::{flash_block, flash_segments};
use super::{signature, Kernel, KernelDesc, WARP_SIZE};
use crate::blocks::QK8_0;

/// How the latent cache stores a row of `width = kv_lora + n_rope` values (`--cache-type`): the
/// `cache_type` parameter of the rope kernels that write rows, and which flash kernel reads them
/// ([`FLASH_LATENT`] / [`FLASH_LATENT_MMA`] or their `_q8_0` twins).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum CacheType {
    /// `width` f16, packed.
    #[default]
    F16 = 0,
    /// ggml's q8_0 per 32 values (`d = amax/127`, `q = roundf(x·(1/d))`, a last short group
    /// padded with zeros), split: the [`CacheType::q8_0_blocks`]` · 32` quants (i8), then the
    /// blocks' `d` (f16), then zeros up to a multiple of 16 bytes so every row stays 16-byte
    /// aligned for the flash kernels' vector loads. V2-Lite: 576 + 36 + 12 = 624 bytes, 0.54x
    /// the 1152 of an f16 row.
    Q8_0 = 1,
}

impl CacheType {
    /// q8_0 blocks of a row of `width` values.
    pub const fn q8_0_blocks(width: u32) -> u32 {
        width.div_ceil(QK8_0 as u32)
    }

    /// Bytes of one cache row of `width` values.
    pub const fn row_bytes(self, width: u32) -> u32 {
        match self {
            CacheType::F16 => width * 2,
            CacheType::Q8_0 => {
                let blocks = Self::q8_0_blocks(width);
                (blocks * (QK8_0 as u32 + 2)).next_multiple_of(16)
            }
        }
    }

    /// The value of the rope kernels' `cache_type` parameter.
    pub const fn code(self) -> u32 {
        self as u32
    }

    /// Every format, in the order `--help` lists them.
    pub const ALL: [CacheType; 2] = [CacheType::F16, CacheType::Q8_0];

    /// The format's `--cache-type` name (llama.cpp's `-ctk` names).
    pub const fn name(self) -> &'static str {
        match self {
            CacheType::F16 => "f16",
            CacheType::Q8_0 => "q8_0",
        }
    }

    /// The format named `name` ([`CacheType::name`]), if there is one.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl core::fmt::Display for CacheType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

const _: () = assert!(CacheType::Q8_0.row_bytes(576) == 624);

/// Threads per block of [`ROPE_KV`].
pub const ROPE_KV_THREADS: u32 = 256;
/// Most rope dimensions per head [`ROPE_KV`] and [`FLASH_LATENT`] support (V2-Lite: 64).
pub const ATTN_MAX_ROPE: u32 = 64;

/// `rope_kv(q, kv, kv_norm, rope_freq, state, q_pe, cache, n_head, d_nope, kv_lora, n_rope, ctx,
/// eps, mscale, cache_type)`: rotates every head's query rope part into `q_pe` and, when
/// `pos < ctx`, writes cache row `pos` = `[rmsnorm(c, kv_norm, eps) | rope(k_pe)]` in the
/// format `cache_type` ([`CacheType::code`]) names. Rotation of pair `i`
/// (adjacent elements `2i, 2i+1`, ggml NORM mode) by `θ_i = pos·rope_freq[i]` with cos/sin
/// multiplied by `mscale`. One block; an item is the whole token.
pub const ROPE_KV: Kernel<RopeKvArgs> = Kernel::new("rope_kv", [ROPE_KV_THREADS, 1, 1], 1, 0);

signature! {
    /// The arguments of [`ROPE_KV`].
    RopeKvArgs {
        q: ptr,
        kv: ptr,
        kv_norm: ptr,
        rope_freq: ptr,
        state: ptr,
        q_pe: ptr,
        cache: ptr,
        n_head: u32,
        d_nope: u32,
        kv_lora: u32,
        n_rope: u32,
        ctx: u32,
        eps: f32,
        mscale: f32,
        cache_type: u32,
    }
}

/// `rope_kv_q8_1(q, kv, kv_norm, rope_freq, state, q_pe, q_nope_q8, cache, n_head, d_nope, kv_lora,
/// n_rope, ctx, eps, mscale, cache_type)`: [`ROPE_KV`] that also writes every head's query nope
/// part as q8_1 blocks (head `h` at block `h·d_nope/32`, CUDA variant `s = Σ`), the bits
/// `quantize_q8_1` gives for each head's `d_nope` floats: the grouped `attn_k_b` gemv's input,
/// without a quantization launch. Also requires `d_nope` a multiple of 32 and `n_rope` of 4. One
/// block; an item is the whole token.
pub const ROPE_KV_Q8_1: Kernel<RopeKvQ8_1Args> =
    Kernel::new("rope_kv_q8_1", [ROPE_KV_THREADS, 1, 1], 1, 0);

signature! {
    /// The arguments of [`ROPE_KV_Q8_1`].
    RopeKvQ8_1Args {
        q: ptr,
        kv: ptr,
        kv_norm: ptr,
        rope_freq: ptr,
        state: ptr,
        q_pe: ptr,
        q_nope_q8: ptr,
        cache: ptr,
        n_head: u32,
        d_nope: u32,
        kv_lora: u32,
        n_rope: u32,
        ctx: u32,
        eps: f32,
        mscale: f32,
        cache_type: u32,
    }
}

/// `rope_kv_q8_1_rows(q, kv, kv_norm, rope_freq, state, rows, q_pe, q_nope_q8, cache, n_head,
/// d_nope, kv_lora, n_rope, ctx, eps, mscale, cache_type, ntok)`: [`ROPE_KV_Q8_1`] for the
/// tokens of a prefill chunk at positions `pos0 .. pos0 + n`, `pos0 = StepState::pos` (in
/// device memory, so a captured chunk graph replays at any position). Token `t`'s `q`, `kv`,
/// `q_pe` and `q_nope_q8` are row `t` of token-major buffers, each row laid out as the decode
/// kernel's whole buffer (strides `n_head·(d_nope+n_rope)` f32, `kv_lora+n_rope` f32,
/// `n_head·n_rope` f32, `n_head·d_nope/32` q8_1 blocks: the `mmq` projections' outputs);
/// its cache row is `pos0 + t` (none when `≥ ctx`). Every row is the bits [`ROPE_KV_Q8_1`]
/// writes at that position.
///
/// Fewer tokens than the launch: `ntok` (a launch argument, fixed when a graph is captured)
/// sizes the grid and the buffers, and `rows` is one device `u32` holding the chunk's token
/// count `n`; tokens `t ≥ min(n, ntok)` write nothing. A graph captured for a bucket of `B`
/// tokens runs a chunk of `n ≤ B` after the host writes `n` to `rows` (and `pos0` to the
/// `StepState`). One block per token: an item is a token.
pub const ROPE_KV_Q8_1_ROWS: Kernel<RopeKvRowsArgs> =
    Kernel::new("rope_kv_q8_1_rows", [ROPE_KV_THREADS, 1, 1], 1, 0);

signature! {
    /// The arguments of [`ROPE_KV_Q8_1_ROWS`].
    RopeKvRowsArgs {
        q: ptr,
        kv: ptr,
        kv_norm: ptr,
        rope_freq: ptr,
        state: ptr,
        rows: ptr,
        q_pe: ptr,
        q_nope_q8: ptr,
        cache: ptr,
        n_head: u32,
        d_nope: u32,
        kv_lora: u32,
        n_rope: u32,
        ctx: u32,
        eps: f32,
        mscale: f32,
        cache_type: u32,
        ntok: u32,
    }
}

/// Threads per block of [`FLASH_LATENT`].
pub const FLASH_THREADS: u32 = 256;
/// Cache rows one [`FLASH_LATENT`] block stages in shared memory at a time.
pub const FLASH_TILE: u32 = 32;
/// Heads one [`FLASH_LATENT`] / [`FLASH_LATENT_MMA`] block serves: a head group (all heads of
/// V2-Lite; every head shares the cache rows, so one block reads each row once for all of its
/// heads).
pub const FLASH_GROUP_HEADS: u32 = 16;
/// Most heads the flash kernels serve (DeepSeek-V3: 128). Heads past [`FLASH_GROUP_HEADS`] run
/// in more blocks, one per (head group, segment) (see [`flash_items`]); each group re-reads the
/// segment's cache rows, from L2 once the first group has fetched them.
pub const FLASH_MAX_HEADS: u32 = 128;
/// Widest cache row `kv_lora + n_rope` [`FLASH_LATENT`] supports, in f16 elements.
pub const FLASH_MAX_ROW: u32 = 576;
/// Widest latent `kv_lora` [`FLASH_LATENT`] supports.
pub const FLASH_MAX_LORA: u32 = 512;
/// Fewest tiles a segment holds while spare blocks can still share the segments' heads
/// (`flash_segments`). Each segment costs a re-read of the query (`n_head·576·4` B ≈ 36 KB at
/// V2-Lite shapes, L2-resident) and a partial output (`n_head·kv_lora·2` B = 16 KB, written and
/// merged), against 36 KB of f16 cache per tile. Past that point every block takes a segment,
/// of 1 tile or more: an idle SM costs the step more than a partial output.
pub const FLASH_MIN_SEGMENT_TILES: u32 = 2;

/// Byte offsets of [`FLASH_LATENT`]'s dynamic shared memory.
pub mod flash_smem {
    use super::{FLASH_GROUP_HEADS, FLASH_MAX_ROW, FLASH_TILE};
    /// The staged cache tile: `FLASH_TILE` rows of `kv_lora + n_rope` f16, packed.
    pub const TILE: u32 = 0;
    /// Probabilities `p[t][h]` of the tile, f32, `FLASH_GROUP_HEADS` per token.
    pub const P: u32 = TILE + FLASH_TILE * FLASH_MAX_ROW * 2;
    /// Per-head rescale factor `2^(m_old − m_new)` of the current tile, f32.
    pub const ALPHA: u32 = P + FLASH_TILE * FLASH_GROUP_HEADS * 4;
    /// Total bytes.
    pub const BYTES: u32 = ALPHA + FLASH_GROUP_HEADS * 4;
}

/// Head groups of `n_head` heads: blocks per segment of the flash kernels.
pub const fn flash_head_groups(n_head: u32) -> u32 {
    n_head.div_ceil(FLASH_GROUP_HEADS)
}

/// Items (= blocks) of [`FLASH_LATENT`] / [`FLASH_LATENT_MMA`]: `max_segments` per head group.
/// Block `b` serves heads of group `b / max_segments` (heads `16·g .. 16·g + 16`, those below
/// `n_head`) over one segment, all 16 or a share of them while the split leaves blocks spare
/// ([`flash_block`]); `max_segments = 0` counts as 1.
pub const fn flash_items(n_head: u32, max_segments: u32) -> u32 {
    let ms = if max_segments == 0 { 1 } else { max_segments };
    flash_head_groups(n_head) * ms
}

/// `flash_latent(q_abs, q_pe, cache, state, part_o, part_ml, n_head, kv_lora, n_rope, ctx,
/// max_segments, kq_scale, temp, temperature, next_a, next_a_bytes, next_b, next_b_bytes)`:
/// block `b` attends the query of its heads to the
/// cache rows of its segment of `0..=pos` (see [`flash_segments`], [`flash_block`]) and writes
/// those heads' rows of that segment's `part_o` and `part_ml`; blocks without work exit at once.
/// Heads run in groups of 16, `max_segments` blocks per group (see [`flash_items`]), a segment's
/// heads shared by several of them while the split leaves blocks spare; the output layout does
/// not depend on the grouping or the sharing. Requires `n_head ≤ 128`,
/// `kv_lora + n_rope ≤ 576`, `kv_lora ≤ 512`, both multiples of 8. Grid: [`flash_items`] blocks (an
/// item is one potential segment of one head group).
///
/// Attention temperature (Mistral Large 3's `attention.temperature_scale`): with
/// `temperature` = [`TEMPERATURE_TABLE`] the logit scale at position `pos` is
/// `kq_scale · temp[pos]`, `temp` holding `ctx` f32 factors the host computed once; with
/// [`TEMPERATURE_NONE`] it is `kq_scale` and `temp` is never read. A table, not a formula: the
/// position advances on the device inside a captured graph, and the host's factors are the
/// reference's to the bit.
///
/// Weights handed ahead: before anything else the launch's threads, all of its blocks together,
/// prefetch into L2 the first `next_a_bytes` of `next_a` and the first `next_b_bytes` of
/// `next_b` (the next launches' weights, [`FLASH_HANDOFF_MAX_BYTES`] at most together; 0
/// bytes prefetch nothing), and the cache rows are read with the L2 evict-first priority, so
/// they do not push those lines out. Prefetching is a hint: nothing it touches is read or
/// written, and the output does not depend on it.
pub const FLASH_LATENT: Kernel<FlashLatentArgs> =
    Kernel::new("flash_latent", [FLASH_THREADS, 1, 1], 1, flash_smem::BYTES);

signature! {
    /// The arguments of [`FLASH_LATENT`] and its siblings (the Q8_0-cache and MMA variants).
    FlashLatentArgs {
        q_abs: ptr,
        q_pe: ptr,
        cache: ptr,
        state: ptr,
        part_o: ptr,
        part_ml: ptr,
        n_head: u32,
        kv_lora: u32,
        n_rope: u32,
        ctx: u32,
        max_segments: u32,
        kq_scale: f32,
        temp: ptr,
        temperature: u32,
        next_a: ptr,
        next_a_bytes: u32,
        next_b: ptr,
        next_b_bytes: u32,
    }
}

/// Most weight bytes a flash launch prefetches for the launches after it ([`FLASH_LATENT`]'s
/// `next_a_bytes + next_b_bytes`): two thirds of the L2 of the smallest card ingot targets (RTX
/// 3090 and A6000: 6 MiB). The lines stay beside what the step keeps there meanwhile because the
/// launch between the flash and the FFN the lines are for reads its largest weight with the L2
/// streaming property (`ingot_graph::Node::l2_streaming`: evict-first, like the flash's own
/// cache rows), and 4 MiB is about what such a card's DRAM moves while a short context's flash
/// and that merge run and the next two nodes start (~4.8 us at ~840 GB/s, PREDICTED by
/// docs/prediction-model.md, not measured). Prefetched as at most
/// [`FLASH_HANDOFF_LINES_PER_THREAD`] lines per thread and span, which covers it in full from
/// 64 blocks of [`FLASH_THREADS`] on (`4 MiB / (2 · 256 · 128 B)`; the planner's split gives
/// every targeted card one block per SM, 82 or more).
pub const FLASH_HANDOFF_MAX_BYTES: u32 = 4 << 20;

/// The bytes a flash launch prefetches of two buffers of `a` and `b` bytes handed ahead
/// (`next_a_bytes`, `next_b_bytes`): each buffer's first bytes, the first buffer first, at most
/// [`FLASH_HANDOFF_MAX_BYTES`] together. The planner and the launcher both size the spans here.
pub const fn flash_handoff_bytes(a: u64, b: u64) -> [u32; 2] {
    let max = FLASH_HANDOFF_MAX_BYTES as u64;
    let a = if a < max { a } else { max };
    let left = max - a;
    let b = if b < left { b } else { left };
    [a as u32, b as u32]
}

/// Lines of 128 bytes each thread of a flash launch prefetches per span of
/// [`FLASH_HANDOFF_MAX_BYTES`]: a constant, so the prefetch unrolls into predicated instructions
/// and no loop.
pub const FLASH_HANDOFF_LINES_PER_THREAD: u32 = 2;

/// [`FLASH_LATENT`] over a [`CacheType::Q8_0`] cache: same parameters, limits, grid and
/// output. Each tile's q8_0 blocks are widened into the same shared f16 tile (`f16(q·d)`, one
/// more rounding of at most 2⁻¹¹ relative than the q8_0 values), so the attention math is
/// [`FLASH_LATENT`]'s.
pub const FLASH_LATENT_Q8_0: Kernel<FlashLatentArgs> = FLASH_LATENT.renamed("flash_latent_q8_0");

/// [`FLASH_LATENT`] `temperature` value: the logit scale is `kq_scale` (`temp` is not read).
pub const TEMPERATURE_NONE: u32 = 0;
/// [`FLASH_LATENT`] `temperature` value: the logit scale is `kq_scale · temp[pos]`.
pub const TEMPERATURE_TABLE: u32 = 1;

/// Latent dims of one head that one [`ATTN_MERGE`] block merges: one warp's worth, lane `i`
/// owning dims `4i .. 4i+4` of the slice.
pub const MERGE_DIMS: u32 = 4 * WARP_SIZE;
/// Warps per [`ATTN_MERGE`] block. Every warp merges the same dims over its own share of the
/// segments (warp `w` takes segments `w, w + MERGE_WARPS, ...`), then the block adds the warps'
/// partial sums in shared memory. A 4096-deep context on a 132-SM GPU has ~65 segments, so each
/// warp walks ~8 of them instead of one thread walking all 65.
pub const MERGE_WARPS: u32 = 8;
/// Threads per block of [`ATTN_MERGE`] and [`ATTN_MERGE_Q8_1`].
pub const MERGE_THREADS: u32 = MERGE_WARPS * WARP_SIZE;

/// Items (= blocks) of [`ATTN_MERGE`] / [`ATTN_MERGE_Q8_1`] for `n_head` heads of `kv_lora`
/// latent dims: one per [`MERGE_DIMS`]-wide slice of each head (V2-Lite: 16 × 4 = 64).
pub const fn merge_items(n_head: u32, kv_lora: u32) -> u32 {
    n_head * kv_lora.div_ceil(MERGE_DIMS)
}

/// `attn_merge(part_o, part_ml, state, o_lat, n_head, kv_lora, ctx, max_segments)`: combines the
/// segments [`FLASH_LATENT`] wrote for this step (their count is re-derived from `pos`) into
/// `o_lat[h] = Σ_s 2^(m_s − M)·l_s·ō_s / Σ_s 2^(m_s − M)·l_s` with `M = max_s m_s`.
/// An item is one [`MERGE_DIMS`]-wide slice of one head, block `b` taking head
/// `b / ceil(kv_lora / MERGE_DIMS)`, slice `b % ceil(kv_lora / MERGE_DIMS)`; see [`merge_items`].
pub const ATTN_MERGE: Kernel<AttnMergeArgs> =
    Kernel::new("attn_merge", [MERGE_THREADS, 1, 1], 1, 0);

signature! {
    /// The arguments of [`ATTN_MERGE`].
    AttnMergeArgs {
        part_o: ptr,
        part_ml: ptr,
        state: ptr,
        o_lat: ptr,
        n_head: u32,
        kv_lora: u32,
        ctx: u32,
        max_segments: u32,
    }
}

/// `attn_merge_q8_1(part_o, part_ml, state, o_lat_q8, n_head, kv_lora, ctx, max_segments)`:
/// [`ATTN_MERGE`] writing `o_lat` as q8_1 blocks (`kv_lora / 32` per head, CUDA variant
/// `s = Σ`): the bits `quantize_q8_1` gives for [`ATTN_MERGE`]'s f32 output, so the grouped
/// `attn_v_b` gemv reads it without a separate quantization launch. `kv_lora` a multiple of
/// 32. Items and blocks as [`ATTN_MERGE`].
pub const ATTN_MERGE_Q8_1: Kernel<AttnMergeQ8_1Args> =
    Kernel::new("attn_merge_q8_1", [MERGE_THREADS, 1, 1], 1, 0);

signature! {
    /// The arguments of [`ATTN_MERGE_Q8_1`].
    AttnMergeQ8_1Args {
        part_o: ptr,
        part_ml: ptr,
        state: ptr,
        o_lat_q8: ptr,
        n_head: u32,
        kv_lora: u32,
        ctx: u32,
        max_segments: u32,
    }
}

const _: () = assert!(
    MERGE_DIMS.is_multiple_of(32),
    "q8_1 blocks must not straddle slices"
);
const _: () =
    assert!(FLASH_THREADS == FLASH_GROUP_HEADS * 16 && FLASH_THREADS.is_multiple_of(WARP_SIZE));
const _: () = assert!(FLASH_MAX_HEADS.is_multiple_of(FLASH_GROUP_HEADS));
const _: () = assert!(
    flash_smem::BYTES <= 48 * 1024,
    "more needs an opt-in launch attribute"
);

/// Rows of `attn_v_b` one `attn_merge_v_b_*` (`GemvType::merge_v_b`) block computes
/// ([`merge_v_b_rows`]): two q8_1 output blocks, or one where two leave fewer than
/// [`MERGE_V_B_FILL_BLOCKS`] blocks.
pub const MERGE_V_B_ROWS: u32 = 64;
/// The smaller row block of [`merge_v_b_rows`]: one q8_1 output block.
pub const MERGE_V_B_MIN_ROWS: u32 = 32;
/// Blocks below which `attn_merge_v_b_*` halves its row blocks: about one per SM of the largest
/// card planned for (132 on an H200). V2-Lite's 16 heads of 128 rows are 64 blocks of 64 rows,
/// which left half an H200's SMs idle and each k-quant warp two row passes; with 32 rows, 128
/// blocks of one pass (the merge's fixed work, about 3/4 of a block's at depth 0, is then done
/// twice as often, and a head's partials are read once per row block). GLM-4.7-Flash's 20
/// heads of 256 rows are 160 blocks of 64 already: halving them would only add merges.
pub const MERGE_V_B_FILL_BLOCKS: u32 = 128;

/// The rows per block of `attn_merge_v_b_*` for `n_head` heads of `d_v` rows: [`MERGE_V_B_ROWS`]
/// if `d_v` is whole blocks of them and they make at least [`MERGE_V_B_FILL_BLOCKS`] blocks, else
/// [`MERGE_V_B_MIN_ROWS`]. The device computes it from its own arguments, so host and device
/// agree.
pub const fn merge_v_b_rows(n_head: u32, d_v: u32) -> u32 {
    let big = n_head as u64 * (d_v / MERGE_V_B_ROWS) as u64 * MERGE_V_B_SPLIT as u64;
    if d_v.is_multiple_of(MERGE_V_B_ROWS) && big >= MERGE_V_B_FILL_BLOCKS as u64 {
        MERGE_V_B_ROWS
    } else {
        MERGE_V_B_MIN_ROWS
    }
}
// V2-Lite (16 heads of 128 rows) takes 32-row blocks, GLM-4.7-Flash (20 of 256), Kimi-K2 (64 of
// 128) and V3 (128 of 128) 64-row ones; a d_v of odd 32-row blocks takes 32.
const _: () = assert!(
    merge_v_b_rows(16, 128) == 32
        && merge_v_b_rows(20, 256) == 64
        && merge_v_b_rows(64, 128) == 64
        && merge_v_b_rows(128, 128) == 64
        && merge_v_b_rows(128, 96) == 32
);
/// Column parts of each head's latent in `attn_merge_v_b_*` (`GemvType::merge_v_b`): block pairs
/// split `kv_lora` in halves, each block merging and dotting one half: twice the blocks for
/// the same partial reads (a head's once per row block).
pub const MERGE_V_B_SPLIT: u32 = 2;

/// Items (= blocks) of `attn_merge_v_b_*` (`GemvType::merge_v_b`) and its siblings: one per (head,
/// block of `R` = [`merge_v_b_rows`] rows of `d_v`, half of `kv_lora`). Block `b` is pair `b / 2`
/// (head `pair / (d_v / R)`, rows `R·(pair % (d_v / R)) ..` of the head), half `b % 2`.
pub const fn merge_v_b_items(n_head: u32, d_v: u32) -> u32 {
    merge_v_b_pairs(n_head, d_v) * MERGE_V_B_SPLIT
}

/// Block pairs of `attn_merge_v_b_*` (`GemvType::merge_v_b`): the `u32` done counters `pair_count`
/// holds, and the `f32` pairs of `R` = [`merge_v_b_rows`] partial rows `scratch` holds (`scratch`
/// is `pairs · MERGE_V_B_SPLIT · R = n_head · d_v · MERGE_V_B_SPLIT` floats).
pub const fn merge_v_b_pairs(n_head: u32, d_v: u32) -> u32 {
    n_head * (d_v / merge_v_b_rows(n_head, d_v))
}

/// The latent width `kv_lora` `attn_merge_v_b_*` (`GemvType::merge_v_b`) and its siblings are built
/// for (every model of the family: V2-Lite, V3, Kimi-K2, GLM-4.7-Flash): a compile-time width gives
/// the half rows a constant unit count, so their dot loops carry no remainder guard.
pub const MERGE_V_B_KV_LORA: u32 = 512;

/// Whether `attn_merge_v_b_*` (`GemvType::merge_v_b`) and its siblings take a layer of `kv_lora`
/// latent dims and `d_v` value dims per head with a weight type whose gemv unit is `unit_elems`
/// weights (`GemvUnit::elems`: 64 for the 32-element types, 256 for k-quants): `kv_lora` is
/// [`MERGE_V_B_KV_LORA`], each half of it whole merge slices and whole units, and the rows whole
/// [`MERGE_V_B_MIN_ROWS`]-row blocks.
pub const fn merge_v_b_fits(kv_lora: u32, d_v: u32, unit_elems: u32) -> bool {
    let half = MERGE_V_B_KV_LORA / MERGE_V_B_SPLIT;
    kv_lora == MERGE_V_B_KV_LORA
        && unit_elems > 0
        && half.is_multiple_of(unit_elems)
        && d_v > 0
        && d_v.is_multiple_of(MERGE_V_B_MIN_ROWS)
}
const _: () = assert!(
    MERGE_V_B_KV_LORA <= FLASH_MAX_LORA
        && (MERGE_V_B_KV_LORA / MERGE_V_B_SPLIT).is_multiple_of(MERGE_DIMS)
);

signature! {
    /// The arguments of every `attn_merge_v_b_*` kernel (`merge_v_b_kernel`): [`ATTN_MERGE`]'s
    /// inputs, the grouped `attn_v_b` gemv's weights and q8_1 output, the halves' scratch and the
    /// pairs' done counters.
    MergeVbArgs {
        part_o: ptr,
        part_ml: ptr,
        state: ptr,
        w: ptr,
        y: ptr,
        scratch: ptr,
        pair_count: ptr,
        n_head: u32,
        d_v: u32,
        ctx: u32,
        max_segments: u32,
    }
}

/// The descriptor of an `attn_merge_v_b_*` kernel (`crate::weight_types::GemvType::merge_v_b`):
/// `(part_o, part_ml, state, w, y, scratch, pair_count, n_head, d_v, ctx, max_segments)`,
/// [`ATTN_MERGE_Q8_1`] and the grouped `attn_v_b` gemv of the type with q8_1 output in one
/// launch. Each block merges its half of its head's latent exactly as `attn_merge_q8_1` does
/// (the same q8_1 bits, kept in shared memory), dots it with its [`merge_v_b_rows`] rows' half
/// of `w` (`n_head·d_v` rows of `kv_lora` = [`MERGE_V_B_KV_LORA`] weights, head `h`'s rows from
/// `h·d_v` on) and parks their sums in `scratch`; the second block of the pair to finish
/// (`pair_count`: one `u32` per pair, 0 before and after the launch) adds half 0 and half 1 in
/// that order and writes the rows' q8_1 blocks of `y`. Requires [`merge_v_b_fits`]. Grid:
/// [`merge_v_b_items`] blocks.
pub(crate) const fn merge_v_b_kernel(name: &'static str) -> Kernel<MergeVbArgs> {
    Kernel::new(name, [MERGE_THREADS, 1, 1], 1, 0)
}
const _: () = assert!(MERGE_THREADS == super::GEMV_BLOCK_WARPS * WARP_SIZE);
const _: () = assert!(
    MERGE_V_B_ROWS.is_multiple_of(MERGE_V_B_MIN_ROWS)
        && MERGE_V_B_MIN_ROWS.is_multiple_of(32)
        && MERGE_V_B_ROWS / 4 <= WARP_SIZE
);

/// Threads per block of [`FLASH_LATENT_MMA`]: eight warps.
pub const FLASH_MMA_THREADS: u32 = 256;
/// Heads of one [`FLASH_LATENT_MMA`] block: exactly the M = 16 rows of `mma.sync.m16n8k16`.
/// A last group of fewer heads (GLM-4.7-Flash's 20 = 16 + 4) runs with zero query rows for the
/// heads the model lacks and stores none of their rows.
pub const FLASH_MMA_HEADS: u32 = FLASH_GROUP_HEADS;
/// Bytes between consecutive rows of [`FLASH_LATENT_MMA`]'s shared tile: the widest row
/// (`FLASH_MAX_ROW` f16) plus 16 bytes, so the eight 16-byte rows of one `ldmatrix` matrix
/// start 4 banks apart (292 words ≡ 4 mod 32) and never conflict.
pub const FLASH_MMA_ROW_STRIDE: u32 = FLASH_MAX_ROW * 2 + 16;

/// Byte offsets of [`FLASH_LATENT_MMA`]'s dynamic shared memory.
pub mod flash_mma_smem {
    use super::{FLASH_MMA_HEADS, FLASH_MMA_ROW_STRIDE, FLASH_TILE};
    /// The staged cache tile: `FLASH_TILE` rows of `kv_lora + n_rope` f16, row `t` at
    /// `t·FLASH_MMA_ROW_STRIDE`; the bytes past each row stay zero. Before the first tile it
    /// holds the f16 query, head `h` at `h·FLASH_MMA_ROW_STRIDE`.
    pub const TILE: u32 = 0;
    /// Scores of the tile, f32, as two partial sums (the two halves of the 576-deep dot
    /// product), each `[h][t]` with rows `S_STRIDE` bytes apart.
    pub const S: u32 = TILE + FLASH_TILE * FLASH_MMA_ROW_STRIDE;
    /// `FLASH_TILE` f32 plus 8: the `mma` accumulator stores (8 heads × 8 scores per warp)
    /// then spread over all 32 banks.
    pub const S_STRIDE: u32 = (FLASH_TILE + 8) * 4;
    /// Bytes of one partial-score half.
    pub const S_HALF: u32 = FLASH_MMA_HEADS * S_STRIDE;
    /// Probabilities of the tile, f16, `[h][t]` with rows `P_STRIDE` bytes apart.
    pub const P: u32 = S + 2 * S_HALF;
    /// `FLASH_TILE` f16 plus 16 bytes: 20 words, so an `ldmatrix` of 8 heads is conflict-free.
    pub const P_STRIDE: u32 = FLASH_TILE * 2 + 16;
    /// Per-head rescale factor `2^(m_old − m_new)` of the current tile, f32.
    pub const ALPHA: u32 = P + FLASH_MMA_HEADS * P_STRIDE;
    /// Total bytes.
    pub const BYTES: u32 = ALPHA + FLASH_MMA_HEADS * 4;
}

/// `flash_latent_mma(q_abs, q_pe, cache, state, part_o, part_ml, n_head, kv_lora, n_rope, ctx,
/// max_segments, kq_scale, temp, temperature, next_a, next_a_bytes, next_b, next_b_bytes)`:
/// [`FLASH_LATENT`] on tensor cores, with the same parameters (the weights handed ahead
/// included), the same segments ([`flash_segments`]) and the same `part_o` / `part_ml` output, so
/// [`ATTN_MERGE`] combines it unchanged. The 16 heads are the M side of
/// `mma.sync.m16n8k16.f32.f16.f16.f32`: scores `S = Q·Kᵀ` and the output `O += P·V` accumulate in
/// f32, while the scaled query `kq_scale·log2(e)·q` and the probabilities `P` enter the tensor
/// cores rounded to f16 (as llama.cpp's MMA flash attention does), which bounds its precision: see
/// the kernel's module docs. Requires `n_head ≤ 128` (a last group of fewer than 16 heads is
/// partial: its missing heads' rows are neither read nor written), `kv_lora + n_rope ≤
/// 576`, `kv_lora ≤ 512`, both multiples of 8, and `|kq_scale·log2(e)·q| < 65504` for every query
/// element (the temperature factor included). Heads in groups of 16 as [`FLASH_LATENT`]. Grid:
/// [`flash_items`] blocks.
pub const FLASH_LATENT_MMA: Kernel<FlashLatentArgs> = Kernel::new(
    "flash_latent_mma",
    [FLASH_MMA_THREADS, 1, 1],
    1,
    flash_mma_smem::BYTES,
);

/// [`FLASH_LATENT_MMA`] over a [`CacheType::Q8_0`] cache: same parameters, limits, grid and
/// output; each tile's q8_0 blocks are widened into the same shared f16 tile as
/// [`FLASH_LATENT_Q8_0`] does, so the tensor-core loop is [`FLASH_LATENT_MMA`]'s.
pub const FLASH_LATENT_MMA_Q8_0: Kernel<FlashLatentArgs> =
    FLASH_LATENT_MMA.renamed("flash_latent_mma_q8_0");

const _: () = assert!(
    flash_mma_smem::BYTES <= 48 * 1024,
    "more needs an opt-in launch attribute"
);
const _: () =
    assert!(FLASH_MMA_ROW_STRIDE.is_multiple_of(16) && (FLASH_MMA_ROW_STRIDE / 4) % 32 == 4);
const _: () =
    assert!(flash_mma_smem::P_STRIDE.is_multiple_of(16) && flash_mma_smem::P.is_multiple_of(16));
const _: () = assert!(
    FLASH_MMA_HEADS <= FLASH_TILE,
    "the query is staged in the tile"
);

/// Tokens of one [`FLASH_LATENT_PREFILL`] block: the M side of its `mma` is this many tokens
/// × [`FLASH_MMA_HEADS`] heads, so every cache tile it stages serves both tokens. Two, not
/// more: each thread holds the output accumulators of `FLASH_PREFILL_TOKENS · 32` f32 and 72
/// query-fragment registers, and a third token would pass the 255-register limit.
pub const FLASH_PREFILL_TOKENS: u32 = 2;
/// Rows of the M side of one [`FLASH_LATENT_PREFILL`] block: `(token, head)` pairs, token
/// major (row `r` is head `r % 16` of the block's token `r / 16`).
pub const FLASH_PREFILL_ROWS: u32 = FLASH_PREFILL_TOKENS * FLASH_MMA_HEADS;
/// Most tokens of one [`FLASH_LATENT_PREFILL`] launch (one prefill chunk).
pub const FLASH_PREFILL_MAX_TOKENS: u32 = 512;

/// Byte offsets of [`FLASH_LATENT_PREFILL`]'s dynamic shared memory.
pub mod flash_prefill_smem {
    use super::{FLASH_MMA_ROW_STRIDE, FLASH_PREFILL_ROWS, FLASH_TILE};
    /// The staged cache tile: `FLASH_TILE` rows of `kv_lora + n_rope` f16, row `t` at
    /// `t·FLASH_MMA_ROW_STRIDE`; the bytes past each row stay zero. Before the first tile it
    /// holds the f16 query, M-row `r` at `r·FLASH_MMA_ROW_STRIDE`.
    pub const TILE: u32 = 0;
    /// Scores of the tile, f32, as two partial sums (the two halves of the 576-deep dot
    /// product), each `[r][t]` with M-rows `S_STRIDE` bytes apart and the 8-score groups of a
    /// row swizzled: score `t` of M-row `r` at f32 index `t ^ S_SWIZZLE·(r % 4)`. So the four
    /// rows a warp's softmax reads, and the four a half-warp's `mma` accumulator store writes,
    /// fall on distinct banks without padding.
    pub const S: u32 = TILE + FLASH_TILE * FLASH_MMA_ROW_STRIDE;
    /// `FLASH_TILE` f32 (32 words: unpadded, the swizzle spreads the banks).
    pub const S_STRIDE: u32 = FLASH_TILE * 4;
    /// The swizzle unit: scores per group (f32).
    pub const S_SWIZZLE: u32 = 8;
    /// Bytes of one partial-score half.
    pub const S_HALF: u32 = FLASH_PREFILL_ROWS * S_STRIDE;
    /// Probabilities of the tile, f16, `[r][t]` with M-rows `P_STRIDE` bytes apart.
    pub const P: u32 = S + 2 * S_HALF;
    /// `FLASH_TILE` f16 plus 16 bytes: 20 words, so an `ldmatrix` of 8 M-rows is
    /// conflict-free. `ldmatrix` reads only the first `FLASH_TILE` f16 of a row.
    pub const P_STRIDE: u32 = FLASH_TILE * 2 + 16;
    /// Per-M-row f32 at byte `ALPHA` of its `P` row (in the padding no `ldmatrix` reads): the
    /// tile's rescale factor `2^(m_old − m_new)`, and after the last tile the sum `l`.
    pub const ALPHA: u32 = FLASH_TILE * 2;
    /// Total bytes.
    pub const BYTES: u32 = P + FLASH_PREFILL_ROWS * P_STRIDE;
}

/// Items (= blocks) of [`FLASH_LATENT_PREFILL`] for `n_head` heads and `ntok` tokens: one per
/// (head group, pair of tokens), `flash_head_groups(n_head) · ⌈ntok / 2⌉`. Block `b` serves
/// head group `b / ⌈ntok/2⌉` and the token pair `⌈ntok/2⌉ − 1 − b % ⌈ntok/2⌉`: the last
/// tokens, which read the most cache rows, get the lowest block indices and start first.
pub const fn flash_prefill_items(n_head: u32, ntok: u32) -> u32 {
    flash_head_groups(n_head) * ntok.div_ceil(FLASH_PREFILL_TOKENS)
}
// V2-Lite's largest chunk: 256 blocks, about two per SM of a 132-SM GPU, without split-K.
const _: () = assert!(flash_prefill_items(16, FLASH_PREFILL_MAX_TOKENS) == 256);

/// `flash_latent_prefill(q_abs, q_pe, cache, state, o_lat, n_head, kv_lora, n_rope, ctx, ntok,
/// kq_scale, temp, temperature)`: the causal absorbed MLA attention of a prefill chunk of `ntok`
/// tokens at positions `pos0 .. pos0 + ntok`, `pos0` = [`crate::step::StepState::pos`] (in device
/// memory, so a captured chunk replays at any position), every token's cache row already written.
/// Token `t`, head `h` attends rows `0..=pos0 + t` of the cache: `o_lat[t][h] = Σ_j
/// softmax_j(s)·c_j` with `s_j = kq_scale·(q_abs[t][h]·c_j + q_pe[t][h]·k_pe_j)`, normalized (no
/// merge follows).
///
/// Layouts: `q_abs` `ntok × n_head × kv_lora` f32, `q_pe` `ntok × n_head × n_rope` f32 (one
/// decode step's buffers per token, token-major); `o_lat` `ntok × n_head × kv_lora` f32, the
/// decode `o_lat` of each token in turn (so a token's heads are consecutive, the per-head
/// `attn_v_b` product reads head `h`'s rows at stride `n_head·kv_lora`, and a q8_1
/// quantization of the whole buffer gives each (token, head) its own blocks).
///
/// A block owns two tokens × 16 heads (see [`flash_prefill_items`]) and streams rows
/// `0..=pos0 + its last token` once for both, on tensor cores as [`FLASH_LATENT_MMA`] (same
/// f16 rounding of the scaled query and the probabilities). A chunk that does not fit,
/// `pos0 + ntok > ctx`, reads only row 0 and writes NaN to every output, so an overflow is
/// visible.
/// Temperature as [`FLASH_LATENT`], per token at its own position. Requires `n_head ≤ 128`
/// (partial last group as [`FLASH_LATENT_MMA`]), `kv_lora + n_rope ≤ 576`, `kv_lora ≤ 512`,
/// both multiples of 8, `1 ≤ ntok ≤` [`FLASH_PREFILL_MAX_TOKENS`] and
/// `|kq_scale·log2(e)·q| < 65504`. Grid: [`flash_prefill_items`] blocks.
pub const FLASH_LATENT_PREFILL: Kernel<FlashPrefillArgs> = Kernel::new(
    "flash_latent_prefill",
    [FLASH_MMA_THREADS, 1, 1],
    1,
    flash_prefill_smem::BYTES,
);

signature! {
    /// The arguments of [`FLASH_LATENT_PREFILL`] and [`FLASH_LATENT_PREFILL_Q8_0`].
    FlashPrefillArgs {
        q_abs: ptr,
        q_pe: ptr,
        cache: ptr,
        state: ptr,
        o_lat: ptr,
        n_head: u32,
        kv_lora: u32,
        n_rope: u32,
        ctx: u32,
        ntok: u32,
        kq_scale: f32,
        temp: ptr,
        temperature: u32,
    }
}

/// [`FLASH_LATENT_PREFILL`] over a [`CacheType::Q8_0`] cache: same parameters, limits, grid
/// and output; each tile's q8_0 blocks are widened into the same shared f16 tile as
/// [`FLASH_LATENT_MMA_Q8_0`] does.
pub const FLASH_LATENT_PREFILL_Q8_0: Kernel<FlashPrefillArgs> =
    FLASH_LATENT_PREFILL.renamed("flash_latent_prefill_q8_0");

const _: () = assert!(
    flash_prefill_smem::BYTES <= 48 * 1024,
    "more needs an opt-in launch attribute"
);
const _: () = assert!(
    FLASH_PREFILL_ROWS <= FLASH_TILE,
    "the query is staged in the tile"
);
const _: () = assert!(
    flash_prefill_smem::P.is_multiple_of(16)
        && flash_prefill_smem::ALPHA + 4 <= flash_prefill_smem::P_STRIDE
);
const _: () = assert!(
    FLASH_TILE == 4 * flash_prefill_smem::S_SWIZZLE && flash_prefill_smem::S_STRIDE == 128,
    "the swizzle permutes a 32-word row's four groups"
);

/// The kernels of this family.
pub const ALL: &[KernelDesc] = &[
    ROPE_KV.desc,
    ROPE_KV_Q8_1.desc,
    ROPE_KV_Q8_1_ROWS.desc,
    FLASH_LATENT.desc,
    ATTN_MERGE.desc,
    ATTN_MERGE_Q8_1.desc,
    FLASH_LATENT_MMA.desc,
    FLASH_LATENT_Q8_0.desc,
    FLASH_LATENT_MMA_Q8_0.desc,
    FLASH_LATENT_PREFILL.desc,
    FLASH_LATENT_PREFILL_Q8_0.desc,
];
