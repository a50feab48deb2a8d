//! `flash_latent`: split-K attention of all heads of one token over the layer's latent cache
//! (docs/decode-math.md#mla-attention steps 8-10, docs/decode-math.md#split-k-attention), scalar
//! f32 version.
//!
//! Block `b` owns segment `b` of the rows `0..=pos` ([`flash_segments`]); it streams the segment
//! through shared memory one tile of `FLASH_TILE` rows at a time, so every cache row is read
//! from global memory once and serves every head: first as the key (all `kv_lora + n_rope`
//! dims), then as the value (the first `kv_lora` dims). Softmax is online (running max `m` and
//! sum `l` per head, base 2: scores are pre-multiplied by `kq_scale·log2 e` through the query),
//! accumulators are f32, and the segment's normalized output `O/l` (f16) and `(m, l)` go to
//! `part_o` / `part_ml` for `attn_merge`.
//!
//! Head groups: block `b` serves heads of group `b / max_segments` over a segment (16 or fewer:
//! [`flash_block`]); below, "head `h`" is the `h`-th head from the block's first, `h0`.
//!
//! Thread roles (256 threads):
//! * score: head `h = tid/16`, lane `k = tid%16` holds the scaled query dims `4(k + 16j) + e`
//!   (`j < 9`, `e < 4`) in registers; per row it dots them with the f16 row and the 16 lanes of
//!   the head reduce by shuffles. Lane `k` keeps the scores of tile rows `k` and `k + 16`.
//! * value: dims `8c .. 8c+8` (`c = tid%64`) of heads `4g .. 4g+4` (`g = tid/64`), 32 f32
//!   accumulators; per row one 16-byte shared load of the value chunk and one of `p[t][4g..]`.
//!
//! Shapes below the maximum (fewer heads, narrower rows) run the same code: query registers
//! past the row or the head count are zero, and the tile is zeroed once, so reads past a row
//! (into the next row or the zeroed rest) add exact zeros; results of unused heads/dims are
//! simply not stored.
//!
//! Pipelining: the next tile's 16-byte global loads (9 per thread at V2-Lite shapes) are issued
//! into registers before the current tile is computed, so a block keeps 36 KB of cache reads in
//! flight while it does the math.

use super::cache_q8;
use super::temperature::logit_scale;
use crate::intrinsics::{
    bid, exp2, fma, global, h2_to_f32, half_warp_max, half_warp_sum, ld_u32, ld_v4_f32,
    ld_v4_stream, lds_v2, lds_v4, lds_v4_f32, pack_f16x2, st_v2_f32, st_v4_u32, sts_f32, sts_v4,
    tid,
};
use core::arch::{asm, global_asm, nvptx};
use core::mem::offset_of;
use core::num::NonZeroU32;
use ingot_abi::blocks::QK8_0;
use ingot_abi::launch::{
    flash_block, flash_segments, flash_smem, CacheType, FlashBlock, FLASH_GROUP_HEADS,
    FLASH_MAX_LORA, FLASH_MAX_ROW, FLASH_THREADS, FLASH_TILE,
};
use ingot_abi::step::StepState;

// The dynamic shared memory of the launch (`flash_smem::BYTES`, laid out by `flash_smem`).
global_asm!(".extern .shared .align 16 .b8 flash_latent_smem[];");

/// 16-byte chunks of a tile of the widest rows; each thread moves `PER_THREAD` of them.
const TILE_CHUNKS: u32 = FLASH_TILE * FLASH_MAX_ROW * 2 / 16;
const PER_THREAD: usize = (TILE_CHUNKS / FLASH_THREADS) as usize;
const _: () = assert!(TILE_CHUNKS % FLASH_THREADS == 0);

/// Score role: lanes per head and 4-dim query chunks per lane.
const SCORE_LANES: u32 = 16;
const Q_CHUNKS: usize = (FLASH_MAX_ROW / 4 / SCORE_LANES) as usize;
const _: () = assert!(FLASH_MAX_ROW % (4 * SCORE_LANES) == 0);
const _: () = assert!(SCORE_LANES * FLASH_GROUP_HEADS == FLASH_THREADS);
/// Score-role lane `k` keeps the scores of tile rows `k` and `k + 16`.
const _: () = assert!(FLASH_TILE == 2 * SCORE_LANES);

