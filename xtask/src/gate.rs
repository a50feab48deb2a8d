//! `cargo xtask test`: the whole test gate, as CI runs it (`.ci/run`).
//!
//! Steps, each run even if an earlier one failed so one run shows every problem; the command fails
//! if any step failed, and names which:
//! 1. install the tools the kernel build, audit and tests need (nightly rust-src, ptxas/cuobjdump
//!    wheels, the `openai` Python client);
//! 2. `cargo test --workspace --no-run`: the one build of the workspace (debug profile) that the
//!    steps below share;
//! 3. `kernels --check`: rebuild the PTX from the device sources (nightly, its own target
//!    directory) and fail on drift from the committed file;
//! 4. `ptx-audit check`, run from that build: hot-loop instruction counts, guards, traps,
//!    registers, spills vs budgets;
//! 5. `cargo clippy --workspace --all-targets -- -D warnings` (its own check build, no codegen);
//! 6. `cargo doc --workspace --no-deps` with `RUSTDOCFLAGS=-D warnings`: broken or private
//!    intra-doc links fail (the dependencies' metadata is clippy's);
//! 7. `cargo test --workspace` (built by step 2): each test binary, and the doc tests;
//! 8. `scripts/device-check.sh --rehearse`: the GPU check's whole path without a GPU, which must
//!    fail only because no GPU was found (see [`crate::rehearse`]).
//!
//! Steps 3 to 8 run side by side as one pool of jobs ([`crate::pool`]), each test binary a job,
//! since one after another they left a core idle for minutes (the drift check among them: its
//! nightly build ran at 115% of one core, 46 s, on the 2-core VM).
//!
//! Steps 2 and 4 to 7 get the tools' paths in `INGOT_PTXAS`/`INGOT_CUOBJDUMP`/`INGOT_NVDISASM`
//! ([`crate::paths::tool_env`]): `ptx-audit` and its tests do not search for them.
//!
//! Nothing is compiled twice: `ptx-audit` is the test build's binary, not `cargo run -p
//! ptx-audit`, which resolves that package's features alone (other features of `syn`, `serde`,
//! `clap` ...) and so rebuilds most of the dependency tree; `.ci/run` likewise runs this gate
//! from the test build's own `xtask` binary.

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::pool::{self, Job};
use crate::{paths, rehearse, tools};

