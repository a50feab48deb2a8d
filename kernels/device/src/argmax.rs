//! `argmax_step`: greedy choice of the next token from the lm_head logits, and the step-state
//! advance that makes the next replay of a captured decode graph process that token
//! (`StepState`: `next_token = token = argmax`, `pos += 1`, `steps_done += 1`).
//!
//! Order: the largest logit wins, the lowest index among equal logits (−0 equals +0), and NaN
//! ranks below every number (a row of NaNs yields token 0). Each candidate is a `u64` key
//! `orderable(logit) << 32 | !index`, so one unsigned maximum implements all three rules.
//!
//! Thread mapping: one block of `ARGMAX_THREADS` threads. Thread `t` scans the float4 chunks
//! `t, t + THREADS, …` (16-byte loads) and threads `0..n%4` the scalar tail; keys are reduced per
//! warp with shuffles, then across warps through a static shared array; thread 0 writes the
//! state. The kernel keeps no state between launches, so replays need no reset.
//!
//! [`finish`] is the same advance as the tail of the fused lm_head gemv (`gemv_argmax_*`), from
//! the key its rows folded into an 8-byte atomic maximum.

use crate::intrinsics::{
    global, ld_u32, ld_u64_relaxed, ld_v4_f32, shfl_xor_f32, st_u32, st_u64, tid,
};
use core::arch::{asm, global_asm, nvptx};
use core::mem::offset_of;
use ingot_abi::launch::{ARGMAX_THREADS as THREADS, WARP_SIZE};
use ingot_abi::step::StepState;

const WARPS: u32 = THREADS / WARP_SIZE;
const _: () = assert!(WARPS == 32, "argmax_partials below is sized for 32 warps");

// One u64 key per warp.
global_asm!(".shared .align 16 .b8 argmax_partials[256];");

#[inline(always)]
unsafe fn partials_addr() -> u32 {
    let a: u32;
    asm!("mov.u32 {a}, argmax_partials;", a = out(reg32) a, options(pure, nomem, nostack));
    a
}

/// The candidate key of logit `v` at index `i` (module docs).
#[inline(always)]
pub(crate) fn key(v: f32, i: u32) -> u64 {
    let bits = if v == 0.0 { 0 } else { v.to_bits() };
    let ord = if v.is_nan() {
        0
    } else if bits & 0x8000_0000 != 0 {
        !bits
    } else {
        bits | 0x8000_0000
    };
    (u64::from(ord) << 32) | u64::from(!i)
}

#[inline(always)]
fn shfl_xor_u64(v: u64, m: u32) -> u64 {
    let lo = shfl_xor_f32(f32::from_bits(v as u32), m).to_bits();
    let hi = shfl_xor_f32(f32::from_bits((v >> 32) as u32), m).to_bits();
    (u64::from(hi) << 32) | u64::from(lo)
}

/// `logits`: `n` floats (`n ≥ 1`); `state`: one `StepState`, read and advanced by thread 0.
/// Grid: one block.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn argmax_step(logits: *const f32, state: *mut StepState, n: u32) {
    let t = tid();
    let lg = global(logits);
    let chunks = n / 4;
    let mut best = 0u64;
    let mut c = t;
    while c < chunks {
        let v = ld_v4_f32(lg + c as u64 * 16);
        let i = 4 * c;
        best = best
            .max(key(v[0], i))
            .max(key(v[1], i + 1))
            .max(key(v[2], i + 2))
            .max(key(v[3], i + 3));
        c += THREADS;
    }
    let tail = 4 * chunks + t;
    if tail < n {
        best = best.max(key(f32::from_bits(ld_u32(lg + tail as u64 * 4)), tail));
    }

    let mut m = WARP_SIZE / 2;
    while m > 0 {
        best = best.max(shfl_xor_u64(best, m));
        m >>= 1;
    }
    let partials = partials_addr();
    if t.is_multiple_of(WARP_SIZE) {
        asm!("st.shared.u64 [{a}], {v};", a = in(reg32) partials + (t / WARP_SIZE) * 8,
             v = in(reg64) best, options(nostack));
    }
    nvptx::_syncthreads();
    if t == 0 {
        let mut k = 0;
        while k < WARPS {
            let p: u64;
            asm!("ld.shared.u64 {p}, [{a}];", p = out(reg64) p, a = in(reg32) partials + k * 8,
                 options(readonly, nostack));
            best = best.max(p);
            k += 1;
        }
        advance(state, !(best as u32));
    }
}

/// The tail of a fused lm_head gemv (`gemv_argmax_*`), run by its last block after every other
/// block has counted itself done: thread 0 turns the running maximum key at `acc` (global
/// address) into the next token, advances `state` as `argmax_step` does, and sets `acc` back to
/// 0 so the next replay starts clean. The key is read with a `.relaxed.gpu` load: the other
/// blocks' atomic maxima reached it before they counted themselves done.
#[inline(always)]
pub(crate) unsafe fn finish(acc: u64, state: *mut StepState) {
    if tid() != 0 {
        return;
    }
    let best = ld_u64_relaxed(acc);
    st_u64(acc, 0);
    advance(state, !(best as u32));
}

/// `next_token = token = next`, `pos += 1`, `steps_done += 1`.
#[inline(always)]
unsafe fn advance(state: *mut StepState, next: u32) {
    let sg = global(state);
    let pos = core::ptr::read_volatile(&(*state).pos);
    let steps = core::ptr::read_volatile(&(*state).steps_done);
    st_u32(sg + offset_of!(StepState, next_token) as u64, next);
    st_u32(sg + offset_of!(StepState, token) as u64, next);
    st_u32(sg + offset_of!(StepState, pos) as u64, pos.wrapping_add(1));
    st_u32(
        sg + offset_of!(StepState, steps_done) as u64,
        steps.wrapping_add(1),
    );
}
