//! `attn_merge`: combines the segments `flash_latent` wrote for this step into the normalized
//! latent attention output (ggml's `flash_attn_combine_results` in base 2): with `ō_s = O_s / l_s`
//! the segment's normalized output (f16 in `part_o`),
//! `o_lat[h] = Σ_s 2^(m_s − M)·l_s·ō_s / Σ_s 2^(m_s − M)·l_s`, `M = max_s m_s`.
//!
//! Thread mapping: block `b` merges one `MERGE_DIMS`-wide slice of one head (see
//! `ingot_abi::launch::merge_items`); lane `i` of every warp owns the slice's dims `4i .. 4i+4`.
//! The segment count is re-derived from `StepState::pos` exactly as `flash_latent` derived it.
//!
//! The merge is latency-bound (a deep context's ~65 segments are 16 KB each, L2-resident), so
//! it is laid out for memory-level parallelism rather than one serial walk per thread:
//! 1. `M`: every warp reads the `m_s` of all segments, `MAX_UNROLL` per lane with independent
//!    predicated loads, and reduces them with a butterfly (`max` is order-independent, so `M`
//!    and every weight `2^(m_s − M)` are the very values a serial walk gives).
//! 2. Warp `w` sums the weighted `ō_s` and `l_s` of segments `w, w + MERGE_WARPS, ...`, issuing
//!    the loads of `UNROLL` segments before using any (predicated, so no remainder loop and no
//!    guard in the loop).
//! 3. The warps' partial sums meet in shared memory and warp 0 adds them in warp order, so the
//!    result is deterministic; only the summation order differs from a serial walk.
//!
//! `attn_merge_q8_1` is the same merge with a q8_1 epilogue: a q8_1 block is 32 dims, i.e. the
//! 8 consecutive lanes of warp 0, which reduce its scale and sum by shuffles.

use crate::intrinsics::{
    bid, exp2, fma, global, h2_to_f32, ld_u32, ld_v2_f32_or, ld_v2_if, lds_f32, lds_v4_f32,
    st_v4_f32, sts_f32, sts_v4, tid, warp_max_f32,
};
use crate::norm_q8::quantize_store;
use core::arch::{asm, global_asm, nvptx};
use core::mem::{offset_of, size_of};
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::{flash_segments, MERGE_DIMS, MERGE_WARPS, WARP_SIZE};
use ingot_abi::step::StepState;

/// Shared memory: the warps' partial sums `[MERGE_WARPS][MERGE_DIMS]` f32, then their
/// denominators `[MERGE_WARPS]` f32.
const PARTIALS: u32 = 0;
const DENS: u32 = PARTIALS + MERGE_WARPS * MERGE_DIMS * 4;
pub(crate) const SMEM_BYTES: u32 = DENS + MERGE_WARPS * 4;
const _: () = assert!(
    SMEM_BYTES == 4128,
    "keep the .shared declaration below in step"
);
const _: () = assert!(MERGE_DIMS == 4 * WARP_SIZE);
global_asm!(".shared .align 16 .b8 attn_merge_partials[4128];");

/// Segments one warp has in flight per iteration of the weighted sum.
const UNROLL: u32 = 4;
/// `m_s` loads one lane has in flight per iteration of the max pass (stride 32 segments).
const MAX_UNROLL: u32 = 4;

/// `(m, l)` of a segment slot past the last segment: neutral for the max and the sums.
const ABSENT: [f32; 2] = [f32::NEG_INFINITY, 0.0];

const POS_OFF: u64 = offset_of!(StepState, pos) as u64;

#[inline(always)]
unsafe fn smem_base() -> u32 {
    let a: u32;
    asm!("mov.u32 {a}, attn_merge_partials;", a = out(reg32) a, options(pure, nomem, nostack));
    a
}

