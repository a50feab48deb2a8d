//! Each audit rule against the fixtures: it fails on the kernel built to break it and passes on the
//! clean one. These tests run ptxas and cuobjdump/nvdisasm, found like the CLI finds them
//! (`INGOT_*` variables, which `cargo xtask test` sets, else `PATH`); without them they fail with
//! the message to run `cargo xtask tools`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use ptx_audit::{audit, Budgets, KernelReport, LoopMatch, ToolSearch, Tools, METRICS};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn tools() -> Tools {
    ToolSearch::from_env()
        .tools()
        .unwrap_or_else(|e| panic!("these tests need NVIDIA's tools: {e}"))
}

fn audit_one(ptx: &str) -> KernelReport {
    let mut reports = audit(&fixture(ptx), &tools()).unwrap();
    assert_eq!(reports.len(), 1, "each fixture holds one kernel");
    reports.remove(0)
}

/// Budgets with every ceiling far above any fixture (so only required-zero rules can fire).
fn generous(kernel: &str) -> Budgets {
    let mut budgets = Budgets::default();
    let limits = budgets.kernels.entry(kernel.to_string()).or_default();
    for (metric, kind, _) in METRICS {
        if kind == ptx_audit::MetricKind::Ceiling {
            limits.insert(metric.to_string(), 10_000);
        }
    }
    budgets
}

fn broken(budgets: &Budgets, report: &KernelReport) -> BTreeSet<String> {
    budgets
        .check(std::slice::from_ref(report))
        .into_iter()
        .map(|v| v.metric)
        .collect()
}

#[test]
fn clean_kernel_passes_every_rule() {
    let report = audit_one("clean.ptx");
    let budgets = Budgets::load(&fixture("clean.toml")).unwrap();
    assert_eq!(budgets.check(std::slice::from_ref(&report)), vec![]);

    let hot: Vec<_> = report.ptx.hot_loops().collect();
    assert_eq!(hot.len(), 1);
    assert!(hot[0].marked && hot[0].innermost);
    // mul.wide, add, ld.global, add.rn, add, setp, @p bra: counted by hand in clean.ptx.
    assert_eq!(hot[0].ptx_insts, 7);
    for arch in &report.archs {
        assert_eq!(arch.matching, LoopMatch::Paired, "{}", arch.arch);
        // ptxas unrolls the loop, so the SASS loop is at least as long as the PTX one.
        assert!(arch.hot_sass_insts() >= 7, "{}: {:?}", arch.arch, arch);
        assert_eq!(arch.resources.stack_frame_bytes, 0);
    }
}

#[test]
fn bounds_check_in_loop_breaks_guard_and_trap_rules() {
    let report = audit_one("bounds_check.ptx");
    let metrics = report.metrics();
    assert_eq!(metrics["hot_loop_guards"], 1);
    assert_eq!(metrics["hot_loop_traps"], 1);
    let expected: BTreeSet<String> = ["hot_loop_guards", "hot_loop_traps"]
        .map(String::from)
        .into();
    assert_eq!(broken(&generous("checked_sum"), &report), expected);
}

#[test]
fn local_array_breaks_stack_and_local_memory_rules() {
    let report = audit_one("local_array.ptx");
    let metrics = report.metrics();
    // `[u32; 64]` is 256 bytes, declared as `__local_depot2[256]` and reported as the frame.
    assert_eq!(metrics["local_bytes"], 256);
    assert_eq!(metrics["stack_frame_bytes"], 256);
    // 1 st.local.b8 (zeroing loop) + 4x(ld+st) + 1x(ld+st) (histogram) + 8 ld (copy-out).
    assert_eq!(metrics["local_accesses"], 19);
    let expected: BTreeSet<String> = ["local_accesses", "local_bytes", "stack_frame_bytes"]
        .map(String::from)
        .into();
    assert_eq!(broken(&generous("local_array"), &report), expected);
}

