//! The whole audit of one PTX file: PTX metrics, ptxas resources and SASS hot loops per kernel
//! and architecture, and the metric values that budgets are checked against.

use std::collections::BTreeMap;
use std::path::Path;

use crate::analysis::{analyze_kernel, analyze_module, KernelPtx};
use crate::error::AuditError;
use crate::ptxas::{self, Resources, ARCHS};
use crate::sass::{self, SassLoop};
use crate::tools::Tools;
use ptx_front::PtxModule;

/// How the SASS innermost loops of a kernel were matched to its PTX innermost loops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopMatch {
    /// Neither side has loops.
    NoLoops,
    /// Same number of innermost loops: paired in order (PTX header order, SASS address order).
    Paired,
    /// Different numbers (ptxas unrolled a loop completely, or split one): no per-loop pairing;
    /// the kernel's hot-loop SASS count is still the sum over all SASS innermost loops.
    Unmatched { ptx: usize, sass: usize },
}

/// ptxas and SASS results of one kernel on one architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchResult {
    pub arch: &'static str,
    pub resources: Resources,
    /// Innermost SASS loops by address.
    pub sass_loops: Vec<SassLoop>,
    pub matching: LoopMatch,
}

impl ArchResult {
    /// SASS instructions summed over the innermost SASS loops (see the crate docs for why this
    /// stands for the hot loops).
    pub fn hot_sass_insts(&self) -> usize {
        self.sass_loops.iter().map(|l| l.insts).sum()
    }

    /// The SASS loop paired with the `n`-th PTX innermost loop, when pairing succeeded.
    pub fn paired(&self, n: usize) -> Option<&SassLoop> {
        match self.matching {
            LoopMatch::Paired => self.sass_loops.get(n),
            _ => None,
        }
    }
}

/// Everything measured for one kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelReport {
    pub ptx: KernelPtx,
    /// One entry per [`ARCHS`] element, same order; empty for a PTX-only audit.
    pub archs: Vec<ArchResult>,
}

/// Whether a budget metric is a ceiling that must be listed per kernel, or a quantity that must
/// be zero unless the budget file explicitly allows more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Ceiling,
    RequiredZero,
}

/// The budgeted metrics: key in the budget file, kind, and meaning.
pub const METRICS: [(&str, MetricKind, &str); 11] = [
    (
        "hot_loop_ptx_insts",
        MetricKind::Ceiling,
        "PTX instructions summed over hot loops",
    ),
    (
        "hot_loop_sass_insts_sm86",
        MetricKind::Ceiling,
        "SASS instructions summed over innermost SASS loops, sm_86",
    ),
    (
        "hot_loop_sass_insts_sm90",
        MetricKind::Ceiling,
        "SASS instructions summed over innermost SASS loops, sm_90",
    ),
    (
        "registers_sm86",
        MetricKind::Ceiling,
        "registers per thread, sm_86",
    ),
    (
        "registers_sm90",
        MetricKind::Ceiling,
        "registers per thread, sm_90",
    ),
    (
        "spill_bytes",
        MetricKind::RequiredZero,
        "spill store + load bytes, worst architecture",
    ),
    (
        "stack_frame_bytes",
        MetricKind::RequiredZero,
        "stack frame bytes, worst architecture",
    ),
    (
        "hot_loop_traps",
        MetricKind::RequiredZero,
        "traps reachable from hot loops",
    ),
    (
        "hot_loop_guards",
        MetricKind::RequiredZero,
        "guards (non-loop-control conditional branches) in hot loops",
    ),
    (
        "local_bytes",
        MetricKind::RequiredZero,
        ".local bytes declared in the PTX",
    ),
    (
        "local_accesses",
        MetricKind::RequiredZero,
        "ld.local/st.local instructions in the PTX",
    ),
];

impl KernelReport {
    pub fn name(&self) -> &str {
        &self.ptx.name
    }

    pub fn arch(&self, arch: &str) -> Option<&ArchResult> {
        self.archs.iter().find(|a| a.arch == arch)
    }

    /// The value of every budget metric, keyed as in [`METRICS`]. Per-architecture metrics are
    /// absent for a PTX-only audit.
    pub fn metrics(&self) -> BTreeMap<&'static str, u64> {
        let mut m = BTreeMap::new();
        let n = |v: usize| v as u64;
        m.insert("hot_loop_ptx_insts", n(self.ptx.hot_ptx_insts()));
        m.insert("hot_loop_traps", n(self.ptx.hot_traps()));
        m.insert("hot_loop_guards", n(self.ptx.hot_guards()));
        m.insert("local_bytes", self.ptx.local_decl_bytes);
        m.insert("local_accesses", n(self.ptx.local_accesses));
        if !self.archs.is_empty() {
            let worst = |f: fn(&Resources) -> u64| {
                self.archs
                    .iter()
                    .map(|a| f(&a.resources))
                    .max()
                    .unwrap_or(0)
            };
            m.insert(
                "spill_bytes",
                worst(|r| r.spill_store_bytes + r.spill_load_bytes),
            );
            m.insert("stack_frame_bytes", worst(|r| r.stack_frame_bytes));
        }
        for a in &self.archs {
            let (sass, regs) = match a.arch {
                "sm_86" => ("hot_loop_sass_insts_sm86", "registers_sm86"),
                "sm_90" => ("hot_loop_sass_insts_sm90", "registers_sm90"),
                _ => continue,
            };
            m.insert(sass, n(a.hot_sass_insts()));
            m.insert(regs, a.resources.registers);
        }
        m
    }
}

