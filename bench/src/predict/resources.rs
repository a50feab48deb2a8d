//! Per-kernel resources from the audit: registers per thread (the ratcheted ceilings of
//! `kernels/audit-budgets.toml`, which `ptx-audit check` keeps at or above ptxas's figures) and
//! static shared memory (the PTX analysis of `ptx-audit`).

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use ptx_audit::Budgets;
use ptx_front::entries::{entries, Entries};
use ptx_front::{Function, PtxModule};

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

/// Resources of `kernel` for `arch` (`sm_86` or `sm_90`; other architectures take the sm_86
/// figures, the closest ptxas target the audit runs); the default (no registers, no static shared
/// memory) for a name that is not a kernel of the committed PTX.
pub fn kernel_resources(arch: &str, kernel: &str) -> Result<KernelResources, PredictError> {
    let Some(static_shared) = static_shared(kernel)? else {
        return Ok(KernelResources::default());
    };
    let budgets = budgets()?;
    let key = if arch == "sm_90" {
        "registers_sm90"
    } else {
        "registers_sm86"
    };
    let registers = budgets
        .kernels
        .get(kernel)
        .and_then(|m| m.get(key))
        .map(|&r| r as u32);
    Ok(KernelResources {
        registers,
        static_shared,
    })
}

/// The committed budgets, parsed once per process.
fn budgets() -> Result<&'static Budgets, PredictError> {
    static BUDGETS_PARSED: OnceLock<Result<Budgets, String>> = OnceLock::new();
    BUDGETS_PARSED
        .get_or_init(|| Budgets::parse(BUDGETS).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| PredictError::Audit(e.clone()))
}

/// Static shared bytes of `kernel` (`None`: no such kernel in the committed PTX) as the audit's
/// analysis counts them (its own `.shared` declarations and the module-scope ones it names), once
/// per kernel and process. Each kernel is parsed at its first use from a text of the PTX's header
/// and that kernel: a prediction uses a few dozen of the PTX's kernels, and parsing all 21 MB
/// took every process that predicted seconds and gigabytes. The header holds every module-scope
/// declaration ([`entries`] gives up otherwise, and the module is then parsed whole), so the sum
/// is the whole module's; the test `one_kernel_at_a_time_is_the_whole_modules_figure` checks
/// every kernel.
fn static_shared(kernel: &str) -> Result<Option<u32>, PredictError> {
    static SPLIT: OnceLock<Option<Entries>> = OnceLock::new();
    static KNOWN: Mutex<BTreeMap<String, Option<u32>>> = Mutex::new(BTreeMap::new());
    let known = |k: &str| {
        KNOWN
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(k)
            .copied()
    };
    if let Some(bytes) = known(kernel) {
        return Ok(bytes);
    }
    let ptx = ingot_kernels::PTX;
    let bytes = match SPLIT.get_or_init(|| entries(ptx)) {
        Some(split) => match split.kernels.iter().find(|(name, _)| name == kernel) {
            Some((_, range)) => {
                let text = format!("{}{}", &ptx[..split.header_end], &ptx[range.clone()]);
                let module =
                    PtxModule::parse(&text).map_err(|e| PredictError::Audit(e.to_string()))?;
                let found = module.kernels().find(|k| k.name == kernel);
                found.map(|k| shared_bytes(k, &module))
            }
            None => None,
        },
        None => whole_module()?.get(kernel).copied(),
    };
    KNOWN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(kernel.to_string(), bytes);
    Ok(bytes)
}

fn shared_bytes(kernel: &Function, module: &PtxModule) -> u32 {
    kernel.shared_usage(module).0 as u32
}

/// Static shared bytes of every kernel, the committed PTX parsed whole once per process (when
/// [`entries`] cannot split it).
fn whole_module() -> Result<&'static BTreeMap<String, u32>, PredictError> {
    static SHARED: OnceLock<Result<BTreeMap<String, u32>, String>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            let module = PtxModule::parse(ingot_kernels::PTX).map_err(|e| e.to_string())?;
            Ok(module
                .kernels()
                .map(|k| (k.name.clone(), shared_bytes(k, &module)))
                .collect())
        })
        .as_ref()
        .map_err(|e| PredictError::Audit(e.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ptx_audit::analysis::analyze_module;

    /// Every kernel's figure, each parsed from the header and its own text, is the one the
    /// audit's analysis of the whole module gives, and the split names every kernel.
    #[test]
    fn one_kernel_at_a_time_is_the_whole_modules_figure() {
        let split = entries(ingot_kernels::PTX).expect("the committed PTX splits into kernels");
        let module = PtxModule::parse(ingot_kernels::PTX).unwrap();
        let whole = analyze_module(&module);
        let names: Vec<&str> = split.kernels.iter().map(|(n, _)| n.as_str()).collect();
        let whole_names: Vec<&str> = whole.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, whole_names);
        for k in &whole {
            assert_eq!(
                static_shared(&k.name).unwrap(),
                Some(k.shared_bytes as u32),
                "{}",
                k.name
            );
        }
        assert_eq!(static_shared("no_such_kernel").unwrap(), None);
        assert_eq!(
            kernel_resources("sm_90", "no_such_kernel").unwrap(),
            KernelResources::default()
        );
    }
}