#[test]
fn register_pressure_breaks_the_spill_rule() {
    let report = audit_one("spill.ptx");
    assert!(report.metrics()["spill_bytes"] > 0, "{:?}", report.archs);
    let failing = broken(&generous("spill_accumulators"), &report);
    assert!(failing.contains("spill_bytes"), "{failing:?}");
    assert!(failing.contains("stack_frame_bytes"), "{failing:?}");
    // No local memory in the PTX itself: the spills come from ptxas.
    assert!(!failing.contains("local_bytes"), "{failing:?}");
}

#[test]
fn over_budget_kernel_fails_each_ceiling() {
    let report = audit_one("clean.ptx");
    let budgets = Budgets::load(&fixture("over_budget.toml")).unwrap();
    let violations = budgets.check(std::slice::from_ref(&report));
    let metrics: BTreeSet<&str> = violations.iter().map(|v| v.metric.as_str()).collect();
    let expected: BTreeSet<&str> = [
        "hot_loop_ptx_insts",
        "hot_loop_sass_insts_sm86",
        "hot_loop_sass_insts_sm90",
        "registers_sm86",
        "registers_sm90",
    ]
    .into();
    assert_eq!(metrics, expected);
    let ptx = violations
        .iter()
        .find(|v| v.metric == "hot_loop_ptx_insts")
        .unwrap();
    assert_eq!((ptx.budget, ptx.actual), (Some(6), Some(7)));
}

#[test]
fn unbudgeted_and_vanished_kernels_fail() {
    let report = audit_one("clean.ptx");
    let violations = Budgets::default().check(std::slice::from_ref(&report));
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].problem, "kernel missing from budget file");

    let mut budgets = Budgets::load(&fixture("clean.toml")).unwrap();
    budgets
        .kernels
        .insert("renamed_kernel".into(), Default::default());
    let violations = budgets.check(std::slice::from_ref(&report));
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].kernel, "renamed_kernel");
    assert_eq!(violations[0].problem, "budgeted kernel not in PTX");

    let mut budgets = Budgets::load(&fixture("clean.toml")).unwrap();
    budgets
        .kernels
        .get_mut("clean_sum")
        .unwrap()
        .remove("registers_sm90");
    let violations = budgets.check(std::slice::from_ref(&report));
    assert_eq!(violations.len(), 1);
    assert_eq!(
        (violations[0].metric.as_str(), violations[0].problem),
        ("registers_sm90", "no budget")
    );
}

#[test]
fn ratchet_lowers_never_raises_and_adds_only_when_asked() {
    let clean = audit_one("clean.ptx");
    let bounds = audit_one("bounds_check.ptx");
    let reports = [clean.clone(), bounds];
    let actual = clean.metrics();

    let mut budgets = generous("clean_sum");
    let limits = budgets.kernels.get_mut("clean_sum").unwrap();
    // One ceiling already below today's value: the ratchet must keep it (and check must fail).
    limits.insert("hot_loop_ptx_insts".into(), 6);

    let changes = budgets.ratchet(&reports, false);
    let limits = &budgets.kernels["clean_sum"];
    assert_eq!(limits["hot_loop_ptx_insts"], 6);
    for metric in [
        "registers_sm86",
        "registers_sm90",
        "hot_loop_sass_insts_sm86",
    ] {
        assert_eq!(
            limits[metric], actual[metric],
            "{metric} lowered to today's value"
        );
    }
    assert_eq!(changes.len(), 4, "{changes:?}");
    assert!(!budgets.kernels.contains_key("checked_sum"));
    assert_eq!(budgets.check(&reports[..1]).len(), 1);

    // Ratcheting again changes nothing.
    assert!(budgets.ratchet(&reports, false).is_empty());

    let changes = budgets.ratchet(&reports, true);
    let added = &budgets.kernels["checked_sum"];
    // New kernels get ceilings only; their guard and trap stay required zeros, so they fail.
    assert_eq!(added.len(), 5, "{added:?}");
    assert_eq!(changes.len(), 5);
    let failing: BTreeSet<String> = budgets
        .check(&reports)
        .into_iter()
        .filter(|v| v.kernel == "checked_sum")
        .map(|v| v.metric)
        .collect();
    let expected: BTreeSet<String> = ["hot_loop_guards", "hot_loop_traps"]
        .map(String::from)
        .into();
    assert_eq!(failing, expected);
}
