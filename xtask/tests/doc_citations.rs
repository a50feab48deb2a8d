//! Every document a Rust file cites can be read in the repository. Comments cite the repository's
//! own docs as `docs/FILE.md#heading-anchor` (docs/architecture.md lists them); this test fails
//! when a tracked `.rs` file
//! - names a `docs/...` path that does not exist, or a `#anchor` that no heading of that markdown
//!   file produces (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens);
//! - cites a document outside the repository: the `shared/spec` notes the project started from,
//!   or a numbered section sign, which is how those notes were cited (RFC sections are public and
//!   allowed).
//!
//! The test's own file is not scanned: it spells out the patterns it looks for.

use std::collections::{HashMap, HashSet};
use std::path::Path;
mod support;

/// The section sign, written as an escape so that this file does not contain it.
const SECTION: char = '\u{a7}';

/// This file, relative to the repository root.
const SELF: &str = "xtask/tests/doc_citations.rs";

/// Headings' anchors of each markdown file read so far (`None`: the file does not exist).
#[derive(Default)]
struct Docs {
    anchors: HashMap<String, Option<HashSet<String>>>,
}

impl Docs {
    fn anchors(&mut self, root: &Path, path: &str) -> &Option<HashSet<String>> {
        self.anchors.entry(path.to_string()).or_insert_with(|| {
            std::fs::read_to_string(root.join(path))
                .ok()
                .map(|text| anchors_of(&text))
        })
    }
}

/// The anchors GitHub gives the headings of a markdown text: the heading text in lower case,
/// every character but letters, digits, `-`, `_` and spaces dropped, spaces turned into `-`, and
/// `-1`, `-2`, ... appended to repeats. Lines inside code fences are not headings.
fn anchors_of(text: &str) -> HashSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = HashSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if fenced || !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let slug: String = line[hashes..]
            .trim()
            .to_lowercase()
            .chars()
            .filter(|&c| c.is_alphanumeric() || c == '-' || c == '_' || c == ' ')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let n = seen.entry(slug.clone()).or_insert(0);
        out.insert(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    out
}

/// Every `docs/...` citation in `line`: the path (trailing dots of a sentence dropped) and the
/// anchor after `#`, if any. A `docs/` preceded by a path character belongs to another path
/// (a URL, another repository's folder) and is skipped.
fn citations(line: &str) -> Vec<(String, Option<String>)> {
    let path_char = |c: char| c.is_ascii_alphanumeric() || "_-./".contains(c);
    let anchor_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let mut out = Vec::new();
    for (at, _) in line.match_indices("docs/") {
        if line[..at].chars().next_back().is_some_and(path_char) {
            continue;
        }
        let rest = &line[at..];
        let end = rest.find(|c: char| !path_char(c)).unwrap_or(rest.len());
        let path = rest[..end].trim_end_matches('.').to_string();
        let anchor = rest[end..].strip_prefix('#').map(|a| {
            let n = a.find(|c: char| !anchor_char(c)).unwrap_or(a.len());
            a[..n].to_string()
        });
        out.push((path, anchor.filter(|a| !a.is_empty())));
    }
    out
}

/// The problems of one file's text; `cited` counts the citations of repository docs.
fn problems_in(
    root: &Path,
    docs: &mut Docs,
    file: &str,
    text: &str,
    cited: &mut usize,
) -> Vec<String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let at = format!("{file}:{}", n + 1);
        let outside = line.contains("shared/spec")
            || line.contains("deepseek2-gguf.md")
            || line.contains("rust-gpu.md")
            || (line.contains(SECTION) && !line.contains("RFC "));
        if outside {
            out.push(format!(
                "{at}: cites a document outside the repository; write what the code relies on \
                 into docs/ and cite docs/FILE.md#anchor: {}",
                line.trim()
            ));
        }
        for (path, anchor) in citations(line) {
            *cited += 1;
            if !path.ends_with(".md") {
                if !root.join(&path).exists() {
                    out.push(format!("{at}: {path} does not exist"));
                }
                continue;
            }
            match (docs.anchors(root, &path), anchor) {
                (None, _) => out.push(format!("{at}: {path} does not exist")),
                (Some(anchors), Some(a)) if !anchors.contains(&a) => {
                    let mut known: Vec<_> = anchors.iter().map(String::as_str).collect();
                    known.sort_unstable();
                    out.push(format!(
                        "{at}: {path} has no heading with anchor #{a} (it has: {})",
                        known.join(", ")
                    ));
                }
                _ => {}
            }
        }
    }
    out
}

#[test]
fn rust_files_cite_only_docs_that_exist() {
    let root = support::root();
    let mut docs = Docs::default();
    let (mut seen, mut cited) = (0, 0);
    let mut problems = Vec::new();
    for (path, text) in support::tracked_rust_files() {
        if path == SELF {
            continue;
        }
        let path = path.as_str();
        seen += 1;
        problems.extend(problems_in(root, &mut docs, path, &text, &mut cited));
    }
    assert!(seen > 100, "only {seen} Rust files tracked: wrong folder?");
    assert!(
        cited > 50,
        "only {cited} citations of docs/ found: is the scan broken?"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_checks_reject_broken_citations() {
    let root = support::root();
    let mut docs = Docs::default();
    let mut cited = 0;
    let mut check = |line: &str| problems_in(root, &mut docs, "x.rs", line, &mut cited).len();
    assert_eq!(
        check("// see docs/decode-math.md#mla-attention, step 6."),
        0
    );
    assert_eq!(check("// see docs/decode-math.md."), 0);
    assert_eq!(
        check("// https://example.org/docs/nowhere.md and docs.rs"),
        0
    );
    assert_eq!(check("// docs/decode-math.md#no-such-heading"), 1);
    assert_eq!(check("// docs/no-such-file.md#mla-attention"), 1);
    assert_eq!(check(&format!("// the spec ({SECTION}5.1)")), 1);
    assert_eq!(check("// ../shared/spec/notes.md"), 1);
    assert_eq!(check(&format!("// RFC 7235 {SECTION}2.1")), 0);
    assert_eq!(cited, 4);

    let anchors = anchors_of("# A `b`.c\n## Q4_K\n```\n# not a heading\n```\n## Q4_K\n#nope\n");
    let want = ["a-bc", "q4_k", "q4_k-1"];
    assert_eq!(anchors, want.iter().map(|s| s.to_string()).collect());
}
