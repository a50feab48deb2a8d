//! `flash_latent_prefill`: the causal absorbed MLA attention of a prefill chunk on tensor cores
//! (docs/decode-math.md#split-k-attention, without the split): `flash_latent_mma`'s tile loop with
//! the M side of `mma.m16n8k16` widened to two tokens × 16 heads (M-row `r` = head `h0 + r % 16` of
//! token `t0 + r / 16`), so every cache tile staged in shared memory serves both tokens.
//!
//! Block `b` (of `flash_prefill_items`) owns head group `b / P` and token pair `P − 1 − b % P`
//! (`P = ⌈ntok/2⌉`; the pairs that read the most rows start first) and streams cache rows
//! `0..=p_b` (`p_b`: its last live token's position) in tiles of `FLASH_TILE` (32) rows, each row
//! read once for both tokens and all 16 heads, as key and as value. No split-K: tokens × head
//! groups give enough blocks (V2-Lite at `ntok` 512: 256 blocks of 8 warps).
//!
//! Per tile, warp `w` of 8:
//! * scores `S[32 × 32] = Q·Kᵀ`: token `w / 4`, tile rows `16(w % 2) .. + 16`, half `(w / 2) % 2`
//!   of the 576-deep product, query fragments in 72 registers loaded once; the halves meet in
//!   shared memory as f32, 8-score groups swizzled by row (`flash_prefill_smem::S`: no bank
//!   conflict on store or read);
//! * softmax: thread `(tid/8, tid%8)` sums scores `k + 8j` of its M-row, masks, updates `(m, l)`,
//!   writes f16 probabilities. Tile row `start + t` is visible to token 0 iff `t < n` and
//!   `start + t ≤ p_a`, to token 1 iff `≤ p_b`; a masked score is −∞ (a select), so its probability
//!   is exactly 0, and row 0, visible to both, makes the first tile's running max finite;
//! * values `O[32 × 512] += P·V`: latent dims `64w .. 64w+64` of both tokens (64 f32 accumulators).
//!
//! Why two tokens, not more: 64 accumulators + 72 query registers + 36 staging registers is what a
//! thread holds without spills (254 on sm_86); more tokens need the query in shared memory, past
//! the 48 KiB a launch gets without an opt-in. A cache row costs 17 `mma` for two tokens.
//!
//! Precision as `flash_latent_mma`, then one f32 division by `l`. Smaller shapes and a lone last
//! token run the same code (zero query past `kv_lora + n_rope` and past `ntok`, unstored rows and
//! columns); the tile loop holds no branch besides its own control and pipelines the next tile's
//! global loads into registers.

use super::cache_q8;
use super::flash_tile::{
    load_tile, stage_query_chunk, store_tile, tile_dst, zero_tile, QuerySrc, HEADS, PER_THREAD,
    ROW_CHUNKS, STRIDE, THREADS,
};
use super::temperature::logit_scale;
use crate::intrinsics::{
    bid, exp2, f16_to_f32, f32_to_f16, fma, global, ld_u32, ldmatrix_x4, ldmatrix_x4_trans,
    lds_f32, mma_f16_f32, st_v2_f32, sts_b16, sts_f32_if, sts_v2_f32, sub_max, sub_sum, tid,
};
use core::arch::{asm, global_asm, nvptx};
use core::mem::offset_of;
use core::num::NonZeroU32;
use ingot_abi::launch::{
    flash_prefill_smem as sm, CacheType, FLASH_MAX_LORA, FLASH_MAX_ROW, FLASH_PREFILL_ROWS,
    FLASH_PREFILL_TOKENS, FLASH_TILE,
};
use ingot_abi::step::StepState;

// The dynamic shared memory of the launch (`flash_prefill_smem::BYTES`).
global_asm!(".extern .shared .align 16 .b8 flash_latent_prefill_smem[];");

