//! Integer and bit instructions: byte dot products, funnel shifts, byte permutes, selects.

use core::arch::asm;

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

/// `(a & m) | (b & !m)`: the bits of `a` where `m` is set, of `b` elsewhere (one `lop3.b32`).
#[inline(always)]
pub fn bitselect(m: u32, a: u32, b: u32) -> u32 {
    let d: u32;
    // SAFETY: register-only instruction. LUT 0xE2 = (a & m) | (b & !m) for operands (a, m, b).
    unsafe {
        asm!("lop3.b32 {d}, {a}, {m}, {b}, 0xE2;", d = out(reg32) d, a = in(reg32) a,
             m = in(reg32) m, b = in(reg32) b, options(pure, nomem, nostack));
    }
    d
}

/// `prmt.b32` (default mode): byte `i` of the result is byte `sel.nibble(i) & 7` of `hi:lo`.
/// Selectors here never set bit 3 of a nibble (sign replication).
#[inline(always)]
pub fn prmt(lo: u32, hi: u32, sel: u32) -> u32 {
    let d: u32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("prmt.b32 {d}, {a}, {b}, {c};", d = out(reg32) d, a = in(reg32) lo,
             b = in(reg32) hi, c = in(reg32) sel, options(pure, nomem, nostack));
    }
    d
}

/// The low bytes of `q[0..4]` as one word, `q[0]` lowest: `Σ (q[k] & 0xFF) << 8k` in three
/// `prmt` (pairs first, then the two pairs' low halves).
#[inline(always)]
pub fn pack_low_bytes(q: [i32; 4]) -> u32 {
    let lo = prmt(q[0] as u32, q[1] as u32, 0x40);
    let hi = prmt(q[2] as u32, q[3] as u32, 0x40);
    prmt(lo, hi, 0x5410)
}

/// `if p { a } else { b }` as one `selp.f32`, which LLVM cannot turn back into a branch.
#[inline(always)]
pub fn select_f32(p: bool, a: f32, b: f32) -> f32 {
    let d: f32;
    // SAFETY: register-only instructions.
    unsafe {
        asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; selp.f32 {d}, {a}, {b}, p; }}",
             c = in(reg32) p as u32, d = out(reg32) d, a = in(reg32) a, b = in(reg32) b,
             options(pure, nomem, nostack));
    }
    d
}

/// `if p { a } else { b }` as one `selp.b64`, which LLVM cannot turn back into a branch.
#[inline(always)]
pub fn select_u64(p: bool, a: u64, b: u64) -> u64 {
    let d: u64;
    // SAFETY: register-only instructions.
    unsafe {
        asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; selp.b64 {d}, {a}, {b}, p; }}",
             c = in(reg32) p as u32, d = out(reg64) d, a = in(reg64) a, b = in(reg64) b,
             options(pure, nomem, nostack));
    }
    d
}
