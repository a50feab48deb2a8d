//! The budget file: per-kernel limits, the check against measured values, and the ratchet.
//!
//! ```toml
//! [kernels.gemv_q4k_q8_1]
//! hot_loop_ptx_insts = 96
//! hot_loop_sass_insts_sm86 = 110
//! hot_loop_sass_insts_sm90 = 104
//! registers_sm86 = 40
//! registers_sm90 = 40
//! ```
//!
//! Ceilings (see [`METRICS`]) must be present for every kernel. Required-zero metrics default
//! to 0 and may be raised for one kernel only by writing the key explicitly, with a comment
//! saying why; rewriting the file keeps comments.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::audit::{KernelReport, MetricKind, METRICS};
use crate::error::AuditError;
use toml_edit::{DocumentMut, Item, Table, TomlError, Value};

/// Largest budget file accepted (bytes); a real one is a few KiB.
const MAX_BUDGET_BYTES: u64 = 1 << 20;

/// Budgets by kernel, then by metric key.
#[derive(Debug, Clone, Default)]
pub struct Budgets {
    pub kernels: BTreeMap<String, BTreeMap<String, u64>>,
    /// The file as parsed, kept so that rewriting it preserves its comments and layout.
    document: Option<DocumentMut>,
}

/// Equal when the budgets are; formatting and comments do not count.
impl PartialEq for Budgets {
    fn eq(&self, other: &Self) -> bool {
        self.kernels == other.kernels
    }
}

impl Eq for Budgets {}

/// One failed rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub kernel: String,
    /// A metric key, or `-` for a kernel-level problem.
    pub metric: String,
    pub budget: Option<u64>,
    pub actual: Option<u64>,
    pub problem: &'static str,
}

/// One budget lowered or added by the ratchet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub kernel: String,
    pub metric: String,
    /// `None` when the entry was added.
    pub old: Option<u64>,
    pub new: u64,
}

impl Budgets {
    /// Reads a budget file; a missing file is an error (CI must not pass without budgets).
    pub fn load(path: &Path) -> Result<Budgets, AuditError> {
        let io = |source| AuditError::Io {
            path: path.to_path_buf(),
            source,
        };
        let size = std::fs::metadata(path).map_err(io)?.len();
        if size > MAX_BUDGET_BYTES {
            return Err(budget_error(
                path,
                format!("{size} bytes, over the {MAX_BUDGET_BYTES}-byte limit"),
            ));
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        Budgets::parse(&text).map_err(|message| budget_error(path, message))
    }

    /// Parses budget TOML, rejecting unknown keys and values that are not non-negative
    /// integers, so that a typo cannot silently drop a limit.
    pub fn parse(text: &str) -> Result<Budgets, String> {
        let document: DocumentMut = text.parse().map_err(|e: TomlError| e.to_string())?;
        let mut budgets = Budgets::default();
        for (key, item) in document.iter() {
            if key != "kernels" {
                return Err(format!(
                    "unknown top-level key `{key}` (expected [kernels.NAME] tables)"
                ));
            }
            let kernels = item
                .as_table_like()
                .ok_or_else(|| "`kernels` must be a table".to_string())?;
            for (kernel, limits) in kernels.iter() {
                let limits = limits
                    .as_table_like()
                    .ok_or_else(|| format!("kernels.{kernel} must be a table"))?;
                let mut parsed = BTreeMap::new();
                for (metric, value) in limits.iter() {
                    if !METRICS.iter().any(|(k, _, _)| *k == metric) {
                        let known: Vec<&str> = METRICS.iter().map(|(k, _, _)| *k).collect();
                        return Err(format!(
                            "kernels.{kernel}: unknown metric `{metric}` (known: {})",
                            known.join(", ")
                        ));
                    }
                    let n = value
                        .as_integer()
                        .and_then(|n| u64::try_from(n).ok())
                        .ok_or_else(|| {
                            format!("kernels.{kernel}.{metric} must be a non-negative integer")
                        })?;
                    parsed.insert(metric.to_string(), n);
                }
                budgets.kernels.insert(kernel.to_string(), parsed);
            }
        }
        budgets.document = Some(document);
        Ok(budgets)
    }

    /// The file text. A parsed file keeps its comments, layout and order: values are replaced in
    /// place and new kernels or metrics are appended. A new file gets a header explaining it and
    /// one table per kernel, metrics in [`METRICS`] order.
    pub fn render(&self) -> String {
        match &self.document {
            Some(document) => self.update(document.clone()).to_string(),
            None => self.render_new(),
        }
    }

    fn update(&self, mut document: DocumentMut) -> DocumentMut {
        let kernels = document.entry("kernels").or_insert_with(|| {
            let mut table = Table::new();
            table.set_implicit(true);
            Item::Table(table)
        });
        let Some(kernels) = kernels.as_table_like_mut() else {
            // `parse` only accepts a table here.
            return document;
        };
        for (kernel, limits) in &self.kernels {
            let table = kernels
                .entry(kernel)
                .or_insert_with(|| Item::Table(Table::new()));
            let Some(table) = table.as_table_like_mut() else {
                continue;
            };
            for (metric, _, _) in METRICS {
                let Some(&n) = limits.get(metric) else {
                    continue;
                };
                let new = Value::from(i64::try_from(n).unwrap_or(i64::MAX));
                match table.get_mut(metric).and_then(Item::as_value_mut) {
                    Some(old) => {
                        let decor = old.decor().clone();
                        *old = new;
                        *old.decor_mut() = decor;
                    }
                    None => {
                        table.insert(metric, Item::Value(new));
                    }
                }
            }
        }
        document
    }

    fn render_new(&self) -> String {
        let mut out = String::from(
            "# PTX audit budgets, checked by `cargo run -p ptx-audit -- check` (see `cargo doc -p ptx-audit`).\n\
             # Ceilings must be listed for every kernel and only go down: `check --ratchet` lowers them to\n\
             # today's values, `check --ratchet --add-new` adds new kernels. Required zeros are 0 unless\n\
             # listed; list one only with a reviewed reason.\n",
        );
        for (metric, kind, meaning) in METRICS {
            let kind = match kind {
                MetricKind::Ceiling => "ceiling",
                MetricKind::RequiredZero => "required zero",
            };
            out.push_str(&format!("#   {metric}: {meaning} ({kind})\n"));
        }
        for (kernel, limits) in &self.kernels {
            out.push_str(&format!("\n[kernels.{}]\n", toml_key(kernel)));
            for (metric, _, _) in METRICS {
                if let Some(v) = limits.get(metric) {
                    out.push_str(&format!("{metric} = {v}\n"));
                }
            }
        }
        out
    }

    /// Writes the file atomically: a temporary file in the same folder, then a rename.
    pub fn save(&self, path: &Path) -> Result<(), AuditError> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let io = |source| AuditError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(io)?;
        tmp.write_all(self.render().as_bytes()).map_err(io)?;
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(path).map_err(|e| io(e.error))?;
        Ok(())
    }

