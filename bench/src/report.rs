//! The tables the kernel bench prints.

use std::fmt::Write;

use crate::cases::Case;
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
            if r.cold { "cold" } else { "warm" },
        );
    }
    s
}

/// The simulator table: counters per case, required bytes at the rows that ran.
pub fn sim_table(reports: &[SimReport]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<25} {:<22} {:>13} {:>11} {:>9} {:>10} {:>10} {:>9} {:>8} {:>7}",
        "kernel",
        "tensor",
        "rows run/real",
        "warp instr",
        "instr/row",
        "read KB",
        "need KB",
        "read/need",
        "sect/req",
        "sect eff"
    );
    for r in reports {
        let _ = writeln!(
            s,
            "{:<25} {:<22} {:>13} {:>11} {:>9.0} {:>10.1} {:>10.1} {:>9.3} {:>8.2} {:>6.1}%",
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
        );
    }
    s
}
