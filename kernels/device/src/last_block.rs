//! Last-block-done: the blocks of a launch count themselves in a global done counter (the
//! `count` parameters of `ingot_abi::launch`, see `KernelDesc`), and the block that counts last
//! runs a tail that reads what every other block wrote, then sets the counter back to 0.

use crate::intrinsics::{
    fence_acq_rel_gpu, fence_atom_add_u32_if, lds_u32, nblocks, st_u32, sts_u32, tid,
};
use core::arch::{asm, global_asm, nvptx};

// Thread 0's verdict, read by the whole block.
global_asm!(".shared .align 4 .b8 last_block_flag[4];");

#[inline(always)]
unsafe fn flag_addr() -> u32 {
    let a: u32;
    asm!("mov.u32 {a}, last_block_flag;", a = out(reg32) a, options(pure, nomem, nostack));
    a
}

/// Whether this block is the last of the launch to get here; it counts `warps` (its warps) in
/// the counter at global address `count`. Every thread of the block must call it, after its
/// last store that another block's tail reads (it holds two barriers).
///
/// Ordering: each thread fences its own stores (`fence.acq_rel.gpu`, `__threadfence()`)
/// before the block meets, so they are visible GPU-wide before thread 0's atomic add counts
/// the block; thread 0 of the last block fences again after the add (acquire), and the
/// barrier carries that to its other threads, which then read the other blocks' stores with
/// loads that bypass the non-coherent caches (`ld.relaxed.gpu`).
#[inline(always)]
pub(crate) unsafe fn last_block_done(count: u64, warps: u32) -> bool {
    last_of(count, warps, nblocks())
}

/// [`last_block_done`] among `blocks` blocks that share the counter at `count` (a group of the
/// launch's blocks, each group with its own counter).
#[inline(always)]
pub(crate) unsafe fn last_of(count: u64, warps: u32, blocks: u32) -> bool {
    fence_acq_rel_gpu();
    nvptx::_syncthreads();
    let t = tid();
    let old = fence_atom_add_u32_if(t == 0, count, warps);
    let flag = flag_addr();
    if t == 0 {
        fence_acq_rel_gpu();
        sts_u32(flag, (old == (blocks - 1) * warps) as u32);
    }
    nvptx::_syncthreads();
    lds_u32(flag) != 0
}

/// Sets the counter back to 0; called by the last block once its tail no longer needs it
/// (every block has counted, so nothing else touches it in this launch).
#[inline(always)]
pub(crate) unsafe fn reset(count: u64) {
    if tid() == 0 {
        st_u32(count, 0);
    }
}
