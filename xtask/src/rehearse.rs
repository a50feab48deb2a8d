//! `scripts/device-check.sh --rehearse` as a CI step: the device script's whole path (bundle,
//! unpack, every step, summary) run on a machine without a GPU, so the script is tested on every
//! commit. Without a GPU it must fail, and only for that reason: exit status 3 and a last line
//! saying `no GPU found`. Any other outcome (a step failing for another reason, a missing
//! binary, a timeout, a script error) fails CI. With a GPU present the real check runs and must
//! pass (exit 0).

use anyhow::{bail, Result};
use std::process::{Command, Output};

use crate::pool::Job;

/// The device script's exit status when every failing step failed because no GPU was found.
const NO_GPU_EXIT: i32 = 3;

/// The rehearsal as a job of the gate's pool, judged by [`judge`] on its exit status and last
/// line of output; in the cargo lane, as its bundle is built with cargo.
pub fn job() -> Job {
    let script = crate::paths::workspace_root()
        .join("scripts")
        .join("device-check.sh");
    let mut command = Command::new("bash");
    command.arg(&script).arg("--rehearse").env_remove("OUT");
    let mut job = Job::step(
        "device-check --rehearse",
        "scripts/device-check.sh --rehearse",
        command,
        true,
    );
    job.judge = judged;
    job
}

fn judged(out: &Output) -> Result<()> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty());
    judge(out.status.code(), last.unwrap_or_default())
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
