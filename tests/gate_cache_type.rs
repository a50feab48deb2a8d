//! `ingot gate --cache-type` through the real binary: `q8_0` without `--backend` measures the
//! q8_0 latent cache against the full-precision one on the CPU backend and passes on the tiny
//! model; asking a device plan for a q8_0 cache, or no backend with the f16 cache, is one clear
//! error line and exit code 1, no panic.

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

    for (args, want) in [
        (
            &["gate", "--cache-type", "q8_0", "--backend", "sim", "-m"][..],
            "keeps an f16 latent cache",
        ),
        (
            &["gate", "-m"][..],
            "give the backend to judge with --backend",
        ),
    ] {
        let out = ingot(args, &model);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
