//! `ingot gate --cache-type` through the real binary: `q8_0` without `--backend` measures the
//! q8_0 latent cache against the full-precision one on the CPU backend and passes on the tiny
//! model, and so does the simulated plan with a q8_0 cache against the CPU backend with one;
//! the oracle with a q8_0 cache, an unknown cache type, or no backend with the f16 cache is one
//! clear error line and exit code 1 (2 for clap's usage errors), no panic.

use std::path::PathBuf;
use std::process::{Command, Output};

fn ingot(args: &[&str], model: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ingot"))
        .args(args)
        .arg(model)
        .output()
        .unwrap()
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn q8_0_cache_gate_runs_and_misuse_is_one_error() {
    let dir =
        Scratch(std::env::temp_dir().join(format!("ingot-gate-cache-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let model = dir.0.join("tiny.gguf");
    let synth = ingot(&["synth", "--preset", "tiny", "-o"], &model);
    assert!(
        synth.status.success(),
        "synth: {}",
        String::from_utf8_lossy(&synth.stderr)
    );

    let ok = ingot(&["gate", "--cache-type", "q8_0", "-n", "8", "-m"], &model);
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(
        stdout.contains("q8_0 cache vs f16 cache (CPU backend)"),
        "{stdout}"
    );
    assert!(stdout.trim_end().ends_with("PASS"), "{stdout}");

    // The simulated plan with a q8_0 cache, judged against the CPU backend with one.
    let sim = ingot(
        &[
            "gate",
            "--cache-type",
            "q8_0",
            "--backend",
            "sim",
            "-n",
            "4",
            "-m",
        ],
        &model,
    );
    let stdout = String::from_utf8_lossy(&sim.stdout);
    assert!(
        sim.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&sim.stderr)
    );
    assert!(stdout.contains("Sim gate vs Cpu"), "{stdout}");
    assert!(stdout.trim_end().ends_with("PASS"), "{stdout}");

    for (args, want) in [
        (
            &[
                "run",
                "--backend",
                "oracle",
                "--cache-type",
                "q8_0",
                "-p",
                "x",
                "-m",
            ][..],
            "the oracle keeps its cache in full precision",
        ),
        (
            &[
                "run",
                "--backend",
                "oracle",
                "--mla-form",
                "decompressed",
                "-p",
                "x",
                "-m",
            ][..],
            "--mla-form: only the cpu backend's prefill takes an attention form, not the oracle backend's",
        ),
        (
            &["bench", "--mla-form", "sideways", "-m"][..],
            "expected auto, absorbed or decompressed",
        ),
        (
            &["gate", "--cache-type", "q4_0", "-m"][..],
            "unknown cache type `q4_0`",
        ),
        (
            &["gate", "-m"][..],
            "give the backend to judge with --backend",
        ),
    ] {
        let out = ingot(args, &model);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let usage = args.contains(&"q4_0") || args.contains(&"sideways");
        assert_eq!(
            out.status.code(),
            Some(if usage { 2 } else { 1 }),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
