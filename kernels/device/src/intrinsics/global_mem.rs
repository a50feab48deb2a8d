//! Global-memory loads and stores. Read-only loads use `ld.global.nc`; the `_if` forms are
//! predicated (a lane whose predicate is false reads nothing and gets zeros), so lanes that read
//! nothing do not branch around them.

use core::arch::asm;

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

/// 8-byte read-only load. `a` must be an 8-byte aligned global address of readable memory.
#[inline(always)]
pub unsafe fn ld_u64(a: u64) -> u64 {
    let v: u64;
    asm!("ld.global.nc.u64 {v}, [{a}];", v = out(reg64) v, a = in(reg64) a,
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

/// `ld_u32(a)` on lanes where `p` holds, 0 elsewhere: a predicated load, so lanes that read
/// nothing do not branch around it (the other lanes get the value by shuffle).
#[inline(always)]
pub unsafe fn ld_u32_if(p: bool, a: u64) -> u32 {
    let v: u32;
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; mov.u32 {v}, 0; @p ld.global.nc.u32 {v}, [{a}]; }}",
         c = in(reg32) p as u32, v = out(reg32) v, a = in(reg64) a,
         options(pure, readonly, nostack));
    v
}

/// `ld_u16(a)` (zero-extended) where `p` holds, 0 elsewhere; see [`ld_u32_if`].
#[inline(always)]
pub unsafe fn ld_u16_if(p: bool, a: u64) -> u32 {
    let v: u32;
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; mov.u32 {v}, 0; @p ld.global.nc.u16 {v}, [{a}]; }}",
         c = in(reg32) p as u32, v = out(reg32) v, a = in(reg64) a,
         options(pure, readonly, nostack));
    v
}

/// 8-byte read-only global load of two floats where `p` holds, `fill` elsewhere: a predicated
/// load whose fill value is the neutral element the caller needs (so no select on `p`
/// follows it, which LLVM would turn back into a branch around the load). `a` must be a valid
/// 8-byte aligned global address where `p` holds.
#[inline(always)]
pub unsafe fn ld_v2_f32_or(p: bool, a: u64, fill: [f32; 2]) -> [f32; 2] {
    let (x, y): (f32, f32);
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; mov.b32 {x}, {fx}; mov.b32 {y}, {fy}; \
          @p ld.global.nc.v2.f32 {{{x}, {y}}}, [{a}]; }}",
         c = in(reg32) p as u32, fx = in(reg32) fill[0], fy = in(reg32) fill[1],
         x = out(reg32) x, y = out(reg32) y, a = in(reg64) a,
         options(pure, readonly, nostack));
    [x, y]
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

/// 8-byte read-only global load where `p` holds, zeros elsewhere (one predicated
/// `ld.global.nc.v2.u32`). `a` must be a valid 8-byte aligned global address where `p` holds.
#[inline(always)]
pub unsafe fn ld_v2_if(p: bool, a: u64) -> [u32; 2] {
    let (x, y): (u32, u32);
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; mov.u32 {x}, 0; mov.u32 {y}, 0; \
          @p ld.global.nc.v2.u32 {{{x}, {y}}}, [{a}]; }}",
         c = in(reg32) p as u32, x = out(reg32) x, y = out(reg32) y, a = in(reg64) a,
         options(pure, readonly, nostack));
    [x, y]
}

/// Four aligned words from `a` where `p` holds, zeros elsewhere; see [`ld_u32_if`].
#[inline(always)]
pub unsafe fn ld_words4_if(p: bool, a: u64) -> [u32; 4] {
    [
        ld_u32_if(p, a),
        ld_u32_if(p, a + 4),
        ld_u32_if(p, a + 8),
        ld_u32_if(p, a + 12),
    ]
}

