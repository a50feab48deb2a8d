//! `rope_kv`: everything of one token's attention that only needs the two projection outputs —
//! the rotation of every head's query rope part (docs/decode-math.md#mla-attention step 4,
//! docs/decode-math.md#rope) and the latent cache row `[rmsnorm(c) | rope(k_pe)]` at
//! `StepState::pos` (steps 5-6), as f16 or as q8_0 blocks (`crate::attention::cache_q8`). Fused
//! because all of it is a few KB of element-wise work that one block does in a single pass.
//!
//! Angles: `θ_i = pos·rope_freq[i]` in f64 (exact integer position times the host's f64 table),
//! reduced modulo 2π in f64, then `sin.approx`/`cos.approx` on the reduced f32 argument, so the
//! rotation stays accurate to ~1e-6 at any position (f32 `pos·freq` would already be off by
//! 2.4e-4 rad at pos 4096).
//!
//! Thread mapping: one block of `BLOCK` threads (`ROPE_KV_THREADS` in the `rope_kv` kernels; the
//! gemv's block in the tail of the `gemv2_rope_*` kernels, see `crate::gemv`); thread `t` takes
//! query pairs `t, t + BLOCK, …` (pair index over all heads), the float4 chunks `t, t + BLOCK, …`
//! of `c`, and k_pe pair `t` (`n_rope/2 ≤ 32 ≤ BLOCK`). Σc² is reduced per warp with shuffles,
//! then across warps through shared memory.

use super::cache_q8::store_q8_0_value;
use crate::intrinsics::{
    bid, cos, f32_to_f16, fma, global, ld_f64, ld_u32, ld_v2_f32, ld_v2_f32_relaxed, ld_v4_f32,
    ld_v4_f32_relaxed, rint_f64, select_f32, shfl_idx_f32, sin, sqrt, st_u32, st_v2_f32, st_v2_u32,
    tid, warp_sum,
};
use crate::norm_q8::{quantize_pair_store, PAIR_LANES};
use core::arch::{asm, global_asm, nvptx};
use core::f64::consts::TAU;
use core::mem::{offset_of, size_of};
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::{CacheType, ROPE_KV_THREADS, WARP_SIZE};
use ingot_abi::step::StepState;

/// Most warps of a block that runs the rope: `rope_kv_partials` holds one f32 per warp.
const MAX_WARPS: u32 = 8;
const _: () = assert!(ROPE_KV_THREADS / WARP_SIZE <= MAX_WARPS);

// One f32 partial Σc² per warp.
global_asm!(".shared .align 16 .b8 rope_kv_partials[32];");

/// 2π split so that `k·TAU_HI` is exact for |k| < 2^21 (positions up to ~13 M at frequency 1):
/// TAU_HI keeps 32 significant bits, TAU_LO is the f64 rest.
const TAU_HI: f64 = f64::from_bits(TAU.to_bits() & !((1u64 << 21) - 1));
const TAU_LO: f64 = TAU - TAU_HI;
const INV_TAU: f64 = 1.0 / TAU;

/// `(mscale·cos θ, mscale·sin θ)` of pair `i` at `pos`.
#[inline(always)]
unsafe fn cos_sin(freq: u64, pos: u32, i: u32, mscale: f32) -> (f32, f32) {
    let theta = pos as f64 * ld_f64(freq + i as u64 * 8);
    let k = rint_f64(theta * INV_TAU);
    let r = ((theta - k * TAU_HI) - k * TAU_LO) as f32;
    (cos(r) * mscale, sin(r) * mscale)
}

/// `StepState::pos` of the step state at `state`.
#[inline(always)]
pub(crate) unsafe fn step_pos(state: *const StepState) -> u32 {
    ld_u32(global(state) + offset_of!(StepState, pos) as u64)
}

/// `(a, b)` rotated by the angle whose scaled cosine and sine are `(c, s)`.
#[inline(always)]
fn rotate(a: f32, b: f32, (c, s): (f32, f32)) -> (f32, f32) {
    (fma(a, c, -(b * s)), fma(a, s, b * c))
}

/// Two floats as an f16x2 word (low element first), each rounded to nearest even.
#[inline(always)]
fn pack_h2(lo: f32, hi: f32) -> u32 {
    f32_to_f16(lo) | (f32_to_f16(hi) << 16)
}

