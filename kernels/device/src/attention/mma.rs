//! Single-instruction helpers of `flash_latent_mma`: tensor-core operations (fragment layouts:
//! PTX ISA "Matrix Fragments for mma.m16n8k16 with floating point type" and `ldmatrix`,
//! summarized in `shared/spec/rust-gpu.md` §6.1 and §6.3), f16 packing, and predicated memory
//! accesses that keep the tile loop free of branches.
//!
//! The warp-synchronous instructions (`ldmatrix`, `mma.sync`) are deliberately not `pure`, so
//! LLVM never moves them into a branch that only part of the warp takes.

use core::arch::asm;

/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16`: lane `L` supplies the `.shared` address of row
/// `L % 8` of matrix `L / 8` (16-byte aligned); register `m` of lane `L` receives elements
/// `(L/4, 2(L%4))` (low half) and `(L/4, 2(L%4)+1)` of matrix `m`. Every lane of the warp must
/// execute it.
#[inline(always)]
pub unsafe fn ldmatrix_x4(a: u32) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{x}, {y}, {z}, {w}}}, [{a}];",
         x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w,
         a = in(reg32) a, options(readonly, nostack));
    [x, y, z, w]
}

/// [`ldmatrix_x4`] with `.trans`: register `m` of lane `L` receives elements `(2(L%4), L/4)`
/// (low half) and `(2(L%4)+1, L/4)` of matrix `m`, i.e. the transposed matrix.
#[inline(always)]
pub unsafe fn ldmatrix_x4_trans(a: u32) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{x}, {y}, {z}, {w}}}, [{a}];",
         x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w,
         a = in(reg32) a, options(readonly, nostack));
    [x, y, z, w]
}

/// `D = A·B + C` for a 16×16 f16 `A` (row-major fragment), a 16×8 f16 `B` (column fragment)
/// and 16×8 f32 `C`/`D` (`mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`). Products are
/// exact; the hardware's accumulation order and rounding are implementation-defined. Every
/// lane of the warp must execute it.
#[inline(always)]
pub fn mma_f16_f32(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let (d0, d1, d2, d3): (f32, f32, f32, f32);
    // SAFETY: register-only warp instruction; callers keep the whole warp converged.
    unsafe {
        asm!("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 \
              {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, \
              {{{c0}, {c1}, {c2}, {c3}}};",
             d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
             a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
             b0 = in(reg32) b[0], b1 = in(reg32) b[1],
             c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
             options(nomem, nostack));
    }
    [d0, d1, d2, d3]
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

/// 2-byte shared store of the low 16 bits of `v`; `a` 2-byte aligned.
#[inline(always)]
pub unsafe fn sts_b16(a: u32, v: u32) {
    asm!("st.shared.b16 [{a}], {v};", a = in(reg32) a, v = in(reg16) v as u16,
         options(nostack));
}

/// 8-byte shared store of two floats; `a` 8-byte aligned.
#[inline(always)]
pub unsafe fn sts_v2_f32(a: u32, v: [f32; 2]) {
    asm!("st.shared.v2.f32 [{a}], {{{x}, {y}}};", a = in(reg32) a, x = in(reg32) v[0],
         y = in(reg32) v[1], options(nostack));
}

/// 4-byte shared load of a float; `a` 4-byte aligned.
#[inline(always)]
pub unsafe fn lds_f32(a: u32) -> f32 {
    let v: f32;
    asm!("ld.shared.f32 {v}, [{a}];", v = out(reg32) v, a = in(reg32) a,
         options(pure, readonly, nostack));
    v
}

/// 16-byte read-only global load where `p` holds, zeros elsewhere: a predicated load, so a
/// partial tile needs no branch in the tile loop. `a` must be a valid 16-byte aligned global
/// address where `p` holds.
#[inline(always)]
pub unsafe fn ld_v4_if(p: bool, a: u64) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; mov.u32 {x}, 0; mov.u32 {y}, 0; \
          mov.u32 {z}, 0; mov.u32 {w}, 0; @p ld.global.nc.v4.u32 {{{x}, {y}, {z}, {w}}}, [{a}]; }}",
         c = in(reg32) p as u32, x = out(reg32) x, y = out(reg32) y, z = out(reg32) z,
         w = out(reg32) w, a = in(reg64) a, options(pure, readonly, nostack));
    [x, y, z, w]
}

/// 16-byte read-only global load where `p` holds; where it does not, the result is whatever
/// the registers held (no zero fill), so it must only feed accesses predicated the same way.
#[inline(always)]
pub unsafe fn ld_v4_when(p: bool, a: u64) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; \
          @p ld.global.nc.v4.u32 {{{x}, {y}, {z}, {w}}}, [{a}]; }}",
         c = in(reg32) p as u32, x = out(reg32) x, y = out(reg32) y, z = out(reg32) z,
         w = out(reg32) w, a = in(reg64) a, options(pure, readonly, nostack));
    [x, y, z, w]
}

/// 16-byte shared store where `p` holds (predicated, no branch); `a` 16-byte aligned there.
#[inline(always)]
pub unsafe fn sts_v4_if(p: bool, a: u32, v: [u32; 4]) {
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; @p st.shared.v4.u32 [{a}], {{{x}, {y}, {z}, {w}}}; }}",
         c = in(reg32) p as u32, a = in(reg32) a, x = in(reg32) v[0], y = in(reg32) v[1],
         z = in(reg32) v[2], w = in(reg32) v[3], options(nostack));
}

/// 4-byte shared store of a float where `p` holds (predicated, no branch); `a` 4-byte aligned.
#[inline(always)]
pub unsafe fn sts_f32_if(p: bool, a: u32, v: f32) {
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; @p st.shared.f32 [{a}], {v}; }}",
         c = in(reg32) p as u32, a = in(reg32) a, v = in(reg32) v, options(nostack));
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
