//! `rmsnorm_q8_1`: `y = quantize_q8_1(x·(1/sqrt(mean(x²) + eps))·w)` per row, the attention /
//! FFN / output norm fused with the activation quantization of the gemv that follows
//! (docs/decode-math.md#rms-norm; quantization as ggml-cuda's `quantize_q8_1`,
//! docs/quant-formats.md#gpu-dot-products).
//! `rmsnorm_q8_1_f32` also stores the normalized floats (the MoE layers' router input).
//!
//! Thread mapping: one block of `RMSNORM_Q8_1_THREADS` threads per row. Thread `t` owns the
//! float4 chunks `t, t + THREADS, …` (16-byte loads); 8 consecutive threads of a warp cover one
//! q8_1 block of 32 values in each pass. Σx² is reduced per warp with shuffles, then across
//! warps through a static shared array; the second pass re-reads `x` (L1) and quantizes.
//!
//! The normalized value is `(x·scale)·w`, the order of ggml's `rms_norm` then `mul`; per q8_1
//! block the amax / Σ reductions, `d = amax/127` and `q = roundf(v/d)` are the ones of
//! `quantize.rs`, so the bits match ggml's quantizer applied to the same floats.

use crate::intrinsics::{
    bid, f32_to_f16, global, ld_v4_f32, ld_v4_f32_relaxed, ld_v4_f32_relaxed_if, ld_v4_if,
    pack_low_bytes, round_away_i32, shfl_xor_f32, sqrt, st_u32, st_v4_f32, st_v4_f32_if, sts_u32,
    tid, warp_sum,
};
use crate::intrinsics::{lds_f32, sts_f32_if};
use core::arch::{asm, global_asm, nvptx};
use core::mem::{offset_of, size_of};
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::{RMSNORM_Q8_1_THREADS as THREADS, WARP_SIZE};

const LANES_PER_BLOCK: u32 = QK8_1 as u32 / 4;
const _: () = assert!(
    THREADS / WARP_SIZE <= 8,
    "rmsnorm_q8_1_partials below holds 8 warps' sums"
);
const _: () = assert!(offset_of!(BlockQ8_1, s) == offset_of!(BlockQ8_1, d) + 2);

// One f32 partial sum per warp (at most 8 warps).
global_asm!(".shared .align 16 .b8 rmsnorm_q8_1_partials[32];");

#[inline(always)]
unsafe fn partials_addr() -> u32 {
    let a: u32;
    asm!("mov.u32 {a}, rmsnorm_q8_1_partials;", a = out(reg32) a, options(pure, nomem, nostack));
    a
}

/// `x`: `rows × n` floats, `w`: `n` floats, `y`: `rows × n/32` q8_1 blocks; `n` a multiple of
/// 32. Grid: one block per row.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn rmsnorm_q8_1(
    x: *const f32,
    w: *const f32,
    y: *mut BlockQ8_1,
    n: u32,
    eps: f32,
) {
    rmsnorm_row::<false>(global(x), global(w), global(y), 0, n, eps);
}

/// As [`rmsnorm_q8_1`], and also stores the normalized floats (the values it quantizes) to
/// `y_f32` (`rows × n` floats): the MoE router reads them in f32.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn rmsnorm_q8_1_f32(
    x: *const f32,
    w: *const f32,
    y: *mut BlockQ8_1,
    y_f32: *mut f32,
    n: u32,
    eps: f32,
) {
    rmsnorm_row::<true>(global(x), global(w), global(y), global(y_f32), n, eps);
}

/// The row of block `bid`; with `F32` the normalized floats also go to `yf`.
#[inline(always)]
unsafe fn rmsnorm_row<const F32: bool>(x: u64, wg: u64, y: u64, yf: u64, n: u32, eps: f32) {
    let row = bid() as u64;
    rmsnorm_block::<THREADS, F32, false>(
        x + row * n as u64 * 4,
        wg,
        y + row * (n / QK8_1 as u32) as u64 * size_of::<BlockQ8_1>() as u64,
        yf + row * n as u64 * 4,
        n,
        eps,
    );
}

