//! The committed PTX made ready for Hopper's programmatic dependent launch (PDL).
//!
//! The kernels are compiled once, for `sm_86`. On `sm_90` and later a kernel launched with
//! programmatic stream serialization may start while the previous kernel of the stream is still
//! running, so its launch latency and block start-up overlap the previous kernel's last blocks;
//! it must then execute `griddepcontrol.wait` before it touches memory the previous kernels
//! write, and may execute `griddepcontrol.launch_dependents` to let the next kernel start in
//! turn. Neither instruction exists on `sm_86`, so [`for_sm90`] rewrites the text:
//!
//! - `.target sm_86` becomes `.target sm_90` (the PTX ISA is already 7.8, which has them);
//! - a kernel whose body has the markers `// ingot:griddepcontrol.wait` (and
//!   `// ingot:griddepcontrol.launch_dependents`), written by device code that prefetches
//!   before waiting, gets the instructions in their place;
//! - every other kernel gets both instructions as the first statements of its body, so nothing
//!   it does precedes the wait, and its successor may be scheduled as soon as it has started.
//!
//! Invariants (each checked by a test in this file): the result differs from the input only in
//! the target line and the inserted or substituted instruction lines; every `.entry` of the
//! result executes `griddepcontrol.wait` before any other instruction or at a marker; the
//! transform is deterministic. ptx-sim runs the result and faults on any global access before
//! a kernel's wait (`FaultKind::BeforeGridDependencyWait`).
//!
//! This file is std-only: `xtask` includes it by path to build the `sm_90a` cubin from the same
//! text the JIT path loads.

/// The marker device code writes where the wait goes.
pub const WAIT_MARKER: &str = "// ingot:griddepcontrol.wait";
/// The marker device code writes where its dependents may start.
pub const LAUNCH_MARKER: &str = "// ingot:griddepcontrol.launch_dependents";
const WAIT: &str = "griddepcontrol.wait;";
const LAUNCH: &str = "griddepcontrol.launch_dependents;";

/// Why PTX text cannot be made ready for PDL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GridDepError(pub String);

impl std::fmt::Display for GridDepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PTX for programmatic dependent launch: {}", self.0)
    }
}

impl std::error::Error for GridDepError {}

/// `ptx` (targeting `sm_86`) rewritten for `sm_90` with every kernel waiting on its predecessor
/// (see the module docs).
pub fn for_sm90(ptx: &str) -> Result<String, GridDepError> {
    let err = |m: &str| GridDepError(m.to_string());
    if !ptx.lines().any(|l| l.trim() == ".target sm_86") {
        return Err(err(
            "no `.target sm_86` line: not the committed kernels' PTX",
        ));
    }
    let mut out = String::with_capacity(ptx.len() + ptx.len() / 64);
    let mut lines = ptx.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim();
        if t == ".target sm_86" {
            out.push_str(".target sm_90\n");
            continue;
        }
        out.push_str(line);
        out.push('\n');
        if !t.starts_with(".visible .entry ") && !t.starts_with(".entry ") {
            continue;
        }
        // The parameter list, then the body's opening brace.
        let mut body_open = false;
        for l in lines.by_ref() {
            out.push_str(l);
            out.push('\n');
            if l.trim() == "{" {
                body_open = true;
                break;
            }
        }
        if !body_open {
            return Err(err(&format!("`{t}` has no body")));
        }
        // The body up to its closing brace at column 0, held back so its markers decide.
        let mut body = Vec::new();
        for l in lines.by_ref() {
            let end = l == "}";
            body.push(l);
            if end {
                break;
            }
        }
        if body.last() != Some(&"}") {
            return Err(err(&format!("`{t}`'s body does not end")));
        }
        let marked = body.iter().any(|l| l.trim() == WAIT_MARKER);
        let mut inserted = marked;
        for l in body {
            let lt = l.trim();
            if !inserted && !is_declaration(lt) {
                out.push('\t');
                out.push_str(WAIT);
                out.push_str("\n\t");
                out.push_str(LAUNCH);
                out.push('\n');
                inserted = true;
            }
            if lt == WAIT_MARKER {
                out.push('\t');
                out.push_str(WAIT);
            } else if lt == LAUNCH_MARKER {
                out.push('\t');
                out.push_str(LAUNCH);
            } else {
                out.push_str(l);
            }
            out.push('\n');
        }
    }
    Ok(out)
}

/// Lines that may precede a body's first instruction: declarations, comments, blank lines.
fn is_declaration(t: &str) -> bool {
    t.is_empty()
        || t.starts_with("//")
        || t.starts_with(".reg")
        || t.starts_with(".shared")
        || t.starts_with(".local")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = ".version 7.8\n.target sm_86\n.address_size 64\n\n\
        .visible .entry a(\n\t.param .u64 a_param_0\n)\n{\n\t.reg .b32 \t%r<3>;\n\n\
        \tmov.u32 \t%r1, %tid.x;\n$L__BB0_1:\n\tret;\n\n}\n\
        .visible .entry b(\n\t.param .u64 b_param_0\n)\n{\n\t.reg .b64 \t%rd<3>;\n\
        \tprefetch.global.L2 [%rd1];\n\t// begin inline asm\n\t// ingot:griddepcontrol.wait\n\
        \t// end inline asm\n\tld.global.u32 \t%r1, [%rd1];\n\t// ingot:griddepcontrol.launch_dependents\n\
        \tret;\n\n}\n";

    #[test]
    fn every_kernel_waits_first_or_at_its_marker() {
        let out = for_sm90(SRC).unwrap();
        let want = SRC
            .replace(".target sm_86", ".target sm_90")
            .replace(
                "\tmov.u32 \t%r1, %tid.x;",
                "\tgriddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;\n\tmov.u32 \t%r1, %tid.x;",
            )
            .replace("\t// ingot:griddepcontrol.wait", "\tgriddepcontrol.wait;")
            .replace(
                "\t// ingot:griddepcontrol.launch_dependents",
                "\tgriddepcontrol.launch_dependents;",
            );
        assert_eq!(out, want);
        // Deterministic, and nothing else changed: removing what it added gives the input back.
        assert_eq!(for_sm90(SRC).unwrap(), out);
        let back = out
            .replace(".target sm_90", ".target sm_86")
            .replace(
                "\tgriddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;\n",
                "",
            )
            .replace("\tgriddepcontrol.wait;", "\t// ingot:griddepcontrol.wait")
            .replace(
                "\tgriddepcontrol.launch_dependents;",
                "\t// ingot:griddepcontrol.launch_dependents",
            );
        assert_eq!(back, SRC);
    }

    #[test]
    fn refuses_text_that_is_not_the_kernels() {
        assert!(for_sm90(&SRC.replace("sm_86", "sm_90")).is_err());
        let open = SRC.trim_end().trim_end_matches('}');
        assert!(for_sm90(open).is_err(), "an unterminated body");
    }
}
