//! What the tree-walking tests share: the repository's root and its tracked Rust files.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root (xtask's parent).
pub fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// Every tracked `.rs` file, as a path relative to the root and its text. Tracked files only: a
/// build's output or a scratch file is not the project's source.
pub fn tracked_rust_files() -> Vec<(String, String)> {
    let out = Command::new("git")
        .args(["ls-files", "-z", "--", "*.rs"])
        .current_dir(root())
        .output()
        .expect("git ls-files (the test reads the tracked files)");
    assert!(out.status.success(), "git ls-files failed");
    String::from_utf8(out.stdout)
        .expect("UTF-8 paths")
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(|path| {
            let full: PathBuf = root().join(path);
            let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{path}: {e}"));
            (path.to_string(), text)
        })
        .collect()
}
