//! Thin wrappers around single PTX instructions that LLVM does not emit on its own in the form
//! the kernels need (non-coherent vector loads, dp4a, warp shuffles, half conversions).
//!
//! Global addresses are plain `u64`s obtained once per kernel from [`global`]; all loads go
//! through `ld.global.nc` (read-only data cache), so they must only read buffers that no thread
//! writes during the same launch.

use core::arch::asm;
use core::arch::nvptx;

/// Converts a generic pointer parameter to a global-state-space address.
#[inline(always)]
pub fn global<T>(p: *const T) -> u64 {
    let g: u64;
    // SAFETY: address conversion only, no memory access.
    unsafe {
        asm!("cvta.to.global.u64 {g}, {p};", g = out(reg64) g, p = in(reg64) p as u64,
             options(pure, nomem, nostack));
    }
    g
}

/// 16-byte read-only load. `a` must be a 16-byte aligned global address of readable memory.
#[inline(always)]
pub unsafe fn ld_v4(a: u64) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("ld.global.nc.v4.u32 {{{x}, {y}, {z}, {w}}}, [{a}];",
         x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w, a = in(reg64) a,
         options(pure, readonly, nostack));
    [x, y, z, w]
}

/// 16-byte read-only load of four floats. Same contract as [`ld_v4`].
#[inline(always)]
pub unsafe fn ld_v4_f32(a: u64) -> [f32; 4] {
    let (x, y, z, w): (f32, f32, f32, f32);
    asm!("ld.global.nc.v4.f32 {{{x}, {y}, {z}, {w}}}, [{a}];",
         x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w, a = in(reg64) a,
         options(pure, readonly, nostack));
    [x, y, z, w]
}

/// 4-byte read-only load. `a` must be a 4-byte aligned global address of readable memory.
#[inline(always)]
pub unsafe fn ld_u32(a: u64) -> u32 {
    let v: u32;
    asm!("ld.global.nc.u32 {v}, [{a}];", v = out(reg32) v, a = in(reg64) a,
         options(pure, readonly, nostack));
    v
}

/// 2-byte read-only load, zero-extended. `a` must be a 2-byte aligned global address.
#[inline(always)]
pub unsafe fn ld_u16(a: u64) -> u32 {
    let v: u32;
    asm!("ld.global.nc.u16 {v}, [{a}];", v = out(reg32) v, a = in(reg64) a,
         options(pure, readonly, nostack));
    v
}

/// 4-byte store to global memory; `a` 4-byte aligned.
#[inline(always)]
pub unsafe fn st_u32(a: u64, v: u32) {
    asm!("st.global.u32 [{a}], {v};", a = in(reg64) a, v = in(reg32) v, options(nostack));
}

/// 16-byte store of four floats to global memory; `a` 16-byte aligned.
#[inline(always)]
pub unsafe fn st_v4_f32(a: u64, v: [f32; 4]) {
    asm!("st.global.v4.f32 [{a}], {{{x}, {y}, {z}, {w}}};", a = in(reg64) a,
         x = in(reg32) v[0], y = in(reg32) v[1], z = in(reg32) v[2], w = in(reg32) v[3],
         options(nostack));
}

/// 4-byte store of a float to global memory; `a` 4-byte aligned.
#[inline(always)]
pub unsafe fn st_f32(a: u64, v: f32) {
    asm!("st.global.f32 [{a}], {v};", a = in(reg64) a, v = in(reg32) v, options(nostack));
}

/// `c + Σ_i a.byte[i]·b.byte[i]` with all bytes signed (`dp4a.s32.s32`).
#[inline(always)]
pub fn dp4a(a: u32, b: u32, c: i32) -> i32 {
    let d: i32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("dp4a.s32.s32 {d}, {a}, {b}, {c};", d = out(reg32) d, a = in(reg32) a,
             b = in(reg32) b, c = in(reg32) c, options(pure, nomem, nostack));
    }
    d
}

/// Bits `[sh, sh+32)` of the 64-bit value `hi:lo`, with `sh` clamped to 32 (`shf.r.clamp`):
/// `sh = 0` gives `lo`, `sh = 32` gives `hi`.
#[inline(always)]
pub fn funnel_r(lo: u32, hi: u32, sh: u32) -> u32 {
    let d: u32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("shf.r.clamp.b32 {d}, {lo}, {hi}, {sh};", d = out(reg32) d, lo = in(reg32) lo,
             hi = in(reg32) hi, sh = in(reg32) sh, options(pure, nomem, nostack));
    }
    d
}

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

/// Low 16 bits of `bits` read as IEEE binary16, widened exactly to f32.
#[inline(always)]
pub fn f16_to_f32(bits: u32) -> f32 {
    let d: f32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("cvt.f32.f16 {d}, {h};", d = out(reg32) d, h = in(reg16) bits as u16,
             options(pure, nomem, nostack));
    }
    d
}

/// `x` rounded to the nearest binary16 (ties to even), as raw bits in the low 16 bits.
#[inline(always)]
pub fn f32_to_f16(x: f32) -> u32 {
    let h: u16;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("cvt.rn.f16.f32 {h}, {x};", h = out(reg16) h, x = in(reg32) x,
             options(pure, nomem, nostack));
    }
    u32::from(h)
}

/// `x` rounded toward zero to an integral float.
#[inline(always)]
pub fn trunc(x: f32) -> f32 {
    let d: f32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("cvt.rzi.f32.f32 {d}, {x};", d = out(reg32) d, x = in(reg32) x,
             options(pure, nomem, nostack));
    }
    d
}

/// C `roundf`: nearest integer, ties away from zero. `x − trunc(x)` is exact for every finite
/// f32, so comparing it with 0.5 decides the tie direction without double rounding.
#[inline(always)]
pub fn round_away(x: f32) -> f32 {
    let t = trunc(x);
    let frac = x - t;
    if frac >= 0.5 {
        t + 1.0
    } else if frac <= -0.5 {
        t - 1.0
    } else {
        t
    }
}

/// Correctly rounded square root (`sqrt.rn.f32`).
#[inline(always)]
pub fn sqrt(x: f32) -> f32 {
    let d: f32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("sqrt.rn.f32 {d}, {x};", d = out(reg32) d, x = in(reg32) x,
             options(pure, nomem, nostack));
    }
    d
}

/// `threadIdx.x`.
#[inline(always)]
pub fn tid() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_thread_idx_x() as u32 }
}

/// `blockIdx.x`.
#[inline(always)]
pub fn bid() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_block_idx_x() as u32 }
}
