//! Finding and running NVIDIA's offline tools (ptxas, cuobjdump, nvdisasm).
//!
//! Each tool is taken from its environment variable (`INGOT_PTXAS`, `INGOT_CUOBJDUMP`,
//! `INGOT_NVDISASM`), else from `PATH`. Where the workspace installs them (`.tools/`, filled by
//! `cargo xtask tools`) is xtask's knowledge alone: `cargo xtask audit` and `cargo xtask test` set
//! the variables. A tool that is not found is an error that says so; the audit never skips a check
//! silently.

use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::AuditError;

/// Longest a single tool run may take. ptxas needs well under a second per kernel here; the
/// limit only turns a hung process into an error.
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(300);

/// A tool the audit runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Ptxas,
    Cuobjdump,
    Nvdisasm,
}

impl Tool {
    pub fn name(self) -> &'static str {
        match self {
            Tool::Ptxas => "ptxas",
            Tool::Cuobjdump => "cuobjdump",
            Tool::Nvdisasm => "nvdisasm",
        }
    }

    pub fn env_var(self) -> &'static str {
        match self {
            Tool::Ptxas => "INGOT_PTXAS",
            Tool::Cuobjdump => "INGOT_CUOBJDUMP",
            Tool::Nvdisasm => "INGOT_NVDISASM",
        }
    }
}

/// Where to look for tools. [`ToolSearch::from_env`] reads the process environment; tests build
/// one by hand so that they do not depend on (or change) the environment.
#[derive(Debug, Clone, Default)]
pub struct ToolSearch {
    /// Explicit paths, as the `INGOT_*` variables would give them.
    pub explicit: Vec<(Tool, PathBuf)>,
    /// The `PATH` value.
    pub path: Option<OsString>,
}

/// The disassembler used for SASS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disassembler {
    /// `cuobjdump -sass FILE.cubin` (preferred).
    Cuobjdump(PathBuf),
    /// `nvdisasm -c FILE.cubin`, used when cuobjdump is not found.
    Nvdisasm(PathBuf),
}

/// Resolved tool paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tools {
    pub ptxas: PathBuf,
    pub disassembler: Disassembler,
}

impl ToolSearch {
    /// The search the CLI uses: the `INGOT_*` variables, then `PATH`.
    pub fn from_env() -> ToolSearch {
        let explicit = [Tool::Ptxas, Tool::Cuobjdump, Tool::Nvdisasm]
            .into_iter()
            .filter_map(|t| std::env::var_os(t.env_var()).map(|p| (t, PathBuf::from(p))))
            .collect();
        ToolSearch {
            explicit,
            path: std::env::var_os("PATH"),
        }
    }

    /// Finds one tool. An explicit path that does not exist is an error rather than a reason
    /// to fall back, so a typo in `INGOT_PTXAS` is not hidden by another ptxas on `PATH`.
    pub fn find(&self, tool: Tool) -> Result<PathBuf, AuditError> {
        if let Some((_, path)) = self.explicit.iter().find(|(t, _)| *t == tool) {
            return if path.is_file() {
                Ok(path.clone())
            } else {
                Err(AuditError::ToolMissing {
                    tool: tool.name(),
                    env_var: tool.env_var(),
                    searched: format!("{}={} does not exist", tool.env_var(), path.display()),
                })
            };
        }
        if let Some(path) = &self.path {
            for dir in std::env::split_paths(path) {
                let candidate = dir.join(tool.name());
                if candidate.is_file() {
                    return Ok(candidate);
                }
            }
        }
        Err(AuditError::ToolMissing {
            tool: tool.name(),
            env_var: tool.env_var(),
            searched: format!("{} unset, not on PATH", tool.env_var()),
        })
    }

    /// ptxas plus a disassembler (cuobjdump, else nvdisasm).
    pub fn tools(&self) -> Result<Tools, AuditError> {
        let ptxas = self.find(Tool::Ptxas)?;
        let disassembler = match self.find(Tool::Cuobjdump) {
            Ok(path) => Disassembler::Cuobjdump(path),
            Err(cuobjdump_missing) => match self.find(Tool::Nvdisasm) {
                Ok(path) => Disassembler::Nvdisasm(path),
                Err(_) => return Err(cuobjdump_missing),
            },
        };
        Ok(Tools {
            ptxas,
            disassembler,
        })
    }
}

