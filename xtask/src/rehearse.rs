//! `scripts/device-check.sh --rehearse` as a CI step: the device script's whole path (bundle,
//! unpack, every step, summary) run on a machine without a GPU, so the script is tested on every
//! commit. Without a GPU it must fail, and only for that reason: exit status 3 and a last line
//! saying `no GPU found`. Any other outcome (a step failing for another reason, a missing
//! binary, a timeout, a script error) fails CI. With a GPU present the real check runs and must
//! pass (exit 0).

use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// The device script's exit status when every failing step failed because no GPU was found.
const NO_GPU_EXIT: i32 = 3;

pub fn run() -> Result<()> {
    let script = crate::paths::workspace_root()
        .join("scripts")
        .join("device-check.sh");
    let mut child = Command::new("bash")
        .arg(&script)
        .arg("--rehearse")
        .env_remove("OUT")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {} --rehearse", script.display()))?;
    let stdout = child.stdout.take().context("the script's stdout")?;
    let mut last = String::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading the script's output")?;
        println!("{line}");
        if !line.trim().is_empty() {
            last = line;
        }
    }
    let status = child.wait().context("waiting for the device script")?;
    judge(status.code(), &last)
}

/// Whether the rehearsal ended as it must; `last` is its last non-empty line of output.
fn judge(code: Option<i32>, last: &str) -> Result<()> {
    match code {
        Some(0) => Ok(()),
        Some(NO_GPU_EXIT) if says_no_gpu(last) => Ok(()),
        Some(NO_GPU_EXIT) => bail!(
            "the rehearsal exited {NO_GPU_EXIT} but its last line does not say `no GPU found`: {last}"
        ),
        Some(c) => bail!("the rehearsal failed for a reason other than a missing GPU (exit {c}): {last}"),
        None => bail!("the rehearsal was killed by a signal"),
    }
}

fn says_no_gpu(last: &str) -> bool {
    last.contains("no GPU found")
}

#[cfg(test)]
mod tests {
    use super::judge;

    #[test]
    fn only_a_no_gpu_failure_or_a_pass_is_accepted() {
        let no_gpu =
            "device-check: no GPU found: all 14 failing step(s) failed because no GPU was found";
        assert!(judge(Some(0), "").is_ok());
        assert!(judge(Some(3), no_gpu).is_ok());
        assert!(judge(Some(3), "device-check: FAILED: gate").is_err());
        assert!(judge(Some(1), no_gpu).is_err(), "other failures too");
        assert!(judge(Some(2), "usage").is_err());
        assert!(judge(None, no_gpu).is_err());
    }
}