/// See the module docs and `ingot_abi::launch::ROPE_KV` for the contract. The host launcher
/// checks `n_rope ≤ 64` even, `d_nope` even, `kv_lora` a multiple of 8 and every buffer size.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn rope_kv(
    q: *const f32,
    kv: *const f32,
    kv_norm: *const f32,
    rope_freq: *const f64,
    state: *const StepState,
    q_pe: *mut f32,
    cache: *mut u16,
    n_head: u32,
    d_nope: u32,
    kv_lora: u32,
    n_rope: u32,
    ctx: u32,
    eps: f32,
    mscale: f32,
    cache_type: u32,
) {
    let dims = Dims {
        n_head,
        d_nope,
        kv_lora,
        n_rope,
        ctx,
        cache_type,
    };
    rope_kv_impl::<false, ROPE_KV_THREADS, false>(
        global(q),
        global(kv),
        global(kv_norm),
        global(rope_freq),
        step_pos(state),
        global(q_pe),
        0,
        global(cache),
        dims,
        eps,
        mscale,
    );
}

/// [`rope_kv`] that also writes every head's `q_nope` as q8_1 blocks into `q_nope_q8` (head
/// `h` at block `h·d_nope/32`): the input of the grouped `attn_k_b` gemv, bit-identical to
/// `quantize_q8_1` of each head's slice. See `ingot_abi::launch::ROPE_KV_Q8_1`; the launcher
/// also checks `d_nope` a multiple of 32 and `n_rope` of 4 (16-byte aligned head slices).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn rope_kv_q8_1(
    q: *const f32,
    kv: *const f32,
    kv_norm: *const f32,
    rope_freq: *const f64,
    state: *const StepState,
    q_pe: *mut f32,
    q_nope_q8: *mut BlockQ8_1,
    cache: *mut u16,
    n_head: u32,
    d_nope: u32,
    kv_lora: u32,
    n_rope: u32,
    ctx: u32,
    eps: f32,
    mscale: f32,
    cache_type: u32,
) {
    let dims = Dims {
        n_head,
        d_nope,
        kv_lora,
        n_rope,
        ctx,
        cache_type,
    };
    rope_kv_impl::<true, ROPE_KV_THREADS, false>(
        global(q),
        global(kv),
        global(kv_norm),
        global(rope_freq),
        step_pos(state),
        global(q_pe),
        global(q_nope_q8),
        global(cache),
        dims,
        eps,
        mscale,
    );
}

/// [`rope_kv_q8_1`] for the tokens of a prefill chunk, one block per token: block `t` runs
/// the decode body on row `t` of `q`, `kv`, `q_pe` and `q_nope_q8` (token-major, each at the
/// stride of one token's decode buffer) at position `StepState::pos + t`, so every row is the
/// bits `rope_kv_q8_1` gives at that position. Blocks `t ≥ min(*rows, ntok)` write nothing.
/// See `ingot_abi::launch::ROPE_KV_Q8_1_ROWS`; the launcher checks the shapes as for
/// `rope_kv_q8_1` and the buffers for `ntok` rows.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn rope_kv_q8_1_rows(
    q: *const f32,
    kv: *const f32,
    kv_norm: *const f32,
    rope_freq: *const f64,
    state: *const StepState,
    rows: *const u32,
    q_pe: *mut f32,
    q_nope_q8: *mut BlockQ8_1,
    cache: *mut u16,
    n_head: u32,
    d_nope: u32,
    kv_lora: u32,
    n_rope: u32,
    ctx: u32,
    eps: f32,
    mscale: f32,
    cache_type: u32,
    ntok: u32,
) {
    let tok = bid();
    // Block-uniform, before the body's barrier: the whole block leaves together.
    if tok >= ld_u32(global(rows)).min(ntok) {
        return;
    }
    // Past u32::MAX the position saturates: still `≥ ctx`, so no cache row is written.
    let pos = step_pos(state).saturating_add(tok);
    let tok = tok as u64;
    let q_row = (n_head * (d_nope + n_rope)) as u64 * 4;
    let kv_row = (kv_lora + n_rope) as u64 * 4;
    let pe_row = (n_head * n_rope) as u64 * 4;
    let q8_row = (n_head * (d_nope / QK8_1 as u32)) as u64 * size_of::<BlockQ8_1>() as u64;
    let dims = Dims {
        n_head,
        d_nope,
        kv_lora,
        n_rope,
        ctx,
        cache_type,
    };
    rope_kv_impl::<true, ROPE_KV_THREADS, false>(
        global(q) + tok * q_row,
        global(kv) + tok * kv_row,
        global(kv_norm),
        global(rope_freq),
        pos,
        global(q_pe) + tok * pe_row,
        global(q_nope_q8) + tok * q8_row,
        global(cache),
        dims,
        eps,
        mscale,
    );
}