/// Output of a finished tool run.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    pub stdout: String,
    pub stderr: String,
}

/// Runs `command`, failing on a non-zero exit status or after `timeout` (the child, which this
/// function started, is then killed).
pub fn run_tool(
    mut command: Command,
    tool: Tool,
    arch: &str,
    timeout: Duration,
) -> Result<ToolOutput, AuditError> {
    let io_error = |e: std::io::Error| AuditError::ToolOutput {
        tool: tool.name(),
        arch: arch.to_string(),
        message: e.to_string(),
    };
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_error)?;
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = reader(Box::new(child.stdout.take().expect("stdout is piped")));
    let stderr = reader(Box::new(child.stderr.take().expect("stderr is piped")));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(io_error)? {
            break status;
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(AuditError::ToolTimeout {
                tool: tool.name(),
                arch: arch.to_string(),
                seconds: timeout.as_secs(),
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let output = ToolOutput {
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    };
    if !status.success() {
        let mut message = output.stderr.trim().to_string();
        if message.is_empty() {
            message = output.stdout.trim().to_string();
        }
        return Err(AuditError::ToolFailed {
            tool: tool.name(),
            arch: arch.to_string(),
            status: status.to_string(),
            stderr: message,
        });
    }
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tool_says_to_run_xtask_tools() {
        let search = ToolSearch {
            explicit: Vec::new(),
            path: Some(OsString::from("/nonexistent/bin")),
        };
        let message = search.tools().unwrap_err().to_string();
        assert!(message.contains("ptxas not found"), "{message}");
        assert!(message.contains("cargo xtask tools"), "{message}");
        assert!(message.contains("INGOT_PTXAS"), "{message}");
    }

    #[test]
    fn explicit_path_that_does_not_exist_is_an_error() {
        let search = ToolSearch {
            explicit: vec![(Tool::Ptxas, PathBuf::from("/nonexistent/ptxas"))],
            ..ToolSearch::default()
        };
        let message = search.find(Tool::Ptxas).unwrap_err().to_string();
        assert!(
            message.contains("INGOT_PTXAS=/nonexistent/ptxas does not exist"),
            "{message}"
        );
    }

    #[test]
    fn finds_tools_on_path_and_prefers_cuobjdump() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for name in ["ptxas", "nvdisasm"] {
            std::fs::write(bin.join(name), b"").unwrap();
        }
        let path = std::env::join_paths([PathBuf::from("/nonexistent"), bin.clone()]).unwrap();
        let search = ToolSearch {
            path: Some(path),
            ..ToolSearch::default()
        };
        let tools = search.tools().unwrap();
        assert_eq!(tools.ptxas, bin.join("ptxas"));
        assert_eq!(
            tools.disassembler,
            Disassembler::Nvdisasm(bin.join("nvdisasm"))
        );
        std::fs::write(bin.join("cuobjdump"), b"").unwrap();
        assert_eq!(
            search.tools().unwrap().disassembler,
            Disassembler::Cuobjdump(bin.join("cuobjdump"))
        );
    }

    #[test]
    fn failing_and_hanging_tools_are_errors() {
        let mut fail = Command::new("sh");
        fail.args(["-c", "echo boom >&2; exit 3"]);
        let err = run_tool(fail, Tool::Ptxas, "sm_86", TOOL_TIMEOUT).unwrap_err();
        assert!(err.to_string().contains("boom"), "{err}");

        let mut hang = Command::new("sleep");
        hang.arg("30");
        let started = Instant::now();
        let err = run_tool(hang, Tool::Ptxas, "sm_86", Duration::from_millis(200)).unwrap_err();
        assert!(matches!(err, AuditError::ToolTimeout { .. }), "{err}");
        // Generous bound: the kill must come long before `sleep 30` would end on its own.
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
