//! The tables the kernel bench prints.

use std::cmp::Ordering::{Equal, Less};
use std::fmt::Write;

use crate::cases::Case;
use crate::sass::{GemvSass, ARCHS};
use crate::sim::SimReport;

/// One timed case on a GPU.
#[derive(Clone, Copy)]
pub struct GpuResult {
    pub case: Case,
    /// Median GPU time of one launch, seconds.
    pub median_s: f64,
    /// Bytes the kernel must read plus write.
    pub required: usize,
    /// Bytes the rotation sets span.
    pub working_set: usize,
    /// Whether the working set exceeds the L2 rotation target (else timed L2-warm).
    pub cold: bool,
}

impl GpuResult {
    /// Required bytes over time, GB/s (10^9 B/s).
    pub fn gbps(&self) -> f64 {
        self.required as f64 / self.median_s / 1e9
    }
}

/// The cold cases whose figure exceeds the device-to-device copy bandwidth measured in the same
/// run. A kernel that reads its weights from DRAM cannot move bytes faster than a copy does, so
/// any such case means the timing is broken (events not ordered with the kernels, launches that
/// did not run) and the whole bench is invalid. Warm cases (working set inside the L2 rotation
/// target) are exempt: reading from L2 may legitimately beat a DRAM copy; so are the prefill
/// products, whose required bytes count L2 re-reads by design ([`Case::counts_cache_rereads`]).
pub fn over_copy(results: &[GpuResult], copy_gbps: f64) -> Vec<&GpuResult> {
    results
        .iter()
        .filter(|r| {
            r.cold
                && !r.case.counts_cache_rereads()
                && !matches!(r.gbps().partial_cmp(&copy_gbps), Some(Less | Equal))
        })
        .collect()
}

fn shape(c: &Case) -> String {
    format!("{}x{}", c.shape.rows, c.shape.cols)
}

/// The GPU table: median time, GB/s and the fraction of the copy bandwidth `copy_gbps`.
pub fn gpu_table(results: &[GpuResult], copy_gbps: f64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<25} {:<22} {:>12} {:>10} {:>9} {:>7} {:>9}  L2",
        "kernel", "tensor", "shape", "median us", "GB/s", "% copy", "set MB"
    );
    for r in results {
        let _ = writeln!(
            s,
            "{:<25} {:<22} {:>12} {:>10.2} {:>9.1} {:>6.1}% {:>9.1}  {}",
            r.case.kernel,
            r.case.tensor,
            shape(&r.case),
            r.median_s * 1e6,
            r.gbps(),
            100.0 * r.gbps() / copy_gbps,
            r.working_set as f64 / 1e6,
            match (r.cold, r.gbps() > copy_gbps) {
                _ if r.case.counts_cache_rereads() => "tile re-reads counted (L2 by design)",
                (true, true) => "cold  INVALID: above the copy bandwidth",
                (true, false) => "cold",
                (false, true) => "warm (L2-resident, above the DRAM copy)",
                (false, false) => "warm",
            },
        );
    }
    s
}

/// The simulator table: counters per case, required bytes at the rows that ran.
pub fn sim_table(reports: &[SimReport]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<25} {:<22} {:>13} {:>11} {:>9} {:>10} {:>10} {:>9} {:>8} {:>7} {:>9}",
        "kernel",
        "tensor",
        "rows run/real",
        "warp instr",
        "instr/row",
        "read KB",
        "need KB",
        "read/need",
        "sect/req",
        "sect eff",
        "table KB"
    );
    for r in reports {
        let _ = writeln!(
            s,
            "{:<25} {:<22} {:>13} {:>11} {:>9.0} {:>10.1} {:>10.1} {:>9.3} {:>8.2} {:>6.1}% {:>9.1}",
            r.case.kernel,
            r.case.tensor,
            format!(
                "{}{}/{}",
                r.shape.rows,
                if r.reduced() { "*" } else { "" },
                r.case.shape.rows
            ),
            r.stats.warp_instructions,
            r.stats.warp_instructions as f64 / r.shape.rows.max(1) as f64,
            r.stats.global_bytes_read as f64 / 1e3,
            r.required_read as f64 / 1e3,
            r.read_ratio(),
            r.sectors_per_request(),
            100.0 * r.sector_efficiency(),
            r.stats.module_bytes_read as f64 / 1e3,
        );
    }
    s
}

/// The SASS table: each gemv's weight-streaming loop and its instructions per 256 weights.
pub fn sass_table(rows: &[GemvSass]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<25} {:>11} {:>11} {:>12} {:>15} {:>15}",
        "kernel",
        format!("loop {}", ARCHS[0]),
        format!("loop {}", ARCHS[1]),
        "weights/iter",
        format!("SASS/256w {}", ARCHS[0]),
        format!("SASS/256w {}", ARCHS[1]),
    );
    let count = |n: Option<usize>| n.map_or("unpaired".to_string(), |n| n.to_string());
    let per = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    for r in rows {
        let _ = writeln!(
            s,
            "{:<25} {:>11} {:>11} {:>12} {:>15} {:>15}",
            r.kernel,
            count(r.loop_insts[0]),
            count(r.loop_insts[1]),
            r.weights_per_iteration,
            per(r.per_256_weights(0)),
            per(r.per_256_weights(1)),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases::CASES;

    fn result(cold: bool, median_s: f64) -> GpuResult {
        GpuResult {
            case: CASES[0],
            median_s,
            required: 1_000_000_000,
            working_set: 0,
            cold,
        }
    }

    #[test]
    fn a_cold_case_above_the_copy_invalidates_the_bench() {
        // 1 GB in 1 s = 1 GB/s, in 0.25 s = 4 GB/s; the copy ran at 2 GB/s.
        let rs = [result(true, 1.0), result(true, 0.25), result(false, 0.25)];
        let bad = over_copy(&rs, 2.0);
        assert_eq!(bad.len(), 1, "only the cold case above the copy");
        assert!(bad[0].cold && bad[0].gbps() > 2.0);
        assert!(gpu_table(&rs, 2.0).contains("INVALID"));
        // A zero time (events that timed nothing) gives an infinite figure: invalid too.
        assert_eq!(over_copy(&[result(true, 0.0)], 2.0).len(), 1);
        assert_eq!(over_copy(&[result(true, f64::NAN)], 2.0).len(), 1);
    }

    #[test]
    fn a_prefill_product_above_the_copy_does_not() {
        let mmq = CASES
            .iter()
            .find(|c| c.counts_cache_rereads())
            .expect("an mmq case");
        let r = GpuResult {
            case: *mmq,
            ..result(true, 0.25)
        };
        assert!(over_copy(std::slice::from_ref(&r), 2.0).is_empty());
        assert!(gpu_table(&[r], 2.0).contains("L2 by design"));
        assert!(!CASES[0].counts_cache_rereads());
    }
}
