//! Published figures of the cards the model predicts for. Every number here is from the vendor's
//! documents named in [`Card::source`]; per-SM limits are those of the card's compute capability
//! in the CUDA C++ Programming Guide ("Features and Technical Specifications", table of technical
//! specifications per compute capability).

use serde::Serialize;

/// One GPU as the model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Card {
    /// Name accepted by `--predict` (lower case, no spaces).
    pub name: &'static str,
    pub display: &'static str,
    /// Compute capability, e.g. `sm_86`.
    pub arch: &'static str,
    pub sms: u32,
    /// Warp schedulers per SM (each issues at most one warp instruction per clock).
    pub schedulers_per_sm: u32,
    /// Boost clock, GHz.
    pub boost_clock_ghz: f64,
    /// Peak DRAM bandwidth, GB/s (10^9 bytes per second).
    pub dram_gbps: f64,
    /// Host link bandwidth per direction, GB/s: PCIe 4.0 x16 is 16 GT/s x 16 lanes x 128/130 / 8 =
    /// 31.5, PCIe 5.0 x16 twice that (PCI-SIG base specifications); the host interface is in each
    /// card's datasheet.
    pub pcie_gbps: f64,
    pub l2_bytes: u64,
    /// 32-bit registers per SM.
    pub registers_per_sm: u32,
    pub max_warps_per_sm: u32,
    pub max_blocks_per_sm: u32,
    /// Shared memory per SM usable by blocks, bytes.
    pub shared_per_sm: u32,
    /// Where the figures come from.
    pub source: &'static str,
}

/// Per-SM limits of compute capability 8.6 (GA102): CUDA C++ Programming Guide.
const SM86: (u32, u32, u32, u32) = (65_536, 48, 16, 100 * 1024);
/// Compute capability 8.9 (AD102).
const SM89: (u32, u32, u32, u32) = (65_536, 48, 24, 100 * 1024);
/// Compute capability 9.0 (GH100).
const SM90: (u32, u32, u32, u32) = (65_536, 64, 32, 228 * 1024);

const fn card(
    name: &'static str,
    display: &'static str,
    arch: &'static str,
    limits: (u32, u32, u32, u32),
    sms: u32,
    boost_clock_ghz: f64,
    dram_gbps: f64,
    pcie_gbps: f64,
    l2_mib: u64,
    source: &'static str,
) -> Card {
    Card {
        name,
        display,
        arch,
        sms,
        schedulers_per_sm: 4,
        boost_clock_ghz,
        dram_gbps,
        pcie_gbps,
        l2_bytes: l2_mib << 20,
        registers_per_sm: limits.0,
        max_warps_per_sm: limits.1,
        max_blocks_per_sm: limits.2,
        shared_per_sm: limits.3,
        source,
    }
}

/// The card table.
pub const CARDS: [Card; 5] = [
    card(
        "3090",
        "GeForce RTX 3090",
        "sm_86",
        SM86,
        82,
        1.695,
        936.0,
        31.5,
        6,
        "NVIDIA Ampere GA102 GPU Architecture whitepaper (appendix A, RTX 3090: 82 SMs, \
         1695 MHz boost, 936 GB/s GDDR6X, 6144 KB L2; PCIe 4.0 x16)",
    ),
    card(
        "a6000",
        "RTX A6000",
        "sm_86",
        SM86,
        84,
        1.800,
        768.0,
        31.5,
        6,
        "NVIDIA RTX A6000 datasheet (84 SMs / 10752 CUDA cores, 1800 MHz boost, 768 GB/s \
         GDDR6, PCIe 4.0 x16) and the GA102 whitepaper (6144 KB L2)",
    ),
    card(
        "4090",
        "GeForce RTX 4090",
        "sm_89",
        SM89,
        128,
        2.520,
        1008.0,
        31.5,
        72,
        "NVIDIA Ada GPU Architecture whitepaper (table 1, RTX 4090: 128 SMs, 2520 MHz boost, \
         1008 GB/s GDDR6X, 73728 KB L2; PCIe 4.0 x16)",
    ),
    card(
        "h100",
        "H100 SXM5",
        "sm_90",
        SM90,
        132,
        1.980,
        3350.0,
        63.0,
        50,
        "NVIDIA H100 Tensor Core GPU datasheet (SXM: 3.35 TB/s HBM3, PCIe 5.0 x16, 67 TFLOPS FP32 = \
         132 SMs x 128 lanes x 2 x 1.98 GHz) and the Hopper architecture whitepaper (50 MB L2)",
    ),
    card(
        "h200",
        "H200 SXM",
        "sm_90",
        SM90,
        132,
        1.980,
        4800.0,
        63.0,
        50,
        "NVIDIA H200 Tensor Core GPU datasheet (SXM: 4.8 TB/s HBM3e, PCIe 5.0 x16, 67 TFLOPS FP32, same \
         GH100 with 132 SMs and 50 MB L2 as the H100 SXM)",
    ),
];

impl Card {
    /// Whether the card launches graph nodes early (programmatic dependent launch, compute
    /// capability 9.0 and later: ingot's kernels wait on their predecessor there).
    pub fn early_launch(&self) -> bool {
        self.arch
            .strip_prefix("sm_")
            .and_then(|d| d.get(..d.len().saturating_sub(1)))
            .and_then(|major| major.parse::<u32>().ok())
            .is_some_and(|major| major >= 9)
    }
}

/// The card called `name` (case-insensitive; `rtx3090` and `3090` both work).
pub fn card_named(name: &str) -> Option<&'static Card> {
    let n = name.to_ascii_lowercase().replace(['-', '_', ' '], "");
    let n = n.trim_start_matches("rtx").trim_end_matches("sxm");
    CARDS.iter().find(|c| c.name == n)
}

/// The names `--predict` accepts, for error messages.
pub fn card_names() -> String {
    CARDS.iter().map(|c| c.name).collect::<Vec<_>>().join(", ")
}
