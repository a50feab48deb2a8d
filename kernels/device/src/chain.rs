//! A chained launch: the blocks of two kernels' work in one grid (`ingot_abi::launch::attn_out`).
//! A block's work is the ticket it draws at its start, not its index: every block of the first
//! part draws a lower ticket than any of the second, so a block of the second part that waits
//! for the first waits only on blocks that have started, and the wait ends on any GPU whatever
//! blocks are resident. The control words are `CHAIN_CTL_WORDS` `u32`s, 0 before and after
//! every launch.

use crate::intrinsics::{
    atom_add_u32, fence_acq_rel_gpu, ld_u32_acquire, lds_u32, nanosleep, nblocks,
    red_release_add_u32_if, st_u32, sts_u32, tid,
};
use core::arch::{asm, global_asm, nvptx};
use ingot_abi::launch::{CHAIN_CTL_DONE, CHAIN_CTL_PASSED, CHAIN_CTL_TICKET};

// The block's ticket, written by thread 0.
global_asm!(".shared .align 4 .b8 chain_ticket[4];");

/// Sleep between two looks at the done word (nanoseconds): short beside a part's microseconds,
/// long enough to leave the SM's issue slots to the blocks that compute.
const WAIT_NS: u32 = 64;

#[inline(always)]
unsafe fn word(ctl: u64, w: u32) -> u64 {
    ctl + 4 * w as u64
}

/// The block's ticket: thread 0 draws it from word `CHAIN_CTL_TICKET` of `ctl` (the block that
/// draws the last sets the word back to 0) and hands it to the block through shared memory.
/// Every thread of the block calls it (a barrier).
#[inline(always)]
pub(crate) unsafe fn ticket(ctl: u64) -> u32 {
    let slot: u32;
    asm!("mov.u32 {a}, chain_ticket;", a = out(reg32) slot, options(pure, nomem, nostack));
    if tid() == 0 {
        let a = word(ctl, CHAIN_CTL_TICKET);
        let k = atom_add_u32(a, 1);
        // Every block has drawn: nothing else touches the word in this launch.
        if k == nblocks() - 1 {
            st_u32(a, 0);
        }
        sts_u32(slot, k);
    }
    nvptx::_syncthreads();
    lds_u32(slot)
}

/// Counts this block of the first part as done: every thread fences its stores, the block
/// meets, and thread 0 adds 1 to word `CHAIN_CTL_DONE` with release semantics. Every thread of
/// the block calls it, after its last store a second-part block reads.
#[inline(always)]
pub(crate) unsafe fn done(ctl: u64) {
    fence_acq_rel_gpu();
    nvptx::_syncthreads();
    red_release_add_u32_if(tid() == 0, word(ctl, CHAIN_CTL_DONE), 1);
}

/// Waits until the `first` blocks of the first part are [`done`]: thread 0 spins on an acquire
/// load (sleeping between looks), counts the block among the `waiters` blocks of the second
/// part (the last sets both words back to 0), and the barrier hands the acquired view to the
/// block's other threads. Every thread of the block calls it.
#[inline(always)]
pub(crate) unsafe fn wait_done(ctl: u64, first: u32, waiters: u32) {
    if tid() == 0 {
        let done = word(ctl, CHAIN_CTL_DONE);
        while ld_u32_acquire(done) != first {
            nanosleep(WAIT_NS);
        }
        let passed = word(ctl, CHAIN_CTL_PASSED);
        // Every waiter has seen the first part done: nothing else reads either word.
        if atom_add_u32(passed, 1) == waiters - 1 {
            st_u32(done, 0);
            st_u32(passed, 0);
        }
    }
    nvptx::_syncthreads();
}