/// This block's head and this lane's 4-dim chunk `c` within the head (dims `4c .. 4c+4`).
#[inline(always)]
fn slice(kv_lora: u32) -> (u32, u32) {
    let slices = kv_lora.div_ceil(MERGE_DIMS);
    let b = bid();
    (
        b / slices,
        (b % slices) * (MERGE_DIMS / 4) + tid() % WARP_SIZE,
    )
}

/// See the module docs and `ingot_abi::launch::ATTN_MERGE` for the contract.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn attn_merge(
    part_o: *const u16,
    part_ml: *const f32,
    state: *const StepState,
    o_lat: *mut f32,
    n_head: u32,
    kv_lora: u32,
    ctx: u32,
    max_segments: u32,
) {
    let (h, c) = slice(kv_lora);
    let Some(v) = merge4(
        part_o,
        part_ml,
        state,
        n_head,
        kv_lora,
        ctx,
        max_segments,
        h,
        c,
        smem_base(),
    ) else {
        return;
    };
    let d = 4 * c;
    if d < kv_lora {
        st_v4_f32(
            global(o_lat) + (h as u64 * kv_lora as u64 + d as u64) * 4,
            v,
        );
    }
}

/// `attn_merge` with `o_lat` written as q8_1 blocks, `kv_lora/32` per head (the grouped
/// `attn_v_b` gemv's input): the bits `quantize_q8_1` gives for `attn_merge`'s f32 output. See
/// `ingot_abi::launch::ATTN_MERGE_Q8_1`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn attn_merge_q8_1(
    part_o: *const u16,
    part_ml: *const f32,
    state: *const StepState,
    o_lat_q8: *mut BlockQ8_1,
    n_head: u32,
    kv_lora: u32,
    ctx: u32,
    max_segments: u32,
) {
    let (h, c) = slice(kv_lora);
    let Some(v) = merge4(
        part_o,
        part_ml,
        state,
        n_head,
        kv_lora,
        ctx,
        max_segments,
        h,
        c,
        smem_base(),
    ) else {
        return;
    };
    // Every lane of warp 0 takes part in the 8-lane shuffles of the quantization; `kv_lora` and
    // `MERGE_DIMS` are multiples of 32, so a block's 8 lanes are all in range or all out of it.
    let active = 4 * c < kv_lora;
    let v = if active { v } else { [0.0; 4] };
    let row = global(o_lat_q8)
        + h as u64 * (kv_lora / QK8_1 as u32) as u64 * size_of::<BlockQ8_1>() as u64;
    quantize_store(v, row, c, active);
}