/// Four aligned words from `a`, as [`ld_words`] but one base register with immediate offsets
/// (no address arithmetic per word).
#[inline(always)]
pub unsafe fn ld_words4_imm(a: u64) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("ld.global.nc.u32 {x}, [{a}]; ld.global.nc.u32 {y}, [{a}+4]; \
          ld.global.nc.u32 {z}, [{a}+8]; ld.global.nc.u32 {w}, [{a}+12];",
         x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w, a = in(reg64) a,
         options(pure, readonly, nostack));
    [x, y, z, w]
}

/// `(ld_u32(a), ld_u16(b))` where `p` holds, zeros elsewhere: two predicated loads under one
/// predicate; see [`ld_u32_if`].
#[inline(always)]
pub unsafe fn ld_u32_u16_if(p: bool, a: u64, b: u64) -> (u32, u32) {
    let (x, y): (u32, u32);
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; mov.u32 {x}, 0; mov.u32 {y}, 0; \
          @p ld.global.nc.u32 {x}, [{a}]; @p ld.global.nc.u16 {y}, [{b}]; }}",
         c = in(reg32) p as u32, x = out(reg32) x, y = out(reg32) y, a = in(reg64) a,
         b = in(reg64) b, options(pure, readonly, nostack));
    (x, y)
}

/// Two aligned words from `a` (`a` and `a + 4`), one base register with an immediate offset.
#[inline(always)]
pub unsafe fn ld_words2_imm(a: u64) -> [u32; 2] {
    let (x, y): (u32, u32);
    asm!("ld.global.nc.u32 {x}, [{a}]; ld.global.nc.u32 {y}, [{a}+4];",
         x = out(reg32) x, y = out(reg32) y, a = in(reg64) a, options(pure, readonly, nostack));
    [x, y]
}

/// The signed bytes at `a` and `a + 4`, sign-extended (`ld.global.nc.s8` into 32-bit registers).
#[inline(always)]
pub unsafe fn ld_i8_pair4(a: u64) -> [i32; 2] {
    let (x, y): (i32, i32);
    asm!("ld.global.nc.s8 {x}, [{a}]; ld.global.nc.s8 {y}, [{a}+4];",
         x = out(reg32) x, y = out(reg32) y, a = in(reg64) a, options(pure, readonly, nostack));
    [x, y]
}

/// 1-byte read-only load, zero-extended.
#[inline(always)]
pub unsafe fn ld_u8(a: u64) -> u32 {
    let v: u16;
    asm!("ld.global.nc.u8 {v}, [{a}];", v = out(reg16) v, a = in(reg64) a,
         options(pure, readonly, nostack));
    u32::from(v)
}

/// `N` consecutive 4-byte words from the 4-byte aligned global address `a`.
#[inline(always)]
pub unsafe fn ld_words<const N: usize>(a: u64) -> [u32; N] {
    let mut w = [0u32; N];
    let mut i = 0;
    while i < N {
        w[i] = ld_u32(a + 4 * i as u64);
        i += 1;
    }
    w
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

/// 4-byte coherent load (`ld.global.f32`), for data the same launch may write elsewhere (the
/// residual when `y` aliases it), where `ld.global.nc` would not be allowed.
#[inline(always)]
pub unsafe fn ld_f32_coherent(a: u64) -> f32 {
    let v: f32;
    asm!("ld.global.f32 {v}, [{a}];", v = out(reg32) v, a = in(reg64) a,
         options(readonly, nostack));
    v
}

/// 16-byte coherent load of four floats (`ld.global.v4.f32`), for data the same launch may
/// write (the residual when the output aliases it); `a` 16-byte aligned.
#[inline(always)]
pub unsafe fn ld_v4_f32_coherent(a: u64) -> [f32; 4] {
    let (x, y, z, w): (f32, f32, f32, f32);
    asm!("ld.global.v4.f32 {{{x}, {y}, {z}, {w}}}, [{a}];",
         x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w, a = in(reg64) a,
         options(readonly, nostack));
    [x, y, z, w]
}

/// 4-byte load with `.relaxed.gpu` semantics, for data other blocks of the same launch wrote
/// and published through a fence and an atomic (a last-block-done pattern), which neither
/// `ld.global.nc` nor a possibly L1-cached weak load may read.
#[inline(always)]
pub unsafe fn ld_u32_relaxed(a: u64) -> u32 {
    let v: u32;
    asm!("ld.relaxed.gpu.global.u32 {v}, [{a}];", v = out(reg32) v, a = in(reg64) a,
         options(readonly, nostack));
    v
}

/// 8-byte load with `.relaxed.gpu` semantics (see [`ld_u32_relaxed`]); `a` 8-byte aligned.
#[inline(always)]
pub unsafe fn ld_u64_relaxed(a: u64) -> u64 {
    let v: u64;
    asm!("ld.relaxed.gpu.global.u64 {v}, [{a}];", v = out(reg64) v, a = in(reg64) a,
         options(readonly, nostack));
    v
}

/// [`ld_u32_relaxed`] where `p` holds, 0 elsewhere (predicated, no branch).
#[inline(always)]
pub unsafe fn ld_u32_relaxed_if(p: bool, a: u64) -> u32 {
    let v: u32;
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; mov.u32 {v}, 0; \
          @p ld.relaxed.gpu.global.u32 {v}, [{a}]; }}",
         c = in(reg32) p as u32, v = out(reg32) v, a = in(reg64) a, options(readonly, nostack));
    v
}

