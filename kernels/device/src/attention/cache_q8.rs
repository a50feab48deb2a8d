//! The q8_0 latent cache (`ingot_abi::launch::CacheType::Q8_0`) on both sides: the rope
//! kernels' row writer and the flash kernels' tile loader, which widens each tile's blocks into
//! the shared f16 tile the f16 cache is copied into, so the flash kernels' math does not change.
//!
//! Row layout (one source of truth: `CacheType::row_bytes`): `blocks·32` i8 quants, then the
//! `blocks` f16 scales, then zeros to a multiple of 16 bytes; `blocks = ⌈width/32⌉` and quants
//! past `width` are 0.

use crate::intrinsics::{
    f32_to_f16, ld_u16_if, ld_u16_stream_if, ld_v4_stream_when, ld_v4_when, mul_f16x2, prmt,
    round_away_i32, st_u16_if, st_u8, sts_v4_if, sub_f16x2, warp_max_f32,
};
use core::num::NonZeroU32;
use ingot_abi::blocks::QK8_0;
use ingot_abi::launch::{FLASH_MAX_ROW, FLASH_THREADS, FLASH_TILE, WARP_SIZE};

const QK: u32 = QK8_0 as u32;
const _: () = assert!(
    QK == WARP_SIZE,
    "a warp quantizes one block, a lane per value"
);

/// Writes value `x` of lane `j % 32` of q8_0 block `b` of the row at `row` (global), a block of
/// `blocks` per row, as ggml's `quantize_row_q8_0` does: `d = amax/127` over the warp's 32
/// values, `q = roundf(x·(1/d))` (0 when `d = 0`: 0·∞ is NaN, which converts to 0), `d` stored
/// as f16. Every lane of the warp must call it with the same `b`.
#[inline(always)]
pub(crate) unsafe fn store_q8_0_value(row: u64, blocks: u32, b: u32, lane: u32, x: f32) {
    let amax = warp_max_f32(x.abs());
    let d = amax / 127.0;
    let id = 1.0 / d;
    st_u8(row + (b * QK + lane) as u64, round_away_i32(x * id) as u32);
    st_u16_if(lane == 0, row + (blocks * QK + 2 * b) as u64, f32_to_f16(d));
}

/// q8_0 blocks of a tile of the widest rows, and per thread (both flash kernels run
/// `FLASH_THREADS` threads).
const TILE_UNITS: u32 = FLASH_TILE * FLASH_MAX_ROW / QK;
pub(crate) const UNITS_PER_THREAD: usize = TILE_UNITS.div_ceil(FLASH_THREADS) as usize;

/// A thread's staged blocks: 32 quants as 8 words, and the f16 scale bits.
pub(crate) type Staged = [([u32; 8], u32); UNITS_PER_THREAD];
/// Nothing staged (the f16 instances of the flash kernels never read it).
pub(crate) const EMPTY: Staged = [([0; 8], 0); UNITS_PER_THREAD];

/// Where a thread's blocks of any tile are (offsets from the tile's start; the same for every
/// tile): quants and scale in the cache, the 64-byte f16 destination in the shared tile.
#[derive(Clone, Copy)]
pub(crate) struct Map {
    quants: [u32; UNITS_PER_THREAD],
    scale: [u32; UNITS_PER_THREAD],
    dst: [u32; UNITS_PER_THREAD],
    blocks: u32,
}

impl Map {
    /// Unit `i = tid + k·FLASH_THREADS` of a tile is block `i % blocks` of row `i / blocks`;
    /// cache rows are `row_bytes` apart, shared tile rows `stride`. (`NonZeroU32` division
    /// carries no divide-by-zero trap.)
    #[inline(always)]
    pub(crate) fn new(blocks: NonZeroU32, row_bytes: u32, stride: u32, tid: u32) -> Map {
        let mut m = Map {
            quants: [0; UNITS_PER_THREAD],
            scale: [0; UNITS_PER_THREAD],
            dst: [0; UNITS_PER_THREAD],
            blocks: blocks.get(),
        };
        let mut k = 0;
        while k < UNITS_PER_THREAD {
            let i = tid + k as u32 * FLASH_THREADS;
            let (r, b) = (i / blocks, i % blocks);
            m.quants[k] = r * row_bytes + b * QK;
            m.scale[k] = r * row_bytes + blocks.get() * QK + 2 * b;
            m.dst[k] = r * stride + b * QK * 2;
            k += 1;
        }
        m
    }

    /// Blocks of a tile of `rows` rows.
    #[inline(always)]
    pub(crate) fn units(&self, rows: u32) -> u32 {
        rows * self.blocks
    }
}

/// Issues this thread's loads of the first `units` blocks of the tile at `src` (global);
/// blocks past `units` are predicated off, and [`store_tile`] skips them with the same
/// predicate. With `STREAM` the rows are read evict-first (a decode step reads each once:
/// `ld_v4_stream_when`); a prefill chunk's blocks share them, so they stay in L2.
#[inline(always)]
pub(crate) unsafe fn load_tile<const STREAM: bool>(
    src: u64,
    units: u32,
    map: &Map,
    tid: u32,
) -> Staged {
    let mut r = [([0u32; 8], 0u32); UNITS_PER_THREAD];
    let mut k = 0;
    while k < UNITS_PER_THREAD {
        let live = tid + k as u32 * FLASH_THREADS < units;
        let at = src + map.quants[k] as u64;
        let (lo, hi, scale) = if STREAM {
            (
                ld_v4_stream_when(live, at),
                ld_v4_stream_when(live, at + 16),
                ld_u16_stream_if(live, src + map.scale[k] as u64),
            )
        } else {
            (
                ld_v4_when(live, at),
                ld_v4_when(live, at + 16),
                ld_u16_if(live, src + map.scale[k] as u64),
            )
        };
        r[k] = (
            [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]],
            scale,
        );
        k += 1;
    }
    r
}

/// Four i8 of `w` (bytes 0-3) as two f16x2 words, each value times the f16 scale in both halves
/// of `dd`: bytes biased to `q + 128` and placed in the mantissa of 1024 (`0x64xx` = 1024 + byte,
/// exact), minus 1152 gives `q` exactly, and one `mul` rounds `q·d` to f16 once.
#[inline(always)]
fn widen4(w: u32, dd: u32) -> [u32; 2] {
    const F16_1024: u32 = 0x6464_6464;
    const F16_1152: u32 = 0x6480_6480;
    let biased = w ^ 0x8080_8080;
    [
        mul_f16x2(sub_f16x2(prmt(biased, F16_1024, 0x4140), F16_1152), dd),
        mul_f16x2(sub_f16x2(prmt(biased, F16_1024, 0x4342), F16_1152), dd),
    ]
}

/// Widens what [`load_tile`] loaded into the shared f16 tile at `tile`: each block's 32 values
/// `f16(q·d)` at its `dst`.
#[inline(always)]
pub(crate) unsafe fn store_tile(tile: u32, staged: &Staged, units: u32, map: &Map, tid: u32) {
    let mut k = 0;
    while k < UNITS_PER_THREAD {
        let live = tid + k as u32 * FLASH_THREADS < units;
        let (q, d) = staged[k];
        let dd = d | (d << 16);
        let dst = tile + map.dst[k];
        let mut c = 0;
        while c < 4 {
            let a = widen4(q[2 * c], dd);
            let b = widen4(q[2 * c + 1], dd);
            sts_v4_if(live, dst + c as u32 * 16, [a[0], a[1], b[0], b[1]]);
            c += 1;
        }
        k += 1;
    }
}