/// Reads and parses a PTX file, plain or `.xz` ([`ptx_front::read_ptx`]).
pub fn read_ptx(path: &Path) -> Result<PtxModule, AuditError> {
    let text = read_text(path)?;
    PtxModule::parse(&text).map_err(|source| AuditError::Ptx {
        path: path.to_path_buf(),
        source,
    })
}

/// The text of a PTX file, refused above [`ptx_front::MAX_PTX_BYTES`] (a plain file before it
/// is read, a compressed one once unpacked).
fn read_text(path: &Path) -> Result<String, AuditError> {
    let io = |source| AuditError::Io {
        path: path.to_path_buf(),
        source,
    };
    let too_large = |bytes: u64| AuditError::Ptx {
        path: path.to_path_buf(),
        source: crate::PtxError::TooLarge {
            bytes: usize::try_from(bytes).unwrap_or(usize::MAX),
            limit: ptx_front::MAX_PTX_BYTES,
        },
    };
    let size = std::fs::metadata(path).map_err(io)?.len();
    if size > ptx_front::MAX_PTX_BYTES as u64 {
        return Err(too_large(size));
    }
    let text = ptx_front::read_ptx(path).map_err(io)?;
    if text.len() > ptx_front::MAX_PTX_BYTES {
        return Err(too_large(text.len() as u64));
    }
    Ok(text)
}

/// PTX metrics only (no NVIDIA tools needed).
pub fn audit_ptx_only(path: &Path) -> Result<Vec<KernelReport>, AuditError> {
    let module = read_ptx(path)?;
    Ok(analyze_module(&module)
        .into_iter()
        .map(|ptx| KernelReport {
            ptx,
            archs: Vec::new(),
        })
        .collect())
}

/// The full audit: PTX metrics plus, for each of [`ARCHS`], ptxas resources and SASS loops.
pub fn audit(path: &Path, tools: &Tools) -> Result<Vec<KernelReport>, AuditError> {
    audit_some(path, tools, None)
}

/// [`audit`] of the kernels named `names` only (ptxas compiles just those entries); an unknown
/// name is an error.
pub fn audit_kernels(
    path: &Path,
    tools: &Tools,
    names: &[&str],
) -> Result<Vec<KernelReport>, AuditError> {
    audit_some(path, tools, Some(names))
}

fn audit_some(
    path: &Path,
    tools: &Tools,
    names: Option<&[&str]>,
) -> Result<Vec<KernelReport>, AuditError> {
    let mut reports = match names {
        None => audit_ptx_only(path)?,
        // Only the named kernels' PTX is analysed (a bench asks for a few of hundreds).
        Some(names) => {
            let module = read_ptx(path)?;
            let mut reports = Vec::with_capacity(names.len());
            for &name in names {
                let kernel = module.kernels().find(|k| k.name == name).ok_or_else(|| {
                    AuditError::UnknownKernel {
                        name: name.to_string(),
                        path: path.to_path_buf(),
                    }
                })?;
                reports.push(KernelReport {
                    ptx: analyze_kernel(&module, kernel),
                    archs: Vec::new(),
                });
            }
            reports
        }
    };
    let scratch = tempfile::tempdir().map_err(|source| AuditError::Io {
        path: std::env::temp_dir(),
        source,
    })?;
    // ptxas reads a file: a compressed PTX is unpacked into the scratch folder first.
    let unpacked;
    let path = if path
        .extension()
        .is_some_and(|e| e == ptx_front::COMPRESSED_EXTENSION)
    {
        unpacked = scratch.path().join("unpacked.ptx");
        std::fs::write(&unpacked, read_text(path)?).map_err(|source| AuditError::Io {
            path: unpacked.clone(),
            source,
        })?;
        unpacked.as_path()
    } else {
        path
    };
    // The architectures are independent: assemble and disassemble them concurrently.
    let per_arch = std::thread::scope(|scope| {
        let jobs: Vec<_> = ARCHS
            .map(|arch| {
                let cubin = scratch.path().join(format!("audit-{arch}.cubin"));
                scope.spawn(move || {
                    let resources = ptxas::assemble(&tools.ptxas, path, arch, &cubin, names)?;
                    let listing = sass::disassemble(&tools.disassembler, &cubin, arch)?;
                    Ok::<_, AuditError>((arch, resources, listing))
                })
            })
            .into_iter()
            .collect();
        jobs.into_iter()
            .map(|job| job.join().expect("tool runner threads do not panic"))
            .collect::<Result<Vec<_>, AuditError>>()
    })?;
    for (arch, resources, listing) in per_arch {
        for report in &mut reports {
            let name = report.ptx.name.clone();
            let missing = |tool: &'static str| AuditError::ToolOutput {
                tool,
                arch: arch.to_string(),
                message: format!("kernel `{name}` is missing from the output"),
            };
            let resources = *resources.get(&name).ok_or_else(|| missing("ptxas"))?;
            let sass_loops = sass::innermost_loops(listing.get(&name).ok_or_else(|| {
                missing(match tools.disassembler {
                    crate::tools::Disassembler::Cuobjdump(_) => "cuobjdump",
                    crate::tools::Disassembler::Nvdisasm(_) => "nvdisasm",
                })
            })?);
            let ptx_innermost = report.ptx.loops.iter().filter(|l| l.innermost).count();
            let matching = match (ptx_innermost, sass_loops.len()) {
                (0, 0) => LoopMatch::NoLoops,
                (p, s) if p == s => LoopMatch::Paired,
                (p, s) => LoopMatch::Unmatched { ptx: p, sass: s },
            };
            report.archs.push(ArchResult {
                arch,
                resources,
                sass_loops,
                matching,
            });
        }
    }
    Ok(reports)
}
