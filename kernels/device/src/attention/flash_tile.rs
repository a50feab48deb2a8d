//! The pieces the tensor-core flash kernels (`flash_latent_mma`, `flash_latent_prefill`) share:
//! copying f16 cache tiles into shared memory (rows at `FLASH_MMA_ROW_STRIDE`, `FLASH_TILE`
//! rows, `FLASH_MMA_THREADS` threads) and staging the scaled f16 query, one head per row, before
//! its fragments are loaded into registers.

use crate::intrinsics::{
    ld_v4_if, ld_v4_stream_when, ld_v4_when, pack_f16x2, select_u64, sts_v4_if,
};
use core::num::NonZeroU32;
use ingot_abi::launch::{
    FLASH_MAX_ROW, FLASH_MMA_HEADS, FLASH_MMA_ROW_STRIDE, FLASH_MMA_THREADS, FLASH_TILE,
};

pub(super) const STRIDE: u32 = FLASH_MMA_ROW_STRIDE;
pub(super) const THREADS: u32 = FLASH_MMA_THREADS;
pub(super) const HEADS: u32 = FLASH_MMA_HEADS;

/// 16-byte chunks of a widest row and of a full tile of them; each thread moves `PER_THREAD`
/// chunks of a tile.
pub(super) const ROW_CHUNKS: u32 = FLASH_MAX_ROW * 2 / 16;
const TILE_CHUNKS: u32 = FLASH_TILE * ROW_CHUNKS;
pub(super) const PER_THREAD: usize = (TILE_CHUNKS / THREADS) as usize;
const _: () = assert!(TILE_CHUNKS.is_multiple_of(THREADS));

/// 16-byte chunks of the whole tile region (rows at `STRIDE`), zeroed once.
const TILE_REGION_CHUNKS: u32 = FLASH_TILE * STRIDE / 16;
const ZERO_PER_THREAD: u32 = TILE_REGION_CHUNKS.div_ceil(THREADS);

pub(super) type Staged = [[u32; 4]; PER_THREAD];
/// Shared offsets (from the tile start) of a thread's staged chunks; the same for every tile.
pub(super) type Dst = [u32; PER_THREAD];

/// Loads this thread's chunks of the first `chunks` 16-byte chunks of a tile starting at `src`
/// (a tile's rows are contiguous in the cache); chunks past `chunks` are predicated off and
/// left undefined: [`store_tile`] skips them with the same predicate. With `STREAM` the rows
/// are read evict-first (a decode step reads each once); a prefill chunk's blocks share them.
#[inline(always)]
pub(super) unsafe fn load_tile<const STREAM: bool>(src: u64, chunks: u32, tid: u32) -> Staged {
    let mut r = [[0u32; 4]; PER_THREAD];
    let mut k = 0;
    while k < PER_THREAD {
        let i = tid + k as u32 * THREADS;
        let at = src + i as u64 * 16;
        r[k] = if STREAM {
            ld_v4_stream_when(i < chunks, at)
        } else {
            ld_v4_when(i < chunks, at)
        };
        k += 1;
    }
    r
}

/// Whether pass `k` of this thread's warp (chunks `(tid & !31) + k·THREADS ..`, `THREADS` apart
/// per pass) holds a chunk below `end`: the same answer for every lane of the warp, so a branch
/// on it never diverges. A pass it rules out has every lane's chunk at or past `end`.
#[inline(always)]
pub(super) fn warp_pass_live(tid: u32, k: u32, end: u32) -> bool {
    (tid & !31) + k * THREADS < end
}

/// Where chunk `i` of a tile of packed cache rows goes: row `i / row_chunks` to offset
/// `row·STRIDE`. (`NonZeroU32` division carries no divide-by-zero trap.)
#[inline(always)]
pub(super) fn tile_dst(row_chunks: NonZeroU32, tid: u32) -> Dst {
    tile_dst_below(row_chunks, tid, u32::MAX)
}

/// [`tile_dst`] for tiles of at most `chunks` chunks: a warp stops at the first pass whose chunks
/// all lie past them (warp-uniform) and leaves the later destinations 0, which [`store_tile`]
/// never uses for such a tile (its predicate is off for every one of those chunks).
#[inline(always)]
pub(super) fn tile_dst_below(row_chunks: NonZeroU32, tid: u32, chunks: u32) -> Dst {
    let mut d = [0u32; PER_THREAD];
    let mut k = 0;
    while k < PER_THREAD {
        if !warp_pass_live(tid, k as u32, chunks) {
            break;
        }
        let i = tid + k as u32 * THREADS;
        d[k] = (i / row_chunks) * STRIDE + (i % row_chunks) * 16;
        k += 1;
    }
    d
}

/// Stores what [`load_tile`] loaded into the shared tile.
#[inline(always)]
pub(super) unsafe fn store_tile(tile: u32, r: &Staged, dst: &Dst, chunks: u32, tid: u32) {
    let mut k = 0;
    while k < PER_THREAD {
        sts_v4_if(tid + (k as u32) * THREADS < chunks, tile + dst[k], r[k]);
        k += 1;
    }
}