/// Head `h`'s latent dims `4c .. 4c+4` merged over this step's segments (NaN when
/// `pos ≥ ctx`, so a step past the cache is visible downstream), returned to warp 0 only
/// (`None` elsewhere, after the block's barrier). Lanes with `4c ≥ kv_lora` read no `part_o`
/// and get 0 (NaN past the cache). `smem` is the shared address of [`SMEM_BYTES`] bytes
/// (16-byte aligned) the warps' partial sums meet in; warp 0 reads it after the barrier, so a
/// caller that merges again at once must pass another buffer (the next call's barrier then
/// orders warp 0's reads before the third call's writes).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn merge4(
    part_o: *const u16,
    part_ml: *const f32,
    state: *const StepState,
    n_head: u32,
    kv_lora: u32,
    ctx: u32,
    max_segments: u32,
    h: u32,
    c: u32,
    smem: u32,
) -> Option<[f32; 4]> {
    let warp = tid() / WARP_SIZE;
    let lane = tid() % WARP_SIZE;
    let pos = ld_u32(global(state) + POS_OFF);
    if pos >= ctx {
        // Uniform over the block: no thread reaches the barrier below.
        return if warp == 0 { Some([f32::NAN; 4]) } else { None };
    }
    let count = flash_segments(pos + 1, max_segments).count;
    let ml = global(part_ml) + h as u64 * 8;
    let ml_stride = n_head as u64 * 8;

    // 1. M = max_s m_s, all loads of an iteration issued before any is used.
    let mut mx = f32::NEG_INFINITY;
    let mut base = 0;
    while base < count {
        let mut m = [f32::NEG_INFINITY; MAX_UNROLL as usize];
        let mut j = 0;
        while j < MAX_UNROLL {
            let s = base + j * WARP_SIZE + lane;
            m[j as usize] = ld_v2_f32_or(s < count, ml + s as u64 * ml_stride, ABSENT)[0];
            j += 1;
        }
        let mut j = 0;
        while j < MAX_UNROLL {
            mx = mx.max(m[j as usize]);
            j += 1;
        }
        base += MAX_UNROLL * WARP_SIZE;
    }
    let mx = warp_max_f32(mx);

    // 2. This warp's share of Σ_s 2^(m_s − M)·(O_s, l_s).
    let d = 4 * c;
    let active = d < kv_lora;
    let po = global(part_o) + (h as u64 * kv_lora as u64 + d as u64) * 2;
    let po_stride = n_head as u64 * kv_lora as u64 * 2;
    let mut den = 0.0f32;
    let mut acc = [0.0f32; 4];
    // Addresses of segment `s0` and the step between a warp's segments, advanced per
    // iteration (no 64-bit multiply per load).
    let (o_step, ml_step) = (
        MERGE_WARPS as u64 * po_stride,
        MERGE_WARPS as u64 * ml_stride,
    );
    let mut o_at = po + warp as u64 * po_stride;
    let mut ml_at = ml + warp as u64 * ml_stride;
    let mut s0 = warp;
    while s0 < count {
        let mut ml_s = [[0.0f32; 2]; UNROLL as usize];
        let mut o_s = [[0u32; 2]; UNROLL as usize];
        let mut j = 0;
        while j < UNROLL {
            let p = s0 + j * MERGE_WARPS < count;
            ml_s[j as usize] = ld_v2_f32_or(p, ml_at + j as u64 * ml_step, ABSENT);
            o_s[j as usize] = ld_v2_if(p & active, o_at + j as u64 * o_step);
            j += 1;
        }
        o_at += UNROLL as u64 * o_step;
        ml_at += UNROLL as u64 * ml_step;
        let mut j = 0;
        while j < UNROLL {
            // A slot past the last segment has m = -inf, l = 0 and ō = 0, so weight
            // 2^-inf·0 = 0 and it adds exact zeros (acc starts at +0, so no sign of zero
            // changes either).
            let [m, l] = ml_s[j as usize];
            let w = exp2(m - mx) * l;
            den += w;
            let [o0, o1] = h2_to_f32(o_s[j as usize][0]);
            let [o2, o3] = h2_to_f32(o_s[j as usize][1]);
            let o = [o0, o1, o2, o3];
            let mut e = 0;
            while e < 4 {
                acc[e] = fma(w, o[e], acc[e]);
                e += 1;
            }
            j += 1;
        }
        s0 += UNROLL * MERGE_WARPS;
    }

    // 3. Warp 0 adds the warps' partials in warp order.
    sts_v4(
        smem + PARTIALS + (warp * MERGE_DIMS + 4 * lane) * 4,
        [
            acc[0].to_bits(),
            acc[1].to_bits(),
            acc[2].to_bits(),
            acc[3].to_bits(),
        ],
    );
    if lane == 0 {
        sts_f32(smem + DENS + warp * 4, den);
    }
    nvptx::_syncthreads();
    if warp != 0 {
        return None;
    }
    let mut sum = [0.0f32; 4];
    let mut den = 0.0f32;
    let mut w = 0;
    while w < MERGE_WARPS {
        let a = lds_v4_f32(smem + PARTIALS + (w * MERGE_DIMS + 4 * lane) * 4);
        let mut e = 0;
        while e < 4 {
            sum[e] += a[e];
            e += 1;
        }
        den += lds_f32(smem + DENS + w * 4);
        w += 1;
    }
    let inv = 1.0 / den;
    Some([sum[0] * inv, sum[1] * inv, sum[2] * inv, sum[3] * inv])
}
