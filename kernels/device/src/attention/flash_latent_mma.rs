//! `flash_latent_mma`: `flash_latent` on tensor cores (docs/decode-math.md#split-k-attention),
//! heads in groups of 16, the M rows of `mma.sync.m16n8k16.row.col.f32.f16.f16.f32`: block `b`
//! serves heads of group `b / max_segments` over one segment ([`flash_block`]: 16, or fewer while
//! the split leaves blocks spare, or in a last partial group: GLM-4.7-Flash's 20 = 16 + 4); the
//! other rows are zero query rows, never stored. Same contract as `flash_latent`: a block streams
//! its segment of rows `0..=pos` ([`flash_segments`]) through shared memory in tiles of
//! `FLASH_TILE` (32) rows, every row read once for all heads as key and value, keeps a base-2
//! online softmax per head, and writes `O/l` (f16) and `(m, l)` for `attn_merge`.
//!
//! Per tile, warp `w` of 8:
//! * scores `S[16 × 32] = Q·Kᵀ`: rows `8(w%4) ..` over half `w/4` of the 576-deep product (18
//!   k-steps, query fragments in 72 registers loaded once); the halves meet in shared memory as
//!   f32;
//! * softmax: thread `(tid/16, tid%16)` sums scores `k`, `k + 16` of head `h`, updates `(m, l)`,
//!   writes f16 probabilities;
//! * values `O[16 × 512] += P·V`: latent dims `64w .. 64w+64` (32 f32 accumulators per thread). A
//!   cache row costs 8.5 `mma` (4.5 scores, 4 values).
//!
//! Precision: f32 products and sums; two operands rounded to f16, as in llama.cpp's MMA flash
//! attention: the scaled query `f16(kq_scale·log2(e)·q)` (≤ 2^-11 relative; it must stay below
//! 65504) and the probabilities `p = 2^(s − m) ∈ [0, 1]` (≤ 2^-11 relative, 2^-25 absolute below
//! 2^-14). `l` sums the same rounded `p` the values are weighted with, so the result stays a convex
//! combination of the value rows.
//!
//! Smaller shapes run the same code: the query and the tile are zero past `kv_lora + n_rope` (rows
//! at a fixed `FLASH_MMA_ROW_STRIDE`), so the fixed 18 k-steps add exact zeros; tile rows past the
//! segment get probability 0 and hold finite data. The tile loop holds no branch besides its own
//! control (predicated loads and stores, a select for the mask) and issues the next tile's global
//! loads before the current tile's math. 214 registers on sm_86, no spills; the grid is at most one
//! block per SM per head group (`max_segments`), so occupancy is not the limit.

use super::cache_q8;
use super::flash_tile::{
    load_tile, stage_query_chunk, store_first_tile, store_tile, tile_dst_below, warp_pass_live,
    zero_query_chunk, zero_tile_rows, QuerySrc, HEADS, PER_THREAD, ROW_CHUNKS, STRIDE, THREADS,
};
use super::temperature::logit_scale;
use crate::intrinsics::{
    bid, exp2, f16_to_f32, f32_to_f16, fma, global, half_warp_max, half_warp_sum, ld_u32,
    ldmatrix_x4, ldmatrix_x4_trans, lds_f32, lds_v4, mma_f16_f32, pack_f16x2, rcp_approx,
    st_v2_f32, st_v4_u32, sts_b16, sts_f32_if, sts_u32, sts_v2_f32, tid,
};
use core::arch::{asm, global_asm, nvptx};
use core::mem::offset_of;
use core::num::NonZeroU32;
use ingot_abi::launch::{
    flash_block, flash_mma_smem as sm, flash_segments, CacheType, FlashBlock, FLASH_MAX_LORA,
    FLASH_MAX_ROW, FLASH_TILE,
};
use ingot_abi::step::StepState;

// The dynamic shared memory of the launch (`flash_mma_smem::BYTES`, laid out by `flash_mma_smem`).
global_asm!(".extern .shared .align 16 .b8 flash_latent_mma_smem[];");

const WARPS: u32 = THREADS / 32;

/// 16-byte stores of one head's `part_o` row at the widest latent (`FLASH_MAX_LORA` f16).
const ROW_STORES: u32 = FLASH_MAX_LORA / 8;
const _: () = assert!(THREADS.is_multiple_of(ROW_STORES));