/// [`store_tile`] for a segment's first tile (run once per block, outside the tile loop): a warp
/// stops at the first pass whose chunks all lie past `chunks` (warp-uniform), so a short
/// context's one-row tile costs one pass, not [`PER_THREAD`].
#[inline(always)]
pub(super) unsafe fn store_first_tile(tile: u32, r: &Staged, dst: &Dst, chunks: u32, tid: u32) {
    let mut k = 0;
    while k < PER_THREAD {
        if !warp_pass_live(tid, k as u32, chunks) {
            break;
        }
        sts_v4_if(tid + (k as u32) * THREADS < chunks, tile + dst[k], r[k]);
        k += 1;
    }
}

/// Zeroes rows `from .. to` (at most [`FLASH_TILE`]) of the tile region, with the bytes past each
/// row; a warp stops at the first pass that holds none of them (warp-uniform).
#[inline(always)]
pub(super) unsafe fn zero_tile_rows(tile: u32, (from, to): (u32, u32), tid: u32) {
    const _: () = assert!(STRIDE.is_multiple_of(16));
    let (lo, hi) = (from * (STRIDE / 16), to * (STRIDE / 16));
    let mut k = 0;
    while k < ZERO_PER_THREAD {
        if !warp_pass_live(tid, k, hi - lo) {
            break;
        }
        let i = lo + tid + k * THREADS;
        sts_v4_if(i < hi, tile + i * 16, [0; 4]);
        k += 1;
    }
}

/// Zeroes the tile region (rows at `STRIDE`, including the bytes past each row).
#[inline(always)]
pub(super) unsafe fn zero_tile(tile: u32, tid: u32) {
    let mut k = 0;
    while k < ZERO_PER_THREAD {
        let i = tid + k * THREADS;
        sts_v4_if(i < TILE_REGION_CHUNKS, tile + i * 16, [0; 4]);
        k += 1;
    }
}

/// Where the query of up to two tokens' 16-head groups comes from and its scale.
///
/// Staged row `r` is head `r % 16` of token `r / 16`: query row `(r / 16)·tok_rows + r % 16`
/// from `q_abs` (`kv_lora` f32 per row) and `q_pe` (`n_rope` f32 per row), both pointers
/// already at the first token's first head; rows `≥ live_rows` and rows whose head `r % 16` is
/// `≥ heads` (the heads of a last, partial group that the model does not have) are staged as
/// zeros and never read. `qs[r / 16]` is the token's `kq_scale·log2(e)` (with its temperature
/// factor).
#[derive(Clone, Copy)]
pub(super) struct QuerySrc {
    pub q_abs: u64,
    pub q_pe: u64,
    pub kv_lora: u32,
    pub n_rope: u32,
    pub tok_rows: u32,
    pub live_rows: u32,
    pub heads: u32,
    pub qs: [f32; 2],
}

/// What [`stage_query_chunk`] writes for chunk `k` when its row is one of the heads the model
/// does not have (or past `live_rows`): zeros, without the loads and the scaling.
#[inline(always)]
pub(super) unsafe fn zero_query_chunk(rows: u32, dst: u32, tid: u32, k: u32) {
    let i = tid + k * THREADS;
    let (r, c) = (i / ROW_CHUNKS, i % ROW_CHUNKS);
    sts_v4_if(i < rows * ROW_CHUNKS, dst + r * STRIDE + c * 16, [0; 4]);
}

/// Writes this thread's chunk `k` of the first `rows` staged query rows as f16 to `dst`, row
/// `r` at `r·STRIDE`: dims `< kv_lora` from `q_abs`, then `n_rope` dims from `q_pe`, zero up to
/// `FLASH_MAX_ROW`. Branch-free (a select and predicated accesses).
#[inline(always)]
pub(super) unsafe fn stage_query_chunk(q: QuerySrc, rows: u32, dst: u32, tid: u32, k: u32) {
    let i = tid + k * THREADS;
    let r = i / ROW_CHUNKS;
    let c = i % ROW_CHUNKS;
    let d = 8 * c;
    let row = (r / HEADS) * q.tok_rows + r % HEADS;
    let at = select_u64(
        d < q.kv_lora,
        q.q_abs + (row * q.kv_lora + d) as u64 * 4,
        q.q_pe + (row * q.n_rope).wrapping_add(d.wrapping_sub(q.kv_lora)) as u64 * 4,
    );
    let live = r < q.live_rows && r % HEADS < q.heads && d < q.kv_lora + q.n_rope;
    let a = ld_v4_if(live, at).map(f32::from_bits);
    let b = ld_v4_if(live, at + 16).map(f32::from_bits);
    let qs = if r < HEADS { q.qs[0] } else { q.qs[1] };
    sts_v4_if(
        i < rows * ROW_CHUNKS,
        dst + r * STRIDE + c * 16,
        [
            pack_f16x2(a[0] * qs, a[1] * qs),
            pack_f16x2(a[2] * qs, a[3] * qs),
            pack_f16x2(b[0] * qs, b[1] * qs),
            pack_f16x2(b[2] * qs, b[3] * qs),
        ],
    );
}