const WARPS: u32 = THREADS / 32;
const TOKENS: u32 = FLASH_PREFILL_TOKENS;
const ROWS: u32 = FLASH_PREFILL_ROWS;
const _: () = assert!(TOKENS == 2 && ROWS == TOKENS * HEADS);

/// Chunks of 8 query dims (16 bytes as f16) of both tokens, staged once per block.
const Q_PER_THREAD: u32 = (ROWS * ROW_CHUNKS).div_ceil(THREADS);

/// Scores: warp `w` covers token `w / 4`, half `(w / 2) % 2` of the `K_STEPS` 16-dim k-steps
/// of a widest row, and the two n-tiles (8 tile rows each) `2(w % 2)` and `2(w % 2) + 1`.
const K_STEPS: u32 = FLASH_MAX_ROW / 16;
const HALF_STEPS: usize = (K_STEPS / 2) as usize;
const N_TILES: u32 = FLASH_TILE / 8;
const WARP_N_TILES: u32 = 2;
const _: () = assert!(TOKENS * 2 * (N_TILES / WARP_N_TILES) == WARPS);
/// Each half is read as whole pairs of k-steps (one `ldmatrix.x4` = two B fragments).
const _: () = assert!(HALF_STEPS.is_multiple_of(2));

/// Values: latent dims per warp, as n-tiles of 8, and the tile's 16-row k-steps.
const V_COLS: u32 = FLASH_MAX_LORA / WARPS;
const V_TILES: usize = (V_COLS / 8) as usize;
const PV_STEPS: usize = (FLASH_TILE / 16) as usize;
const _: () = assert!(V_TILES.is_multiple_of(2) && PV_STEPS == 2);

/// Softmax role: lane `k` of M-row `r` keeps scores `k + 8j`, `j < 4`, of the tile.
const SOFTMAX_LANES: u32 = 8;
const SOFTMAX_SCORES: usize = (FLASH_TILE / SOFTMAX_LANES) as usize;
const _: () = assert!(SOFTMAX_LANES * ROWS == THREADS && SOFTMAX_SCORES == 4);

const POS_OFF: u64 = offset_of!(StepState, pos) as u64;

#[inline(always)]
unsafe fn smem_base() -> u32 {
    let a: u32;
    asm!("mov.u32 {a}, flash_latent_prefill_smem;", a = out(reg32) a, options(pure, nomem, nostack));
    a
}

/// Stages both tokens' query (one block-wide pass, written out so it needs no loop).
#[inline(always)]
unsafe fn stage_query(q: QuerySrc, dst: u32, tid: u32) {
    const _: () = assert!(Q_PER_THREAD == 9);
    stage_query_chunk(q, ROWS, dst, tid, 0);
    stage_query_chunk(q, ROWS, dst, tid, 1);
    stage_query_chunk(q, ROWS, dst, tid, 2);
    stage_query_chunk(q, ROWS, dst, tid, 3);
    stage_query_chunk(q, ROWS, dst, tid, 4);
    stage_query_chunk(q, ROWS, dst, tid, 5);
    stage_query_chunk(q, ROWS, dst, tid, 6);
    stage_query_chunk(q, ROWS, dst, tid, 7);
    stage_query_chunk(q, ROWS, dst, tid, 8);
}

/// One token's output accumulators of a warp: its 64 latent dims as 8 n-tiles, rows g and
/// g + 8 (the `mma` C fragment layout).
type Acc = [[f32; 4]; V_TILES];

/// `o = α·o`, rows g and g + 8 by their own factors.
#[inline(always)]
fn rescale(o: &mut Acc, al_g: f32, al_g8: f32) {
    let mut c = 0;
    while c < V_TILES {
        let a = o[c];
        o[c] = [a[0] * al_g, a[1] * al_g, a[2] * al_g8, a[3] * al_g8];
        c += 1;
    }
}

