//! Single-instruction wrappers the MoE kernels need beyond `crate::ptx`: fast exp, warp
//! reductions on integers, index shuffles.

use core::arch::asm;

/// `log2(e)`, the factor that turns `exp(x)` into `2^(x·log2 e)`.
const LOG2_E: f32 = core::f32::consts::LOG2_E;

/// `2^x` (`ex2.approx.f32`: relative error ≤ 2^-22.5, ±inf and denormal outputs handled).
#[inline(always)]
pub fn ex2(x: f32) -> f32 {
    let d: f32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("ex2.approx.f32 {d}, {x};", d = out(reg32) d, x = in(reg32) x,
             options(pure, nomem, nostack));
    }
    d
}

/// `e^x` as `2^(x·log2 e)`: the rounding of the product adds a relative error of about
/// `|x|·2^-24` to the `ex2` error.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    ex2(x * LOG2_E)
}

/// `silu(z) = z / (1 + e^-z)`; `e^-z` overflows to +inf for z < −88, giving −0 (the limit).
#[inline(always)]
pub fn silu(z: f32) -> f32 {
    z / (1.0 + exp(-z))
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

/// Maximum of `v` over the 32 lanes (butterfly of `max.f32`, which ignores a NaN operand).
#[inline(always)]
pub fn warp_max_f32(mut v: f32) -> f32 {
    let mut m = 16;
    while m > 0 {
        v = v.max(crate::ptx::shfl_xor_f32(v, m));
        m >>= 1;
    }
    v
}

/// Lane `src`'s `v` (`shfl.sync.idx.b32`); the whole warp must execute it.
#[inline(always)]
pub fn shfl_idx_u32(v: u32, src: u32) -> u32 {
    shfl_idx_f32(f32::from_bits(v), src).to_bits()
}

/// 4-byte coherent load (`ld.global.f32`), for data the same launch may write elsewhere (the
/// residual when `y` aliases it), where `ld.global.nc` would not be allowed.
#[inline(always)]
pub unsafe fn ld_f32_coherent(a: u64) -> f32 {
    let v: f32;
    asm!("ld.global.f32 {v}, [{a}];", v = out(reg32) v, a = in(reg64) a,
         options(readonly, nostack));
    v
}

/// 4-byte store to shared memory at the 32-bit shared address `a`.
#[inline(always)]
pub unsafe fn st_shared_f32(a: u32, v: f32) {
    asm!("st.shared.f32 [{a}], {v};", a = in(reg32) a, v = in(reg32) v, options(nostack));
}

/// 4-byte load from shared memory at the 32-bit shared address `a`.
#[inline(always)]
pub unsafe fn ld_shared_f32(a: u32) -> f32 {
    let v: f32;
    asm!("ld.shared.f32 {v}, [{a}];", v = out(reg32) v, a = in(reg32) a,
         options(readonly, nostack));
    v
}