/// 16-byte load of four floats with `.relaxed.gpu` semantics (see [`ld_u32_relaxed`]) where
/// `p` holds, zeros elsewhere (predicated, no branch); `a` 16-byte aligned where `p` holds.
#[inline(always)]
pub unsafe fn ld_v4_f32_relaxed_if(p: bool, a: u64) -> [f32; 4] {
    let (x, y, z, w): (f32, f32, f32, f32);
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; mov.f32 {x}, 0f00000000; \
          mov.f32 {y}, 0f00000000; mov.f32 {z}, 0f00000000; mov.f32 {w}, 0f00000000; \
          @p ld.relaxed.gpu.global.v4.f32 {{{x}, {y}, {z}, {w}}}, [{a}]; }}",
         c = in(reg32) p as u32, x = out(reg32) x, y = out(reg32) y, z = out(reg32) z,
         w = out(reg32) w, a = in(reg64) a, options(readonly, nostack));
    [x, y, z, w]
}

/// 8-byte load of two floats with `.relaxed.gpu` semantics (see [`ld_u32_relaxed`]); `a`
/// 8-byte aligned.
#[inline(always)]
pub unsafe fn ld_v2_f32_relaxed(a: u64) -> [f32; 2] {
    let (x, y): (f32, f32);
    asm!("ld.relaxed.gpu.global.v2.f32 {{{x}, {y}}}, [{a}];", x = out(reg32) x, y = out(reg32) y,
         a = in(reg64) a, options(readonly, nostack));
    [x, y]
}

/// 16-byte load of four floats with `.relaxed.gpu` semantics (see [`ld_u32_relaxed`]); `a`
/// 16-byte aligned.
#[inline(always)]
pub unsafe fn ld_v4_f32_relaxed(a: u64) -> [f32; 4] {
    let (x, y, z, w): (f32, f32, f32, f32);
    asm!("ld.relaxed.gpu.global.v4.f32 {{{x}, {y}, {z}, {w}}}, [{a}];", x = out(reg32) x,
         y = out(reg32) y, z = out(reg32) z, w = out(reg32) w, a = in(reg64) a,
         options(readonly, nostack));
    [x, y, z, w]
}

/// `fence.acq_rel.gpu` (`__threadfence()`): this thread's earlier memory accesses are ordered
/// before its later ones for every thread of the GPU.
#[inline(always)]
pub unsafe fn fence_acq_rel_gpu() {
    asm!("fence.acq_rel.gpu;", options(nostack));
}