/// One row of `n` floats at `xr` normalized with weights `wg` and quantized to `yr` (`n/32`
/// q8_1 blocks) by the whole block of `BLOCK` threads (a multiple of 32, at most 256); with
/// `F32` the normalized floats also go to `yfr`; with `COHERENT` the row is read with
/// `.relaxed.gpu` loads (other blocks of the launch wrote it: a last-block-done tail). Every
/// thread of the block must call it (it holds a barrier).
#[inline(always)]
pub(crate) unsafe fn rmsnorm_block<const BLOCK: u32, const F32: bool, const COHERENT: bool>(
    xr: u64,
    wg: u64,
    yr: u64,
    yfr: u64,
    n: u32,
    eps: f32,
) {
    let t = tid();
    let chunks = n / 4;

    let load_x = |a: u64| {
        if COHERENT {
            ld_v4_f32_relaxed(a)
        } else {
            ld_v4_f32(a)
        }
    };
    let mut ss = 0.0f32;
    let mut i = t;
    while i < chunks {
        ss += sum_sq(load_x(xr + i as u64 * 16));
        i += BLOCK;
    }
    let scale = 1.0 / sqrt(block_sum::<BLOCK>(ss) / n as f32 + eps);

    // Passes over the row; `n % 32 == 0` and BLOCK % 8 == 0 make each 8-lane group either
    // wholly inside the row or wholly past it, so the shuffles below always see whole groups.
    // Every thread runs the same number of passes (lanes past the end compute on zeros and
    // store nothing) so the whole warp takes part in every shuffle.
    let passes = chunks.div_ceil(BLOCK);
    let mut pass = 0;
    while pass < passes {
        let c = pass * BLOCK + t;
        let in_row = c < chunks;
        let v = if in_row {
            let off = c as u64 * 16;
            normalized(load_x(xr + off), ld_v4_f32(wg + off), scale)
        } else {
            [0.0; 4]
        };
        if F32 && in_row {
            st_v4_f32(yfr + c as u64 * 16, v);
        }
        quantize_store(v, yr, c, in_row);
        pass += 1;
    }
}

/// Threads whose Σx² order [`rmsnorm_tail`] keeps: it sums as a 128-thread block of its
/// mapping would, whatever its own size, so the tail's bits do not depend on the launch's block.
pub(crate) const TAIL_ORDER: u32 = 128;

// Σx² of round `r` of threads `TAIL_ORDER ..` (thread `t` at `4·(t − TAIL_ORDER)`), read by
// thread `t − TAIL_ORDER`.
global_asm!(".shared .align 4 .b8 rmsnorm_tail_partner[{bytes}];", bytes = const TAIL_ORDER * 4);

#[inline(always)]
unsafe fn partner_addr() -> u32 {
    let a: u32;
    asm!("mov.u32 {a}, rmsnorm_tail_partner;", a = out(reg32) a, options(pure, nomem, nostack));
    a
}