/// Value role: 8-dim chunks of the latent and heads per thread.
const V_CHUNKS: u32 = FLASH_MAX_LORA / 8;
const V_HEADS: usize = 4;
const _: () = assert!(V_CHUNKS * FLASH_GROUP_HEADS / V_HEADS as u32 == FLASH_THREADS);

const POS_OFF: u64 = offset_of!(StepState, pos) as u64;

#[inline(always)]
unsafe fn smem_base() -> u32 {
    let a: u32;
    asm!("mov.u32 {a}, flash_latent_smem;", a = out(reg32) a, options(pure, nomem, nostack));
    a
}

type Staged = [[u32; 4]; PER_THREAD];

/// Issues this thread's loads of the `chunks` 16-byte chunks of a tile starting at `src` (the
/// tile's rows are contiguous in the cache), evict-first (a step reads each row once). A full
/// tile of the widest rows takes the unguarded path.
#[inline(always)]
unsafe fn load_tile(src: u64, chunks: u32, tid: u32) -> Staged {
    let mut r = [[0u32; 4]; PER_THREAD];
    if chunks == TILE_CHUNKS {
        let mut k = 0;
        while k < PER_THREAD {
            r[k] = ld_v4_stream(src + (tid + k as u32 * FLASH_THREADS) as u64 * 16);
            k += 1;
        }
    } else {
        let mut k = 0;
        while k < PER_THREAD {
            let i = tid + k as u32 * FLASH_THREADS;
            if i < chunks {
                r[k] = ld_v4_stream(src + i as u64 * 16);
            }
            k += 1;
        }
    }
    r
}

/// Stores what [`load_tile`] loaded into the shared tile, packed like the cache.
#[inline(always)]
unsafe fn store_tile(tile: u32, r: &Staged, chunks: u32, tid: u32) {
    if chunks == TILE_CHUNKS {
        let mut k = 0;
        while k < PER_THREAD {
            sts_v4(tile + (tid + k as u32 * FLASH_THREADS) * 16, r[k]);
            k += 1;
        }
    } else {
        let mut k = 0;
        while k < PER_THREAD {
            let i = tid + k as u32 * FLASH_THREADS;
            if i < chunks {
                sts_v4(tile + i * 16, r[k]);
            }
            k += 1;
        }
    }
}

/// Dot product of the lane's query registers with its dims of the f16 row at shared `row`.
#[inline(always)]
unsafe fn row_dot(q: &[[f32; 4]; Q_CHUNKS], row: u32) -> f32 {
    let mut acc = 0.0f32;
    let mut j = 0;
    while j < Q_CHUNKS {
        let w = lds_v2(row + j as u32 * SCORE_LANES * 8);
        let [a, b] = h2_to_f32(w[0]);
        let [c, d] = h2_to_f32(w[1]);
        acc = fma(
            q[j][0],
            a,
            fma(q[j][1], b, fma(q[j][2], c, fma(q[j][3], d, acc))),
        );
        j += 1;
    }
    acc
}

flash_entry_points! {
    flash_latent_impl;
    /// See the module docs and `ingot_abi::launch::FLASH_LATENT` for the contract; the host
    /// launcher checks the shape limits and every buffer size.
    flash_latent => false;
    /// [`flash_latent`] over a q8_0 cache (`ingot_abi::launch::FLASH_LATENT_Q8_0`): each tile's
    /// blocks are widened into the shared f16 tile (`super::cache_q8`), rows `32·blocks` values
    /// apart.
    flash_latent_q8_0 => true;
}

