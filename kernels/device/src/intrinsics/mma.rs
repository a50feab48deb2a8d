//! Tensor-core operations of `flash_latent_mma` and the `mmq` kernels (fragment layouts: PTX
//! ISA "Matrix Fragments for mma.m16n8k16 with floating point type", "for mma.m16n8k32" and
//! `ldmatrix`, restated in docs/ptx-isa.md#tensor-core-fragments and docs/ptx-isa.md#ldmatrix).
//! The warp-synchronous instructions are deliberately not `pure`, so LLVM never moves them into
//! a branch that only part of the warp takes.

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

/// `D = A·B + C` for a 16×32 s8 `A` (row-major fragment), a 32×8 s8 `B` (column fragment) and
/// 16×8 s32 `C`/`D` (`mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32`). With `g = lane/4`,
/// `t = lane%4`: `a[0]` holds bytes `4t..4t+4` of row `g`, `a[1]` of row `g+8`, `a[2]`/`a[3]`
/// the same rows' bytes `16+4t..`; `b[0]` holds k = `4t..4t+4` of column `g`, `b[1]` k =
/// `16+4t..`; `c`/`d` elements `(g, 2t)`, `(g, 2t+1)`, `(g+8, 2t)`, `(g+8, 2t+1)`. So an
/// `ldmatrix_x4` of 8 rows × 16 bytes per matrix loads both fragments from row-major bytes.
/// Integer products and sums are exact (callers keep sums inside `i32`). Every lane of the
/// warp must execute it.
#[inline(always)]
pub fn mma_s8_s32(a: [u32; 4], b: [u32; 2], c: [i32; 4]) -> [i32; 4] {
    let (d0, d1, d2, d3): (i32, i32, i32, i32);
    // SAFETY: register-only warp instruction; callers keep the whole warp converged.
    unsafe {
        asm!("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 \
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
