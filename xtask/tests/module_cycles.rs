//! No circle between the files of a crate: if `a.rs` names something of `b.rs`, nothing `b.rs`
//! names leads back to `a.rs`. A reader can then learn a crate bottom up, and a file can be moved
//! or split without dragging the others along.
//!
//! What counts as "names": every `crate::...` and `super::...` path in a file's code (comments
//! and the `#[cfg(test)]` part at its end left out), `use` groups expanded, resolved to the file
//! of the longest module prefix that is one. Not edges: a parent's `mod` declarations and the
//! plain paths by which it reaches into its own children (a module owning its children is not a
//! circle), and paths that resolve only to the crate root (its re-exports are not its code).

use std::collections::{BTreeMap, BTreeSet};

mod support;

/// The crate roots among `files`: the folder holding `src/`, `""` for the workspace root.
/// A `main.rs` beside a `lib.rs` is a binary over the library and is not scanned.
fn crate_dirs(files: &[(String, String)]) -> Vec<String> {
    let mut dirs: Vec<String> = files
        .iter()
        .filter_map(|(p, _)| {
            p.strip_suffix("src/lib.rs")
                .or_else(|| p.strip_suffix("src/main.rs"))
        })
        .filter(|d| d.is_empty() || d.ends_with('/'))
        .map(str::to_string)
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// `(crate folder, module path)` of a source file, `None` outside every crate's `src/` (tests,
/// benches, examples, build scripts).
fn module_of(dirs: &[String], path: &str) -> Option<(String, Vec<String>)> {
    let dir = dirs
        .iter()
        .filter(|d| path.starts_with(&format!("{d}src/")))
        .max_by_key(|d| d.len())?;
    let rel = path[dir.len() + 4..].strip_suffix(".rs")?;
    let mut segs: Vec<String> = rel.split('/').map(str::to_string).collect();
    if matches!(
        segs.last().map(String::as_str),
        Some("lib" | "main" | "mod")
    ) {
        segs.pop();
    }
    Some((dir.clone(), segs))
}

/// The code of a file: `//` comments blanked, everything from the first `#[cfg(test)]` dropped.
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Expands a path starting at `s` (just after `crate::` or `super::`) into its full paths,
/// following `use` groups: `a::{b, c::{d, e}}` gives `a::b`, `a::c::d`, `a::c::e`.
fn expand(s: &str) -> Vec<Vec<String>> {
    let (paths, _) = expand_at(s.as_bytes(), 0);
    paths
}

/// The first index from `i` that is not whitespace.
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && (b[i] as char).is_whitespace() {
        i += 1;
    }
    i
}

fn expand_at(b: &[u8], mut i: usize) -> (Vec<Vec<String>>, usize) {
    let mut segs: Vec<String> = Vec::new();
    loop {
        i = skip_ws(b, i);
        if i < b.len() && b[i] == b'{' {
            let mut out = Vec::new();
            i += 1;
            loop {
                let (inner, next) = expand_at(b, i);
                out.extend(inner.into_iter().map(|t| {
                    let mut p = segs.clone();
                    p.extend(t);
                    p
                }));
                i = next;
                i = skip_ws(b, i);
                match b.get(i) {
                    Some(b',') => i += 1,
                    Some(b'}') => return (out, i + 1),
                    _ => return (out, i),
                }
                i = skip_ws(b, i);
                if b.get(i) == Some(&b'}') {
                    return (out, i + 1);
                }
            }
        }
        let start = i;
        while i < b.len() && is_ident(b[i] as char) {
            i += 1;
        }
        if i == start {
            return (vec![segs], i);
        }
        segs.push(String::from_utf8_lossy(&b[start..i]).into_owned());
        if b[i..].starts_with(b"::") {
            i += 2;
        } else {
            return (vec![segs], i);
        }
    }
}

