//! Special registers and address-space conversion.

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

/// `gridDim.x`.
#[inline(always)]
pub fn nblocks() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_grid_dim_x() as u32 }
}

/// This lane's index in its warp (`%laneid`).
#[inline(always)]
pub fn lane_id() -> u32 {
    let d: u32;
    // SAFETY: reads a special register.
    unsafe {
        asm!("mov.u32 {d}, %laneid;", d = out(reg32) d, options(pure, nomem, nostack));
    }
    d
}

/// `nanosleep.u32 ns`: the warp gives up its issue slots for up to about `ns` nanoseconds, so a
/// spin-wait leaves them to the warps it waits for.
#[inline(always)]
pub unsafe fn nanosleep(ns: u32) {
    asm!("nanosleep.u32 {n};", n = in(reg32) ns, options(nostack));
}
