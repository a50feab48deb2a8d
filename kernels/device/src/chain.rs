//! Blocks that wait on each other inside one launch: a block's work is the ticket it draws at
//! its start ([`ticket_at`]), not its index, and a block waits only for work of lower tickets
//! ([`wait_then_pass`]), which blocks that have started drew, so every wait ends on any GPU
//! whatever blocks are resident (docs/ptx-sim.md, "Blocks that wait on each other").
//!
//! Users: the gate/up kernel with its router (`crate::moe_gate_up`: routed blocks wait for the
//! routing) and the chained launch of two kernels' blocks in one grid
//! (`ingot_abi::launch::attn_out`: [`ticket`], [`done`], [`wait_done`] on its
//! `CHAIN_CTL_WORDS` control words, 0 before and after every launch).

use crate::intrinsics::{
    atom_add_u32, fence_acq_rel_gpu, ld_u32_acquire, lds_u32, nanosleep, nblocks,
    red_release_add_u32_if, st_u32, sts_u32, tid,
};
use core::arch::{asm, global_asm, nvptx};
use ingot_abi::launch::{CHAIN_CTL_DONE, CHAIN_CTL_PASSED, CHAIN_CTL_TICKET};

// The block's ticket, written by thread 0.
global_asm!(".shared .align 4 .b8 chain_ticket[4];");

/// Sleep between two looks at a word a block waits on (nanoseconds): short beside the
/// microseconds of the work it waits for, long enough to leave the SM's issue slots to the
/// blocks that compute.
const WAIT_NS: u32 = 64;

#[inline(always)]
unsafe fn word(ctl: u64, w: u32) -> u64 {
    ctl + 4 * w as u64
}

/// The block's ticket: thread 0 draws it from the word at `word` (the block that draws the last
/// sets the word back to 0) and hands it to the block through shared memory. Every thread of
/// the block calls it (a barrier).
#[inline(always)]
pub(crate) unsafe fn ticket_at(word: u64) -> u32 {
    let slot: u32;
    asm!("mov.u32 {a}, chain_ticket;", a = out(reg32) slot, options(pure, nomem, nostack));
    if tid() == 0 {
        let k = atom_add_u32(word, 1);
        // Every block has drawn: nothing else touches the word in this launch.
        if k == nblocks() - 1 {
            st_u32(word, 0);
        }
        sts_u32(slot, k);
    }
    nvptx::_syncthreads();
    lds_u32(slot)
}

/// Thread 0 waits until the word at `ready` holds `target` (an acquire spin that sleeps between
/// looks), then counts the block among the `waiters` blocks that wait for it in the word at
/// `passed`; the last to pass sets both words back to 0. The barrier hands the acquired view
/// to the block's other threads. Every thread of the block calls it.
#[inline(always)]
pub(crate) unsafe fn wait_then_pass(ready: u64, target: u32, passed: u64, waiters: u32) {
    if tid() == 0 {
        while ld_u32_acquire(ready) != target {
            nanosleep(WAIT_NS);
        }
        // Every waiter has seen the count: nothing else reads either word.
        if atom_add_u32(passed, 1) == waiters - 1 {
            st_u32(ready, 0);
            st_u32(passed, 0);
        }
    }
    nvptx::_syncthreads();
}

/// [`ticket_at`] word `CHAIN_CTL_TICKET` of a chained launch's control words `ctl`.
#[inline(always)]
pub(crate) unsafe fn ticket(ctl: u64) -> u32 {
    ticket_at(word(ctl, CHAIN_CTL_TICKET))
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

/// Waits until the `first` blocks of the first part are [`done`] ([`wait_then_pass`] on words
/// `CHAIN_CTL_DONE` and `CHAIN_CTL_PASSED`, `waiters` blocks in the second part).
#[inline(always)]
pub(crate) unsafe fn wait_done(ctl: u64, first: u32, waiters: u32) {
    let (done, passed) = (word(ctl, CHAIN_CTL_DONE), word(ctl, CHAIN_CTL_PASSED));
    wait_then_pass(done, first, passed, waiters);
}