/// Per scanned file, the other files of its crate it names.
fn module_edges(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let dirs = crate_dirs(files);
    let paths: BTreeSet<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    let mut modules: BTreeMap<(String, Vec<String>), String> = BTreeMap::new();
    let mut scanned = Vec::new();
    for (path, text) in files {
        let beside_lib = path.ends_with("src/main.rs")
            && paths.contains(path.replace("src/main.rs", "src/lib.rs").as_str());
        if beside_lib {
            continue;
        }
        if let Some(m) = module_of(&dirs, path) {
            modules.insert(m.clone(), path.clone());
            scanned.push((path.clone(), m, text));
        }
    }
    let resolve = |dir: &str, full: &[String]| {
        (1..=full.len())
            .rev()
            .find_map(|n| modules.get(&(dir.to_string(), full[..n].to_vec())))
            .cloned()
    };
    let mut edges = BTreeMap::new();
    for (path, (dir, module), text) in scanned {
        let code = code_of(text);
        let mut out = BTreeSet::new();
        for kw in ["crate::", "super::"] {
            let mut from = 0;
            while let Some(at) = code[from..].find(kw) {
                let at = from + at;
                from = at + kw.len();
                // Inside an identifier (`my_crate::`), or a later segment of a path already
                // read (`super::super::`).
                let before = &code[..at];
                if before.chars().next_back().is_some_and(is_ident) || before.ends_with("::") {
                    continue;
                }
                let mut base: Vec<String> = if kw == "crate::" {
                    Vec::new()
                } else {
                    module[..module.len().saturating_sub(1)].to_vec()
                };
                let mut rest = &code[from..];
                while let Some(r) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = r;
                }
                for tail in expand(rest) {
                    let mut full = base.clone();
                    full.extend(tail);
                    if let Some(target) = resolve(&dir, &full) {
                        if target != path {
                            out.insert(target);
                        }
                    }
                }
            }
        }
        edges.insert(path, out);
    }
    edges
}

/// The circles of `edges`: its strongly connected components of more than one file (Tarjan).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_circle_between_the_files_of_a_crate() {
    let files = support::tracked_rust_files();
    let edges = module_edges(&files);
    assert!(
        edges.len() > 100,
        "only {} source files scanned",
        edges.len()
    );
    let named: usize = edges.values().map(BTreeSet::len).sum();
    assert!(named > 300, "only {named} references between files found");
    let found = circles(&edges);
    let report: Vec<String> = found
        .iter()
        .map(|c| {
            let mut lines = vec![format!("a circle of {} files:", c.len())];
            for f in c {
                let to: Vec<&str> = edges[f]
                    .iter()
                    .filter(|t| c.contains(t))
                    .map(String::as_str)
                    .collect();
                lines.push(format!("  {f} names {}", to.join(", ")));
            }
            lines.join("\n")
        })
        .collect();
    assert!(report.is_empty(), "{}", report.join("\n"));
}

/// The scan finds what it claims and passes what it must not flag.
#[test]
fn the_scan_sees_circles_and_only_circles() {
    let file = |p: &str, t: &str| (p.to_string(), t.to_string());
    let crate_files = |extra: Vec<(String, String)>| {
        let mut v = vec![
            file("k/src/lib.rs", "mod a;\nmod b;\nmod c;\npub use a::A;\n"),
            file("k/src/c/mod.rs", "mod d;\nuse d::D;\n"),
            file("k/src/c/d.rs", "use super::C;\npub struct D;\n"),
        ];
        v.extend(extra);
        v
    };
    // a -> b through a use group, b -> a through an inline path: a circle.
    let looped = crate_files(vec![
        file("k/src/a.rs", "use crate::{b::{B, Bb}, c};\n"),
        file("k/src/b.rs", "fn f() { crate::a::g(); }\n"),
    ]);
    let edges = module_edges(&looped);
    assert!(edges["k/src/a.rs"].contains("k/src/b.rs"));
    assert!(edges["k/src/a.rs"].contains("k/src/c/mod.rs"));
    assert_eq!(
        circles(&edges),
        vec![vec!["k/src/a.rs".to_string(), "k/src/b.rs".to_string()]]
    );
    // The same without the way back, a comment naming it, and a test module naming it: none.
    let clean = crate_files(vec![
        file("k/src/a.rs", "use crate::{b::{B, Bb}, c};\n"),
        file(
            "k/src/b.rs",
            "// crate::a::g\nfn f() {}\n#[cfg(test)]\nmod t { use crate::a::g; }\n",
        ),
    ]);
    assert!(circles(&module_edges(&clean)).is_empty());
    // A child naming its parent through `super`, the parent owning it: no circle.
    assert_eq!(
        module_edges(&clean)["k/src/c/d.rs"],
        BTreeSet::from(["k/src/c/mod.rs".to_string()])
    );
    // `super::super` climbs two levels; an identifier ending in `crate` is no path.
    let deep = crate_files(vec![
        file("k/src/a.rs", "fn f() { my_crate::b::x(); }\n"),
        file("k/src/b.rs", ""),
        file("k/src/c/e.rs", "use super::super::a::f;\n"),
    ]);
    let edges = module_edges(&deep);
    assert!(edges["k/src/a.rs"].is_empty());
    assert_eq!(
        edges["k/src/c/e.rs"],
        BTreeSet::from(["k/src/a.rs".to_string()])
    );
}
