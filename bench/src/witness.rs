//! The witness line a bench prints first: which machine, in which state, produced the numbers.

use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;

/// GPU `index` as NVML sees it now: name, driver, enforced power limit, current SM and memory
/// clocks, temperature and PCIe link. A field NVML cannot report reads `?`. Without a driver
/// this is NVML's error (it loads `libnvidia-ml.so.1` at run time and never panics).
pub fn gpu(index: u32) -> Result<String, NvmlError> {
    let nvml = Nvml::init()?;
    let d = nvml.device_by_index(index)?;
    let or_q = |r: Result<String, NvmlError>| r.unwrap_or_else(|_| "?".into());
    Ok(format!(
        "gpu: {} | driver {} | power limit {} W (enforced) | SM {} MHz, mem {} MHz | {} C | PCIe gen{} x{}",
        or_q(d.name()),
        or_q(nvml.sys_driver_version()),
        or_q(d.enforced_power_limit().map(|mw| format!("{:.0}", f64::from(mw) / 1e3))),
        or_q(d.clock_info(Clock::SM).map(|v| v.to_string())),
        or_q(d.clock_info(Clock::Memory).map(|v| v.to_string())),
        or_q(d.temperature(TemperatureSensor::Gpu).map(|v| v.to_string())),
        or_q(d.current_pcie_link_gen().map(|v| v.to_string())),
        or_q(d.current_pcie_link_width().map(|v| v.to_string())),
    ))
}

/// The CPU model from `/proc/cpuinfo` (`model name`), or `unknown CPU` where there is none.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| parse_cpu_model(&text))
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The first `model name` value of a `/proc/cpuinfo` text.
pub fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "model name").then(|| value.trim().to_string())
    })
}

/// Threads of rayon's global pool, which the CPU backend and the simulator run on.
pub fn rayon_threads() -> usize {
    rayon::current_num_threads()
}

/// The CPU witness: model, the instruction set the CPU backend's kernels run on (`INGOT_CPU_ISA`
/// can lower it), whether its Q4_K rows are packed at load (`INGOT_CPU_REPACK=0` keeps them as
/// the file has them) and the thread count the caller runs with.
pub fn cpu(threads: usize) -> String {
    use ingot_quant::cpu_dot::{packed, Isa};
    let isa = Isa::detect();
    let packed = if packed::packs(ingot_gguf::GgmlType::Q4K, isa) {
        ", Q4_K packed"
    } else {
        ""
    };
    format!(
        "cpu: {} | {} kernels{packed} | {threads} threads (rayon)",
        cpu_model(),
        isa.name()
    )
}
