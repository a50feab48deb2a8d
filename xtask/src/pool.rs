//! The gate's steps after the workspace's test build, run side by side: the audit, clippy,
//! rustdoc, the device-check rehearsal, the doc tests and every test binary of that build.
//!
//! Run one after another (as `cargo test` runs its binaries) they left a core idle for minutes:
//! a binary whose last test is long runs it alone (`cargo test --workspace` used 1.62 cores of
//! 2; docs/perf.md, "CI gate"). Here they are jobs taken by as many workers as the machine has
//! cores, the longest known first ([`LONG`]).
//!
//! Invariants:
//! - a test binary runs as cargo runs it: from its package's directory, with cargo's package
//!   variables (`CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, `CARGO_PKG_VERSION`) and the tools'
//!   paths ([`paths::tool_env`]), libtest choosing its threads;
//! - the binaries are cargo's own (its JSON messages of the test build), never a list kept here:
//!   [`LONG`] only orders them, and a name in it that no longer exists changes nothing;
//! - a job's output is captured and printed whole when it ends, under its heading, so no two
//!   jobs' lines interleave;
//! - jobs in the cargo lane (cargo commands, which lock the build directory) never run at the
//!   same time, so no worker sits blocked on cargo's lock;
//! - every job runs even if another failed; the step fails naming each failed job and the
//!   command that reruns it alone.

use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::Instant;

use crate::paths;

/// Jobs that ran longest in clean CI runs on the 2-core VM, each alone (2026-12-07: the
/// rehearsal 96 s with its bundle, clippy 87-90, sim_gate 83, the audit 72-79, rustdoc 34-69,
/// the drift check 39-53, moe_ffn_chain 38, mmq 38, moe_ffn 38, sim_mtp 35, ingot_bench's unit
/// tests 34, attention_mma 28, sim_verify 22, merge_v_b 20, cases 20, sim_prefill 19,
/// gemv2_rope_kb 14, trained_model 14, project_kernels 13, expert_cache 13, merge_v_b_o 11,
/// attention 9), started first so that no long one starts last and runs alone. Order only: a
/// stale entry costs time, not coverage.
const LONG: [&str; 22] = [
    "clippy",
    "sim_gate",
    "device-check --rehearse",
    "ptx-audit check",
    "kernels --check",
    "moe_ffn_chain",
    "mmq",
    "moe_ffn",
    "sim_mtp",
    "rustdoc",
    "ingot_bench",
    "attention_mma",
    "sim_verify",
    "merge_v_b",
    "cases",
    "sim_prefill",
    "gemv2_rope_kb",
    "trained_model",
    "project_kernels",
    "expert_cache",
    "merge_v_b_o",
    "attention",
];

/// Whether a job's run passed, from its exit status and output.
pub type Judge = fn(&Output) -> Result<()>;

/// One job: a command, its name (a test target's name, or a gate step's), what to print above
/// its output, how to rerun it alone, and whether it is a cargo command.
pub struct Job {
    pub name: String,
    pub heading: String,
    pub rerun: String,
    pub command: Command,
    pub cargo_lane: bool,
    pub judge: Judge,
}

impl Job {
    /// A gate step: headed and judged by its exit status.
    pub fn step(name: &str, rerun: &str, command: Command, cargo_lane: bool) -> Job {
        Job {
            name: name.into(),
            heading: format!("\n==> xtask test: {name}"),
            rerun: rerun.into(),
            command,
            cargo_lane,
            judge: exit_status,
        }
    }
}

/// Passes on a zero exit status.
pub fn exit_status(out: &Output) -> Result<()> {
    if !out.status.success() {
        bail!("{}", out.status);
    }
    Ok(())
}

/// Runs `jobs` (see the module docs); the error names every failed job.
pub fn run(mut jobs: Vec<Job>) -> Result<()> {
    let rank = |j: &Job| LONG.iter().position(|l| *l == j.name).unwrap_or(LONG.len());
    jobs.sort_by_key(rank); // stable: the given order within a rank
    let total = jobs.len();
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    println!("{total} jobs on {workers} workers, the longest known first");
    let queue = Mutex::new((jobs, false)); // (jobs not started, the cargo lane busy)
    let finished = Mutex::new((0usize, Vec::new())); // (jobs ended, reruns of the failed)
    let next = || {
        let mut q = queue.lock().unwrap();
        let lane_busy = q.1;
        // None while only cargo-lane jobs remain and the lane is busy: this worker ends, and
        // the worker holding the lane runs them one after another, as it must.
        let i = q.0.iter().position(|j| !(j.cargo_lane && lane_busy))?;
        let job = q.0.remove(i);
        q.1 |= job.cargo_lane;
        Some(job)
    };
    std::thread::scope(|s| {
        for _ in 0..workers.min(total) {
            s.spawn(|| {
                while let Some(mut job) = next() {
                    let start = Instant::now();
                    let out = job.command.output();
                    let secs = start.elapsed().as_secs_f64();
                    if job.cargo_lane {
                        queue.lock().unwrap().1 = false;
                    }
                    // Held while printing: one job's lines at a time.
                    let mut ended = finished.lock().unwrap();
                    ended.0 += 1;
                    let done = ended.0;
                    println!("{}", job.heading);
                    let verdict = out.context("could not start it").and_then(|o| {
                        print!("{}", String::from_utf8_lossy(&o.stdout));
                        eprint!("{}", String::from_utf8_lossy(&o.stderr));
                        (job.judge)(&o)
                    });
                    match verdict {
                        Ok(()) => println!("==> {}: ok ({secs:.0} s, {done}/{total})", job.name),
                        Err(e) => {
                            println!(
                                "==> {}: FAILED ({secs:.0} s, {done}/{total}): {e:#}",
                                job.name
                            );
                            ended.1.push(job.rerun);
                        }
                    }
                }
            });
        }
    });
    let failed = finished.into_inner().unwrap().1;
    if !failed.is_empty() {
        bail!(
            "{} of {total} jobs failed; rerun each alone with:\n  {}",
            failed.len(),
            failed.join("\n  ")
        );
    }
    Ok(())
}

