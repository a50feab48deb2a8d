//! `cargo xtask test`: the whole test gate, as CI runs it (`.ci/run`).
//!
//! Steps, each run even if an earlier one failed so one run shows every problem; the command
//! fails if any step failed, and names which:
//! 1. install the tools the kernel build, audit and tests need (nightly rust-src, ptxas/cuobjdump wheels,
//!    the `openai` Python client);
//! 2. rebuild the PTX from the device sources and fail on drift from the committed file;
//! 3. `ptx-audit check` (debug build, shared with the tests): hot-loop instruction counts, guards,
//!    traps, registers, spills vs budgets;
//! 4. `cargo test --workspace`;
//! 5. `scripts/device-check.sh --rehearse`: the GPU check's whole path without a GPU, which must
//!    fail only because no GPU was found (see [`crate::rehearse`]).
//!
//! Steps 3 and 4 get the tools' paths in `INGOT_PTXAS`/`INGOT_CUOBJDUMP`/`INGOT_NVDISASM`
//! ([`crate::paths::tool_env`]): `ptx-audit` and its tests do not search for them.

use anyhow::{bail, Result};
use std::process::Command;
use std::time::Instant;

use crate::{kernels, paths, rehearse, tools};

/// Runs cargo with the tools' paths in the environment.
fn cargo(args: &[&str]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(args)
        .envs(paths::tool_env())
        .status()?;
    if !status.success() {
        bail!("`cargo {}` failed ({status})", args.join(" "));
    }
    Ok(())
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
    let steps: [(&str, &dyn Fn() -> Result<()>); 5] = [
        ("tools", &tools::install),
        ("kernels --check", &kernels::check),
        ("ptx-audit check", &|| {
            cargo(&["run", "--quiet", "-p", "ptx-audit", "--", "check"])
        }),
        ("cargo test --workspace", &|| {
            cargo(&["test", "--workspace"])
        }),
        ("device-check --rehearse", &rehearse::run),
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
    // The GPU halves of the kernel and gate tests print their skip reason into captured test output;
    // say it once here too, so a run without a GPU never reads as a GPU pass.
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
