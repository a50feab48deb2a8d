//! Plain-text tables for the CLI.

use crate::audit::{KernelReport, LoopMatch};
use crate::budget::{Change, Violation};

/// Column alignment.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Align {
    Left,
    Right,
}

use Align::{Left, Right};

/// Columns two spaces apart, aligned as `align` says (text left, numbers right).
fn table(header: &[&str], align: &[Align], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<String>| {
        let mut out = String::new();
        for (i, ((cell, w), a)) in cells.iter().zip(&widths).zip(align).enumerate() {
            let sep = if i == 0 { "" } else { "  " };
            match a {
                Left => out.push_str(&format!("{sep}{cell:<w$}")),
                Right => out.push_str(&format!("{sep}{cell:>w$}")),
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        out.push_str(&line(row.clone()));
    }
    out
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// The per-kernel table, then one line per hot loop, then notes.
pub fn kernel_table(reports: &[KernelReport]) -> String {
    let header = [
        "kernel", "ptx", "loops", "hot", "hot_ptx", "sass86", "sass90", "regs86", "regs90",
        "stack", "spill", "guards", "traps", "calls", "local_B", "local_ls", "smem_B",
    ];
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| {
            let m = r.metrics();
            let get = |k: &str| opt(m.get(k).copied());
            let p = &r.ptx;
            let smem = format!(
                "{}{}",
                p.shared_bytes,
                if p.dynamic_shared { "+dyn" } else { "" }
            );
            vec![
                p.name.clone(),
                p.ptx_insts.to_string(),
                p.loops.len().to_string(),
                p.hot_loops().count().to_string(),
                get("hot_loop_ptx_insts"),
                get("hot_loop_sass_insts_sm86"),
                get("hot_loop_sass_insts_sm90"),
                get("registers_sm86"),
                get("registers_sm90"),
                get("stack_frame_bytes"),
                get("spill_bytes"),
                get("hot_loop_guards"),
                get("hot_loop_traps"),
                p.calls.to_string(),
                get("local_bytes"),
                get("local_accesses"),
                smem,
            ]
        })
        .collect();
    let mut align = vec![Right; header.len()];
    align[0] = Left;
    let mut out = table(&header, &align, &rows);

    let mut details = String::new();
    for r in reports {
        let mut innermost_index = 0;
        for lp in &r.ptx.loops {
            let n = innermost_index;
            if lp.innermost {
                innermost_index += 1;
            }
            if !lp.hot {
                continue;
            }
            let why = match (lp.innermost, lp.marked) {
                (true, true) => "innermost, marked",
                (true, false) => "innermost",
                _ => "marked",
            };
            let sass: Vec<String> = r
                .archs
                .iter()
                .map(|a| match (lp.innermost, a.paired(n), a.matching) {
                    (true, Some(s), _) => format!("{} {}", a.arch, s.insts),
                    (_, _, LoopMatch::Unmatched { ptx, sass }) => {
                        format!("{} unmatched ({ptx} PTX vs {sass} SASS loops)", a.arch)
                    }
                    _ => format!("{} -", a.arch),
                })
                .collect();
            let guard_lines: Vec<String> = lp.guards.iter().map(|g| g.line.to_string()).collect();
            details.push_str(&format!(
                "  {} {} (line {}, depth {}, {}): ptx {}, sass [{}], guards {}{}, traps {}, calls {}, local ld/st {}\n",
                r.ptx.name,
                if lp.header.is_empty() { "<entry>" } else { &lp.header },
                lp.line,
                lp.depth,
                why,
                lp.ptx_insts,
                sass.join(", "),
                lp.guards.len(),
                if guard_lines.is_empty() {
                    String::new()
                } else {
                    format!(" (lines {})", guard_lines.join(","))
                },
                lp.traps,
                lp.calls,
                lp.local_accesses,
            ));
        }
        for note in &r.ptx.notes {
            details.push_str(&format!("  {}: note: {}\n", r.ptx.name, note));
        }
    }
    if !details.is_empty() {
        out.push_str("\nhot loops:\n");
        out.push_str(&details);
    }
    out
}

/// The regression table printed by `check`.
pub fn violation_table(violations: &[Violation]) -> String {
    let rows: Vec<Vec<String>> = violations
        .iter()
        .map(|v| {
            vec![
                v.kernel.clone(),
                v.metric.clone(),
                opt(v.budget),
                opt(v.actual),
                v.problem.to_string(),
            ]
        })
        .collect();
    table(
        &["kernel", "metric", "budget", "actual", "problem"],
        &[Left, Left, Right, Right, Left],
        &rows,
    )
}

/// The ratchet's changes.
pub fn change_table(changes: &[Change]) -> String {
    let rows: Vec<Vec<String>> = changes
        .iter()
        .map(|c| {
            vec![
                c.kernel.clone(),
                c.metric.clone(),
                opt(c.old),
                c.new.to_string(),
            ]
        })
        .collect();
    table(
        &["kernel", "metric", "old", "new"],
        &[Left, Left, Right, Right],
        &rows,
    )
}