    /// Every rule the reports break, in kernel then metric order.
    pub fn check(&self, reports: &[KernelReport]) -> Vec<Violation> {
        let mut violations = Vec::new();
        for report in reports {
            let kernel = report.name().to_string();
            let Some(limits) = self.kernels.get(&kernel) else {
                violations.push(Violation {
                    kernel,
                    metric: "-".into(),
                    budget: None,
                    actual: None,
                    problem: "kernel missing from budget file",
                });
                continue;
            };
            let actuals = report.metrics();
            for (metric, kind, _) in METRICS {
                let Some(&actual) = actuals.get(metric) else {
                    continue;
                };
                let budget = match (limits.get(metric), kind) {
                    (Some(&b), _) => b,
                    (None, MetricKind::RequiredZero) => 0,
                    (None, MetricKind::Ceiling) => {
                        violations.push(Violation {
                            kernel: kernel.clone(),
                            metric: metric.into(),
                            budget: None,
                            actual: Some(actual),
                            problem: "no budget",
                        });
                        continue;
                    }
                };
                if actual > budget {
                    violations.push(Violation {
                        kernel: kernel.clone(),
                        metric: metric.into(),
                        budget: Some(budget),
                        actual: Some(actual),
                        problem: match kind {
                            MetricKind::Ceiling => "over budget",
                            MetricKind::RequiredZero if budget == 0 => "must be zero",
                            MetricKind::RequiredZero => "over allowance",
                        },
                    });
                }
            }
        }
        for kernel in self.kernels.keys() {
            if !reports.iter().any(|r| r.name() == kernel) {
                violations.push(Violation {
                    kernel: kernel.clone(),
                    metric: "-".into(),
                    budget: None,
                    actual: None,
                    problem: "budgeted kernel not in PTX",
                });
            }
        }
        violations
    }

