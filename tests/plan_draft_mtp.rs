//! `ingot plan --predict CARD --draft-mtp K` through the real binary, on tiny-glm's header (an MoE
//! NextN/MTP block): the decode table, then one PREDICTED row per k with its speed-up; a `K` out
//! of range, an acceptance outside 0..=1 and a model without a NextN block are refused in one line.
//! With `--routing-trace`, the verify's distinct experts come from a trace of the trained model
//! (`ingot run --trace-routing`); a trace of another expert shape, or too short, is refused.

mod support;

use std::process::Command;

fn plan(extra: &[&str]) -> std::process::Output {
    Command::new(support::EXE)
        .args(["plan", "--predict", "3090", "--max-blocks", "4"])
        .args(extra)
        .output()
        .expect("start ingot")
}

#[test]
fn predicts_each_k_on_tiny_glm() {
    let out = plan(&["--synth", "tiny-glm", "--draft-mtp", "2"]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("PREDICTED speculative decoding"),
        "{stdout}"
    );
    assert!(stdout.contains("acceptance 0.80"), "{stdout}");
    // One row per k: `k tokens/step ...` with E = 1.8 and 2.44 at the default acceptance (its
    // first field is k alone, and a speed-up column ends in `x |`; a node row's first field is
    // its index, which may be 1 or 2 too, but it has no such column).
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|k| k == "1" || k == "2")
                && l.contains("x |")
        })
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    assert!(
        rows[0].contains("1.800") && rows[1].contains("2.440"),
        "{rows:?}"
    );
}

#[test]
fn bad_arguments_and_models_without_a_block_are_refused() {
    for (args, want) in [
        (
            vec!["--synth", "tiny-glm", "--draft-mtp", "4"],
            "--draft-mtp 4 is out of range",
        ),
        (
            vec![
                "--synth",
                "tiny-glm",
                "--draft-mtp",
                "1",
                "--acceptance",
                "1.5",
            ],
            "--acceptance 1.5 is not in 0..=1",
        ),
        (
            vec!["--synth", "tiny", "--draft-mtp", "1"],
            "no NextN/MTP block",
        ),
        (
            vec![
                "--synth",
                "tiny-glm",
                "--draft-mtp",
                "1",
                "--draft-vocab",
                "600",
            ],
            "a draft vocabulary of 600 tokens: the model has 512",
        ),
    ] {
        let out = plan(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

/// Records the trained model's routing over `n` generated tokens into `dir/name`.
fn trace(
    model: &std::path::Path,
    dir: &std::path::Path,
    name: &str,
    n: &str,
) -> std::path::PathBuf {
    let path = dir.join(name);
    let prompt = ("impl<T: Clone> Clone for Box<T> {", n);
    let out = support::greedy_run(
        model,
        prompt,
        "cpu",
        &["--trace-routing".as_ref(), path.as_os_str()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

#[test]
fn a_routing_trace_gives_the_measured_overlap() {
    let model = ingot_testdata::golden_model("trained-rust-std");
    let dir = tempfile::tempdir().expect("tempdir");
    let long = trace(&model, dir.path(), "long.rtr", "40");
    let out = plan(&[
        "-m",
        model.to_str().expect("utf-8 path"),
        "--draft-mtp",
        "2",
        "--routing-trace",
        long.to_str().expect("utf-8 path"),
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("MEASURED on a routing trace"), "{stdout}");
    // 39 generated tokens after the first (the prompt's last token's successor is the first
    // decode record): 38 windows of 2 and 37 of 3; uniform 2 of 4 gives 3.00 and 3.50.
    let line = stdout
        .lines()
        .find(|l| l.starts_with("routing trace"))
        .expect("the trace's line");
    assert!(line.contains("this model"), "{line}");
    assert!(line.contains("(3.00,") && line.contains("(3.50,"), "{line}");
    assert!(line.contains(" windows)"), "{line}");
    assert!(stdout.contains("1.50x needs"), "{stdout}");

    let short = trace(&model, dir.path(), "short.rtr", "2");
    for (args, want) in [
        (
            vec!["-m", model.to_str().expect("utf-8"), "--draft-mtp", "1"],
            "holds no run of 2 consecutive generated tokens (it records 1)",
        ),
        (
            vec!["--synth", "tiny-glm", "--draft-mtp", "1"],
            "record the trace on the model being predicted",
        ),
    ] {
        let trace = if want.contains("consecutive") {
            &short
        } else {
            &long
        };
        let mut args = args;
        args.extend(["--routing-trace", trace.to_str().expect("utf-8")]);
        let out = plan(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