/// [`rmsnorm_block`] with the f32 output for a row that other blocks of the same launch wrote
/// (a last-block-done tail) by a block of `BLOCK` = 2 x [`TAIL_ORDER`] threads: `x` is read
/// with `.relaxed.gpu` loads.
///
/// Thread mapping: four threads per q8_1 block. Thread `t` takes lane `i = t % 4` of block
/// `t / 4` (plus `BLOCK/4` blocks per round), i.e. chunks `8b + i` and `8b + i + 4`, so the
/// quantizer's butterfly adds its first level (elements `e` and `e + 16`) in-thread and two
/// shuffle levels remain ([`quantize_pair_store`]). The first round's `x` and weights stay in
/// registers from the Σx² loop to the stores, so a row of up to `BLOCK·8` floats (2048) costs
/// one memory round trip in all (the last block runs alone: nothing hides its latency);
/// longer rows re-read their later rounds. Every thread runs every round: blocks past the row
/// compute on zeros (Σx² adds nothing) and store nothing.
///
/// Σx² order: that of a [`TAIL_ORDER`]-thread block of this mapping, whose thread `t` held this
/// block's threads `t` and `t + TAIL_ORDER` per round and added their two pair sums before
/// adding the round to its total: thread `t + TAIL_ORDER` hands its sum to thread `t` through
/// shared memory, and only the first [`TAIL_ORDER`] threads' totals are reduced. So the bits
/// are those of the 4-warp tail of before. Not `rmsnorm_block`'s order: the same value within
/// f32 rounding.
#[inline(always)]
pub(crate) unsafe fn rmsnorm_tail<const BLOCK: u32>(
    xr: u64,
    wg: u64,
    yr: u64,
    yfr: u64,
    n: u32,
    eps: f32,
) {
    const { assert!(BLOCK == 2 * TAIL_ORDER) };
    let t = tid();
    let blocks = n / QK8_1 as u32;
    let round = BLOCK / PAIR_LANES;
    let load_pair = |first: u32| {
        let b = first + t / PAIR_LANES;
        let lo = LANES_PER_BLOCK * b + t % PAIR_LANES;
        let live = b < blocks;
        (
            (b, live),
            ld_v4_f32_relaxed_if(live, xr + lo as u64 * 16),
            ld_v4_f32_relaxed_if(live, xr + (lo + PAIR_LANES) as u64 * 16),
        )
    };
    let weights = |(b, live): (u32, bool)| {
        let lo = LANES_PER_BLOCK * b + t % PAIR_LANES;
        (
            ld_v4_if(live, wg + lo as u64 * 16).map(f32::from_bits),
            ld_v4_if(live, wg + (lo + PAIR_LANES) as u64 * 16).map(f32::from_bits),
        )
    };
    let pair_sq = |(_, x_lo, x_hi): ((u32, bool), [f32; 4], [f32; 4])| sum_sq(x_lo) + sum_sq(x_hi);
    // Thread `t < TAIL_ORDER`: its round sum plus its partner's; the barrier is uniform. A
    // later round first waits until every thread has read the previous one's slot (so a row of
    // one round, 2048 floats, meets once here).
    let partner = partner_addr() + 4 * (t % TAIL_ORDER);
    let with_partner = |own: f32| {
        sts_f32_if(t >= TAIL_ORDER, partner, own);
        nvptx::_syncthreads();
        own + lds_f32(partner)
    };

    let p0 = load_pair(0);
    let g0 = weights(p0.0);
    let mut ss = with_partner(pair_sq(p0));
    let mut first = round;
    while first < blocks {
        let own = pair_sq(load_pair(first));
        nvptx::_syncthreads();
        ss += with_partner(own);
        first += round;
    }
    let scale = 1.0 / sqrt(block_sum::<TAIL_ORDER>(ss) / n as f32 + eps);

    let store = |((b, live), x_lo, x_hi): ((u32, bool), [f32; 4], [f32; 4]),
                 (g_lo, g_hi): ([f32; 4], [f32; 4])| {
        let lo = LANES_PER_BLOCK * b + t % PAIR_LANES;
        let v_lo = normalized(x_lo, g_lo, scale);
        let v_hi = normalized(x_hi, g_hi, scale);
        st_v4_f32_if(live, yfr + lo as u64 * 16, v_lo);
        st_v4_f32_if(live, yfr + (lo + PAIR_LANES) as u64 * 16, v_hi);
        quantize_pair_store(v_lo, v_hi, yr, b, t % PAIR_LANES, live);
    };
    store(p0, g0);
    let mut first = round;
    while first < blocks {
        let a = load_pair(first);
        let ga = weights(a.0);
        store(a, ga);
        first += round;
    }
}

