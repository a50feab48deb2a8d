//! Per-kernel resource usage from `ptxas -v`: registers, stack frame, spills, static shared.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::error::AuditError;
use crate::tools::{run_tool, Tool, TOOL_TIMEOUT};

/// The architectures audited: sm_86 (RTX 3090 / A6000) and sm_90 (H100 / H200).
pub const ARCHS: [&str; 2] = ["sm_86", "sm_90"];

/// What ptxas reports for one function on one architecture.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resources {
    pub registers: u64,
    /// Per-thread stack frame in local memory (bytes).
    pub stack_frame_bytes: u64,
    /// Bytes stored to / loaded from local memory because registers ran out.
    pub spill_store_bytes: u64,
    pub spill_load_bytes: u64,
    /// Static shared memory (`smem`, bytes).
    pub shared_bytes: u64,
}

/// Assembles `ptx` for `arch` into `cubin` and returns each function's resources: every
/// function, or with `entries` only those kernels (`ptxas --entry`, seconds instead of minutes
/// for a bench that wants a few).
pub fn assemble(
    ptxas: &Path,
    ptx: &Path,
    arch: &str,
    cubin: &Path,
    entries: Option<&[&str]>,
) -> Result<BTreeMap<String, Resources>, AuditError> {
    let mut command = Command::new(ptxas);
    command.arg(format!("-arch={arch}")).arg("-v");
    if let Some(entries) = entries {
        command.arg(format!("--entry={}", entries.join(",")));
    }
    command.arg(ptx).arg("-o").arg(cubin);
    let output = run_tool(command, Tool::Ptxas, arch, TOOL_TIMEOUT)?;
    // ptxas writes its `info` lines to stdout or stderr depending on the version.
    let text = format!("{}\n{}", output.stdout, output.stderr);
    parse_resources(&text).map_err(|message| AuditError::ToolOutput {
        tool: "ptxas",
        arch: arch.to_string(),
        message,
    })
}

/// Parses `ptxas -v` output. Lines look like:
///
/// ```text
/// ptxas info    : Compiling entry function 'k' for 'sm_86'
/// ptxas info    : Function properties for k
///     256 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
/// ptxas info    : Used 16 registers, used 0 barriers, 1024 bytes smem, 372 bytes cmem[0]
/// ```
pub fn parse_resources(text: &str) -> Result<BTreeMap<String, Resources>, String> {
    let mut all: BTreeMap<String, Resources> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(name) = quoted_after(line, "Compiling entry function")
            .or_else(|| quoted_after(line, "Compiling function"))
        {
            all.entry(name.clone()).or_default();
            current = Some(name);
        } else if let Some(rest) = line.split_once("Function properties for ").map(|(_, r)| r) {
            let name = rest.trim().to_string();
            all.entry(name.clone()).or_default();
            current = Some(name);
        } else if line.contains("bytes stack frame") {
            let name = current
                .as_ref()
                .ok_or_else(|| format!("stack frame line before any function: {line:?}"))?;
            let r = all.entry(name.clone()).or_default();
            r.stack_frame_bytes = number_before(line, "bytes stack frame")?;
            r.spill_store_bytes = number_before(line, "bytes spill stores")?;
            r.spill_load_bytes = number_before(line, "bytes spill loads")?;
        } else if line.contains("Used ") && line.contains(" registers") {
            let name = current
                .as_ref()
                .ok_or_else(|| format!("register line before any function: {line:?}"))?;
            let r = all.entry(name.clone()).or_default();
            r.registers = number_before(line, "registers")?;
            if line.contains("bytes smem") {
                r.shared_bytes = number_before(line, "bytes smem")?;
            }
        }
    }
    Ok(all)
}

/// The text between the first pair of single quotes after `marker`.
fn quoted_after(line: &str, marker: &str) -> Option<String> {
    let rest = &line[line.find(marker)? + marker.len()..];
    let start = rest.find('\'')? + 1;
    let len = rest[start..].find('\'')?;
    Some(rest[start..start + len].to_string())
}

/// The integer right before `phrase` in `line` ("256 bytes stack frame" → 256).
fn number_before(line: &str, phrase: &str) -> Result<u64, String> {
    let at = line
        .find(phrase)
        .ok_or_else(|| format!("no {phrase:?} in {line:?}"))?;
    let word = line[..at]
        .split(|c: char| c.is_whitespace() || c == ',' || c == ':')
        .rfind(|w| !w.is_empty())
        .unwrap_or("");
    word.parse()
        .map_err(|_| format!("expected a number before {phrase:?} in {line:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ptxas_verbose_output() {
        let text = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'local_array' for 'sm_86'\n\
ptxas info    : Function properties for local_array\n\
    256 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n\
ptxas info    : Used 16 registers, used 0 barriers, 256 bytes cumulative stack size, 372 bytes cmem[0]\n\
ptxas info    : Compile time = 43.099 ms\n\
ptxas info    : Compiling entry function 'rms' for 'sm_86'\n\
ptxas info    : Function properties for rms\n\
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 24 registers, used 1 barriers, 32 bytes smem, 372 bytes cmem[0]\n";
        let all = parse_resources(text).unwrap();
        assert_eq!(
            all["local_array"],
            Resources {
                registers: 16,
                stack_frame_bytes: 256,
                spill_store_bytes: 8,
                spill_load_bytes: 12,
                shared_bytes: 0
            }
        );
        assert_eq!(all["rms"].registers, 24);
        assert_eq!(all["rms"].shared_bytes, 32);
    }

    #[test]
    fn garbled_numbers_are_errors_not_zeros() {
        let text = "ptxas info    : Function properties for k\n    lots bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";
        assert!(parse_resources(text).is_err());
    }
}
