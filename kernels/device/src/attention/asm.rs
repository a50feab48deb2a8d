//! Single-instruction helpers the attention kernels need beyond `crate::ptx`: shared-memory
//! vector accesses (32-bit `.shared` addresses), 8-byte global accesses, explicit FMA (rustc
//! never contracts `a*b + c`), the base-2 exponential and f64 rounding for the rope angle.

use core::arch::asm;

/// `a·b + c` rounded once (`fma.rn.f32`).
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    let d: f32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("fma.rn.f32 {d}, {a}, {b}, {c};", d = out(reg32) d, a = in(reg32) a,
             b = in(reg32) b, c = in(reg32) c, options(pure, nomem, nostack));
    }
    d
}

/// `2^x` (`ex2.approx.ftz.f32`: relative error ≤ 2^-22.5; `2^-inf = 0`).
#[inline(always)]
pub fn exp2(x: f32) -> f32 {
    let d: f32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("ex2.approx.ftz.f32 {d}, {x};", d = out(reg32) d, x = in(reg32) x,
             options(pure, nomem, nostack));
    }
    d
}

/// `sin x` for `|x| ≤ π` (`sin.approx.f32`: absolute error ≤ 2^-20.9 there).
#[inline(always)]
pub fn sin(x: f32) -> f32 {
    let d: f32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("sin.approx.f32 {d}, {x};", d = out(reg32) d, x = in(reg32) x,
             options(pure, nomem, nostack));
    }
    d
}

/// `cos x` for `|x| ≤ π` (`cos.approx.f32`: absolute error ≤ 2^-20.5 there).
#[inline(always)]
pub fn cos(x: f32) -> f32 {
    let d: f32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("cos.approx.f32 {d}, {x};", d = out(reg32) d, x = in(reg32) x,
             options(pure, nomem, nostack));
    }
    d
}

/// `x` rounded to the nearest integer, ties to even (`cvt.rni.f64.f64`).
#[inline(always)]
pub fn rint_f64(x: f64) -> f64 {
    let d: f64;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("cvt.rni.f64.f64 {d}, {x};", d = out(reg64) d, x = in(reg64) x,
             options(pure, nomem, nostack));
    }
    d
}

/// 8-byte read-only global load of a double; `a` 8-byte aligned.
#[inline(always)]
pub unsafe fn ld_f64(a: u64) -> f64 {
    let v: f64;
    asm!("ld.global.nc.f64 {v}, [{a}];", v = out(reg64) v, a = in(reg64) a,
         options(pure, readonly, nostack));
    v
}

/// 8-byte read-only global load of two floats; `a` 8-byte aligned.
#[inline(always)]
pub unsafe fn ld_v2_f32(a: u64) -> [f32; 2] {
    let (x, y): (f32, f32);
    asm!("ld.global.nc.v2.f32 {{{x}, {y}}}, [{a}];", x = out(reg32) x, y = out(reg32) y,
         a = in(reg64) a, options(pure, readonly, nostack));
    [x, y]
}

/// 8-byte global store of two floats; `a` 8-byte aligned.
#[inline(always)]
pub unsafe fn st_v2_f32(a: u64, v: [f32; 2]) {
    asm!("st.global.v2.f32 [{a}], {{{x}, {y}}};", a = in(reg64) a, x = in(reg32) v[0],
         y = in(reg32) v[1], options(nostack));
}

/// 8-byte global store of two words; `a` 8-byte aligned.
#[inline(always)]
pub unsafe fn st_v2_u32(a: u64, v: [u32; 2]) {
    asm!("st.global.v2.u32 [{a}], {{{x}, {y}}};", a = in(reg64) a, x = in(reg32) v[0],
         y = in(reg32) v[1], options(nostack));
}

/// 8-byte shared load; `a` an 8-byte aligned `.shared` address.
#[inline(always)]
pub unsafe fn lds_v2(a: u32) -> [u32; 2] {
    let (x, y): (u32, u32);
    asm!("ld.shared.v2.u32 {{{x}, {y}}}, [{a}];", x = out(reg32) x, y = out(reg32) y,
         a = in(reg32) a, options(pure, readonly, nostack));
    [x, y]
}

/// 16-byte shared load; `a` a 16-byte aligned `.shared` address.
#[inline(always)]
pub unsafe fn lds_v4(a: u32) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("ld.shared.v4.u32 {{{x}, {y}, {z}, {w}}}, [{a}];", x = out(reg32) x, y = out(reg32) y,
         z = out(reg32) z, w = out(reg32) w, a = in(reg32) a, options(pure, readonly, nostack));
    [x, y, z, w]
}

/// 16-byte shared load of four floats; `a` 16-byte aligned.
#[inline(always)]
pub unsafe fn lds_v4_f32(a: u32) -> [f32; 4] {
    let (x, y, z, w): (f32, f32, f32, f32);
    asm!("ld.shared.v4.f32 {{{x}, {y}, {z}, {w}}}, [{a}];", x = out(reg32) x, y = out(reg32) y,
         z = out(reg32) z, w = out(reg32) w, a = in(reg32) a, options(pure, readonly, nostack));
    [x, y, z, w]
}

/// 16-byte shared store; `a` 16-byte aligned.
#[inline(always)]
pub unsafe fn sts_v4(a: u32, v: [u32; 4]) {
    asm!("st.shared.v4.u32 [{a}], {{{x}, {y}, {z}, {w}}};", a = in(reg32) a, x = in(reg32) v[0],
         y = in(reg32) v[1], z = in(reg32) v[2], w = in(reg32) v[3], options(nostack));
}

/// 4-byte shared store of a float; `a` 4-byte aligned.
#[inline(always)]
pub unsafe fn sts_f32(a: u32, v: f32) {
    asm!("st.shared.f32 [{a}], {v};", a = in(reg32) a, v = in(reg32) v, options(nostack));
}

/// The two halves of an f16x2 word widened to f32 (low element first).
#[inline(always)]
pub fn h2_to_f32(w: u32) -> [f32; 2] {
    [crate::ptx::f16_to_f32(w), crate::ptx::f16_to_f32(w >> 16)]
}

/// `max` over the 16 lanes of each half-warp; every lane receives its half's value.
#[inline(always)]
pub fn half_warp_max(mut v: f32) -> f32 {
    let mut m = 8;
    while m > 0 {
        v = v.max(crate::ptx::shfl_xor_f32(v, m));
        m >>= 1;
    }
    v
}

/// Sum over the 16 lanes of each half-warp; every lane receives its half's value.
#[inline(always)]
pub fn half_warp_sum(mut v: f32) -> f32 {
    let mut m = 8;
    while m > 0 {
        v += crate::ptx::shfl_xor_f32(v, m);
        m >>= 1;
    }
    v
}