/// Where `p` holds, `fence.acq_rel.gpu` then `atom.relaxed.gpu.global.add.u32` of `v` at `a`,
/// returning the old value; where it does not, nothing and 0 (no branch).
#[inline(always)]
pub unsafe fn fence_atom_add_u32_if(p: bool, a: u64, v: u32) -> u32 {
    let old: u32;
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; mov.u32 {o}, 0; \
          fence.acq_rel.gpu; @p atom.relaxed.gpu.global.add.u32 {o}, [{a}], {v}; }}",
         c = in(reg32) p as u32, o = out(reg32) old, a = in(reg64) a, v = in(reg32) v,
         options(nostack));
    old
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

/// [`ld_v4_when`] for data read once (a latent-cache row): `.cs`, "cache streaming", allocates
/// the line evict-first in L1 and L2 (PTX ISA, cache operators), so a stream of such rows does
/// not push out lines others will read (weights prefetched for the next launch). (The
/// `.L2::evict_first` qualifier would say the same, but ptxas takes it only on 32-byte loads.)
#[inline(always)]
pub unsafe fn ld_v4_stream_when(p: bool, a: u64) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; \
          @p ld.global.cs.nc.v4.u32 {{{x}, {y}, {z}, {w}}}, [{a}]; }}",
         c = in(reg32) p as u32, x = out(reg32) x, y = out(reg32) y, z = out(reg32) z,
         w = out(reg32) w, a = in(reg64) a, options(pure, readonly, nostack));
    [x, y, z, w]
}

/// [`ld_v4`] for data read once; see [`ld_v4_stream_when`].
#[inline(always)]
pub unsafe fn ld_v4_stream(a: u64) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("ld.global.cs.nc.v4.u32 {{{x}, {y}, {z}, {w}}}, [{a}];",
         x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w, a = in(reg64) a,
         options(pure, readonly, nostack));
    [x, y, z, w]
}

/// [`ld_u16_if`] for data read once; see [`ld_v4_stream_when`].
#[inline(always)]
pub unsafe fn ld_u16_stream_if(p: bool, a: u64) -> u32 {
    let v: u32;
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; mov.u32 {v}, 0; \
          @p ld.global.cs.nc.u16 {v}, [{a}]; }}",
         c = in(reg32) p as u32, v = out(reg32) v, a = in(reg64) a,
         options(pure, readonly, nostack));
    v
}

/// 16-byte global store of four floats where `p` holds (predicated, no branch); `a` 16-byte
/// aligned there.
#[inline(always)]
pub unsafe fn st_v4_f32_if(p: bool, a: u64, v: [f32; 4]) {
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; @p st.global.v4.f32 [{a}], {{{x}, {y}, {z}, {w}}}; }}",
         c = in(reg32) p as u32, a = in(reg64) a, x = in(reg32) v[0], y = in(reg32) v[1],
         z = in(reg32) v[2], w = in(reg32) v[3], options(nostack));
}

/// 1-byte store of the low 8 bits of `v` to global memory.
#[inline(always)]
pub unsafe fn st_u8(a: u64, v: u32) {
    asm!("st.global.u8 [{a}], {v};", a = in(reg64) a, v = in(reg32) v, options(nostack));
}

/// 2-byte store of the low 16 bits of `v` to global memory where `p` holds (predicated, no
/// branch); `a` 2-byte aligned there.
#[inline(always)]
pub unsafe fn st_u16_if(p: bool, a: u64, v: u32) {
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; @p st.global.u16 [{a}], {v}; }}",
         c = in(reg32) p as u32, a = in(reg64) a, v = in(reg16) v as u16, options(nostack));
}

/// 4-byte store to global memory; `a` 4-byte aligned.
#[inline(always)]
pub unsafe fn st_u32(a: u64, v: u32) {
    asm!("st.global.u32 [{a}], {v};", a = in(reg64) a, v = in(reg32) v, options(nostack));
}

/// 8-byte store to global memory; `a` 8-byte aligned.
#[inline(always)]
pub unsafe fn st_u64(a: u64, v: u64) {
    asm!("st.global.u64 [{a}], {v};", a = in(reg64) a, v = in(reg64) v, options(nostack));
}

