//! `ingot plan --predict CARD --draft-mtp K` through the real binary, on tiny-glm's header (an MoE
//! NextN/MTP block): the decode table, then one PREDICTED row per k with its speed-up; a `K` out
//! of range, an acceptance outside 0..=1 and a model without a NextN block are refused in one line.

use std::process::Command;

fn plan(extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ingot"))
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
    ] {
        let out = plan(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
