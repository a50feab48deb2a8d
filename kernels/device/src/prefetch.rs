//! A block's weights streamed into L2 before it waits for its predecessor grid.
//!
//! On `sm_90` a kernel of the decode graph is launched while its predecessor still runs
//! (programmatic dependent launch, `ingot_kernels::grid_dep`). Its weights never depend on the
//! activations, so a block can request its weight rows from DRAM first and wait afterwards;
//! the DRAM stream then overlaps the predecessor instead of starting after it. On `sm_86` the
//! wait is a comment, and the prefetches run just before the loads of the same lines.
//!
//! [`prefetch_then_wait`] is the whole protocol: the prefetches, then the wait marker, then the
//! launch marker (the order the rewrite gives kernels without markers). A kernel that calls it
//! must make no global access before it: ptx-sim faults on one in the rewritten PTX.

use crate::intrinsics::{grid_dep_launch_marker, grid_dep_wait_marker, prefetch_l2_if};

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
    grid_dep_wait_marker();
    grid_dep_launch_marker();
}
