//! Static audit of the kernels' PTX and of the SASS ptxas makes from it.
//!
//! `ptx-audit report` prints, for every `.entry` of a PTX file (by default
//! `kernels/ptx/ingot.ptx.xz`), the metrics below; `ptx-audit check` compares them with the budget
//! file (by default `kernels/audit-budgets.toml`) and exits 1 with a table of every broken rule
//! (kernel, metric, budget, actual). Errors (unreadable input, a tool missing or failing) exit 2.
//!
//! ```text
//! cargo run -p ptx-audit -- report [--ptx FILE] [--ptx-only]
//! cargo run -p ptx-audit -- check  [--ptx FILE] [--budgets FILE] [--ratchet [--add-new]]
//! ```
//!
//! # Metrics
//!
//! From the PTX (parsed by the `ptx-front` crate, which also builds the control-flow graph and
//! loops):
//! - `ptx`: PTX instructions in the kernel. A *loop* is a natural loop (a back edge whose target
//!   dominates its source); `hot_ptx` (`hot_loop_ptx_insts`) sums the PTX instructions of the hot
//!   loops' bodies.
//! - `guards` (`hot_loop_guards`): conditional branches in hot loops that are not loop control.
//!   Loop control is a back edge or a branch with a side that leaves the innermost loop holding it;
//!   a predicated `ret`/`exit` is loop control too. Everything else is a guard: an `if` inside the
//!   body, and any branch with a side that reaches a `trap` through unconditional flow only
//!   (rustc's bounds and overflow checks under `panic = "immediate-abort"` become `@p bra OK;
//!   bra.uni PANIC; ... PANIC: trap; exit;`), and `@p trap` itself.
//! - `traps` (`hot_loop_traps`): distinct `trap` instructions in a hot loop's body or reached from
//!   it that way.
//! - `calls`: `call` instructions in the kernel (reported, not budgeted).
//! - `local_B` (`local_bytes`): bytes of `.local` declarations, rustc's `__local_depot` stack
//!   included; `local_ls` (`local_accesses`): `ld.local`/`st.local` instructions.
//! - `smem_B`: static `.shared` bytes the kernel declares or names at module scope; `+dyn` when it
//!   names an unsized `.extern .shared` array (sized at launch).
//!
//! From `ptxas -arch=sm_86 -v` and `-arch=sm_90` ([`ptxas`]): `regs86`/`regs90`
//! (`registers_sm86`/`_sm90`), `stack` (`stack_frame_bytes`, worst architecture) and `spill`
//! (`spill_bytes`: spill store + load bytes, worst architecture).
//!
//! From the SASS (`cuobjdump -sass` of the cubin, or `nvdisasm -c` when cuobjdump is missing;
//! [`sass`]): `sass86`/`sass90` (`hot_loop_sass_insts_sm86`/`_sm90`), the instructions of every
//! innermost SASS loop, summed. A SASS loop is the address range from the target of a backward
//! `BRA` to the last backward branch to that target; innermost means it holds no other.
//!
//! # Hot loops
//!
//! Every innermost natural loop is hot. A kernel can in addition mark a loop hot by leaving the
//! comment `ingot:hot` in its body, which survives into the PTX when written as inline asm:
//!
//! ```text
//! while k < n {
//!     core::arch::asm!("// ingot:hot", options(nomem, nostack, preserves_flags));
//!     /* ... */
//! }
//! ```
//!
//! The asm statement emits no instruction; `nomem` lets LLVM move memory accesses across it, but as
//! an opaque statement it stays in the loop and is not duplicated away (it can make the unroller
//! slightly more conservative). The loop marked is the innermost one holding the first instruction
//! after the marker, so a marker placed in an outer loop's body (outside its inner loops) makes the
//! outer loop hot; its count then includes its inner loops. A marker never makes a loop cold, and
//! one outside any loop is printed as a note. Markers are only recognised in `//` comments, as a
//! whole word.
//!
//! # Matching SASS loops to PTX loops
//!
//! ptxas keeps the PTX block order, so the n-th innermost PTX loop (by header position) is paired
//! with the n-th innermost SASS loop (by address) when both sides have the same number; the
//! per-loop lines of `report` show the pairs. When the numbers differ (ptxas unrolled a loop
//! completely, or split one into an unrolled loop and a remainder loop) the kernel is marked
//! `unmatched` and no per-loop SASS count is shown. Either way the budgeted SASS metric is the sum
//! over all innermost SASS loops: with every innermost loop hot that is the SASS of the hot
//! loops, and it cannot hide a loop. Limits: a marked outer loop has no SASS count of its own;
//! loops that ptxas creates from straight-line PTX are counted; a loop ptxas rotates so that its
//! backward branch skips part of the body undercounts that part.
//!
//! # Budget file
//!
//! TOML, one table per kernel (see [`budget`]):
//!
//! ```toml
//! [kernels.gemv_q4k_q8_1]
//! hot_loop_ptx_insts = 209
//! hot_loop_sass_insts_sm86 = 170
//! hot_loop_sass_insts_sm90 = 171
//! registers_sm86 = 40
//! registers_sm90 = 32
//! ```
//!
//! The five keys above are ceilings and must be present for every kernel. `spill_bytes`,
//! `stack_frame_bytes`, `hot_loop_traps`, `hot_loop_guards`, `local_bytes` and `local_accesses`
//! must be zero; a kernel may list one of them to allow a reviewed non-zero amount. Unknown keys
//! are errors. A kernel missing from the file, a budgeted kernel missing from the PTX, and a
//! missing ceiling are all failures. `check --ratchet` rewrites the file (temporary file plus
//! rename, comments and layout kept) with today's values where they are lower and fills missing
//! ceilings; it never raises a budget and still reports what is over. `--ratchet --add-new` also
//! adds unbudgeted kernels (ceilings only, so their required zeros still apply) and creates the
//! file if needed.
//!
//! # Tools
//!
//! ptxas and cuobjdump/nvdisasm come from `INGOT_PTXAS`, `INGOT_CUOBJDUMP`, `INGOT_NVDISASM`, else
//! `PATH` ([`tools`]). `cargo xtask tools` installs them under `.tools/`, and `cargo xtask audit`
//! / `cargo xtask test` pass their paths in those variables (xtask is the one place that knows
//! where they are). Without them the audit fails and says so; `report --ptx-only` gives the PTX
//! metrics alone.

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
