//! The workspace's layering, enforced: a crate depends only on crates of a lower layer.
//!
//! `cargo metadata` (offline: it reads the manifests and the lock file) gives every workspace
//! crate's dependencies; [`LAYERS`] says where each crate sits. docs/architecture.md mirrors this
//! table. Rules:
//! - a normal or build dependency points to a strictly lower layer;
//! - a dev dependency (tests, benches) points to a layer no higher than the crate's own;
//! - the PTX tools (`Family::Tool`) depend on no ingot crate, and no ingot library below the
//!   kernels depends on them;
//! - `ingot-testdata` is only ever a dev dependency;
//! - every workspace crate is in the table (a new crate must be placed before it can land);
//! - `host/` holds exactly the ingot libraries of layers 1 to 3, the host side below the GPU
//!   code; `abi` (layer 0) and everything from the kernels up sit at the top level.

use std::collections::HashMap;
use std::process::Command;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Family {
    Ingot,
    Tool,
    TestData,
}

/// (crate, layer, family), bottom to top.
const LAYERS: &[(&str, u32, Family)] = &[
    ("ingot-abi", 0, Family::Ingot),
    ("ingot-testdata", 0, Family::TestData),
    ("ingot-gguf", 1, Family::Ingot),
    ("ingot-cuda", 1, Family::Ingot),
    ("ingot-quant", 2, Family::Ingot),
    ("ingot-tokenizer", 2, Family::Ingot),
    ("ingot-model", 3, Family::Ingot),
    ("ingot-synth", 3, Family::Ingot),
    ("ptx-front", 1, Family::Tool),
    ("ptx-sim", 2, Family::Tool),
    ("ptx-audit", 3, Family::Tool),
    ("ingot-kernels", 4, Family::Ingot),
    ("ingot-graph", 5, Family::Ingot),
    ("ingot-engine", 6, Family::Ingot),
    ("ingot-gates", 7, Family::Ingot),
    ("ingot-bench", 7, Family::Ingot),
    ("ingot-serve", 7, Family::Ingot),
    ("ingot", 8, Family::Ingot),
    ("xtask", 9, Family::Ingot),
];

/// The lowest ingot layer allowed to use the PTX tools (the kernels run their PTX in ptx-sim).
const FIRST_TOOL_USER: u32 = 4;

struct Edge {
    from: String,
    to: String,
    kind: String,
}

/// `cargo metadata` of the workspace (offline, no dependencies' packages).
fn metadata() -> serde_json::Value {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("metadata is JSON")
}

fn workspace_edges() -> (Vec<String>, Vec<Edge>) {
    let meta = metadata();
    let packages = meta["packages"].as_array().expect("packages");
    let names: Vec<String> = packages
        .iter()
        .map(|p| p["name"].as_str().expect("name").to_string())
        .collect();
    let mut edges = Vec::new();
    for p in packages {
        for d in p["dependencies"].as_array().expect("dependencies") {
            let to = d["name"].as_str().expect("dep name").to_string();
            if names.contains(&to) {
                edges.push(Edge {
                    from: p["name"].as_str().unwrap().to_string(),
                    to,
                    kind: d["kind"].as_str().unwrap_or("normal").to_string(),
                });
            }
        }
    }
    (names, edges)
}

fn violation(layer: &HashMap<&str, (u32, Family)>, e: &Edge) -> Option<String> {
    let (lf, ff) = layer[e.from.as_str()];
    let (lt, ft) = layer[e.to.as_str()];
    let what = format!("{} -> {} ({} dependency)", e.from, e.to, e.kind);
    if ft == Family::TestData && e.kind != "dev" {
        return Some(format!("{what}: test fixtures are a dev dependency only"));
    }
    if ff == Family::Tool && ft == Family::Ingot {
        return Some(format!("{what}: the PTX tools know nothing of ingot"));
    }
    if ff == Family::Ingot && ft == Family::Tool && lf < FIRST_TOOL_USER && e.kind != "dev" {
        return Some(format!(
            "{what}: only the kernels and above use the PTX tools"
        ));
    }
    let ok = match e.kind.as_str() {
        "dev" => lt <= lf,
        _ => lt < lf,
    };
    (!ok).then(|| format!("{what}: layer {lf} must not depend on layer {lt}"))
}