#[inline(always)]
fn sum_sq(v: [f32; 4]) -> f32 {
    v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3]
}

/// `(x·scale)·g`, the order of ggml's `rms_norm` then `mul`.
#[inline(always)]
fn normalized(x: [f32; 4], g: [f32; 4], scale: f32) -> [f32; 4] {
    [
        (x[0] * scale) * g[0],
        (x[1] * scale) * g[1],
        (x[2] * scale) * g[2],
        (x[3] * scale) * g[3],
    ]
}

/// The sum over the first `BLOCK` threads of the block of their `ss`: per warp with shuffles,
/// then across those `BLOCK/32` warps through `rmsnorm_q8_1_partials` (one barrier; every
/// thread of the block, at most 8 warps, must call it; warps past `BLOCK` fill unread slots).
#[inline(always)]
unsafe fn block_sum<const BLOCK: u32>(ss: f32) -> f32 {
    const { assert!(BLOCK.is_multiple_of(WARP_SIZE) && BLOCK <= 8 * WARP_SIZE) };
    let t = tid();
    let ss = warp_sum(ss);
    let partials = partials_addr();
    if t % WARP_SIZE == 0 {
        asm!("st.shared.f32 [{a}], {v};", a = in(reg32) partials + (t / WARP_SIZE) * 4,
             v = in(reg32) ss, options(nostack));
    }
    nvptx::_syncthreads();
    let mut total = 0.0f32;
    let mut k = 0;
    while k < BLOCK / WARP_SIZE {
        let p: f32;
        asm!("ld.shared.f32 {p}, [{a}];", p = out(reg32) p, a = in(reg32) partials + k * 4,
             options(readonly, nostack));
        total += p;
        k += 1;
    }
    total
}

/// `max |v[k]|`.
#[inline(always)]
pub(crate) fn abs_max(v: [f32; 4]) -> f32 {
    v[0].abs().max(v[1].abs()).max(v[2].abs()).max(v[3].abs())
}

/// The q8_1 block's `amax` and `Σ` from each lane's partial `amax` and four partial sums: the
/// butterfly levels over lanes `xor first_m, first_m/2, … 1`, then the in-thread pairs (0, 2),
/// (1, 3) and the two halves: ggml's order over element indices (xor 16, 8, 4, 2, 1) when
/// element `e` of the block is component `e % 4` of lane-chunk `e / 4` (see quantize.rs).
#[inline(always)]
pub(crate) fn block_amax_sum(mut amax: f32, mut s: [f32; 4], first_m: u32) -> (f32, f32) {
    let mut m = first_m;
    while m > 0 {
        amax = amax.max(shfl_xor_f32(amax, m));
        s[0] += shfl_xor_f32(s[0], m);
        s[1] += shfl_xor_f32(s[1], m);
        s[2] += shfl_xor_f32(s[2], m);
        s[3] += shfl_xor_f32(s[3], m);
        m >>= 1;
    }
    (amax, (s[0] + s[2]) + (s[1] + s[3]))
}

/// The four quants `roundf(v[k] / d)` as one word, `v[0]` lowest. No branch for `amax = 0`
/// (`d = 0`): every value is then ±0 (or NaN), 0/0 is NaN and converts to 0, ggml's q = 0, so
/// the same instructions run on any data (zeros too, and the simulator's counts on zero weights
/// include the rounding).
#[inline(always)]
pub(crate) fn quants(v: [f32; 4], d: f32) -> u32 {
    pack_low_bytes([
        round_away_i32(v[0] / d),
        round_away_i32(v[1] / d),
        round_away_i32(v[2] / d),
        round_away_i32(v[3] / d),
    ])
}

