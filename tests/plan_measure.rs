//! `ingot plan --measure` through the real binary: without a GPU (CI, the development machines)
//! it must fail with the driver's "no GPU found" message, a non-zero exit and no panic; with
//! one it measures the tiny synthetic model and prints the measured column and summary.

use std::path::PathBuf;
use std::process::Command;

fn ingot() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ingot"))
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn measure_fails_cleanly_without_a_gpu() {
    let dir =
        Scratch(std::env::temp_dir().join(format!("ingot-plan-measure-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let model = dir.0.join("tiny.gguf");
    let synth = ingot()
        .args(["synth", "--preset", "tiny", "-o"])
        .arg(&model)
        .output()
        .unwrap();
    assert!(
        synth.status.success(),
        "synth: {}",
        String::from_utf8_lossy(&synth.stderr)
    );
    let out = ingot()
        .args([
            "plan",
            "--measure",
            "--reps",
            "3",
            "--predict",
            "h200",
            "-m",
        ])
        .arg(&model)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    if out.status.success() {
        // A GPU is present: the measurement ran.
        assert!(stdout.contains("measured us"), "{stdout}");
        assert!(stdout.contains("MEASURED on"), "{stdout}");
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one error line: {stderr}");
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains("no GPU found"),
        "{stderr}"
    );
    assert!(
        stdout.is_empty(),
        "no table without a measurement: {stdout}"
    );
}

#[test]
fn measure_needs_a_model_file_and_the_cuda_backend() {
    let out = ingot()
        .args(["plan", "--synth", "tiny", "--measure"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("-m FILE"), "{stderr}");
    let out = ingot()
        .args(["plan", "-m", "unused.gguf", "--measure", "--backend", "cpu"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("only --backend cuda"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `ingot plan --prefill N` refuses what no executor plans (a size that is no bucket, a weight
/// type without prefill kernels) with one line naming it, and plans a bucket of a model it
/// takes.
#[test]
fn prefill_plans_name_what_they_refuse() {
    let run = |args: &[&str]| ingot().args(args).output().unwrap();
    let out = run(&["plan", "--synth", "lite-4l", "--prefill", "100"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--prefill 100") && err.contains("512"),
        "{err}"
    );
    let out = run(&[
        "plan",
        "--synth",
        "tiny",
        "--quant",
        "iq1_s",
        "--prefill",
        "16",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("IQ1_S") && err.contains("mmq"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let out = run(&[
        "plan",
        "--synth",
        "lite-4l",
        "--prefill",
        "16",
        "--max-blocks",
        "2",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("per prefill chunk of 16 tokens") && text.contains("flash_latent_prefill"),
        "{text}"
    );
}
