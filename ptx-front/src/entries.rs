//! Where each `.entry` function of a module's text starts and ends, found by scanning the text
//! (comments and braces) without parsing it, so a module can be lowered one kernel at a time
//! (`ptx_sim::Module::parse_lazy`), or one kernel analysed without parsing the others.
//!
//! The scan accepts only the shape compilers emit: module-scope directives first (the header),
//! then `.entry` functions separated by whitespace and `//` comments. Anything else between or
//! after the functions (a `.func`, a variable declared after a kernel, unbalanced braces) makes
//! it give up, and the caller parses the module whole.

use std::ops::Range;

/// A module's text split into its header and its kernels.
pub struct Entries {
    /// Bytes `0..header_end` hold every module-scope directive; the first kernel starts there.
    pub header_end: usize,
    /// Each kernel's name and byte range (its first directive word to its closing brace).
    pub kernels: Vec<(String, Range<usize>)>,
}

/// The entries of `src`, or `None` when the text does not have the shape described above.
pub fn entries(src: &str) -> Option<Entries> {
    let b = src.as_bytes();
    let mut kernels = Vec::new();
    let mut at = 0;
    let mut header_end = None;
    loop {
        let next = next_code(b, at);
        if next == b.len() {
            break;
        }
        let rest = &src[next..];
        let is_entry = [".visible .entry ", ".weak .entry ", ".entry "]
            .iter()
            .any(|p| rest.starts_with(p));
        if !is_entry {
            if header_end.is_some() {
                return None;
            }
            // A header directive: skip its line (comments included), refusing device functions,
            // whose calls would cross kernels.
            let line_end = rest.find('\n').map_or(b.len(), |i| next + i + 1);
            if src[next..line_end].contains(".func") || src[next..line_end].contains(".entry") {
                return None;
            }
            at = line_end;
            continue;
        }
        header_end.get_or_insert(next);
        let name_start = next + rest.find(".entry ")? + ".entry ".len();
        let name: String = src[name_start..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.'))
            .collect();
        if name.is_empty() {
            return None;
        }
        let end = body_end(b, next)?;
        kernels.push((name, next..end));
        at = end;
    }
    Some(Entries {
        header_end: header_end?,
        kernels,
    })
}

/// The first byte at or after `at` that is neither whitespace nor inside a comment.
fn next_code(b: &[u8], mut at: usize) -> usize {
    while at < b.len() {
        match skip_comment(b, at) {
            Some(after) => at = after,
            None if b[at].is_ascii_whitespace() => at += 1,
            None => return at,
        }
    }
    b.len()
}

/// The byte after a comment that starts at `at`, if one does.
fn skip_comment(b: &[u8], at: usize) -> Option<usize> {
    match b.get(at..at + 2)? {
        b"//" => Some(
            b[at..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |i| at + i + 1),
        ),
        b"/*" => Some(
            b[at + 2..]
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(b.len(), |i| at + 2 + i + 2),
        ),
        _ => None,
    }
}

/// The byte after the closing brace of the function whose declaration starts at `start`.
fn body_end(b: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0u32;
    let mut at = start;
    while at < b.len() {
        if let Some(after) = skip_comment(b, at) {
            at = after;
            continue;
        }
        match b[at] {
            b'{' => depth += 1,
            b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(at + 1);
                }
            }
            _ => {}
        }
        at += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "//\n// header\n.version 7.8\n.target sm_86\n.shared .b8 s[4];\n\n\t// .globl\ta\n.visible .entry a(\n\t.param .u64 p\n)\n{\n\t// a } in a comment\n\t{ /* { */ ret; }\n}\n\t// .globl\tb\n.entry b()\n{\n\tret;\n}\n";

    #[test]
    fn splits_header_and_kernels() {
        let e = entries(SRC).expect("the compiler's shape");
        assert_eq!(
            &SRC[..e.header_end],
            "//\n// header\n.version 7.8\n.target sm_86\n.shared .b8 s[4];\n\n\t// .globl\ta\n"
        );
        let names: Vec<&str> = e.kernels.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(SRC[e.kernels[0].1.clone()].starts_with(".visible .entry a("));
        assert!(SRC[e.kernels[0].1.clone()].ends_with("ret; }\n}"));
        assert_eq!(&SRC[e.kernels[1].1.clone()], ".entry b()\n{\n\tret;\n}");
    }

    #[test]
    fn gives_up_on_other_shapes() {
        let after = format!("{SRC}.global .u32 late;\n");
        assert!(entries(&after).is_none(), "a declaration after a kernel");
        let func = SRC.replace(".shared .b8 s[4];", ".func f()\n{\n\tret;\n}");
        assert!(entries(&func).is_none(), "a device function");
        assert!(entries(&SRC[..SRC.len() - 3]).is_none(), "an unclosed body");
        assert!(
            entries(".version 7.8\n.target sm_86\n").is_none(),
            "no kernel"
        );
    }
}