/// Runs cargo with the tools' paths in the environment.
fn cargo(args: &[&str]) -> Result<()> {
    let status = cargo_command(args, &[]).status()?;
    if !status.success() {
        bail!("`cargo {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

/// The cargo that runs this task (`CARGO`), else the one on `PATH`.
fn cargo_path() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// `cargo ARGS` with the tools' paths and `env` in its environment.
fn cargo_command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(cargo_path());
    command
        .args(args)
        .envs(paths::tool_env())
        .envs(env.iter().copied());
    command
}

/// The workspace's test build: `cargo test --workspace --no-run`.
const TEST_BUILD: [&str; 3] = ["test", "--workspace", "--no-run"];

/// The compiler-artifact messages of the workspace's test build (building what is not built
/// yet): the build `cargo test --workspace` runs, so its binaries share every dependency with the
/// tests.
fn test_build_artifacts() -> Result<Vec<serde_json::Value>> {
    let out = Command::new(cargo_path())
        .args(TEST_BUILD)
        .args(["--quiet", "--message-format=json-render-diagnostics"])
        .envs(paths::tool_env())
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo")?;
    if !out.status.success() {
        bail!("`cargo {}` failed ({})", TEST_BUILD.join(" "), out.status);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut artifacts = Vec::new();
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        let m: serde_json::Value = serde_json::from_str(line).context("cargo's JSON message")?;
        if m["reason"] == "compiler-artifact" {
            artifacts.push(m);
        }
    }
    Ok(artifacts)
}

/// The path of binary `name` among the test build's `artifacts`.
fn workspace_binary(artifacts: &[serde_json::Value], name: &str) -> Result<PathBuf> {
    for m in artifacts {
        let is_bin = m["target"]["name"] == name
            && m["target"]["kind"] == serde_json::json!(["bin"])
            && m["profile"]["test"] == false;
        if let (true, Some(exe)) = (is_bin, m["executable"].as_str()) {
            return Ok(exe.into());
        }
    }
    bail!("`cargo {}` built no `{name}` binary", TEST_BUILD.join(" "))
}

/// `cargo xtask audit [ARGS]`: `ptx-audit ARGS` (`check` when none) with the tools passed to it.
pub fn audit(args: &[&str]) -> Result<()> {
    let mut full = vec!["run", "--quiet", "-p", "ptx-audit", "--"];
    full.extend(if args.is_empty() {
        &["check"][..]
    } else {
        args
    });
    cargo(&full)
}

/// Steps 3 to 8 and the doc tests as one pool of jobs ([`pool`]), each test binary a job.
fn side_by_side() -> Result<()> {
    // The drift check as this binary runs it (`kernels::check`): a process of its own, so its
    // output is captured like every job's. Not in the cargo lane: its nightly cargo builds in
    // kernels/device/target, so it takes no lock the workspace's cargo commands hold.
    let mut drift = Command::new(std::env::current_exe().context("this xtask binary's path")?);
    drift.args(["kernels", "--check"]);
    let drift = Job::step(
        "kernels --check",
        "cargo xtask kernels --check",
        drift,
        false,
    );
    let artifacts = match test_build_artifacts() {
        Ok(artifacts) => artifacts,
        // Without the build only the drift check can run; its verdict is reported too.
        Err(build) => match pool::run(vec![drift]) {
            Ok(()) => return Err(build),
            Err(check) => bail!("{build:#}; {check:#}"),
        },
    };
    let mut audit = Command::new(workspace_binary(&artifacts, "ptx-audit")?);
    audit.arg("check").envs(paths::tool_env());
    let clippy = [
        "clippy",
        "--workspace",
        "--all-targets",
        "--quiet",
        "--",
        "-D",
        "warnings",
    ];
    let doc = (
        ["doc", "--workspace", "--no-deps", "--quiet"],
        [("RUSTDOCFLAGS", "-D warnings")],
    );
    let mut jobs = vec![
        drift,
        Job::step("ptx-audit check", "cargo xtask audit check", audit, false),
        Job::step(
            "clippy",
            "cargo clippy --workspace --all-targets -- -D warnings",
            cargo_command(&clippy, &[]),
            true,
        ),
        Job::step(
            "rustdoc",
            "RUSTDOCFLAGS='-D warnings' cargo doc --workspace --no-deps",
            cargo_command(&doc.0, &doc.1),
            true,
        ),
        Job::step(
            "doc tests",
            "cargo test --workspace --doc",
            cargo_command(&["test", "--workspace", "--doc"], &[]),
            true,
        ),
        rehearse::job(),
    ];
    jobs.extend(pool::test_binaries(&cargo_path(), &artifacts)?);
    pool::run(jobs)
}

/// Which CPU kernel instruction sets this machine ran in the tests (the ISA-pinned tests compare
/// every one the CPU has with the scalar kernels) and which it could not.
fn cpu_isa_line() -> String {
    use ingot_quant::cpu_dot::Isa;
    let all = [Isa::Scalar, Isa::Avx2, Isa::AvxVnni, Isa::Avx512];
    let (ran, missing): (Vec<Isa>, Vec<Isa>) = all.into_iter().partition(|i| i.is_available());
    let mut line = format!("CPU kernels: tested on {ran:?}");
    if !missing.is_empty() {
        // Debian's qemu-user (7.2) is the only x86 emulator the registries offer, and its TCG
        // executes no AVX-512 (it drops the CPUID bits), so kernels this CPU lacks cannot run here.
        line += &format!(
            "; not on this CPU, so not tested in this run: {missing:?} (no emulator here runs them)"
        );
    }
    line
}

pub fn run() -> Result<()> {
    let steps: [(&str, &dyn Fn() -> Result<()>); 3] = [
        ("tools", &tools::install),
        ("cargo test --workspace --no-run", &|| cargo(&TEST_BUILD)),
        ("the rest side by side", &side_by_side),
    ];
    let mut failed = Vec::new();
    for (name, step) in steps {
        println!("\n==> xtask test: {name}");
        let start = Instant::now();
        let result = step();
        let secs = start.elapsed().as_secs_f64();
        match result {
            Ok(()) => println!("==> {name}: ok ({secs:.0} s)"),
            Err(e) => {
                println!("==> {name}: FAILED ({secs:.0} s): {e:#}");
                failed.push(name);
            }
        }
    }
    // The GPU halves of the kernel and gate tests print their skip reason into captured test
    // output; say it once here too, so a run without a GPU never reads as a GPU pass.
    match ingot_cuda::Gpu::new(0) {
        Ok(gpu) => println!(
            "\nGPU: {} (GPU halves of the kernel and gate tests ran)",
            gpu.name().unwrap_or_else(|e| e.to_string())
        ),
        Err(e) => {
            println!("\nGPU: none ({e}): the GPU halves of the kernel and gate tests were skipped")
        }
    }
    println!("{}", cpu_isa_line());
    if !failed.is_empty() {
        bail!(
            "xtask test: {} step(s) failed: {}",
            failed.len(),
            failed.join(", ")
        );
    }
    println!("\nxtask test: all steps passed");
    Ok(())
}
