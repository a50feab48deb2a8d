//! `ingot run --draft mtp` as a user runs it: the same greedy text as without the flag on the
//! trained model (whose MTP block drafts well), on the cpu and sim backends, the drafts' acceptance
//! on stderr, and one clear refusal for a model without a NextN/MTP block and for an out-of-range
//! `--draft-max`.

mod support;

use std::process::Command;

use support::EXE;

fn run(model: &std::path::Path, extra: &[&str]) -> std::process::Output {
    run_on("cpu", "48", model, extra)
}

fn run_on(backend: &str, n: &str, model: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let extra: Vec<&std::ffi::OsStr> = extra.iter().map(std::ffi::OsStr::new).collect();
    support::greedy_run(model, ("pub fn main() {", n), backend, &extra)
}

/// The sim backend (the MTP block's plan in ptx-sim): 12 tokens, k = 2, the same text as without
/// drafts (the simulator is slow, so one short case).
#[test]
fn drafted_sim_run_prints_the_plain_greedy_text() {
    let model = ingot_testdata::golden_model("trained-rust-std");
    let plain = run_on("sim", "12", &model, &[]);
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let drafted = run_on("sim", "12", &model, &["--draft", "mtp", "--draft-max", "2"]);
    let err = String::from_utf8_lossy(&drafted.stderr);
    assert!(drafted.status.success(), "{err}");
    assert_eq!(
        String::from_utf8_lossy(&drafted.stdout),
        String::from_utf8_lossy(&plain.stdout)
    );
    assert!(err.contains("drafts accepted"), "{err}");
}

#[test]
fn drafted_run_prints_the_plain_greedy_text() {
    let model = ingot_testdata::golden_model("trained-rust-std");
    let plain = run(&model, &[]);
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    for k in ["1", "3"] {
        let drafted = run(&model, &["--draft", "mtp", "--draft-max", k]);
        let err = String::from_utf8_lossy(&drafted.stderr);
        assert!(drafted.status.success(), "{err}");
        assert_eq!(
            String::from_utf8_lossy(&drafted.stdout),
            String::from_utf8_lossy(&plain.stdout),
            "--draft-max {k}"
        );
        assert!(err.contains("drafts accepted"), "{err}");
    }
    // A pruned draft head: the same text, its prefix named; an empty one or one past the
    // model's 1,024 ids refused in one line.
    let pruned = run(&model, &["--draft", "mtp", "--draft-vocab", "512"]);
    let err = String::from_utf8_lossy(&pruned.stderr);
    assert!(pruned.status.success(), "{err}");
    assert_eq!(pruned.stdout, plain.stdout);
    assert!(err.contains("among the first 512 ids"), "{err}");
    for (n, want) in [
        ("0", "--draft-vocab 0: drafts need at least one token id"),
        (
            "5000",
            "a draft vocabulary of 5000 tokens: the model has 1024",
        ),
    ] {
        let out = run(&model, &["--draft", "mtp", "--draft-vocab", n]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(want), "{n}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

#[test]
fn a_model_without_an_mtp_block_is_refused_in_one_line() {
    let model = ingot_testdata::golden_model("tiny-mla-f32");
    let out = Command::new(EXE)
        .args(["run", "-m"])
        .arg(&model)
        .args([
            "-p", "Hello", "-n", "4", "--temp", "0", "--ctx", "64", "--draft", "mtp",
        ])
        .output()
        .expect("start ingot");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no NextN/MTP block"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    let model = ingot_testdata::golden_model("trained-rust-std");
    let out = run(&model, &["--draft", "mtp", "--draft-max", "4"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--draft-max 4 is out of range 1..=3"), "{err}");
}
