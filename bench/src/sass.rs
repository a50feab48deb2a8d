//! SASS instructions per 256 weights in the gemv kernels' weight-streaming loop ("SASS per
//! super-block"): ptxas and cuobjdump, the audit's tools, from `INGOT_PTXAS` and
//! `INGOT_CUOBJDUMP` (or `PATH`; `cargo xtask tools` installs them and prints their paths;
//! `cargo xtask test` passes them), on the PTX the bench simulates, compiling only the benched
//! kernels (`ptxas --entry`).
//!
//! The figure is the loop's static instruction count over the weights one iteration of a warp
//! covers ([`GEMV_UNITS_IN_FLIGHT`] units per lane group); at a card's bandwidth it gives the
//! issue rate a gemv needs to stay bandwidth-bound (docs/perf.md derives it per card).

use crate::error::{BenchError, Result};
use ingot_abi::launch::GEMV_UNITS_IN_FLIGHT;
use ingot_kernels::ops::gemv::GemvType;
use ptx_audit::audit::{audit_kernels, KernelReport};
use ptx_audit::tools::ToolSearch;

/// The audited architectures, in `ptx_audit::ptxas::ARCHS` order.
pub const ARCHS: [&str; 2] = ptx_audit::ptxas::ARCHS;

/// The weight-streaming loop of one gemv kernel.
pub struct GemvSass {
    pub kernel: &'static str,
    /// SASS instructions of the loop per architecture ([`ARCHS`]); `None` where ptxas's loops
    /// did not pair with the PTX loops.
    pub loop_insts: [Option<usize>; 2],
    /// Weights one loop iteration of a warp covers.
    pub weights_per_iteration: u32,
}

impl GemvSass {
    /// SASS instructions per 256 weights on architecture `arch` (index into [`ARCHS`]).
    pub fn per_256_weights(&self, arch: usize) -> Option<f64> {
        self.loop_insts[arch].map(|n| n as f64 * 256.0 / f64::from(self.weights_per_iteration))
    }
}

/// The plain gemv kernels among `kernels` (the others are left out), audited. Fails when the
/// tools are missing (the caller announces the skip).
pub fn gemv_sass(kernels: &[&'static str]) -> Result<Vec<GemvSass>> {
    let mut gemvs: Vec<(&'static str, GemvType)> = Vec::new();
    for &k in kernels {
        if let Some(&t) = GemvType::ALL.iter().find(|t| t.plain().name == k) {
            if !gemvs.iter().any(|&(g, _)| g == k) {
                gemvs.push((k, t));
            }
        }
    }
    if gemvs.is_empty() {
        return Ok(Vec::new());
    }
    let tools = ToolSearch::from_env().tools()?;
    let ptx = std::env::temp_dir().join(format!("ingot-bench-{}.ptx", std::process::id()));
    std::fs::write(&ptx, ingot_kernels::PTX).map_err(|source| BenchError::Io {
        path: ptx.clone(),
        source,
    })?;
    let names: Vec<&str> = gemvs.iter().map(|&(k, _)| k).collect();
    let reports = audit_kernels(&ptx, &tools, &names);
    let _ = std::fs::remove_file(&ptx);
    let reports = reports?;
    Ok(gemvs
        .iter()
        .filter_map(|&(kernel, ty)| {
            let r = reports.iter().find(|r| r.ptx.name == kernel)?;
            let unit = ty.unit();
            Some(GemvSass {
                kernel,
                loop_insts: weight_loop(r),
                weights_per_iteration: GEMV_UNITS_IN_FLIGHT * 32 / unit.lanes * unit.elems,
            })
        })
        .collect())
}

/// SASS instructions of the weight-streaming loop: the largest guard-free innermost PTX loop
/// (the remainder loop after it carries the `u < nunits` guard), through its paired SASS loop.
fn weight_loop(r: &KernelReport) -> [Option<usize>; 2] {
    let main = r
        .ptx
        .loops
        .iter()
        .filter(|l| l.innermost)
        .enumerate()
        .filter(|(_, l)| l.guards.is_empty())
        .max_by_key(|(_, l)| l.ptx_insts)
        .map(|(n, _)| n);
    std::array::from_fn(|a| {
        let n = main?;
        r.archs.get(a)?.paired(n).map(|l| l.insts)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs ptxas on one kernel when the tools are installed (CI installs them); says so when
    /// they are not.
    #[test]
    fn q4k_weight_loop_is_found_and_scaled_to_256_weights() {
        let rows = match gemv_sass(&["gemv_q4k_q8_1", "rmsnorm_f32", "gemv_q4k_q8_1"]) {
            Ok(rows) => rows,
            Err(BenchError::Audit(ptx_audit::AuditError::ToolMissing { .. })) => {
                println!("SKIPPED: ptxas/cuobjdump not found (INGOT_PTXAS/INGOT_CUOBJDUMP unset; `cargo xtask test` sets them)");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        assert_eq!(
            rows.len(),
            1,
            "one row per distinct gemv kernel, others left out"
        );
        let r = &rows[0];
        // Q4_K: 8 lanes per 256-weight unit, two units in flight: 8 super-blocks per iteration.
        assert_eq!(r.weights_per_iteration, 2048);
        for (arch, name) in ARCHS.iter().enumerate() {
            let n = r.loop_insts[arch].expect("the Q4_K loops pair");
            // The loop dots 8 super-blocks: far more than a remainder or staging loop, far
            // fewer than the whole kernel.
            assert!((100..1000).contains(&n), "{name}: {n}");
            assert_eq!(r.per_256_weights(arch), Some(n as f64 / 8.0));
        }
    }
}
