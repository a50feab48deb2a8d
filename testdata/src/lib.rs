//! The committed test fixtures, found from any crate's tests without anything beside the checkout.
//!
//! `golden/` holds small synthetic deepseek2 models with the logits, greedy ids and token ids that
//! llama.cpp computed for them (its `README.md` says how they were made and which bands they
//! justify). Tests take paths from here, never from a folder outside the repository, so a fresh
//! clone passes alone. `INGOT_GOLDEN_DIR` points the tests at another copy (to try new data).
//!
//! [`python`] is the one way tests reach the pinned Python packages (numpy, gguf, openai).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The golden-data folder: `$INGOT_GOLDEN_DIR` if set, else `testdata/golden` in this repository.
pub fn golden_dir() -> PathBuf {
    match std::env::var_os("INGOT_GOLDEN_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden"),
    }
}

/// A file under the golden folder, e.g. `golden("tiny-mla-f32/model.gguf")`.
///
/// Panics with the path and the fix when it is missing: a test that cannot find its data fails,
/// it never passes by skipping.
pub fn golden(relative: &str) -> PathBuf {
    let path = golden_dir().join(relative);
    assert!(
        path.exists(),
        "golden fixture {} is missing: it is committed under testdata/golden (or set INGOT_GOLDEN_DIR)",
        path.display()
    );
    path
}

/// `python3` (or `INGOT_PYTHON`) with `PYTHONPATH` at the repository's `.tools/python`, where
/// `cargo xtask tools` installs the pinned packages, after checking that it can import `module`.
/// When it cannot, the test fails, unless `INGOT_SKIP_PYTHON_TESTS` is set (not empty or `0`):
/// then this says on stdout that it skipped and returns `None`.
pub fn python(module: &str) -> Option<Command> {
    let python = std::env::var("INGOT_PYTHON").unwrap_or_else(|_| "python3".into());
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tools/python");
    let probe = Command::new(&python)
        .args(["-c", &format!("import {module}")])
        .env("PYTHONPATH", &path)
        .output();
    let missing = match &probe {
        Err(e) => Some(format!("cannot run `{python}`: {e}")),
        Ok(o) if !o.status.success() => Some(format!(
            "`{python}` cannot import {module} with PYTHONPATH={} (run `cargo xtask tools`): {}",
            path.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(_) => None,
    };
    if let Some(why) = missing {
        if std::env::var("INGOT_SKIP_PYTHON_TESTS").is_ok_and(|v| !v.is_empty() && v != "0") {
            println!("SKIPPED a Python test (INGOT_SKIP_PYTHON_TESTS is set): {why}");
            return None;
        }
        panic!("{why}; set INGOT_SKIP_PYTHON_TESTS=1 to skip this test");
    }
    let mut cmd = Command::new(python);
    cmd.env("PYTHONPATH", path);
    Some(cmd)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_model_folder_has_its_files() {
        for model in [
            "tiny-mla-f32",
            "tiny-legacy-f32",
            "tiny-mla-q4_k_m",
            "tiny-v3-f32",
            "tiny-v3-q4_k_m",
            "tiny-glm-f32",
        ] {
            for file in [
                "model.gguf",
                "prefill16.npy",
                "stepwise16.npy",
                "greedy32.npy",
                "greedy32.ids.txt",
            ] {
                super::golden(&format!("{model}/{file}"));
            }
        }
        super::golden("tokenize.tsv");
    }
}