/// 4-byte store of a float to global memory; `a` 4-byte aligned.
#[inline(always)]
pub unsafe fn st_f32(a: u64, v: f32) {
    asm!("st.global.f32 [{a}], {v};", a = in(reg64) a, v = in(reg32) v, options(nostack));
}

/// 4-byte global store of a float where `p` holds (predicated, no branch); `a` 4-byte aligned
/// there.
#[inline(always)]
pub unsafe fn st_f32_if(p: bool, a: u64, v: f32) {
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; @p st.global.f32 [{a}], {v}; }}",
         c = in(reg32) p as u32, a = in(reg64) a, v = in(reg32) v, options(nostack));
}

/// 16-byte store of four floats to global memory; `a` 16-byte aligned.
#[inline(always)]
pub unsafe fn st_v4_f32(a: u64, v: [f32; 4]) {
    asm!("st.global.v4.f32 [{a}], {{{x}, {y}, {z}, {w}}};", a = in(reg64) a,
         x = in(reg32) v[0], y = in(reg32) v[1], z = in(reg32) v[2], w = in(reg32) v[3],
         options(nostack));
}

/// 8-byte global store of two floats; `a` 8-byte aligned.
#[inline(always)]
pub unsafe fn st_v2_f32(a: u64, v: [f32; 2]) {
    asm!("st.global.v2.f32 [{a}], {{{x}, {y}}};", a = in(reg64) a, x = in(reg32) v[0],
         y = in(reg32) v[1], options(nostack));
}

/// 16-byte global store of four words; `a` 16-byte aligned.
#[inline(always)]
pub unsafe fn st_v4_u32(a: u64, v: [u32; 4]) {
    asm!("st.global.v4.u32 [{a}], {{{x}, {y}, {z}, {w}}};", a = in(reg64) a, x = in(reg32) v[0],
         y = in(reg32) v[1], z = in(reg32) v[2], w = in(reg32) v[3], options(nostack));
}

/// 8-byte global store of two words; `a` 8-byte aligned.
#[inline(always)]
pub unsafe fn st_v2_u32(a: u64, v: [u32; 2]) {
    asm!("st.global.v2.u32 [{a}], {{{x}, {y}}};", a = in(reg64) a, x = in(reg32) v[0],
         y = in(reg32) v[1], options(nostack));
}

/// `atom.relaxed.gpu.global.add.u32` of `v` at `a`, returning the old value: a ticket or a
/// count that orders no other access (no fence).
#[inline(always)]
pub unsafe fn atom_add_u32(a: u64, v: u32) -> u32 {
    let old: u32;
    asm!("atom.relaxed.gpu.global.add.u32 {o}, [{a}], {v};", o = out(reg32) old, a = in(reg64) a,
         v = in(reg32) v, options(nostack));
    old
}

/// 4-byte load with `.acquire.gpu` semantics: this thread's later accesses see what the thread
/// whose release access wrote the value (or a part of it) had written before that access. The
/// reading side of a wait on another block of the same launch.
#[inline(always)]
pub unsafe fn ld_u32_acquire(a: u64) -> u32 {
    let v: u32;
    asm!("ld.acquire.gpu.global.u32 {v}, [{a}];", v = out(reg32) v, a = in(reg64) a,
         options(nostack));
    v
}

/// Where `p` holds, `red.release.gpu.global.add.u32` of `v` at `a`: this thread's earlier
/// stores are visible to a thread that acquires the sum (see [`ld_u32_acquire`]); where it
/// does not, nothing (no branch).
#[inline(always)]
pub unsafe fn red_release_add_u32_if(p: bool, a: u64, v: u32) {
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; @p red.release.gpu.global.add.u32 [{a}], {v}; }}",
         c = in(reg32) p as u32, a = in(reg64) a, v = in(reg32) v, options(nostack));
}
