//! `rmsnorm_f32`: `y = x·w / sqrt(mean(x²) + eps)` per row.
//!
//! Thread mapping: one block of `RMSNORM_THREADS` threads per row; thread `t` handles the float4
//! chunks `t, t + THREADS, …` of the row (16-byte loads). Σx² is reduced per warp with shuffles,
//! then across warps through a small static shared array.

use crate::intrinsics::{bid, global, ld_v4_f32, sqrt, st_v4_f32, tid, warp_sum};
use core::arch::{asm, global_asm, nvptx};
use ingot_abi::launch::{RMSNORM_THREADS, WARP_SIZE};

const WARPS: u32 = RMSNORM_THREADS / WARP_SIZE;
const _: () = assert!(WARPS == 8, "rmsnorm_partials below is sized for 8 warps");

// One f32 partial sum per warp.
global_asm!(".shared .align 16 .b8 rmsnorm_partials[32];");

#[inline(always)]
unsafe fn partials_addr() -> u32 {
    let a: u32;
    asm!("mov.u32 {a}, rmsnorm_partials;", a = out(reg32) a, options(pure, nomem, nostack));
    a
}

/// `x`, `y`: `rows × n` floats, `w`: `n` floats, `n` a multiple of 4; grid = one block per row.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn rmsnorm_f32(
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    n: u32,
    eps: f32,
) {
    let t = tid();
    let row_off = bid() as u64 * n as u64 * 4;
    let xr = global(x) + row_off;
    let yr = global(y) + row_off;
    let wg = global(w);
    let chunks = n / 4;

    let mut ss = 0.0f32;
    let mut i = t;
    while i < chunks {
        let v = ld_v4_f32(xr + i as u64 * 16);
        ss += v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3];
        i += RMSNORM_THREADS;
    }
    ss = warp_sum(ss);

    let lane = t % WARP_SIZE;
    let warp = t / WARP_SIZE;
    let partials = partials_addr();
    if lane == 0 {
        asm!("st.shared.f32 [{a}], {v};", a = in(reg32) partials + warp * 4, v = in(reg32) ss,
             options(nostack));
    }
    nvptx::_syncthreads();
    let mut total = 0.0f32;
    let mut k = 0;
    while k < WARPS {
        let p: f32;
        asm!("ld.shared.f32 {p}, [{a}];", p = out(reg32) p, a = in(reg32) partials + k * 4,
             options(readonly, nostack));
        total += p;
        k += 1;
    }

    let scale = 1.0 / sqrt(total / n as f32 + eps);
    let mut i = t;
    while i < chunks {
        let off = i as u64 * 16;
        let v = ld_v4_f32(xr + off);
        let g = ld_v4_f32(wg + off);
        st_v4_f32(
            yr + off,
            [
                v[0] * scale * g[0],
                v[1] * scale * g[1],
                v[2] * scale * g[2],
                v[3] * scale * g[3],
            ],
        );
        i += RMSNORM_THREADS;
    }
}
