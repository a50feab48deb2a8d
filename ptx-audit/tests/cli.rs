//! The `ptx-audit` binary: exit codes, tables, ratchet file writes, missing tools.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn ptx_audit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ptx-audit"))
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn check_passes_within_budget_and_fails_with_a_table_over_it() {
    let ptx = fixture("clean.ptx");
    let ok = ptx_audit(&[
        "check",
        "--ptx",
        path_str(&ptx),
        "--budgets",
        path_str(&fixture("clean.toml")),
    ]);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}{}",
        text(&ok.stdout),
        text(&ok.stderr)
    );
    assert!(text(&ok.stdout).contains("all 1 kernels within budget"));

    let over = ptx_audit(&[
        "check",
        "--ptx",
        path_str(&ptx),
        "--budgets",
        path_str(&fixture("over_budget.toml")),
    ]);
    let stdout = text(&over.stdout);
    assert_eq!(
        over.status.code(),
        Some(1),
        "{stdout}{}",
        text(&over.stderr)
    );
    assert!(stdout.contains("FAILED: 5 rule(s) broken"), "{stdout}");
    let row = stdout
        .lines()
        .find(|l| l.contains("hot_loop_ptx_insts") && l.starts_with("clean_sum"))
        .unwrap_or_else(|| panic!("no regression row in {stdout}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells,
        [
            "clean_sum",
            "hot_loop_ptx_insts",
            "6",
            "7",
            "over",
            "budget"
        ]
    );
}

#[test]
fn ratchet_add_new_creates_then_tightens_the_budget_file() {
    let dir = tempfile::tempdir().unwrap();
    let budgets = dir.path().join("audit-budgets.toml");
    let ptx = fixture("clean.ptx");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "check",
            "--ptx",
            path_str(&ptx),
            "--budgets",
            path_str(&budgets),
        ];
        args.extend_from_slice(extra);
        ptx_audit(&args)
    };

    let missing = run(&[]);
    assert_eq!(missing.status.code(), Some(2));
    let stderr = text(&missing.stderr);
    assert!(stderr.contains("audit-budgets.toml: not found"), "{stderr}");
    assert!(stderr.contains("--ratchet --add-new"), "{stderr}");

    let created = run(&["--ratchet", "--add-new"]);
    assert_eq!(created.status.code(), Some(0), "{}", text(&created.stdout));
    let written = std::fs::read_to_string(&budgets).unwrap();
    assert!(
        written.contains("[kernels.clean_sum]\nhot_loop_ptx_insts = 7\n"),
        "{written}"
    );

    let loosened = written.replace("hot_loop_ptx_insts = 7", "hot_loop_ptx_insts = 70");
    std::fs::write(&budgets, loosened).unwrap();
    let tightened = run(&["--ratchet"]);
    assert_eq!(tightened.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&budgets).unwrap(), written);
    // Only the budget file is left in the folder (the temporary was renamed over it).
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn missing_tools_fail_loudly() {
    let out = Command::new(env!("CARGO_BIN_EXE_ptx-audit"))
        .args(["report", "--ptx", path_str(&fixture("clean.ptx"))])
        .env("INGOT_PTXAS", "/nonexistent/ptxas")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("cargo xtask tools"), "{stderr}");
    assert!(
        stderr.contains("INGOT_PTXAS=/nonexistent/ptxas"),
        "{stderr}"
    );
}

#[test]
fn ptx_only_report_needs_no_tools_and_bad_ptx_is_an_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_ptx-audit"))
        .args([
            "report",
            "--ptx-only",
            "--ptx",
            path_str(&fixture("bounds_check.ptx")),
        ])
        .env("INGOT_PTXAS", "/nonexistent/ptxas")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("guards 1 (lines 39)"),
        "{}",
        text(&out.stdout)
    );

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.ptx");
    std::fs::write(&bad, ".version 7.8\n.target sm_86\n.entry k( {\n").unwrap();
    let out = ptx_audit(&["report", "--ptx-only", "--ptx", path_str(&bad)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("PTX parse error at line"),
        "{}",
        text(&out.stderr)
    );
}