/// Chunks of 8 query dims (16 bytes as f16), staged cooperatively once per block.
const Q_CHUNKS: u32 = HEADS * ROW_CHUNKS;
const Q_PER_THREAD: u32 = Q_CHUNKS.div_ceil(THREADS);

/// Scores: warp `w` covers n-tile `w % N_TILES` (8 tile rows) and half `w / N_TILES` of the
/// `K_STEPS` 16-dim k-steps of a widest row.
const K_STEPS: u32 = FLASH_MAX_ROW / 16;
const HALF_STEPS: usize = (K_STEPS / 2) as usize;
const N_TILES: u32 = FLASH_TILE / 8;
const _: () = assert!(2 * N_TILES == WARPS);
/// Each half is read as whole pairs of k-steps (one `ldmatrix.x4` = two B fragments).
const _: () = assert!(HALF_STEPS.is_multiple_of(2));

/// Values: latent dims per warp, as n-tiles of 8, and the tile's 16-row k-steps.
const V_COLS: u32 = FLASH_MAX_LORA / WARPS;
const V_TILES: usize = (V_COLS / 8) as usize;
const PV_STEPS: usize = (FLASH_TILE / 16) as usize;
const _: () = assert!(V_TILES.is_multiple_of(2) && PV_STEPS == 2);

/// Softmax role: lane `k` of head `h` keeps scores `k` and `k + 16` of the tile.
const SOFTMAX_LANES: u32 = 16;
const _: () = assert!(SOFTMAX_LANES * HEADS == THREADS && FLASH_TILE == 2 * SOFTMAX_LANES);
/// The query is staged in the tile's first `HEADS` rows.
const _: () = assert!(HEADS <= FLASH_TILE);

const POS_OFF: u64 = offset_of!(StepState, pos) as u64;

#[inline(always)]
unsafe fn smem_base() -> u32 {
    let a: u32;
    asm!("mov.u32 {a}, flash_latent_mma_smem;", a = out(reg32) a, options(pure, nomem, nostack));
    a
}

/// Stages the whole query (one block-wide pass, written out so it needs no loop). A warp whose
/// chunks of a pass all lie in rows past `q.heads` (a short context's blocks serve 1 to 8 heads,
/// [`flash_block`]) writes their zeros without the loads: the test is warp-uniform, and the rows
/// of the heads the block has are staged as before.
#[inline(always)]
unsafe fn stage_query(q: QuerySrc, dst: u32, tid: u32) {
    const _: () = assert!(Q_PER_THREAD == 5);
    let live = q.heads * ROW_CHUNKS;
    let pass = |k: u32| {
        if warp_pass_live(tid, k, live) {
            stage_query_chunk(q, HEADS, dst, tid, k);
        } else {
            zero_query_chunk(HEADS, dst, tid, k);
        }
    };
    pass(0);
    pass(1);
    pass(2);
    pass(3);
    pass(4);
}

flash_entry_points! {
    flash_latent_mma_impl;
    /// See the module docs and `ingot_abi::launch::FLASH_LATENT_MMA` for the contract; the host
    /// launcher checks `n_head` (up to 128), the other shape limits and every buffer size.
    flash_latent_mma => false;
    /// [`flash_latent_mma`] over a q8_0 cache (`ingot_abi::launch::FLASH_LATENT_MMA_Q8_0`): each
    /// tile's blocks are widened into the same f16 tile (`super::cache_q8`).
    flash_latent_mma_q8_0 => true;
}