    /// Lowers budgets to today's values where those are lower, fills in missing ceilings of
    /// budgeted kernels, and with `add_new` adds kernels that have no budget (their ceilings at
    /// today's values; required-zero metrics stay at the implicit 0). Never raises a budget.
    pub fn ratchet(&mut self, reports: &[KernelReport], add_new: bool) -> Vec<Change> {
        let mut changes = Vec::new();
        for report in reports {
            let kernel = report.name().to_string();
            let actuals = report.metrics();
            let is_new = !self.kernels.contains_key(&kernel);
            if is_new && !add_new {
                continue;
            }
            let limits = self.kernels.entry(kernel.clone()).or_default();
            for (metric, kind, _) in METRICS {
                let Some(&actual) = actuals.get(metric) else {
                    continue;
                };
                let old = limits.get(metric).copied();
                let new = match (old, kind) {
                    (Some(b), _) if actual < b => actual,
                    (None, MetricKind::Ceiling) => actual,
                    _ => continue,
                };
                limits.insert(metric.to_string(), new);
                changes.push(Change {
                    kernel: kernel.clone(),
                    metric: metric.to_string(),
                    old,
                    new,
                });
            }
        }
        changes
    }
}

fn budget_error(path: &Path, message: String) -> AuditError {
    AuditError::Budget {
        path: path.to_path_buf(),
        message,
    }
}

/// A bare TOML key when the name allows it, else a quoted one.
fn toml_key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        name.to_string()
    } else {
        format!("{:?}", name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_renders_round_trip() {
        let text = "[kernels.k]\nregisters_sm86 = 40\nhot_loop_ptx_insts = 12\n\n[kernels.\"odd$name\"]\nspill_bytes = 8\n";
        let budgets = Budgets::parse(text).unwrap();
        assert_eq!(budgets.kernels["k"]["registers_sm86"], 40);
        assert_eq!(budgets.kernels["odd$name"]["spill_bytes"], 8);
        // Unchanged budgets render to the same text.
        assert_eq!(budgets.render(), text);

        // A new file lists metrics in METRICS order whatever the insertion order.
        let fresh = Budgets {
            kernels: budgets.kernels.clone(),
            ..Budgets::default()
        };
        let rendered = fresh.render();
        assert!(rendered.contains("[kernels.k]\nhot_loop_ptx_insts = 12\nregisters_sm86 = 40\n"));
        assert!(rendered.starts_with("# PTX audit budgets"));
        assert_eq!(Budgets::parse(&rendered).unwrap(), budgets);
    }

    #[test]
    fn rewriting_keeps_comments_and_appends_new_entries() {
        let text = "# header\n\n[kernels.k]\n# reviewed: needs a 64-byte frame for X\nstack_frame_bytes = 64 # why\nregisters_sm86 = 40\n";
        let mut budgets = Budgets::parse(text).unwrap();
        let k = budgets.kernels.get_mut("k").unwrap();
        k.insert("stack_frame_bytes".into(), 32);
        k.insert("registers_sm90".into(), 36);
        budgets
            .kernels
            .entry("new_kernel".into())
            .or_default()
            .insert("registers_sm86".into(), 20);
        let rendered = budgets.render();
        assert!(rendered.starts_with("# header\n"), "{rendered}");
        assert!(
            rendered.contains(
                "# reviewed: needs a 64-byte frame for X\nstack_frame_bytes = 32 # why\n"
            ),
            "{rendered}"
        );
        assert!(rendered.contains("registers_sm90 = 36"), "{rendered}");
        assert!(
            rendered.contains("[kernels.new_kernel]\nregisters_sm86 = 20\n"),
            "{rendered}"
        );
        assert_eq!(Budgets::parse(&rendered).unwrap(), budgets);
    }

    #[test]
    fn rejects_typos_and_bad_values() {
        let cases = [
            (
                "[kernels.k]\nregisters = 40\n",
                "unknown metric `registers`",
            ),
            ("[kernels.k]\nregisters_sm86 = -1\n", "non-negative integer"),
            (
                "[kernels.k]\nregisters_sm86 = \"40\"\n",
                "non-negative integer",
            ),
            (
                "[kernel.k]\nregisters_sm86 = 40\n",
                "unknown top-level key `kernel`",
            ),
            ("kernels = 3\n", "`kernels` must be a table"),
            ("[kernels.k\n", "TOML parse error at line 1"),
        ];
        for (text, expected) in cases {
            let err = Budgets::parse(text).unwrap_err();
            assert!(err.contains(expected), "{text:?}: {err}");
        }
    }

    #[test]
    fn save_replaces_the_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("budgets.toml");
        std::fs::write(&path, "old").unwrap();
        let mut budgets = Budgets::default();
        budgets
            .kernels
            .entry("k".into())
            .or_default()
            .insert("registers_sm90".into(), 33);
        budgets.save(&path).unwrap();
        assert_eq!(Budgets::load(&path).unwrap(), budgets);
        let entries = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(entries, 1);
    }

    #[test]
    fn missing_file_is_an_error_naming_it() {
        let err = Budgets::load(Path::new("/nonexistent/budgets.toml")).unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/budgets.toml"),
            "{err}"
        );
    }
}