#[test]
fn crates_depend_only_on_lower_layers() {
    let layer: HashMap<&str, (u32, Family)> = LAYERS.iter().map(|&(n, l, f)| (n, (l, f))).collect();
    let (names, edges) = workspace_edges();
    let unplaced: Vec<&String> = names
        .iter()
        .filter(|n| !layer.contains_key(n.as_str()))
        .collect();
    assert!(
        unplaced.is_empty(),
        "workspace crates missing from the layer table in xtask/tests/layering.rs: {unplaced:?}"
    );
    assert!(
        edges.len() > 20,
        "too few edges read from cargo metadata: {}",
        edges.len()
    );
    let bad: Vec<String> = edges.iter().filter_map(|e| violation(&layer, e)).collect();
    assert!(
        bad.is_empty(),
        "layering violations:\n  {}",
        bad.join("\n  ")
    );
}

/// Whether a crate at `layer` of `family` belongs under `host/`.
fn belongs_in_host(layer: u32, family: Family) -> bool {
    family == Family::Ingot && (1..=3).contains(&layer)
}

#[test]
fn host_folder_holds_the_layers_below_the_kernels() {
    let layer: HashMap<&str, (u32, Family)> = LAYERS.iter().map(|&(n, l, f)| (n, (l, f))).collect();
    let meta = metadata();
    let root = meta["workspace_root"].as_str().expect("workspace_root");
    let host = std::path::Path::new(root).join("host");
    let mut bad = Vec::new();
    for p in meta["packages"].as_array().expect("packages") {
        let name = p["name"].as_str().expect("name");
        let manifest = std::path::Path::new(p["manifest_path"].as_str().expect("manifest_path"));
        let Some(&(l, f)) = layer.get(name) else {
            continue;
        };
        let in_host = manifest.starts_with(&host);
        if in_host != belongs_in_host(l, f) {
            bad.push(format!(
                "{name} (layer {l}) is {} host/: host/ holds the ingot libraries of layers 1-3",
                if in_host { "in" } else { "outside" }
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_host_rule_places_only_layers_1_to_3() {
    assert!(belongs_in_host(2, Family::Ingot));
    assert!(
        !belongs_in_host(7, Family::Ingot),
        "the server is above the engine"
    );
    assert!(!belongs_in_host(2, Family::Tool));
    assert!(!belongs_in_host(0, Family::Ingot));
}

#[test]
fn the_rules_reject_upward_edges() {
    let layer: HashMap<&str, (u32, Family)> = LAYERS.iter().map(|&(n, l, f)| (n, (l, f))).collect();
    let edge = |from: &str, to: &str, kind: &str| Edge {
        from: from.into(),
        to: to.into(),
        kind: kind.into(),
    };
    assert!(violation(&layer, &edge("ingot-quant", "ingot-kernels", "normal")).is_some());
    assert!(violation(&layer, &edge("ingot-model", "ingot-synth", "normal")).is_some());
    assert!(violation(&layer, &edge("ingot-model", "ingot-synth", "dev")).is_none());
    assert!(violation(&layer, &edge("ingot-model", "ingot-graph", "dev")).is_some());
    assert!(violation(&layer, &edge("ptx-sim", "ingot-abi", "normal")).is_some());
    assert!(violation(&layer, &edge("ingot-gguf", "ptx-sim", "normal")).is_some());
    assert!(violation(&layer, &edge("ingot-gguf", "ingot-testdata", "normal")).is_some());
    assert!(violation(&layer, &edge("ingot-gguf", "ingot-testdata", "dev")).is_none());
    assert!(violation(&layer, &edge("ingot-graph", "ingot-kernels", "normal")).is_none());
}