/// Quantizes thread chunk `c` (values `4c..4c+4`) as part of q8_1 block `c/8`, reducing amax
/// and Σ over the block's 8 lanes exactly as `quantize.rs` does, and stores it if `store`.
#[inline(always)]
pub(crate) unsafe fn quantize_store(v: [f32; 4], yr: u64, c: u32, store: bool) {
    // Same butterfly order as ggml's per-element reduction (see quantize.rs).
    let (amax, sum) = block_amax_sum(abs_max(v), v, LANES_PER_BLOCK / 2);
    let d = amax / 127.0;
    let packed = quants(v, d);
    if store {
        let block = yr + (c / LANES_PER_BLOCK) as u64 * size_of::<BlockQ8_1>() as u64;
        let lane_in_block = c % LANES_PER_BLOCK;
        st_u32(
            block + offset_of!(BlockQ8_1, qs) as u64 + 4 * lane_in_block as u64,
            packed,
        );
        if lane_in_block == 0 {
            st_u32(
                block + offset_of!(BlockQ8_1, d) as u64,
                f32_to_f16(d) | (f32_to_f16(sum) << 16),
            );
        }
    }
}

/// Threads per q8_1 block in [`quantize_pair_store`].
pub(crate) const PAIR_LANES: u32 = LANES_PER_BLOCK / 2;

/// [`quantize_store`] with two chunks per thread: lane `i < 4` of q8_1 block `b` holds chunks
/// `i` (`lo`, values `4i .. 4i+4`) and `i + 4` (`hi`, values `16 + 4i ..`), and stores them if
/// `store`. The same butterfly, so the same bits: its first level (values `e` and `e + 16`) is
/// `lo + hi` in-thread, the other two are shuffles over the block's four lanes.
#[inline(always)]
pub(crate) unsafe fn quantize_pair_store(
    lo: [f32; 4],
    hi: [f32; 4],
    yr: u64,
    b: u32,
    i: u32,
    store: bool,
) {
    let (amax, sum) = block_amax_sum(
        abs_max(lo).max(abs_max(hi)),
        [lo[0] + hi[0], lo[1] + hi[1], lo[2] + hi[2], lo[3] + hi[3]],
        PAIR_LANES / 2,
    );
    let d = amax / 127.0;
    let (q_lo, q_hi) = (quants(lo, d), quants(hi, d));
    if store {
        let block = yr + b as u64 * size_of::<BlockQ8_1>() as u64;
        let qs = block + offset_of!(BlockQ8_1, qs) as u64 + 4 * i as u64;
        st_u32(qs, q_lo);
        st_u32(qs + 4 * PAIR_LANES as u64, q_hi);
        if i == 0 {
            st_u32(
                block + offset_of!(BlockQ8_1, d) as u64,
                f32_to_f16(d) | (f32_to_f16(sum) << 16),
            );
        }
    }
}

/// [`quantize_store`] into a shared-memory stage at shared address `stage`: lane chunk `c` (values
/// `4c .. 4c+4`) of q8_1 block `c / 8`, every lane of the warp taking part. A copy of its
/// arithmetic (same butterfly, same rounding, so the same bits) rather than a generic store: a
/// store-generic `quantize_store` moved ptxas's block layout in every kernel with a norm tail
/// (`moe_down_q4k_q4k` 103 -> 128 registers on sm_86).
#[inline(always)]
pub(crate) unsafe fn quantize_store_shared(v: [f32; 4], stage: u32, c: u32) {
    let (amax, sum) = block_amax_sum(abs_max(v), v, LANES_PER_BLOCK / 2);
    let d = amax / 127.0;
    let packed = quants(v, d);
    let block = stage + (c / LANES_PER_BLOCK) * size_of::<BlockQ8_1>() as u32;
    let lane_in_block = c % LANES_PER_BLOCK;
    sts_u32(
        block + offset_of!(BlockQ8_1, qs) as u32 + 4 * lane_in_block,
        packed,
    );
    if lane_in_block == 0 {
        sts_u32(
            block + offset_of!(BlockQ8_1, d) as u32,
            f32_to_f16(d) | (f32_to_f16(sum) << 16),
        );
    }
}
