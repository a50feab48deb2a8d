//! Running a large launch on a sample of its blocks and scaling the counters.
//!
//! A block's work depends only on its index and the arguments (a last-block-done tail runs in
//! the last block, which the sample always holds; a launch whose blocks take tickets and wait
//! on each other is counted by [`super::tickets`] instead); within a launch the blocks differ
//! only at the edges (a last partial block of rows, the last split-K segment, the shared
//! expert's rows after the routed experts'). The sample is therefore evenly spaced over the grid
//! and always holds the first and the last block: `s` blocks at indices
//! `round(i·(n−1)/(s−1))`. The last block is counted as itself; the others stand for the
//! `n − 1` blocks before it, so a counter `c` scales as `c_last + (Σ c_others)·(n−1)/(s−1)`.
//! Exact when the blocks other than the last are alike; `tests/predict_sample.rs` compares it
//! with full runs.

use ptx_sim::{ClassCounts, LaunchStats};

/// Block indices of a sample of at most `max` (≥ 2) blocks of an `n`-block grid, ascending and
/// distinct; all blocks when `n ≤ max`. The last index is `n − 1`.
pub fn sample_blocks(n: u64, max: u64) -> Vec<u64> {
    let max = max.max(2);
    if n <= max {
        return (0..n).collect();
    }
    let mut v: Vec<u64> = (0..max)
        .map(|i| ((i as u128 * (n - 1) as u128 + (max - 1) as u128 / 2) / (max - 1) as u128) as u64)
        .collect();
    v.dedup();
    v
}

/// The counters of the full `n`-block launch estimated from `others` (the sampled blocks but
/// the last, `sampled_others` of them) and `last` (the last block alone); see the module docs.
pub fn scale(others: &LaunchStats, sampled_others: u64, last: &LaunchStats, n: u64) -> LaunchStats {
    if sampled_others == 0 {
        return *last;
    }
    let f = (n - 1) as f64 / sampled_others as f64;
    let s = |v: u64| (v as f64 * f).round() as u64;
    let c = &others.by_class;
    let mut out = LaunchStats {
        warp_instructions: s(others.warp_instructions),
        thread_instructions: s(others.thread_instructions),
        by_class: ClassCounts {
            int: s(c.int),
            fp32: s(c.fp32),
            fp16: s(c.fp16),
            fp64: s(c.fp64),
            mem_global: s(c.mem_global),
            mem_shared: s(c.mem_shared),
            mem_local: s(c.mem_local),
            control: s(c.control),
            tensor: s(c.tensor),
            other: s(c.other),
        },
        global_bytes_read: s(others.global_bytes_read),
        global_bytes_written: s(others.global_bytes_written),
        host_bytes_read: s(others.host_bytes_read),
        host_bytes_fetched: s(others.host_bytes_fetched),
        host_bytes_written: s(others.host_bytes_written),
        module_bytes_read: s(others.module_bytes_read),
        module_requests: s(others.module_requests),
        sectors_read: s(others.sectors_read),
        sectors_written: s(others.sectors_written),
        global_requests: s(others.global_requests),
        shared_requests: s(others.shared_requests),
        shared_bank_conflicts: s(others.shared_bank_conflicts),
        barriers: s(others.barriers),
        blocks: n - 1,
        prefetch_lanes: s(others.prefetch_lanes),
    };
    out += *last;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_cover_both_ends_evenly() {
        assert_eq!(sample_blocks(5, 8), vec![0, 1, 2, 3, 4]);
        assert_eq!(sample_blocks(101, 5), vec![0, 25, 50, 75, 100]);
        let s = sample_blocks(1000, 64);
        assert_eq!((s[0], *s.last().unwrap(), s.len()), (0, 999, 64));
        assert!(s.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn scaling_uniform_blocks_is_exact() {
        let one = LaunchStats {
            warp_instructions: 100,
            sectors_read: 7,
            blocks: 1,
            ..LaunchStats::default()
        };
        let mut others = LaunchStats::default();
        for _ in 0..3 {
            others += one;
        }
        let last = LaunchStats {
            warp_instructions: 40,
            blocks: 1,
            ..LaunchStats::default()
        };
        let t = scale(&others, 3, &last, 10);
        assert_eq!(t.warp_instructions, 9 * 100 + 40);
        assert_eq!(t.sectors_read, 9 * 7);
        assert_eq!(t.blocks, 10);
    }
}