/// The kernel, over an f16 cache or, with `Q8`, a q8_0 one.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn flash_latent_impl<const Q8: bool>(
    q_abs: *const f32,
    q_pe: *const f32,
    cache: *const u16,
    state: *const StepState,
    (part_o, part_ml): (*mut u16, *mut f32),
    [n_head, kv_lora, n_rope, ctx, max_segments]: [u32; 5],
    kq_scale: f32,
    temp: *const f32,
    temperature: u32,
) {
    let tid = tid();
    let pos = ld_u32(global(state) + POS_OFF);
    if pos >= ctx {
        return;
    }
    let len = pos + 1;
    let split = flash_segments(len, max_segments);
    // The launcher bounds max_segments by 2^16 and n_head by 128, so the block index splits
    // into (head group, heads, segment) without overflow.
    let Some(FlashBlock { seg, h0, heads }) = flash_block(bid(), n_head, max_segments, split)
    else {
        return;
    };
    let (t0, t1) = split.rows(seg, len);
    let row = kv_lora + n_rope;
    // Bytes between rows of the cache (`row_bytes`) and of the shared tile (`tile_stride`): a
    // q8_0 tile holds whole blocks, so its rows are `32·blocks` values apart, the zero quants
    // past `row` included.
    let q8_blocks = CacheType::q8_0_blocks(row);
    let (row_bytes, tile_stride) = if Q8 {
        (CacheType::Q8_0.row_bytes(row), q8_blocks * QK8_0 as u32 * 2)
    } else {
        (row * 2, row * 2)
    };
    // Only read with `Q8`; `row ≥ 16` here, so the fallback is never taken.
    let q8_map = cache_q8::Map::new(
        NonZeroU32::new(q8_blocks).unwrap_or(NonZeroU32::MIN),
        row_bytes,
        tile_stride,
        tid,
    );
    let smem = smem_base();
    let tile = smem + flash_smem::TILE;

    let mut k = 0;
    while k < PER_THREAD {
        sts_v4(tile + (tid + k as u32 * FLASH_THREADS) * 16, [0; 4]);
        k += 1;
    }

    // Score role: the head's query, scaled so that scores come out in base 2.
    let h = tid / SCORE_LANES;
    let kl = tid % SCORE_LANES;
    let qs = logit_scale(kq_scale, global(temp), temperature, pos) * core::f32::consts::LOG2_E;
    let mut q = [[0.0f32; 4]; Q_CHUNKS];
    if h < heads {
        let qh = h0 + h;
        let mut j = 0;
        while j < Q_CHUNKS {
            let d = 4 * (kl + SCORE_LANES * j as u32);
            let v = if d < kv_lora {
                ld_v4_f32(global(q_abs) + (qh * kv_lora + d) as u64 * 4)
            } else if d < row {
                ld_v4_f32(global(q_pe) + (qh * n_rope + d - kv_lora) as u64 * 4)
            } else {
                [0.0; 4]
            };
            q[j] = [v[0] * qs, v[1] * qs, v[2] * qs, v[3] * qs];
            j += 1;
        }
    }
    let mut m = f32::NEG_INFINITY;
    let mut l = 0.0f32;

    // Value role.
    let c = tid % V_CHUNKS;
    let g = tid / V_CHUNKS;
    let mut o = [[0.0f32; 8]; V_HEADS];

    let src = global(cache);
    let chunks_of = |n: u32| n * row / 8;
    let mut start = t0;
    let first = (t1 - start).min(FLASH_TILE);
    let mut staged = if Q8 {
        [[0; 4]; PER_THREAD]
    } else {
        load_tile(src + start as u64 * row_bytes as u64, chunks_of(first), tid)
    };
    let mut staged8 = if Q8 {
        cache_q8::load_tile::<true>(
            src + start as u64 * row_bytes as u64,
            q8_map.units(first),
            &q8_map,
            tid,
        )
    } else {
        cache_q8::EMPTY
    };
    loop {
        let n = (t1 - start).min(FLASH_TILE);
        // The previous tile's readers (and the zeroing) are done before it is overwritten.
        nvptx::_syncthreads();
        if Q8 {
            cache_q8::store_tile(tile, &staged8, q8_map.units(n), &q8_map, tid);
        } else {
            store_tile(tile, &staged, chunks_of(n), tid);
        }
        nvptx::_syncthreads();
        let next = start + n;
        if next < t1 {
            let rows = (t1 - next).min(FLASH_TILE);
            let at = src + next as u64 * row_bytes as u64;
            if Q8 {
                staged8 = cache_q8::load_tile::<true>(at, q8_map.units(rows), &q8_map, tid);
            } else {
                staged = load_tile(at, chunks_of(rows), tid);
            }
        }

        // Scores of the tile's rows; rows past `n` keep −inf and get probability 0.
        let mut s_lo = f32::NEG_INFINITY;
        let mut s_hi = f32::NEG_INFINITY;
        let lane_row = tile + kl * 8;
        let mut t = 0;
        while t < n {
            let s = half_warp_sum(row_dot(&q, lane_row + t * tile_stride));
            if t == kl {
                s_lo = s;
            }
            if t == kl + SCORE_LANES {
                s_hi = s;
            }
            t += 1;
        }
        // Online softmax: row 0 of the tile is always present, so `m_new` is finite.
        let m_new = m.max(half_warp_max(s_lo.max(s_hi)));
        let alpha = exp2(m - m_new);
        let p_lo = exp2(s_lo - m_new);
        let p_hi = exp2(s_hi - m_new);
        l = fma(l, alpha, half_warp_sum(p_lo + p_hi));
        m = m_new;
        sts_f32(
            smem + flash_smem::P + (kl * FLASH_GROUP_HEADS + h) * 4,
            p_lo,
        );
        sts_f32(
            smem + flash_smem::P + ((kl + SCORE_LANES) * FLASH_GROUP_HEADS + h) * 4,
            p_hi,
        );
        if kl == 0 {
            sts_f32(smem + flash_smem::ALPHA + h * 4, alpha);
        }
        nvptx::_syncthreads();

        // o = α·o + Σ_t p[t]·c[t] for the thread's 4 heads × 8 dims.
        let al = lds_v4_f32(smem + flash_smem::ALPHA + g * 16);
        let mut hh = 0;
        while hh < V_HEADS {
            let mut e = 0;
            while e < 8 {
                o[hh][e] *= al[hh];
                e += 1;
            }
            hh += 1;
        }
        let lane_v = tile + c * 16;
        let lane_p = smem + flash_smem::P + g * 16;
        let mut t = 0;
        while t < n {
            let w = lds_v4(lane_v + t * tile_stride);
            let p = lds_v4_f32(lane_p + t * FLASH_GROUP_HEADS * 4);
            let mut v = [0.0f32; 8];
            let mut e = 0;
            while e < 4 {
                let [a, b] = h2_to_f32(w[e]);
                v[2 * e] = a;
                v[2 * e + 1] = b;
                e += 1;
            }
            let mut hh = 0;
            while hh < V_HEADS {
                let mut e = 0;
                while e < 8 {
                    o[hh][e] = fma(p[hh], v[e], o[hh][e]);
                    e += 1;
                }
                hh += 1;
            }
            t += 1;
        }

        if next >= t1 {
            break;
        }
        start = next;
    }

    // The segment's output normalized, `O_s / l_s` per head, then rounded to f16: every
    // thread's `l` meets the value role through `ALPHA` (the last tile's readers are past the
    // first barrier). `l ≥ 1` for a head the model has (its largest score contributes 1).
    nvptx::_syncthreads();
    if kl == 0 {
        sts_f32(smem + flash_smem::ALPHA + h * 4, 1.0 / l);
    }
    nvptx::_syncthreads();
    let inv_l = lds_v4_f32(smem + flash_smem::ALPHA + g * 16);
    // < max_segments·n_head, which the launcher bounds.
    let seg_head = seg * n_head + h0;
    if c * 8 < kv_lora {
        let mut hh = 0;
        while hh < V_HEADS {
            let head = g * V_HEADS as u32 + hh as u32;
            if head < heads {
                let a =
                    global(part_o) + ((seg_head + head) as u64 * kv_lora as u64 + 8 * c as u64) * 2;
                let x = |e: usize| o[hh][e] * inv_l[hh];
                st_v4_u32(
                    a,
                    [
                        pack_f16x2(x(0), x(1)),
                        pack_f16x2(x(2), x(3)),
                        pack_f16x2(x(4), x(5)),
                        pack_f16x2(x(6), x(7)),
                    ],
                );
            }
            hh += 1;
        }
    }
    if kl == 0 && h < heads {
        st_v2_f32(global(part_ml) + (seg_head + h) as u64 * 8, [m, l]);
    }
}