/// The kernel, over an f16 cache or, with `Q8`, a q8_0 one.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn flash_latent_mma_impl<const Q8: bool>(
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
    // The launcher guarantees a non-empty row; the early exit only keeps the division below
    // free of a trap.
    let Some(row_chunks) = NonZeroU32::new((kv_lora + n_rope) / 8) else {
        return;
    };
    let width = kv_lora + n_rope;
    let row_bytes = if Q8 {
        CacheType::Q8_0.row_bytes(width) as u64
    } else {
        row_chunks.get() as u64 * 16
    };
    // Only read with `Q8`; `width ≥ 8` here, so the fallback is never taken.
    let q8_blocks = NonZeroU32::new(CacheType::q8_0_blocks(width)).unwrap_or(NonZeroU32::MIN);
    let q8_map = cache_q8::Map::new(q8_blocks, row_bytes as u32, STRIDE, tid);
    let smem = smem_base();
    let tile = smem + sm::TILE;

    // The first tile's loads fly while the query is staged.
    let src = global(cache);
    let mut start = t0;
    let first = (t1 - start).min(FLASH_TILE);
    let mut staged = if Q8 {
        [[0; 4]; PER_THREAD]
    } else {
        load_tile::<true>(
            src + start as u64 * row_bytes,
            first * row_chunks.get(),
            tid,
        )
    };
    let mut staged8 = if Q8 {
        cache_q8::load_tile::<true>(
            src + start as u64 * row_bytes,
            q8_map.units(first),
            &q8_map,
            tid,
        )
    } else {
        cache_q8::EMPTY
    };
    let qs = logit_scale(kq_scale, global(temp), temperature, pos) * core::f32::consts::LOG2_E;
    // The group's heads are consecutive rows of q_abs and q_pe.
    let q = QuerySrc {
        q_abs: global(q_abs) + (h0 * kv_lora) as u64 * 4,
        q_pe: global(q_pe) + (h0 * n_rope) as u64 * 4,
        kv_lora,
        n_rope,
        tok_rows: 0,
        live_rows: HEADS,
        heads,
        qs: [qs, qs],
    };
    stage_query(q, tile, tid);
    nvptx::_syncthreads();

    let warp = tid / 32;
    let lane = tid % 32;
    let (g, tq) = (lane / 4, lane % 4);
    // `ldmatrix` row and matrix this lane supplies the address of.
    let (lr, lm) = (lane % 8, lane / 8);
    let nt = warp % N_TILES;
    let half = warp / N_TILES;
    let half_dims = half * HALF_STEPS as u32 * 16;

    // Query A fragments of the warp's k-steps: matrices (heads 0-7 | 8-15) × (dims 0-7 | 8-15).
    let mut qf = [[0u32; 4]; HALF_STEPS];
    let q_lane = tile + (lr + 8 * (lm & 1)) * STRIDE + (half_dims + 8 * (lm >> 1)) * 2;
    let mut j = 0;
    while j < HALF_STEPS {
        qf[j] = ldmatrix_x4(q_lane + j as u32 * 32);
        j += 1;
    }
    nvptx::_syncthreads();
    // Every tile row the stores below do not write must hold finite data (a row past `n` gets
    // probability 0, and 0·NaN would not vanish): rows `heads .. 16` already hold the query's
    // zero rows; the rest are zeroed, the query's rows once their fragments are loaded.
    zero_tile_rows(tile, (0, heads), tid);
    zero_tile_rows(tile, (HEADS, FLASH_TILE), tid);
    // The widest tile of the segment bounds the chunks a tile stores.
    let dst = tile_dst_below(
        row_chunks,
        tid,
        (t1 - t0).min(FLASH_TILE) * row_chunks.get(),
    );

    // Score B fragments: matrices = tile rows `8·nt ..` × 4 consecutive 8-dim groups.
    let s_lane = tile + (8 * nt + lr) * STRIDE + (half_dims + 8 * lm) * 2;
    let s_out = smem + sm::S + half * sm::S_HALF + g * sm::S_STRIDE + (8 * nt + 2 * tq) * 4;
    // Value B fragments (transposed): matrices (rows 0-7 | 8-15) × (dims +0 | +8).
    let v_lane = tile + (lr + 8 * (lm & 1)) * STRIDE + (warp * V_COLS + 8 * (lm >> 1)) * 2;
    // Probability A fragments: matrices (heads 0-7 | 8-15) × (rows 0-7 | 8-15).
    let p_lane = smem + sm::P + (lr + 8 * (lm & 1)) * sm::P_STRIDE + 8 * (lm >> 1) * 2;
    let mut o = [[0.0f32; 4]; V_TILES];

    // Softmax role.
    let sh = tid / SOFTMAX_LANES;
    let sk = tid % SOFTMAX_LANES;
    let s_in = smem + sm::S + sh * sm::S_STRIDE + sk * 4;
    let softmax_live = (tid & !31) / SOFTMAX_LANES < heads;
    let mut m = f32::NEG_INFINITY;
    let mut l = 0.0f32;

    // One tile: stored into shared memory, the next one's loads issued, scores, softmax and the
    // value products; whether another tile follows. Written as a macro so the first tile runs
    // its own copy (`$first`): `O` and `l` start at 0 there and `α = 0`, so its products start
    // from zero instead of scaling zeros (the same bits), and `O` needs no zeroing before.
    macro_rules! tile_step {
        ($first:expr) => {{
            let n = (t1 - start).min(FLASH_TILE);
            // The previous tile's readers (and the zeroing) are done before it is overwritten.
            nvptx::_syncthreads();
            if Q8 {
                cache_q8::store_tile(tile, &staged8, q8_map.units(n), &q8_map, tid);
            } else {
                let chunks = n * row_chunks.get();
                if $first {
                    store_first_tile(tile, &staged, &dst, chunks, tid);
                } else {
                    store_tile(tile, &staged, &dst, chunks, tid);
                }
            }
            nvptx::_syncthreads();
            // The next tile's loads, none after the last tile (block-uniform).
            let next = start + n;
            if next < t1 {
                let n_next = (t1 - next).min(FLASH_TILE);
                if Q8 {
                    staged8 = cache_q8::load_tile::<true>(
                        src + next as u64 * row_bytes,
                        q8_map.units(n_next),
                        &q8_map,
                        tid,
                    );
                } else {
                    staged = load_tile::<true>(
                        src + next as u64 * row_bytes,
                        n_next * row_chunks.get(),
                        tid,
                    );
                }
            }

            // Partial scores of 8 rows over half of the dims. A warp whose rows are all past `n`
            // (a short context's last tile) skips them, warp-uniform: the softmax masks those rows
            // whatever `S` holds there.
            if 8 * nt < n {
                let mut s = [0.0f32; 4];
                let mut j = 0;
                while j < HALF_STEPS / 2 {
                    let b = ldmatrix_x4(s_lane + j as u32 * 64);
                    s = mma_f16_f32(qf[2 * j], [b[0], b[1]], s);
                    s = mma_f16_f32(qf[2 * j + 1], [b[2], b[3]], s);
                    j += 1;
                }
                sts_v2_f32(s_out, [s[0], s[1]]);
                sts_v2_f32(s_out + 8 * sm::S_STRIDE, [s[2], s[3]]);
            }
            nvptx::_syncthreads();

            // Online softmax; rows past `n` get −inf, i.e. probability 0 (a select: their
            // partial scores are finite, computed from zeroed or stale rows). Row 0 of the tile is
            // always present, so `m_new` is finite.
            let score = |t: u32| {
                let at = s_in + (t - sk) * 4;
                let s = lds_f32(at) + lds_f32(at + sm::S_HALF);
                if t < n {
                    s
                } else {
                    f32::NEG_INFINITY
                }
            };
            // A warp whose two heads the block does not have skips them (warp-uniform): their
            // probability rows and factors only reach output rows that are never stored (the rows
            // of the products are independent).
            if softmax_live {
                let s_lo = score(sk);
                let s_hi = score(sk + SOFTMAX_LANES);
                let m_new = m.max(half_warp_max(s_lo.max(s_hi)));
                let alpha = exp2(m - m_new);
                let p_lo = f32_to_f16(exp2(s_lo - m_new));
                let p_hi = f32_to_f16(exp2(s_hi - m_new));
                let sum = half_warp_sum(f16_to_f32(p_lo) + f16_to_f32(p_hi));
                // The first tile: `α = 2^(−∞) = 0` and `l = 0`, so `fma` would return `sum`.
                l = if $first { sum } else { fma(l, alpha, sum) };
                m = m_new;
                let p_row = smem + sm::P + sh * sm::P_STRIDE;
                sts_b16(p_row + sk * 2, p_lo);
                sts_b16(p_row + (sk + SOFTMAX_LANES) * 2, p_hi);
                sts_f32_if(sk == 0 && !$first, smem + sm::ALPHA + sh * 4, alpha);
            }
            nvptx::_syncthreads();

            // O = α·O + P·V for the warp's 64 latent dims; the first tile's `α·O` is 0 (`O = 0`,
            // `α = 0`), so it starts the products from zero instead.
            if !$first {
                let al_g = lds_f32(smem + sm::ALPHA + g * 4);
                let al_g8 = lds_f32(smem + sm::ALPHA + (g + 8) * 4);
                let mut c = 0;
                while c < V_TILES {
                    o[c] = [
                        o[c][0] * al_g,
                        o[c][1] * al_g,
                        o[c][2] * al_g8,
                        o[c][3] * al_g8,
                    ];
                    c += 1;
                }
            }
            let pa = [ldmatrix_x4(p_lane), ldmatrix_x4(p_lane + 32)];
            let mut c = 0;
            while c < V_TILES {
                let mut ks = 0;
                while ks < PV_STEPS {
                    let b = ldmatrix_x4_trans(v_lane + ks as u32 * 16 * STRIDE + c as u32 * 16);
                    let fresh = $first && ks == 0;
                    let acc = |x: [f32; 4]| if fresh { [0.0; 4] } else { x };
                    o[c] = mma_f16_f32(pa[ks], [b[0], b[1]], acc(o[c]));
                    o[c + 1] = mma_f16_f32(pa[ks], [b[2], b[3]], acc(o[c + 1]));
                    ks += 1;
                }
                c += 2;
            }

            if next < t1 {
                start = next;
                true
            } else {
                false
            }
        }};
    }
    let mut more = tile_step!(true);
    while more {
        more = tile_step!(false);
    }

    // The segment's output normalized, `O_s / l_s` per head, then rounded to f16: `1/l` meets
    // the value warps in the score buffer `S`, which nobody reads after the last tile's softmax
    // (behind its barrier), so it needs no barrier before; the one after it also ends the last
    // tile's reads of the tile the rows are staged in below. `l ≥ 1` for a head the model has
    // (its largest score contributes 1), and `rcp.approx` is within an f32 ulp, far below the
    // f16 rounding that follows.
    sts_f32_if(sk == 0, smem + sm::S + sh * 4, rcp_approx(l));
    nvptx::_syncthreads();
    let inv_g = lds_f32(smem + sm::S + g * 4);
    let inv_g8 = lds_f32(smem + sm::S + (g + 8) * 4);

    // Rows g and g + 8 of the accumulators, rounded to f16, meet in the tile (free after the
    // loop; head `h` at `h·STRIDE`, the query's layout, 4 banks apart per head), so the stores
    // to `part_o` below are whole 16-byte chunks, a 32-byte sector per pair of lanes.
    let stage = tile + g * STRIDE + (warp * V_COLS + 2 * tq) * 2;
    let mut c = 0;
    while c < V_TILES {
        sts_u32(
            stage + 16 * c as u32,
            pack_f16x2(o[c][0] * inv_g, o[c][1] * inv_g),
        );
        c += 1;
    }
    // Rows g + 8 are heads 8 to 15, which a block of at most 8 heads does not have
    // (block-uniform).
    if heads > 8 {
        let mut c = 0;
        while c < V_TILES {
            sts_u32(
                stage + 16 * c as u32 + 8 * STRIDE,
                pack_f16x2(o[c][2] * inv_g8, o[c][3] * inv_g8),
            );
            c += 1;
        }
    }
    nvptx::_syncthreads();
    // The rows of the heads the model has, 8 dims (16 bytes) per store: thread `tid` takes
    // chunk `tid % ROW_STORES` of heads `tid / ROW_STORES + j·THREADS / ROW_STORES` (consecutive
    // threads along a row; shifts, no division; a fixed count, unrolled). The launcher bounds
    // seg·n_head + n_head by max_segments·n_head and makes `kv_lora` a multiple of 8, so every
    // row starts 16-byte aligned.
    let seg_head = seg * n_head + h0;
    let k = tid % ROW_STORES;
    let mut j = 0;
    while j < HEADS / (THREADS / ROW_STORES) {
        // No later pass holds a head the block has (block-uniform).
        if j * (THREADS / ROW_STORES) >= heads {
            break;
        }
        let hr = tid / ROW_STORES + j * (THREADS / ROW_STORES);
        if hr < heads && 8 * k < kv_lora {
            let v = lds_v4(tile + hr * STRIDE + 16 * k);
            st_v4_u32(
                global(part_o) + ((seg_head + hr) as u64 * kv_lora as u64 + 8 * k as u64) * 2,
                v,
            );
        }
        j += 1;
    }
    if sk == 0 && sh < heads {
        st_v2_f32(global(part_ml) + (seg_head + sh) as u64 * 8, [m, l]);
    }
}