/// Stores one token's rows g and g + 8 (global `o_row`, `o_row8`) times `inv`, `inv8`: the
/// warp's dims below `kv_lora`; row g only if `live`, row g + 8 only if `live8`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn store_rows(
    o: &Acc,
    (o_row, o_row8): (u64, u64),
    (inv, inv8): (f32, f32),
    warp: u32,
    tq: u32,
    kv_lora: u32,
    (live, live8): (bool, bool),
) {
    let mut c = 0;
    while c < V_TILES {
        let d = warp * V_COLS + 8 * c as u32 + 2 * tq;
        let a = o[c];
        if live && d < kv_lora {
            st_v2_f32(o_row + d as u64 * 4, [a[0] * inv, a[1] * inv]);
        }
        if live8 && d < kv_lora {
            st_v2_f32(o_row8 + d as u64 * 4, [a[2] * inv8, a[3] * inv8]);
        }
        c += 1;
    }
}

/// See the module docs and `ingot_abi::launch::FLASH_LATENT_PREFILL` for the contract; the
/// host launcher checks the shapes and every buffer size.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn flash_latent_prefill(
    q_abs: *const f32,
    q_pe: *const f32,
    cache: *const u16,
    state: *const StepState,
    o_lat: *mut f32,
    n_head: u32,
    kv_lora: u32,
    n_rope: u32,
    ctx: u32,
    ntok: u32,
    kq_scale: f32,
    temp: *const f32,
    temperature: u32,
) {
    prefill_impl::<false>(
        (q_abs, q_pe, cache, state, o_lat),
        [n_head, kv_lora, n_rope, ctx, ntok],
        kq_scale,
        temp,
        temperature,
    );
}

/// [`flash_latent_prefill`] over a q8_0 cache (`ingot_abi::launch::FLASH_LATENT_PREFILL_Q8_0`):
/// each tile's blocks are widened into the same f16 tile (`super::cache_q8`).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn flash_latent_prefill_q8_0(
    q_abs: *const f32,
    q_pe: *const f32,
    cache: *const u16,
    state: *const StepState,
    o_lat: *mut f32,
    n_head: u32,
    kv_lora: u32,
    n_rope: u32,
    ctx: u32,
    ntok: u32,
    kq_scale: f32,
    temp: *const f32,
    temperature: u32,
) {
    prefill_impl::<true>(
        (q_abs, q_pe, cache, state, o_lat),
        [n_head, kv_lora, n_rope, ctx, ntok],
        kq_scale,
        temp,
        temperature,
    );
}

type Bufs = (
    *const f32,
    *const f32,
    *const u16,
    *const StepState,
    *mut f32,
);

