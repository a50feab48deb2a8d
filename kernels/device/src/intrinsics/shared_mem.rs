//! Shared-memory loads and stores at 32-bit `.shared` addresses.

use core::arch::asm;

/// 4-byte shared load of a float; `a` 4-byte aligned.
#[inline(always)]
pub unsafe fn lds_f32(a: u32) -> f32 {
    let v: f32;
    asm!("ld.shared.f32 {v}, [{a}];", v = out(reg32) v, a = in(reg32) a,
         options(pure, readonly, nostack));
    v
}

/// 4-byte load from shared memory at the 32-bit shared address `a`.
#[inline(always)]
pub unsafe fn ld_shared_f32(a: u32) -> f32 {
    let v: f32;
    asm!("ld.shared.f32 {v}, [{a}];", v = out(reg32) v, a = in(reg32) a,
         options(readonly, nostack));
    v
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

/// 4-byte shared load of data that stays unchanged after the barrier that published it (a
/// staged input): `pure`, so LLVM may schedule it like a read-only global load; `a` 4-byte
/// aligned.
#[inline(always)]
pub unsafe fn lds_u32_staged(a: u32) -> u32 {
    let v: u32;
    asm!("ld.shared.u32 {v}, [{a}];", v = out(reg32) v, a = in(reg32) a,
         options(pure, readonly, nostack));
    v
}

/// Four consecutive staged words from `a` (see [`lds_u32_staged`]), one base register with
/// immediate offsets; `a` 4-byte aligned.
#[inline(always)]
pub unsafe fn lds_words4_staged(a: u32) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("ld.shared.u32 {x}, [{a}]; ld.shared.u32 {y}, [{a}+4]; ld.shared.u32 {z}, [{a}+8]; \
          ld.shared.u32 {w}, [{a}+12];",
         x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w, a = in(reg32) a,
         options(pure, readonly, nostack));
    [x, y, z, w]
}

/// 2-byte staged shared load (see [`lds_u32_staged`]); `a` 2-byte aligned.
#[inline(always)]
pub unsafe fn lds_u16_staged(a: u32) -> u16 {
    let v: u16;
    asm!("ld.shared.u16 {v}, [{a}];", v = out(reg16) v, a = in(reg32) a,
         options(pure, readonly, nostack));
    v
}

/// 4-byte shared load of a `u32`; `a` 4-byte aligned.
#[inline(always)]
pub unsafe fn lds_u32(a: u32) -> u32 {
    let v: u32;
    asm!("ld.shared.u32 {v}, [{a}];", v = out(reg32) v, a = in(reg32) a,
         options(readonly, nostack));
    v
}

/// `N` consecutive 4-byte words from the 4-byte aligned shared address `a`, as [`lds_u32`]
/// (not `pure`: for a stage that is rewritten between reads of the same address).
#[inline(always)]
pub unsafe fn lds_words<const N: usize>(a: u32) -> [u32; N] {
    let mut w = [0u32; N];
    let mut i = 0;
    while i < N {
        w[i] = lds_u32(a + 4 * i as u32);
        i += 1;
    }
    w
}

/// Starts copying the 4-byte word at global address `src` to shared address `dst`: see
/// [`cp_async_u32_if`].
#[inline(always)]
pub unsafe fn cp_async_u32(dst: u32, src: u64) {
    asm!("cp.async.ca.shared.global [{d}], [{s}], 4;", d = in(reg32) dst, s = in(reg64) src,
         options(nostack));
}

/// Where `p` holds, starts copying the 4-byte word at global address `src` to shared address
/// `dst` (`cp.async.ca`, both 4-byte aligned) without passing through registers; the copy is
/// complete only after [`cp_async_wait_warp`]. `src` must not be written during the launch.
#[inline(always)]
pub unsafe fn cp_async_u32_if(p: bool, dst: u32, src: u64) {
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; @p cp.async.ca.shared.global [{d}], [{s}], 4; }}",
         c = in(reg32) p as u32, d = in(reg32) dst, s = in(reg64) src, options(nostack));
}

/// Waits for this thread's `cp.async` copies, then meets the warp's other lanes
/// (`bar.warp.sync`), so every lane reads what every lane copied. The whole warp calls it.
#[inline(always)]
pub unsafe fn cp_async_wait_warp() {
    asm!(
        "cp.async.wait_all;",
        "bar.warp.sync 0xffffffff;",
        options(nostack)
    );
}

/// 4-byte shared store of a `u32`; `a` 4-byte aligned.
#[inline(always)]
pub unsafe fn sts_u32(a: u32, v: u32) {
    asm!("st.shared.u32 [{a}], {v};", a = in(reg32) a, v = in(reg32) v, options(nostack));
}

/// 4-byte shared store of a float; `a` 4-byte aligned.
#[inline(always)]
pub unsafe fn sts_f32(a: u32, v: f32) {
    asm!("st.shared.f32 [{a}], {v};", a = in(reg32) a, v = in(reg32) v, options(nostack));
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

/// 8-byte shared store of two words; `a` 8-byte aligned.
#[inline(always)]
pub unsafe fn sts_v2(a: u32, v: [u32; 2]) {
    asm!("st.shared.v2.u32 [{a}], {{{x}, {y}}};", a = in(reg32) a, x = in(reg32) v[0],
         y = in(reg32) v[1], options(nostack));
}

/// 16-byte shared store; `a` 16-byte aligned.
#[inline(always)]
pub unsafe fn sts_v4(a: u32, v: [u32; 4]) {
    asm!("st.shared.v4.u32 [{a}], {{{x}, {y}, {z}, {w}}};", a = in(reg32) a, x = in(reg32) v[0],
         y = in(reg32) v[1], z = in(reg32) v[2], w = in(reg32) v[3], options(nostack));
}

/// 16-byte shared store where `p` holds (predicated, no branch); `a` 16-byte aligned there.
#[inline(always)]
pub unsafe fn sts_v4_if(p: bool, a: u32, v: [u32; 4]) {
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; @p st.shared.v4.u32 [{a}], {{{x}, {y}, {z}, {w}}}; }}",
         c = in(reg32) p as u32, a = in(reg32) a, x = in(reg32) v[0], y = in(reg32) v[1],
         z = in(reg32) v[2], w = in(reg32) v[3], options(nostack));
}

/// 4-byte shared store of a `u32` where `p` holds (predicated, no branch); `a` 4-byte aligned.
#[inline(always)]
pub unsafe fn sts_u32_if(p: bool, a: u32, v: u32) {
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; @p st.shared.u32 [{a}], {v}; }}",
         c = in(reg32) p as u32, a = in(reg32) a, v = in(reg32) v, options(nostack));
}

/// 4-byte shared store of a float where `p` holds (predicated, no branch); `a` 4-byte aligned.
#[inline(always)]
pub unsafe fn sts_f32_if(p: bool, a: u32, v: f32) {
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; @p st.shared.f32 [{a}], {v}; }}",
         c = in(reg32) p as u32, a = in(reg32) a, v = in(reg32) v, options(nostack));
}
