//! The committed test fixtures, found from any crate's tests without anything beside the checkout.
//!
//! `golden/` holds small synthetic deepseek2 models with the logits, greedy ids and token ids that
//! llama.cpp computed for them (its `README.md` says how they were made and which bands they
//! justify). Tests take paths from here, never from a folder outside the repository, so a fresh
//! clone passes alone. `INGOT_GOLDEN_DIR` points the tests at another copy (to try new data).

use std::path::PathBuf;

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
