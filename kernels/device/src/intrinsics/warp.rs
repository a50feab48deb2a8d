//! Warp shuffles and reductions. Every lane of the warp must execute each of them.

use core::arch::asm;

/// Butterfly shuffle over the full warp. Every lane of the warp must execute it (not marked
/// `pure`, so LLVM never sinks it into a branch).
#[inline(always)]
pub fn shfl_xor_f32(v: f32, lane_mask: u32) -> f32 {
    let d: f32;
    // SAFETY: register-only warp instruction; callers keep the whole warp converged.
    unsafe {
        asm!("shfl.sync.bfly.b32 {d}, {v}, {m}, 0x1f, 0xffffffff;", d = out(reg32) d,
             v = in(reg32) v, m = in(reg32) lane_mask, options(nomem, nostack));
    }
    d
}

/// Lane `src`'s `v` (`shfl.sync.idx.b32`); the whole warp must execute it.
#[inline(always)]
pub fn shfl_idx_f32(v: f32, src: u32) -> f32 {
    let d: f32;
    // SAFETY: register-only warp instruction; callers keep the whole warp converged.
    unsafe {
        asm!("shfl.sync.idx.b32 {d}, {v}, {s}, 0x1f, 0xffffffff;", d = out(reg32) d,
             v = in(reg32) v, s = in(reg32) src, options(nomem, nostack));
    }
    d
}

/// Lane `src`'s `v` (`shfl.sync.idx.b32`); the whole warp must execute it.
#[inline(always)]
pub fn shfl_idx_u32(v: u32, src: u32) -> u32 {
    shfl_idx_f32(f32::from_bits(v), src).to_bits()
}

/// `v` of lane `src` of the warp (`shfl.sync.idx`). Every lane of the warp must execute it.
#[inline(always)]
pub fn shfl_idx(v: u32, src: u32) -> u32 {
    let d: u32;
    // SAFETY: register-only warp instruction; callers keep the whole warp converged.
    unsafe {
        asm!("shfl.sync.idx.b32 {d}, {v}, {s}, 0x1f, 0xffffffff;", d = out(reg32) d,
             v = in(reg32) v, s = in(reg32) src, options(nomem, nostack));
    }
    d
}

/// Sum over all 32 lanes; every lane receives the same value.
#[inline(always)]
pub fn warp_sum(mut v: f32) -> f32 {
    let mut m = 16;
    while m > 0 {
        v += shfl_xor_f32(v, m);
        m >>= 1;
    }
    v
}

/// Sum over aligned groups of `lanes` lanes (a power of two ≤ 32); every lane of a group gets
/// its group's sum. Every lane of the warp must execute it.
#[inline(always)]
pub fn sub_sum(mut v: f32, lanes: u32) -> f32 {
    let mut m = lanes / 2;
    while m > 0 {
        v += shfl_xor_f32(v, m);
        m >>= 1;
    }
    v
}

/// Sum over the 16 lanes of each half-warp; every lane receives its half's value.
#[inline(always)]
pub fn half_warp_sum(mut v: f32) -> f32 {
    let mut m = 8;
    while m > 0 {
        v += shfl_xor_f32(v, m);
        m >>= 1;
    }
    v
}

/// Maximum of `v` over the 32 lanes (butterfly of `max.f32`, which ignores a NaN operand).
#[inline(always)]
pub fn warp_max_f32(mut v: f32) -> f32 {
    let mut m = 16;
    while m > 0 {
        v = v.max(shfl_xor_f32(v, m));
        m >>= 1;
    }
    v
}

/// `max` over the 16 lanes of each half-warp; every lane receives its half's value.
#[inline(always)]
pub fn half_warp_max(mut v: f32) -> f32 {
    let mut m = 8;
    while m > 0 {
        v = v.max(shfl_xor_f32(v, m));
        m >>= 1;
    }
    v
}

/// `max` over aligned groups of `lanes` lanes (a power of two ≤ 32); every lane of a group gets
/// its group's maximum. Every lane of the warp must execute it.
#[inline(always)]
pub fn sub_max(mut v: f32, lanes: u32) -> f32 {
    let mut m = lanes / 2;
    while m > 0 {
        v = v.max(shfl_xor_f32(v, m));
        m >>= 1;
    }
    v
}

/// Maximum of `v` over the 32 lanes (`redux.sync.max.u32`); the whole warp must execute it.
#[inline(always)]
pub fn warp_max_u32(v: u32) -> u32 {
    let d: u32;
    // SAFETY: register-only warp instruction; callers keep the whole warp converged.
    unsafe {
        asm!("redux.sync.max.u32 {d}, {v}, 0xffffffff;", d = out(reg32) d, v = in(reg32) v,
             options(nomem, nostack));
    }
    d
}

/// Minimum of `v` over the 32 lanes (`redux.sync.min.u32`); the whole warp must execute it.
#[inline(always)]
pub fn warp_min_u32(v: u32) -> u32 {
    let d: u32;
    // SAFETY: register-only warp instruction; callers keep the whole warp converged.
    unsafe {
        asm!("redux.sync.min.u32 {d}, {v}, 0xffffffff;", d = out(reg32) d, v = in(reg32) v,
             options(nomem, nostack));
    }
    d
}

/// The lanes where `p` holds, as a mask (`vote.sync.ballot.b32`, bit `l` for lane `l`); the
/// whole warp must execute it.
#[inline(always)]
pub fn ballot(p: bool) -> u32 {
    let d: u32;
    // SAFETY: register-only warp instruction; callers keep the whole warp converged.
    unsafe {
        asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; vote.sync.ballot.b32 {d}, p, 0xffffffff; }}",
             c = in(reg32) p as u32, d = out(reg32) d, options(nomem, nostack));
    }
    d
}

/// `bar.warp.sync`: the warp's lanes meet here, and their shared-memory accesses before it are
/// ordered before those after it. The whole warp must execute it.
#[inline(always)]
pub fn syncwarp() {
    // SAFETY: a warp barrier; callers keep the whole warp converged.
    unsafe {
        asm!("bar.warp.sync 0xffffffff;", options(nostack));
    }
}
