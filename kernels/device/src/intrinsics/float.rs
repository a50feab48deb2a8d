//! Floating-point conversions and math: half precision, rounding, and the approximate
//! transcendental instructions (no libm on the GPU). Explicit `fma` because rustc never
//! contracts `a*b + c`.

use core::arch::asm;

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

/// The two halves of an f16x2 word widened to f32 (low element first).
#[inline(always)]
pub fn h2_to_f32(w: u32) -> [f32; 2] {
    [f16_to_f32(w), f16_to_f32(w >> 16)]
}

/// `lo` and `hi` rounded to the nearest binary16 (ties to even) and packed, `lo` in the low
/// 16 bits (`cvt.rn.f16x2.f32`, whose first source is the high half).
#[inline(always)]
pub fn pack_f16x2(lo: f32, hi: f32) -> u32 {
    let d: u32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("cvt.rn.f16x2.f32 {d}, {hi}, {lo};", d = out(reg32) d, hi = in(reg32) hi,
             lo = in(reg32) lo, options(pure, nomem, nostack));
    }
    d
}

/// `a − b` per f16 half (`sub.rn.f16x2`).
#[inline(always)]
pub fn sub_f16x2(a: u32, b: u32) -> u32 {
    let d: u32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("sub.rn.f16x2 {d}, {a}, {b};", d = out(reg32) d, a = in(reg32) a, b = in(reg32) b,
             options(pure, nomem, nostack));
    }
    d
}

/// `a · b` per f16 half (`mul.rn.f16x2`): each product rounded once to binary16.
#[inline(always)]
pub fn mul_f16x2(a: u32, b: u32) -> u32 {
    let d: u32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("mul.rn.f16x2 {d}, {a}, {b};", d = out(reg32) d, a = in(reg32) a, b = in(reg32) b,
             options(pure, nomem, nostack));
    }
    d
}

/// C `roundf` (nearest integer, ties away from zero) converted to i32 as Rust's `as` does
/// (saturating, NaN to 0): `trunc(x + copysign(0.5 − 2⁻²⁵, x))` in three integer/float
/// instructions and one conversion. Adding the largest float below one half carries the
/// round-to-nearest-even sum past the next integer exactly when `|x − trunc(x)| ≥ 0.5`, and
/// `cvt.rzi.s32.f32` truncates, saturates and maps NaN to 0. Equal to `x.round() as i32` for all
/// 2³² inputs (checked exhaustively on the host; `kernels/tests/quantize_q8_1.rs` runs ties and
/// their neighbours through the quantizers).
#[inline(always)]
pub fn round_away_i32(x: f32) -> i32 {
    let d: i32;
    // SAFETY: register-only instructions.
    unsafe {
        asm!("{{ .reg .b32 h; and.b32 h, {x}, 0x80000000; or.b32 h, h, 0x3EFFFFFF; \
              add.rn.f32 h, {x}, h; cvt.rzi.s32.f32 {d}, h; }}",
             d = out(reg32) d, x = in(reg32) x, options(pure, nomem, nostack));
    }
    d
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
/// f32, so comparing it with 0.5 decides the tie direction without double rounding. The same
/// result as [`round_away_i32`] in more instructions and two branches; `moe_gate_up` keeps it
/// because the branch-free form gave its slot-table variants 8-16 more registers (sm_86/sm_90).
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

/// `1/x` (`rcp.approx.ftz.f32`: one MUFU instruction, within 1 ulp of the rounded reciprocal for
/// normal `x`; subnormals flush to zero, so `1/0` and `1/subnormal` are +inf).
#[inline(always)]
pub fn rcp_approx(x: f32) -> f32 {
    let d: f32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("rcp.approx.ftz.f32 {d}, {x};", d = out(reg32) d, x = in(reg32) x,
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