/// The kernel, over an f16 cache or, with `Q8`, a q8_0 one.
#[inline(always)]
unsafe fn prefill_impl<const Q8: bool>(
    (q_abs, q_pe, cache, state, o_lat): Bufs,
    [n_head, kv_lora, n_rope, ctx, ntok]: [u32; 5],
    kq_scale: f32,
    temp: *const f32,
    temperature: u32,
) {
    let tid = tid();
    // The launcher guarantees 1 ≤ ntok ≤ 512 and n_head ≤ 128; the early exit only keeps the
    // divisions below free of a trap.
    let Some(pairs) = NonZeroU32::new(ntok.div_ceil(TOKENS)) else {
        return;
    };
    let h0 = bid() / pairs * HEADS;
    // Heads of this group the model has: 16, fewer in a last partial group (`h0 < n_head`: the
    // launch has one block per group and token pair).
    let heads = n_head.saturating_sub(h0).min(HEADS);
    let t0 = (pairs.get() - 1 - bid() % pairs) * TOKENS;
    // Live tokens of the block: 2, or 1 for the last token of an odd `ntok`.
    let live = (ntok - t0).min(TOKENS);
    let Some(row_chunks) = NonZeroU32::new((kv_lora + n_rope) / 8) else {
        return;
    };
    // A chunk past the capacity reads row 0 only (`ctx ≥ 1`) and stores NaN (`inv` at the end).
    let pos0 = ld_u32(global(state) + POS_OFF);
    let fits = pos0 <= ctx && ntok <= ctx - pos0;
    // Positions of the block's first and last live token: each sees rows up to its own.
    let p_a = if fits { pos0 + t0 } else { 0 };
    let p_b = if fits { p_a + live - 1 } else { 0 };
    let len = p_b + 1;

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
    let first = len.min(FLASH_TILE);
    let mut staged = if Q8 {
        [[0; 4]; PER_THREAD]
    } else {
        load_tile::<false>(src, first * row_chunks.get(), tid)
    };
    let mut staged8 = if Q8 {
        cache_q8::load_tile::<false>(src, q8_map.units(first), &q8_map, tid)
    } else {
        cache_q8::EMPTY
    };
    let qs =
        |p: u32| logit_scale(kq_scale, global(temp), temperature, p) * core::f32::consts::LOG2_E;
    // Row `(t0 + i)·n_head + h0 + hh` of the token-major query (< 512·128, no overflow).
    let q_row0 = (t0 * n_head + h0) as u64;
    let q = QuerySrc {
        q_abs: global(q_abs) + q_row0 * kv_lora as u64 * 4,
        q_pe: global(q_pe) + q_row0 * n_rope as u64 * 4,
        kv_lora,
        n_rope,
        tok_rows: n_head,
        live_rows: live * HEADS,
        heads,
        qs: [qs(p_a), qs(p_b)],
    };
    stage_query(q, tile, tid);
    nvptx::_syncthreads();

    let warp = tid / 32;
    let lane = tid % 32;
    let (g, tq) = (lane / 4, lane % 4);
    // `ldmatrix` row and matrix this lane supplies the address of.
    let (lr, lm) = (lane % 8, lane / 8);
    let mt = warp / 4;
    let half = (warp / 2) % 2;
    let nt0 = WARP_N_TILES * (warp % 2);
    let half_dims = half * HALF_STEPS as u32 * 16;

    // Query A fragments of the warp's token and k-steps: matrices (heads 0-7 | 8-15) ×
    // (dims 0-7 | 8-15).
    let mut qf = [[0u32; 4]; HALF_STEPS];
    let q_lane = tile + (16 * mt + lr + 8 * (lm & 1)) * STRIDE + (half_dims + 8 * (lm >> 1)) * 2;
    let mut j = 0;
    while j < HALF_STEPS {
        qf[j] = ldmatrix_x4(q_lane + j as u32 * 32);
        j += 1;
    }
    nvptx::_syncthreads();
    zero_tile(tile, tid);
    let dst = tile_dst(row_chunks, tid);

    // Score B fragments of n-tile `nt0` (`nt0 + 1`: 8 rows further): matrices = tile rows
    // `8·nt0 ..` × 4 consecutive 8-dim groups.
    let s_lane = tile + (8 * nt0 + lr) * STRIDE + (half_dims + 8 * lm) * 2;
    // Row `16·mt + g` (and `+ 8`, the same swizzle: `r % 4 = g % 4`), scores `8·nt + 2·tq`.
    let s_row = smem + sm::S + half * sm::S_HALF + (16 * mt + g) * sm::S_STRIDE + 2 * tq * 4;
    let s_out = |nt: u32| s_row + ((8 * nt) ^ (sm::S_SWIZZLE * (g % 4))) * 4;
    let s_out = [s_out(nt0), s_out(nt0 + 1)];
    // Value B fragments (transposed): matrices (rows 0-7 | 8-15) × (dims +0 | +8).
    let v_lane = tile + (lr + 8 * (lm & 1)) * STRIDE + (warp * V_COLS + 8 * (lm >> 1)) * 2;
    // Probability A fragments of token 0 (token 1: 16 M-rows further): matrices
    // (heads 0-7 | 8-15) × (rows 0-7 | 8-15).
    let p_lane = smem + sm::P + (lr + 8 * (lm & 1)) * sm::P_STRIDE + 8 * (lm >> 1) * 2;
    // Rescale factors of the accumulator rows g and g + 8 of token 0 (token 1: 16 M-rows on).
    let al_row = smem + sm::P + g * sm::P_STRIDE + sm::ALPHA;
    let mut o0: Acc = [[0.0f32; 4]; V_TILES];
    let mut o1: Acc = [[0.0f32; 4]; V_TILES];

    // Softmax role: M-row `sr` (token `sr / 16`), which sees rows up to `p_sr`.
    let sr = tid / SOFTMAX_LANES;
    let sk = tid % SOFTMAX_LANES;
    let s_in = smem + sm::S + sr * sm::S_STRIDE + sk * 4;
    let s_swz = sm::S_SWIZZLE * (sr % 4);
    let p_row = smem + sm::P + sr * sm::P_STRIDE;
    let p_sr = if sr < HEADS { p_a } else { p_b };
    let mut m = f32::NEG_INFINITY;
    let mut l = 0.0f32;

    let mut start = 0;
    loop {
        let n = (len - start).min(FLASH_TILE);
        // The previous tile's readers (and the zeroing) are done before it is overwritten.
        nvptx::_syncthreads();
        if Q8 {
            cache_q8::store_tile(tile, &staged8, q8_map.units(n), &q8_map, tid);
        } else {
            store_tile(tile, &staged, &dst, n * row_chunks.get(), tid);
        }
        nvptx::_syncthreads();
        // The next tile's loads; all predicated off after the last tile.
        let next = start + n;
        let n_next = if next < len {
            (len - next).min(FLASH_TILE)
        } else {
            0
        };
        if Q8 {
            staged8 = cache_q8::load_tile::<false>(
                src + next as u64 * row_bytes,
                q8_map.units(n_next),
                &q8_map,
                tid,
            );
        } else {
            staged = load_tile::<false>(
                src + next as u64 * row_bytes,
                n_next * row_chunks.get(),
                tid,
            );
        }

        // Partial scores of one token's 16 heads × 16 tile rows over half of the dims.
        let mut s = [[0.0f32; 4]; WARP_N_TILES as usize];
        let mut j = 0;
        while j < HALF_STEPS / 2 {
            let mut t = 0;
            while t < WARP_N_TILES as usize {
                let b = ldmatrix_x4(s_lane + t as u32 * 8 * STRIDE + j as u32 * 64);
                s[t] = mma_f16_f32(qf[2 * j], [b[0], b[1]], s[t]);
                s[t] = mma_f16_f32(qf[2 * j + 1], [b[2], b[3]], s[t]);
                t += 1;
            }
            j += 1;
        }
        let mut t = 0;
        while t < WARP_N_TILES as usize {
            let at = s_out[t];
            sts_v2_f32(at, [s[t][0], s[t][1]]);
            sts_v2_f32(at + 8 * sm::S_STRIDE, [s[t][2], s[t][3]]);
            t += 1;
        }
        nvptx::_syncthreads();

        // Online softmax with the causal mask: tile rows `t < vis` are in the stream and at or
        // before the row's position (`p_sr ≥ start − 1`: `start ≤ p_b ≤ p_a + 1`); the others
        // get −∞, i.e. probability 0 (a select: their partial scores are finite, computed from
        // zeroed, stale or later rows).
        let vis = (p_sr + 1 - start).min(n);
        let mut sc = [0.0f32; SOFTMAX_SCORES];
        let mut mx = f32::NEG_INFINITY;
        let mut j = 0;
        while j < SOFTMAX_SCORES {
            let t = sk + j as u32 * SOFTMAX_LANES;
            let at = s_in + ((j as u32 * SOFTMAX_LANES) ^ s_swz) * 4;
            let v = lds_f32(at) + lds_f32(at + sm::S_HALF);
            sc[j] = if t < vis { v } else { f32::NEG_INFINITY };
            mx = mx.max(sc[j]);
            j += 1;
        }
        let m_new = m.max(sub_max(mx, SOFTMAX_LANES));
        let alpha = exp2(m - m_new);
        let mut sum = 0.0f32;
        let mut j = 0;
        while j < SOFTMAX_SCORES {
            let p = f32_to_f16(exp2(sc[j] - m_new));
            sum += f16_to_f32(p);
            sts_b16(p_row + (sk + j as u32 * SOFTMAX_LANES) * 2, p);
            j += 1;
        }
        l = fma(l, alpha, sub_sum(sum, SOFTMAX_LANES));
        m = m_new;
        sts_f32_if(sk == 0, p_row + sm::ALPHA, alpha);
        nvptx::_syncthreads();

        // O = α·O + P·V for the warp's 64 latent dims of both tokens.
        let p_tok = HEADS * sm::P_STRIDE;
        rescale(&mut o0, lds_f32(al_row), lds_f32(al_row + 8 * sm::P_STRIDE));
        rescale(
            &mut o1,
            lds_f32(al_row + p_tok),
            lds_f32(al_row + p_tok + 8 * sm::P_STRIDE),
        );
        let pa0 = [ldmatrix_x4(p_lane), ldmatrix_x4(p_lane + 32)];
        let pa1 = [
            ldmatrix_x4(p_lane + p_tok),
            ldmatrix_x4(p_lane + p_tok + 32),
        ];
        let mut c = 0;
        while c < V_TILES {
            let mut ks = 0;
            while ks < PV_STEPS {
                let b = ldmatrix_x4_trans(v_lane + ks as u32 * 16 * STRIDE + c as u32 * 16);
                o0[c] = mma_f16_f32(pa0[ks], [b[0], b[1]], o0[c]);
                o0[c + 1] = mma_f16_f32(pa0[ks], [b[2], b[3]], o0[c + 1]);
                o1[c] = mma_f16_f32(pa1[ks], [b[0], b[1]], o1[c]);
                o1[c + 1] = mma_f16_f32(pa1[ks], [b[2], b[3]], o1[c + 1]);
                ks += 1;
            }
            c += 2;
        }

        if next >= len {
            break;
        }
        start = next;
    }

    // Each row's `l` replaces its α once every warp has read the last α.
    nvptx::_syncthreads();
    sts_f32_if(sk == 0, p_row + sm::ALPHA, l);
    nvptx::_syncthreads();

    // Rows g and g + 8 of each live token's accumulators, divided by their `l` (≥ 1: the
    // row's maximum contributes 2^0); NaN for a chunk past the capacity.
    let inv = |row: u32| if fits { 1.0 / lds_f32(row) } else { f32::NAN };
    let rows = |tk: u32| {
        let o_row = global(o_lat) + (q_row0 + (tk * n_head + g) as u64) * kv_lora as u64 * 4;
        (o_row, o_row + 8 * kv_lora as u64 * 4)
    };
    let p_tok = HEADS * sm::P_STRIDE;
    let inv0 = (inv(al_row), inv(al_row + 8 * sm::P_STRIDE));
    let inv1 = (inv(al_row + p_tok), inv(al_row + p_tok + 8 * sm::P_STRIDE));
    // Rows g and g + 8 are heads h0 + g and h0 + g + 8: stored only where the model has them.
    let (hg, hg8) = (h0 + g < n_head, h0 + g + 8 < n_head);
    store_rows(&o0, rows(0), inv0, warp, tq, kv_lora, (hg, hg8));
    let second = live == TOKENS;
    store_rows(
        &o1,
        rows(1),
        inv1,
        warp,
        tq,
        kv_lora,
        (second && hg, second && hg8),
    );
}