/// The test binaries among the workspace test build's compiler-artifact messages, as jobs in
/// cargo's order.
pub fn test_binaries(cargo: &str, artifacts: &[serde_json::Value]) -> Result<Vec<Job>> {
    let packages = packages(cargo)?;
    let root = paths::workspace_root();
    let mut jobs = Vec::new();
    for m in artifacts {
        let (Some(exe), true) = (m["executable"].as_str(), m["profile"]["test"] == true) else {
            continue;
        };
        let manifest = Path::new(m["manifest_path"].as_str().unwrap_or_default());
        let (package, version) = packages
            .get(manifest)
            .with_context(|| format!("no package of {}", manifest.display()))?;
        let dir = manifest.parent().unwrap_or(&root);
        let target = &m["target"];
        let name = target["name"].as_str().unwrap_or_default();
        let kind = target["kind"][0].as_str().unwrap_or_default();
        let src = Path::new(target["src_path"].as_str().unwrap_or_default());
        let src = src.strip_prefix(dir).unwrap_or(src).display();
        let shown = Path::new(exe)
            .strip_prefix(&root)
            .unwrap_or(Path::new(exe))
            .display();
        let (heading, rerun) = match kind {
            "test" => (
                format!("     Running {src} ({shown})"),
                format!("cargo test -p {package} --test {name}"),
            ),
            "bin" | "example" | "bench" => (
                format!("     Running unittests {src} ({shown})"),
                format!("cargo test -p {package} --{kind} {name}"),
            ),
            _ => (
                format!("     Running unittests {src} ({shown})"),
                format!("cargo test -p {package} --lib"),
            ),
        };
        let mut command = Command::new(exe);
        command
            .current_dir(dir)
            .env("CARGO", cargo)
            .env("CARGO_MANIFEST_DIR", dir)
            .env("CARGO_PKG_NAME", package)
            .env("CARGO_PKG_VERSION", version)
            .envs(paths::tool_env());
        jobs.push(Job {
            name: name.into(),
            heading,
            rerun,
            command,
            cargo_lane: false,
            judge: exit_status,
        });
    }
    if jobs.is_empty() {
        bail!("the test build listed no test binaries");
    }
    Ok(jobs)
}

/// The workspace's packages by manifest path: name and version.
fn packages(cargo: &str) -> Result<HashMap<PathBuf, (String, String)>> {
    let out = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!("`cargo metadata` failed ({})", out.status);
    }
    let m: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("cargo metadata's JSON")?;
    let packages = m["packages"]
        .as_array()
        .context("cargo metadata: no packages")?;
    Ok(packages
        .iter()
        .map(|p| {
            let field = |k: &str| p[k].as_str().unwrap_or_default().to_string();
            (
                PathBuf::from(field("manifest_path")),
                (field("name"), field("version")),
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::{exit_status, run, Job};
    use std::process::Command;

    fn shell(name: &str, script: &str, cargo_lane: bool) -> Job {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        Job {
            name: name.into(),
            heading: format!("job {name}"),
            rerun: format!("rerun {name}"),
            command,
            cargo_lane,
            judge: exit_status,
        }
    }

    /// Lane jobs each hold a directory while they run (`mkdir` fails if it exists, and the job
    /// with it), so two overlapping would fail one; a failing job stops no other, and the error
    /// names its rerun command and no other. (With one core there is one worker, and nothing to
    /// overlap.)
    #[test]
    fn lane_jobs_never_overlap_and_a_failure_runs_the_rest() {
        let dir = scratch_dir();
        let lock = dir.join("lock");
        let hold = format!("mkdir {0} || exit 7; sleep 0.2; rmdir {0}", lock.display());
        let mut jobs: Vec<Job> = (0..4)
            .map(|i| shell(&format!("lane{i}"), &hold, true))
            .collect();
        jobs.push(shell("fails", "exit 1", false));
        for i in 0..3 {
            let mark = dir.join(format!("ran{i}"));
            let script = format!("sleep 0.1; touch {}", mark.display());
            jobs.push(shell(&format!("free{i}"), &script, false));
        }
        let err = run(jobs).expect_err("one job failed").to_string();
        assert!(err.contains("rerun fails"), "{err}");
        assert!(!err.contains("rerun lane"), "lane jobs overlapped: {err}");
        for i in 0..3 {
            assert!(
                dir.join(format!("ran{i}")).exists(),
                "job free{i} did not run"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn scratch_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-pool-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
