//! `attn_merge`: combines the segments `flash_latent` wrote for this step into the normalized
//! latent attention output (spec §7.2, ggml's `flash_attn_combine_results` in base 2):
//! `o_lat[h] = Σ_s 2^(m_s − M)·O_s / Σ_s 2^(m_s − M)·l_s`, `M = max_s m_s`.
//!
//! Thread mapping: one block per head; thread `i` owns latent dims `4i .. 4i+4` and walks the
//! segments in order (one 16-byte load of `O_s` and one 8-byte load of `(m_s, l_s)` each).
//! The segment count is re-derived from `StepState::pos` exactly as `flash_latent` derived it.
//! `attn_merge_q8_1` is the same merge with a q8_1 epilogue: a q8_1 block is 32 dims, i.e. the
//! 8 consecutive threads of a warp-aligned group, which reduce its scale and sum by shuffles.

use crate::intrinsics::{bid, exp2, fma, global, ld_u32, ld_v2_f32, ld_v4_f32, st_v4_f32, tid};
use crate::norm_q8::quantize_store;
use core::mem::{offset_of, size_of};
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::flash_segments;
use ingot_abi::step::StepState;

/// See the module docs and `ingot_abi::launch::ATTN_MERGE` for the contract.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn attn_merge(
    part_o: *const f32,
    part_ml: *const f32,
    state: *const StepState,
    o_lat: *mut f32,
    n_head: u32,
    kv_lora: u32,
    ctx: u32,
    max_segments: u32,
) {
    let d = 4 * tid();
    if d >= kv_lora {
        return;
    }
    let h = bid();
    let v = merge4(part_o, part_ml, state, n_head, kv_lora, ctx, max_segments);
    st_v4_f32(
        global(o_lat) + (h as u64 * kv_lora as u64 + d as u64) * 4,
        v,
    );
}

/// `attn_merge` with `o_lat` written as q8_1 blocks, `kv_lora/32` per head (the grouped
/// `attn_v_b` gemv's input): the bits `quantize_q8_1` gives for `attn_merge`'s f32 output. See
/// `ingot_abi::launch::ATTN_MERGE_Q8_1`.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn attn_merge_q8_1(
    part_o: *const f32,
    part_ml: *const f32,
    state: *const StepState,
    o_lat_q8: *mut BlockQ8_1,
    n_head: u32,
    kv_lora: u32,
    ctx: u32,
    max_segments: u32,
) {
    let c = tid();
    let h = bid();
    // Every thread takes part in the 8-lane shuffles of the quantization; `kv_lora` is a
    // multiple of 32, so a block's 8 lanes are all in range or all out of it.
    let active = 4 * c < kv_lora;
    let v = if active {
        merge4(part_o, part_ml, state, n_head, kv_lora, ctx, max_segments)
    } else {
        [0.0; 4]
    };
    let row = global(o_lat_q8)
        + h as u64 * (kv_lora / QK8_1 as u32) as u64 * size_of::<BlockQ8_1>() as u64;
    quantize_store(v, row, c, active);
}

/// Head `bid`'s latent dims `4·tid .. 4·tid+4` merged over this step's segments (NaN when
/// `pos ≥ ctx`, so a step past the cache is visible downstream). Requires `4·tid < kv_lora`.
#[inline(always)]
unsafe fn merge4(
    part_o: *const f32,
    part_ml: *const f32,
    state: *const StepState,
    n_head: u32,
    kv_lora: u32,
    ctx: u32,
    max_segments: u32,
) -> [f32; 4] {
    let d = 4 * tid();
    let h = bid();
    let pos = ld_u32(global(state) + offset_of!(StepState, pos) as u64);
    if pos >= ctx {
        return [f32::NAN; 4];
    }
    let count = flash_segments(pos + 1, max_segments).count;
    let ml = global(part_ml) + h as u64 * 8;
    let ml_stride = n_head as u64 * 8;
    let po = global(part_o) + (h as u64 * kv_lora as u64 + d as u64) * 4;
    let po_stride = n_head as u64 * kv_lora as u64 * 4;

    let mut mx = f32::NEG_INFINITY;
    let mut s = 0;
    while s < count {
        mx = mx.max(ld_v2_f32(ml + s as u64 * ml_stride)[0]);
        s += 1;
    }
    let mut den = 0.0f32;
    let mut acc = [0.0f32; 4];
    let mut s = 0;
    while s < count {
        let [m, l] = ld_v2_f32(ml + s as u64 * ml_stride);
        let o = ld_v4_f32(po + s as u64 * po_stride);
        let w = exp2(m - mx);
        den = fma(w, l, den);
        let mut e = 0;
        while e < 4 {
            acc[e] = fma(w, o[e], acc[e]);
            e += 1;
        }
        s += 1;
    }
    let inv = 1.0 / den;
    [acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv]
}
