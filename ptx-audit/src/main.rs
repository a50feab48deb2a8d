//! `ptx-audit`: report or check the kernels' PTX/SASS metrics against the budget file.
//!
//! Exit status: 0 when everything is within budget, 1 when a rule is broken, 2 on an error
//! (unreadable PTX or budgets, missing tools, a tool failure).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use ptx_audit::{audit, audit_ptx_only, report, Budgets, KernelReport, ToolSearch};

#[derive(Parser)]
#[command(
    name = "ptx-audit",
    about = "Audit the kernels' PTX and SASS: hot-loop sizes, guards, traps, spills, registers",
    after_help = "Tools: ptxas and cuobjdump (or nvdisasm) are taken from INGOT_PTXAS, INGOT_CUOBJDUMP and \
INGOT_NVDISASM (paths to the executables), else from PATH. `cargo xtask tools` installs them under .tools/; \
`cargo xtask audit [ARGS]` runs this tool with those variables set. `report --ptx-only` needs no tools."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the metrics table for every kernel.
    Report {
        #[command(flatten)]
        input: Input,
        /// PTX metrics only: skip ptxas and the SASS (registers, spills, SASS loops unknown).
        #[arg(long)]
        ptx_only: bool,
    },
    /// Check every kernel against the budget file; exit 1 with a table of what regressed.
    Check {
        #[command(flatten)]
        input: Input,
        /// Rewrite the budget file with today's values where they are lower (never raises).
        #[arg(long)]
        ratchet: bool,
        /// With --ratchet: also add kernels that have no budget yet.
        #[arg(long, requires = "ratchet")]
        add_new: bool,
    },
}

#[derive(Args)]
struct Input {
    /// PTX file, plain or .xz [default: <workspace>/kernels/ptx/ingot.ptx.xz]
    #[arg(long)]
    ptx: Option<PathBuf>,
    /// Budget file [default: <workspace>/kernels/audit-budgets.toml]
    #[arg(long)]
    budgets: Option<PathBuf>,
}

impl Input {
    fn ptx(&self) -> PathBuf {
        self.ptx
            .clone()
            .unwrap_or_else(|| workspace_path("kernels/ptx/ingot.ptx.xz"))
    }

    fn budgets(&self) -> PathBuf {
        self.budgets
            .clone()
            .unwrap_or_else(|| workspace_path("kernels/audit-budgets.toml"))
    }
}

/// A path in the workspace this binary was built from.
fn workspace_path(relative: &str) -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(&manifest).join(relative)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("ptx-audit: error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Returns whether every rule passed.
fn run(cli: Cli) -> Result<bool, ptx_audit::AuditError> {
    match cli.command {
        Command::Report { input, ptx_only } => {
            let reports = measure(&input, ptx_only)?;
            print!("{}", report::kernel_table(&reports));
            Ok(true)
        }
        Command::Check {
            input,
            ratchet,
            add_new,
        } => {
            let budgets_path = input.budgets();
            // `--ratchet --add-new` may start a budget file; plain `check` needs one.
            let mut budgets = if budgets_path.exists() {
                Budgets::load(&budgets_path)?
            } else if add_new {
                Budgets::default()
            } else {
                return Err(ptx_audit::AuditError::Budget {
                    path: budgets_path,
                    message: "not found; create it with `ptx-audit check --ratchet --add-new`"
                        .into(),
                });
            };
            let reports = measure(&input, false)?;
            print!("{}", report::kernel_table(&reports));
            if ratchet {
                let changes = budgets.ratchet(&reports, add_new);
                if changes.is_empty() {
                    println!("\nratchet: no budget changed");
                } else {
                    budgets.save(&budgets_path)?;
                    println!(
                        "\nratchet: {} budget(s) tightened or added in {}:\n{}",
                        changes.len(),
                        budgets_path.display(),
                        report::change_table(&changes)
                    );
                }
            }
            let violations = budgets.check(&reports);
            if violations.is_empty() {
                println!(
                    "\nall {} kernels within budget ({})",
                    reports.len(),
                    budgets_path.display()
                );
                Ok(true)
            } else {
                println!(
                    "\nFAILED: {} rule(s) broken ({}):\n{}",
                    violations.len(),
                    budgets_path.display(),
                    report::violation_table(&violations)
                );
                Ok(false)
            }
        }
    }
}

fn measure(input: &Input, ptx_only: bool) -> Result<Vec<KernelReport>, ptx_audit::AuditError> {
    let ptx = input.ptx();
    if ptx_only {
        audit_ptx_only(&ptx)
    } else {
        let tools = ToolSearch::from_env().tools()?;
        audit(&ptx, &tools)
    }
}
