//! A block's weights streamed into L2 before it waits for its predecessor grid.
//!
//! On `sm_90` a kernel of the decode graph is launched while its predecessor still runs
//! (programmatic dependent launch, `ingot_kernels::grid_dep`). Its weights never depend on the
//! activations, so a block can request its weight rows from DRAM first and wait afterwards;
//! the DRAM stream then overlaps the predecessor instead of starting after it. On `sm_86` the
//! wait is a comment, and the prefetches run just before the loads of the same lines.
//!
//! A launch can also prefetch for the launches after it ([`prefetch_ahead_then_wait`]): the
//! flash kernels, whose short-context DRAM stream is small, hand the next weights ahead.
//!
//! [`prefetch_then_wait`] is the whole protocol: the prefetches, then the wait marker, then the
//! launch marker (the order the rewrite gives kernels without markers). A kernel that calls it
//! must make no global access before it: ptx-sim faults on one in the rewritten PTX.

use crate::intrinsics::{
    bid, global, grid_dep_launch_marker, grid_dep_wait_marker, nblocks, prefetch_l2_if, tid,
};
use ingot_abi::launch::FLASH_HANDOFF_LINES_PER_THREAD;

/// Bytes between a thread's prefetch addresses: the L2 line (128 bytes on sm_80 to sm_90; the
/// PTX ISA defines `prefetch` as bringing in the line that holds the address).
pub(crate) const LINE: u64 = 128;

/// Prefetches into L2 the lines of each span `[start, end)` (global addresses of one buffer,
/// `start <= end`; an empty span prefetches nothing), shared by the `threads` threads of the
/// block (this thread is `t < threads`): thread `t` takes the lines that hold `start + (t +
/// k·threads)·LINE` for `k < K`. Then marks the grid-dependency wait and the point from which
/// dependents may launch. Every address prefetched lies in its span.
///
/// `K` caps the prefetch at `K·threads·LINE` bytes per span: rows beyond it are read after the
/// wait as before (the kernels choose `K` to cover their spans at the V2-Lite shapes). It is a
/// constant so the loops below unroll into `K·N` predicated instructions and no loop: the
/// audit's hot loops are unchanged. The last line of a span whose `start` is not line-aligned
/// may be left out (up to `LINE − 1` bytes of it), which only makes the hint smaller.
#[inline(always)]
pub(crate) unsafe fn prefetch_then_wait<const K: u32, const N: usize>(
    spans: [(u64, u64); N],
    t: u32,
    threads: u32,
) {
    prefetch_spans::<K, N>(spans, t, threads);
    mark_wait();
}

/// [`prefetch_then_wait`]'s prefetches alone: for a kernel whose blocks choose between two
/// spans' prefetches, each branch prefetching its own, then one [`mark_wait`] after both (a
/// kernel holds one wait).
#[inline(always)]
pub(crate) unsafe fn prefetch_spans<const K: u32, const N: usize>(
    spans: [(u64, u64); N],
    t: u32,
    threads: u32,
) {
    let mut s = 0;
    while s < N {
        let (start, end) = spans[s];
        let mut k = 0;
        while k < K {
            let a = start + (t + k * threads) as u64 * LINE;
            prefetch_l2_if(a < end, a);
            k += 1;
        }
        s += 1;
    }
}

/// [`prefetch_then_wait`]'s markers alone: the grid-dependency wait, then the point from which
/// dependents may launch.
#[inline(always)]
pub(crate) unsafe fn mark_wait() {
    grid_dep_wait_marker();
    grid_dep_launch_marker();
}

/// [`prefetch_then_wait`] over the whole grid, for the launches that come after this one: the
/// first `bytes` of each span `(pointer, bytes)` (a generic pointer to global memory), shared by
/// every thread of every block (`threads_per_block` each, block-major), at most
/// `FLASH_HANDOFF_LINES_PER_THREAD` lines per thread and span. A launch whose own DRAM stream
/// leaves the bandwidth idle (a short context's attention) streams its successors' weights
/// into L2 this way; on `sm_86`, where nothing launches early, it is the only way a weight
/// stream can start before its kernel does.
#[inline(always)]
pub(crate) unsafe fn prefetch_ahead_then_wait<const N: usize>(
    spans: [(*const u8, u32); N],
    threads_per_block: u32,
) {
    let t = bid().wrapping_mul(threads_per_block).wrapping_add(tid());
    let threads = nblocks().wrapping_mul(threads_per_block);
    let mut lines = [(0u64, 0u64); N];
    let mut s = 0;
    while s < N {
        let a = global(spans[s].0);
        lines[s] = (a, a + spans[s].1 as u64);
        s += 1;
    }
    prefetch_then_wait::<FLASH_HANDOFF_LINES_PER_THREAD, N>(lines, t, threads);
}
