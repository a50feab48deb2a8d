//! L2 prefetch and the grid-dependency markers of programmatic dependent launch.
//!
//! The markers are PTX comments on `sm_86`, where `griddepcontrol` does not exist;
//! `ingot_kernels::grid_dep::for_sm90` puts the instructions in their place for `sm_90`. Each
//! marker is an `asm!` with memory effects (no `pure`/`nomem`/`readonly`), so LLVM keeps every
//! load and store of the kernel on the side of it where the source has it.

use core::arch::asm;

/// `prefetch.global.L2` of the line holding global address `a` where `p` holds: a hint that
/// moves nothing into a register, so it may precede the grid-dependency wait when `a` is a
/// weight (which no kernel writes). Predicated, not branched: lanes with
/// nothing to prefetch do not branch around it. `a` must lie inside a buffer of the launch
/// where `p` holds (ptx-sim checks it). The plain (`evict_normal`) form: an `L2::evict_last`
/// line would outlive its one read of the step and crowd the L2 for the ~1.6 GB of weights
/// that follow (see docs/perf.md, issue 36).
#[inline(always)]
pub unsafe fn prefetch_l2_if(p: bool, a: u64) {
    asm!("{{ .reg .pred p; setp.ne.u32 p, {c}, 0; @p prefetch.global.L2 [{a}]; }}",
         c = in(reg32) p as u32, a = in(reg64) a, options(nostack, readonly));
}

/// Where the kernel waits for its predecessor grid to complete and flush its memory
/// (`griddepcontrol.wait` on `sm_90`, a comment on `sm_86`, where the predecessor is complete
/// before the kernel starts). No global load or store may precede it (ptx-sim faults on one).
#[inline(always)]
pub unsafe fn grid_dep_wait_marker() {
    asm!("// ingot:griddepcontrol.wait", options(nostack));
}

/// Where the kernel lets its dependent grid be scheduled (`griddepcontrol.launch_dependents`
/// on `sm_90`, a comment on `sm_86`). Scheduling only: the dependent still waits for this whole
/// grid to complete before its own first load.
#[inline(always)]
pub unsafe fn grid_dep_launch_marker() {
    asm!(
        "// ingot:griddepcontrol.launch_dependents",
        options(nostack)
    );
}
