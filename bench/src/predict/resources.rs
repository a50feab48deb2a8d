//! Per-kernel resources from the audit: registers per thread (the ratcheted ceilings of
//! `kernels/audit-budgets.toml`, which `ptx-audit check` keeps at or above ptxas's figures) and
//! static shared memory (the PTX analysis of `ptx-audit`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use ptx_audit::analysis::analyze_module;
use ptx_audit::Budgets;
use ptx_front::PtxModule;

use super::PredictError;

/// The audit budgets as committed beside the PTX.
const BUDGETS: &str = include_str!("../../../kernels/audit-budgets.toml");

/// Registers and static shared memory of one kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelResources {
    /// Registers per thread; `None` when the budgets do not list the kernel.
    pub registers: Option<u32>,
    pub static_shared: u32,
}

/// Resources of every kernel of the committed PTX for `arch` (`sm_86` or `sm_90`; other
/// architectures take the sm_86 figures, the closest ptxas target the audit runs).
pub fn kernel_resources(arch: &str) -> Result<BTreeMap<String, KernelResources>, PredictError> {
    let budgets = Budgets::parse(BUDGETS).map_err(PredictError::Audit)?;
    let key = if arch == "sm_90" {
        "registers_sm90"
    } else {
        "registers_sm86"
    };
    Ok(static_shared()?
        .iter()
        .map(|(name, &static_shared)| {
            let registers = budgets
                .kernels
                .get(name)
                .and_then(|m| m.get(key))
                .map(|&r| r as u32);
            let r = KernelResources {
                registers,
                static_shared,
            };
            (name.clone(), r)
        })
        .collect())
}

/// Static shared bytes of every kernel of the committed PTX, analysed once per process: the
/// analysis parses all 21 MB of it, seconds of work that every prediction would repeat.
fn static_shared() -> Result<&'static BTreeMap<String, u32>, PredictError> {
    static SHARED: OnceLock<Result<BTreeMap<String, u32>, String>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            let module = PtxModule::parse(ingot_kernels::PTX).map_err(|e| e.to_string())?;
            Ok(analyze_module(&module)
                .into_iter()
                .map(|k| (k.name, k.shared_bytes as u32))
                .collect())
        })
        .as_ref()
        .map_err(|e| PredictError::Audit(e.clone()))
}
