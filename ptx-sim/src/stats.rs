//! Per-launch counters.

use std::ops::AddAssign;

/// Warp instructions by cost class. A warp instruction is one issue of an instruction by a warp,
/// whatever the number of active lanes; predicated-off issues count too (they occupy an issue slot
/// on hardware).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassCounts {
    pub int: u64,
    pub fp32: u64,
    /// f16/bf16 scalar and packed arithmetic.
    pub fp16: u64,
    pub fp64: u64,
    pub mem_global: u64,
    pub mem_shared: u64,
    pub mem_local: u64,
    /// Branches, exits, barriers.
    pub control: u64,
    /// `mma.sync`.
    pub tensor: u64,
    /// Conversions, warp shuffles/votes/reductions, fences, parameter loads.
    pub other: u64,
}

/// Counters of one launch (summed over all blocks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaunchStats {
    pub warp_instructions: u64,
    /// Sum over warp instructions of the number of lanes that executed them (guard true, lane
    /// active).
    pub thread_instructions: u64,
    pub by_class: ClassCounts,
    /// Bytes requested by active lanes from global memory (loads, and the read half of atomics),
    /// host-mapped allocations excluded.
    pub global_bytes_read: u64,
    pub global_bytes_written: u64,
    /// Bytes requested from host-mapped allocations ([`crate::Sim::alloc_host_mapped`]): what
    /// crosses the host link.
    pub host_bytes_read: u64,
    /// Distinct host-mapped bytes read in the launch (each byte once however often it is
    /// requested): what crosses the link when the GPU's caches serve repeats. Sums over launches
    /// count a byte again.
    pub host_bytes_fetched: u64,
    pub host_bytes_written: u64,
    /// Bytes requested by active lanes from module-scope variables (the code-book tables of the
    /// grid types): constant data a GPU's L1 serves once warm, so counted apart from
    /// `global_bytes_read` (and from the sector and request counts below).
    pub module_bytes_read: u64,
    /// Warp-level loads from module-scope variables.
    pub module_requests: u64,
    /// Distinct 32-byte sectors touched per warp-level global request, summed (a perfectly
    /// coalesced 4-byte load by 32 lanes touches 4 sectors).
    pub sectors_read: u64,
    pub sectors_written: u64,
    /// Warp-level global memory instructions with at least one active lane.
    pub global_requests: u64,
    /// Warp-level shared memory instructions with at least one active lane.
    pub shared_requests: u64,
    /// Extra shared-memory wavefronts caused by bank conflicts (32 banks of 4 bytes): per request,
    /// the maximum number of distinct 4-byte words mapped to one bank, minus the minimum wavefronts
    /// the request's distinct words need (`ceil(words / 32)`). Lanes reading the same word are a
    /// broadcast, not a conflict.
    pub shared_bank_conflicts: u64,
    /// `bar.sync` completions per block, summed over blocks.
    pub barriers: u64,
    pub blocks: u64,
    /// Lanes that executed a `prefetch` of a global address, summed: each asks for the line that
    /// holds its address (the caller knows the line size). Not part of the traffic above: a
    /// prefetch moves nothing into a register, and its line is read again by a load that is
    /// counted.
    pub prefetch_lanes: u64,
}

impl AddAssign for ClassCounts {
    fn add_assign(&mut self, o: Self) {
        self.int += o.int;
        self.fp32 += o.fp32;
        self.fp16 += o.fp16;
        self.fp64 += o.fp64;
        self.mem_global += o.mem_global;
        self.mem_shared += o.mem_shared;
        self.mem_local += o.mem_local;
        self.control += o.control;
        self.tensor += o.tensor;
        self.other += o.other;
    }
}

impl AddAssign for LaunchStats {
    fn add_assign(&mut self, o: Self) {
        self.warp_instructions += o.warp_instructions;
        self.thread_instructions += o.thread_instructions;
        self.by_class += o.by_class;
        self.global_bytes_read += o.global_bytes_read;
        self.global_bytes_written += o.global_bytes_written;
        self.host_bytes_read += o.host_bytes_read;
        self.host_bytes_fetched += o.host_bytes_fetched;
        self.host_bytes_written += o.host_bytes_written;
        self.module_bytes_read += o.module_bytes_read;
        self.module_requests += o.module_requests;
        self.sectors_read += o.sectors_read;
        self.sectors_written += o.sectors_written;
        self.global_requests += o.global_requests;
        self.shared_requests += o.shared_requests;
        self.shared_bank_conflicts += o.shared_bank_conflicts;
        self.barriers += o.barriers;
        self.prefetch_lanes += o.prefetch_lanes;
        self.blocks += o.blocks;
    }
}
