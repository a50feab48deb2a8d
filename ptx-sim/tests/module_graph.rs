//! The simulator's modules import each other in one direction only: the `crate::` paths in
//! `src/**/*.rs` form a graph between top-level modules (`lower/*.rs` count as `lower`), and that
//! graph has no cycle. A cycle means two files can only be understood (and changed) together;
//! shared state and helpers go into their own small module that both import instead (`state.rs`,
//! `slots.rs`, `types.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`None` for the crate root, which declares them all).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).expect("file under src");
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    let name = first.trim_end_matches(".rs").to_string();
    (name != "lib").then_some(name)
}

/// Top-level modules named by `crate::` paths in `text` (comments skipped): `crate::a::b`, and each
/// item of a group `crate::{a, b::c}`.
fn crate_refs(text: &str) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |s: &str| -> String {
        s.trim()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut refs = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            refs.extend(group[..end].split(',').map(ident));
        } else {
            refs.insert(ident(rest));
        }
    }
    refs.retain(|r| !r.is_empty() && r != "self");
    refs
}

fn module_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph = Graph::new();
    for file in files {
        let Some(module) = module_of(src, &file) else {
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("source is readable");
        let edges = graph.entry(module.clone()).or_default();
        edges.extend(crate_refs(&text).into_iter().filter(|r| *r != module));
    }
    graph
}

/// One cycle of `graph` as a path `a -> b -> ... -> a`, if there is any.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        state: &mut BTreeMap<String, bool>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(node) {
            Some(true) => return None,
            Some(false) => {
                let start = path.iter().position(|n| n == node).expect("on the path");
                let mut cycle = path[start..].to_vec();
                cycle.push(node.to_string());
                return Some(cycle);
            }
            None => {}
        }
        state.insert(node.to_string(), false);
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, state, path) {
                return Some(cycle);
            }
        }
        path.pop();
        state.insert(node.to_string(), true);
        None
    }
    let mut state = BTreeMap::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut state, &mut Vec::new()))
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let graph = |edges: &[(&str, &str)]| {
        let mut g = Graph::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string());
        }
        g
    };
    assert_eq!(
        find_cycle(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])),
        None
    );
    assert_eq!(
        find_cycle(&graph(&[("a", "b"), ("b", "c"), ("c", "a")])),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    assert_eq!(
        crate_refs("use crate::ir::*;\nuse crate::{cfg, lanes::WARP};\n// crate::not_code\nlet x = crate::types::wide(t);"),
        ["cfg", "ir", "lanes", "types"].map(String::from).into()
    );
}

#[test]
fn simulator_modules_import_in_one_direction() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src);
    assert!(
        graph.len() > 10,
        "read the modules of {}: {graph:?}",
        src.display()
    );
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "modules of ptx-sim import each other in a circle: {}; move what they share into a module both import",
            cycle.join(" -> ")
        );
    }
}
