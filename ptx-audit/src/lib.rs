//! Static audit of the kernels' PTX and of the SASS ptxas makes from it.
//!
//! `ptx-audit report` prints, for every `.entry` of a PTX file (by default
//! `kernels/ptx/ingot.ptx.xz`), hot-loop instruction counts (PTX and SASS for sm_86 and sm_90),
//! guards, traps, registers, spills, stack and local memory; `ptx-audit check` compares them with
//! the budget file (by default `kernels/audit-budgets.toml`) and exits 1 with a table of every
//! broken rule (kernel, metric, budget, actual). Errors (unreadable input, a tool missing or
//! failing) exit 2.
//!
//! ```text
//! cargo run -p ptx-audit -- report [--ptx FILE] [--ptx-only]
//! cargo run -p ptx-audit -- check  [--ptx FILE] [--budgets FILE] [--ratchet [--add-new]]
//! ```
//!
//! The manual is `docs/ptx-audit.md`: what each metric counts (docs/ptx-audit.md#metrics), which
//! loops are hot and the `ingot:hot` marker (docs/ptx-audit.md#hot-loops), how SASS loops pair with
//! PTX loops (docs/ptx-audit.md#matching-sass-loops-to-ptx-loops), and the budget file
//! (docs/ptx-audit.md#budget-file, [`budget`]): five ceilings per kernel, six metrics that must be
//! zero unless a kernel lists a reviewed amount; `--ratchet` only ever lowers a budget.
//! ptxas and cuobjdump come from `INGOT_PTXAS`/`INGOT_CUOBJDUMP`/`INGOT_NVDISASM`, else `PATH`
//! ([`tools`]); without them the audit fails and says so (docs/ptx-audit.md#tools).

pub mod analysis;
pub mod audit;
pub mod budget;
pub mod error;
pub mod ptxas;
pub mod report;
pub mod sass;
pub mod tools;

pub use audit::{audit, audit_ptx_only, read_ptx, KernelReport, LoopMatch, MetricKind, METRICS};
pub use budget::{Budgets, Change, Violation};
pub use error::AuditError;
pub use ptx_front::PtxError;
pub use tools::{ToolSearch, Tools};