/// The shape of one token's attention inputs (see `ingot_abi::launch::ROPE_KV`).
pub(crate) struct Dims {
    pub(crate) n_head: u32,
    pub(crate) d_nope: u32,
    pub(crate) kv_lora: u32,
    pub(crate) n_rope: u32,
    pub(crate) ctx: u32,
    /// `CacheType::code` of the cache's row format.
    pub(crate) cache_type: u32,
}

/// The rope and cache write of the token at position `pos` with `BLOCK` threads (every thread
/// of the block must call it: it holds a barrier). Addresses are global and point at this
/// token's `q`, `kv`, `q_pe` and `q_nope_q8` rows; `cache` is the whole cache (row `pos` is
/// written when `pos < ctx`). With `COHERENT`, `q` and `kv` are read with
/// `.relaxed.gpu` loads, as a last-block-done tail must read what other blocks of its launch
/// wrote; otherwise with `ld.global.nc`. `q_nope_q8` is only written when `Q8`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn rope_kv_impl<const Q8: bool, const BLOCK: u32, const COHERENT: bool>(
    qg: u64,
    kvg: u64,
    wg: u64,
    freq: u64,
    pos: u32,
    qpe: u64,
    q_nope_q8: u64,
    cache: u64,
    Dims {
        n_head,
        d_nope,
        kv_lora,
        n_rope,
        ctx,
        cache_type,
    }: Dims,
    eps: f32,
    mscale: f32,
) {
    const { assert!(BLOCK.is_multiple_of(WARP_SIZE) && BLOCK <= MAX_WARPS * WARP_SIZE) };
    let load2 = |a: u64| {
        if COHERENT {
            ld_v2_f32_relaxed(a)
        } else {
            ld_v2_f32(a)
        }
    };
    let load4 = |a: u64| {
        if COHERENT {
            ld_v4_f32_relaxed(a)
        } else {
            ld_v4_f32(a)
        }
    };
    let t = tid();
    let pairs = n_rope / 2;

    // Query rope parts of all heads: pair `idx` is pair `i` of head `h`. The angle of pair
    // `t % pairs` is computed once per thread: when `pairs` divides BLOCK (every power-of-two
    // rope width up to 64, the family's 64 included) it is the angle of every pair the thread
    // rotates, and of the k_pe pair below; otherwise each pair computes its own. The sine and
    // cosine take f64 work that consumer GPUs run at 1/64 of the f32 rate.
    let q_stride = d_nope + n_rope;
    let pairs_nz = pairs.max(1);
    let own_i = t % pairs_nz;
    let own = cos_sin(freq, pos, own_i, mscale);
    // Two copies of the loop rather than a branch in it (no guard in the loop).
    let rotate_q = |angle: &dyn Fn(u32) -> (f32, f32)| {
        let mut idx = t;
        while idx < n_head * pairs {
            let h = idx / pairs;
            let i = idx - h * pairs;
            let [a, b] = load2(qg + (h * q_stride + d_nope + 2 * i) as u64 * 4);
            let (x, y) = rotate(a, b, angle(i));
            st_v2_f32(qpe + (h * n_rope + 2 * i) as u64 * 4, [x, y]);
            idx += BLOCK;
        }
    };
    if BLOCK % pairs_nz == 0 {
        rotate_q(&|_| own);
    } else {
        rotate_q(&|i| cos_sin(freq, pos, i, mscale));
    }

    // `per_head > 0` here lets the compiler drop the division-by-zero check inside the loop
    // (the launcher guarantees d_nope ≥ 32).
    let per_head = d_nope / QK8_1 as u32;
    if Q8 && per_head > 0 {
        // Query nope parts as q8_1, four threads per block ([`quantize_pair_store`]): q8_1
        // block `b` is block `j` of head `h`, and a head has `d_nope/32` of them. Every thread
        // runs every round so the 4-lane shuffles see whole groups (BLOCK is a multiple of 4).
        let blocks = n_head * per_head;
        let lane = t % PAIR_LANES;
        let mut base = 0;
        while base < blocks {
            let b = base + t / PAIR_LANES;
            let active = b < blocks;
            let (lo, hi) = if active {
                let h = b / per_head;
                let j = b - h * per_head;
                let at = qg + (h * q_stride + QK8_1 as u32 * j + 4 * lane) as u64 * 4;
                (load4(at), load4(at + 4 * PAIR_LANES as u64 * 4))
            } else {
                ([0.0; 4], [0.0; 4])
            };
            quantize_pair_store(lo, hi, q_nope_q8, b, lane, active);
            base += BLOCK / PAIR_LANES;
        }
    }

    // Σc² over the latent part.
    let chunks = kv_lora / 4;
    let mut ss = 0.0f32;
    let mut ch = t;
    while ch < chunks {
        let v = load4(kvg + ch as u64 * 16);
        ss = fma(
            v[0],
            v[0],
            fma(v[1], v[1], fma(v[2], v[2], fma(v[3], v[3], ss))),
        );
        ch += BLOCK;
    }
    ss = warp_sum(ss);
    let partials: u32;
    asm!("mov.u32 {a}, rope_kv_partials;", a = out(reg32) partials, options(pure, nomem, nostack));
    if t % WARP_SIZE == 0 {
        asm!("st.shared.f32 [{a}], {v};", a = in(reg32) partials + (t / WARP_SIZE) * 4,
             v = in(reg32) ss, options(nostack));
    }
    nvptx::_syncthreads();
    if pos >= ctx {
        return;
    }
    let mut total = 0.0f32;
    let mut w = 0;
    while w < BLOCK / WARP_SIZE {
        let p: f32;
        asm!("ld.shared.f32 {p}, [{a}];", p = out(reg32) p, a = in(reg32) partials + w * 4,
             options(readonly, nostack));
        total += p;
        w += 1;
    }
    let scale = 1.0 / sqrt(total / kv_lora as f32 + eps);

    let width = kv_lora + n_rope;
    if cache_type == CacheType::Q8_0.code() {
        // Cache row `pos` as q8_0: warp `w` quantizes blocks `w, w + warps, …`, lane `l` value
        // `32b + l` (the same products as the f16 row below; zero past the row).
        let blocks = CacheType::q8_0_blocks(width);
        let row = cache + pos as u64 * CacheType::Q8_0.row_bytes(width) as u64;
        let lane = t % WARP_SIZE;
        // Lane `p` of every warp holds pair `p`'s angle (`n_rope ≤ 64`: at most 32 pairs), and
        // a lane takes its pair's angle from there by shuffle. When the pairs divide a warp
        // that is `own` (pair `t % pairs`); otherwise one more angle per thread, before the loop.
        let lane_angle = if WARP_SIZE % pairs_nz == 0 {
            own
        } else {
            cos_sin(freq, pos, lane.min(pairs_nz - 1), mscale)
        };
        let mut b = t / WARP_SIZE;
        while b < blocks {
            let j = b * WARP_SIZE + lane;
            // Branch-free: every lane loads its pair from an address clamped into the buffers
            // and computes both candidates; selects keep the latent value, the rotated one, or
            // 0 past the row. `kv_lora` is even, so a pair never straddles the two parts. On
            // lanes whose value is not rotated the shuffled angle is some pair's, unselected.
            let odd = j & 1 == 1;
            let e = (j & !1).min(width - 2);
            let v = load2(kvg + e as u64 * 4);
            let g = ld_v2_f32(wg + e.min(kv_lora - 2) as u64 * 4);
            let latent = select_f32(odd, v[1] * scale * g[1], v[0] * scale * g[0]);
            let src = (e.saturating_sub(kv_lora) / 2).min(pairs_nz - 1);
            let angle = (
                shfl_idx_f32(lane_angle.0, src),
                shfl_idx_f32(lane_angle.1, src),
            );
            let (re, im) = rotate(v[0], v[1], angle);
            let roped = select_f32(odd, im, re);
            let x = select_f32(j < kv_lora, latent, select_f32(j < width, roped, 0.0));
            store_q8_0_value(row, blocks, b, lane, x);
            b += BLOCK / WARP_SIZE;
        }
        return;
    }

    // Cache row `pos`: normalized latent, then the rotated k_pe, as f16.
    let row = cache + pos as u64 * CacheType::F16.row_bytes(width) as u64;
    let mut ch = t;
    while ch < chunks {
        let v = load4(kvg + ch as u64 * 16);
        let g = ld_v4_f32(wg + ch as u64 * 16);
        st_v2_u32(
            row + ch as u64 * 8,
            [
                pack_h2(v[0] * scale * g[0], v[1] * scale * g[1]),
                pack_h2(v[2] * scale * g[2], v[3] * scale * g[3]),
            ],
        );
        ch += BLOCK;
    }
    if t < pairs {
        // `t < pairs`: the thread's own angle is pair `t`'s.
        let [a, b] = load2(kvg + (kv_lora + 2 * t) as u64 * 4);
        let (x, y) = rotate(a, b, own);
        st_u32(row + (kv_lora + 2 * t) as u64 * 2, pack_h2(x, y));
    }
}
