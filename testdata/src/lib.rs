//! The committed test fixtures, found from any crate's tests without anything beside the checkout.
//!
//! `golden/` holds small synthetic deepseek2 models with the logits, greedy ids and token ids that
//! llama.cpp computed for them (its `README.md` says how they were made and which bands they
//! justify). Tests take paths from here, never from a folder outside the repository, so a fresh
//! clone passes alone. `INGOT_GOLDEN_DIR` points the tests at another copy (to try new data).
//!
//! Some files are not committed but derived, byte for byte, from a committed one at first use
//! ([`derive`](mod@derive): `tiny-legacy-f32/model.gguf` from `tiny-mla-f32`, the f32 models from
//! their xz-compressed byte planes, the llama.cpp vocabularies from xz): every byte of the tracked
//! tree travels to a lent GPU machine with each call. [`golden`] and [`golden_model`] hand out
//! either kind of file alike.
//!
//! [`python`] is the one way tests reach the pinned Python packages (numpy, gguf, openai). [`Lcg`]
//! is the tests' one deterministic generator of inputs.

pub mod derive;
mod lcg;

pub use lcg::Lcg;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The golden-data folder: `$INGOT_GOLDEN_DIR` if set, else `testdata/golden` in this repository.
pub fn golden_dir() -> PathBuf {
    match std::env::var_os("INGOT_GOLDEN_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden"),
    }
}

/// A file under the golden folder, e.g. `golden("tiny-mla-f32/model.gguf")`; a derived model
/// ([`DERIVED`]) is built on first use and its path returned.
///
/// Panics with the path and the fix when it is missing: a test that cannot find its data fails,
/// it never passes by skipping.
pub fn golden(relative: &str) -> PathBuf {
    if let Some(d) = DERIVED.iter().find(|d| d.relative == relative) {
        return derived(d);
    }
    let path = golden_dir().join(relative);
    assert!(
        path.exists(),
        "golden fixture {} is missing: it is committed under testdata/golden (or set INGOT_GOLDEN_DIR)",
        path.display()
    );
    path
}

/// The `model.gguf` of golden model folder `model`, committed or derived.
pub fn golden_model(model: &str) -> PathBuf {
    golden(&format!("{model}/model.gguf"))
}

/// A golden file built from a committed one by a pinned function.
pub struct Derived {
    /// Its path under the golden folder, as [`golden`] is asked for it.
    pub relative: &'static str,
    /// The committed file it is made from.
    pub source: &'static str,
    pub make: fn(&[u8]) -> Result<Vec<u8>, derive::DeriveError>,
    /// SHA-256 of the result: the file llama.cpp's outputs beside it were computed from.
    pub sha256: &'static str,
}

pub const DERIVED: &[Derived] = &[
    Derived {
        relative: "tiny-legacy-f32/model.gguf",
        source: "tiny-mla-f32/model.gguf",
        make: derive::legacy_from_mla,
        sha256: derive::LEGACY_SHA256,
    },
    // The trained demo model (scripts/train/train.py; docs/perf.md), Q8_0, committed xz-compressed:
    // the tracked tree must stay small enough for a device call (scripts/device-lib.sh,
    // CARRY_MAX_MIB).
    Derived {
        relative: "trained-rust-std/model.gguf",
        source: "trained-rust-std/model.gguf.xz",
        make: derive::unxz,
        sha256: TRAINED_SHA256,
    },
    Derived {
        relative: "tiny-mla-f32/model.gguf",
        source: "tiny-mla-f32/model.gguf.planes.xz",
        make: derive::unxz_planes,
        sha256: "79ee7c53e34cf6e13541943b95b6a5adfc17495f99ee16520c5996202c2bf6af",
    },
    Derived {
        relative: "tiny-v3-f32/model.gguf",
        source: "tiny-v3-f32/model.gguf.planes.xz",
        make: derive::unxz_planes,
        sha256: "7a29ac10266a76aba934506322e243f314b5d440025bd804490c4add5e296199",
    },
    Derived {
        relative: "tiny-glm-f32/model.gguf",
        source: "tiny-glm-f32/model.gguf.planes.xz",
        make: derive::unxz_planes,
        sha256: "3759cdb2a277c2bde493dcdd7b5e267e2e5bf959e7a6277b4c2be34c60b47bb0",
    },
    Derived {
        relative: "vocab/ggml-vocab-deepseek-coder.gguf",
        source: "vocab/ggml-vocab-deepseek-coder.gguf.xz",
        make: derive::unxz,
        sha256: "91cb1379f2e33af1c4866b194622b7a0e12e8f0c9dba7ba2f10d55978730bec1",
    },
    Derived {
        relative: "vocab/ggml-vocab-deepseek-llm.gguf",
        source: "vocab/ggml-vocab-deepseek-llm.gguf.xz",
        make: derive::unxz,
        sha256: "867f77537b54565f0d81d508c04edc41aa1d4ffc1a92745f225b4c1b02755f76",
    },
];

/// SHA-256 of the trained demo model (`golden/trained-rust-std/model.gguf`, unpacked).
pub const TRAINED_SHA256: &str = "e9357365b5c63738db8e451d4a23655110083207dd6edf3f605ab865e52443f4";

/// llama.cpp's tokenizer test cases for vocabulary `name` (`deepseek-coder`, `deepseek-llm`): the
/// vocabulary GGUF, and each text with the ids llama.cpp gave it (see `golden/vocab/README.md`).
pub fn llama_cpp_vocab_tests(name: &str) -> (PathBuf, Vec<(String, Vec<u32>)>) {
    let stem = format!("vocab/ggml-vocab-{name}.gguf");
    let read = |ext: &str| {
        let path = golden(&format!("{stem}.{ext}"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let (inp, out) = (read("inp"), read("out"));
    // As llama.cpp reads it: a separator at the very end opens no further case.
    let sep = "\n__ggml_vocab_test__\n";
    let mut texts: Vec<&str> = inp.split(sep).collect();
    if inp.ends_with(sep) {
        texts.pop();
    }
    let ids: Vec<Vec<u32>> = out
        .lines()
        .map(|l| {
            l.split_whitespace()
                .map(|t| {
                    t.parse()
                        .unwrap_or_else(|e| panic!("{stem}.out: {t:?}: {e}"))
                })
                .collect()
        })
        .collect();
    assert_eq!(
        texts.len(),
        ids.len(),
        "{stem}: .inp and .out hold different numbers of cases"
    );
    let cases = texts.iter().map(|t| t.to_string()).zip(ids).collect();
    (golden(&stem), cases)
}

/// The path of derived file `d`, built when absent or not the pinned bytes.
///
/// Built under the system temp folder in a directory named by the pinned hash (tests of many
/// processes share it), written to a unique temporary name and renamed, so a reader never sees
/// a partial file; its hash is checked on every call.
fn derived(d: &Derived) -> PathBuf {
    derived_in(
        d,
        &std::env::temp_dir().join(format!("ingot-golden-{}", &d.sha256[..16])),
    )
}

/// [`derived`] under `dir`.
fn derived_in(d: &Derived, dir: &Path) -> PathBuf {
    let path = dir.join(d.relative);
    if std::fs::read(&path).is_ok_and(|b| derive::sha256_hex(&b) == d.sha256) {
        return path;
    }
    let source = golden(d.source);
    let bytes =
        std::fs::read(&source).unwrap_or_else(|e| panic!("reading {}: {e}", source.display()));
    let made = (d.make)(&bytes)
        .unwrap_or_else(|e| panic!("deriving {} from {}: {e}", d.relative, source.display()));
    let got = derive::sha256_hex(&made);
    assert_eq!(
        got,
        d.sha256,
        "deriving {} from {} gave other bytes than the file llama.cpp's outputs were computed from",
        d.relative,
        source.display()
    );
    let parent = path.parent().expect("a relative path with a folder");
    std::fs::create_dir_all(parent)
        .unwrap_or_else(|e| panic!("creating {}: {e}", parent.display()));
    let tmp = parent.join(format!(
        ".{}.{}.{:?}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("derived"),
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&tmp, &made).unwrap_or_else(|e| panic!("writing {}: {e}", tmp.display()));
    std::fs::rename(&tmp, &path).unwrap_or_else(|e| panic!("renaming to {}: {e}", path.display()));
    path
}

/// The largest `|a[i] - b[i]|`, NaN-aware: infinite when the lengths differ or any pair's
/// difference is NaN (a NaN on either side, or infinities of one sign on both), so no
/// `< tolerance` check can pass over a NaN. The one comparison every logit test uses
/// (`f32::max` alone drops a NaN and reports the rest).
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return f32::INFINITY;
    }
    worst(a.iter().zip(b).map(|(x, y)| (x - y).abs()))
}

/// The largest of `values` (0 for none), NaN-aware: a NaN makes it infinite.
pub fn worst(values: impl IntoIterator<Item = f32>) -> f32 {
    values.into_iter().fold(
        0.0f32,
        |m, v| if v.is_nan() { f32::INFINITY } else { m.max(v) },
    )
}

/// [`worst`] for f64 errors (kernel tests against f64 references).
pub fn worst_f64(values: impl IntoIterator<Item = f64>) -> f64 {
    values.into_iter().fold(
        0.0f64,
        |m, v| if v.is_nan() { f64::INFINITY } else { m.max(v) },
    )
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
    use super::*;

    #[test]
    fn a_derived_model_is_rebuilt_byte_for_byte_and_a_wrong_derivation_fails() {
        let d = &DERIVED[0];
        // A folder of its own: the shared one may be read by other tests meanwhile.
        let dir = std::env::temp_dir().join(format!("ingot-golden-test-{}", std::process::id()));
        let path = derived_in(d, &dir);
        assert_eq!(derive::sha256_hex(&std::fs::read(&path).unwrap()), d.sha256);
        // A stale or damaged copy is replaced, not used.
        std::fs::write(&path, b"damaged").unwrap();
        let again = derived_in(d, &dir);
        assert_eq!(
            derive::sha256_hex(&std::fs::read(&again).unwrap()),
            d.sha256
        );
        // A derivation that drifts (here: the v rows of one layer left out) is caught by the hash.
        let src = std::fs::read(golden(d.source)).unwrap();
        let mut wrong = (d.make)(&src).unwrap();
        let last = wrong.len() - 64;
        wrong[last] ^= 1;
        assert_ne!(derive::sha256_hex(&wrong), d.sha256);
        // A file that is not the f32 MLA model is refused with a reason, never derived from.
        let q4 = std::fs::read(golden("tiny-mla-q4_k_m/model.gguf")).unwrap();
        assert!(legacy_err(&q4).contains("not f32"), "{}", legacy_err(&q4));
        assert!(legacy_err(&src[..1000]).contains("truncated"));
        assert!(legacy_err(b"GGML....").contains("not a GGUF"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_nan_anywhere_fails_every_tolerance() {
        let a = [1.0f32, -2.0, 3.0];
        assert_eq!(max_abs_diff(&a, &[1.5, -2.0, 3.25]), 0.5);
        for i in 0..3 {
            let mut b = a;
            b[i] = f32::NAN;
            assert_eq!(max_abs_diff(&a, &b), f32::INFINITY, "NaN at {i}");
            assert_eq!(
                max_abs_diff(&b, &a),
                f32::INFINITY,
                "NaN at {i}, other side"
            );
            assert_eq!(
                max_abs_diff(&b, &b),
                f32::INFINITY,
                "NaN on both sides at {i}"
            );
        }
        assert_eq!(max_abs_diff(&a, &a[..2]), f32::INFINITY);
        assert_eq!(worst([0.1, f32::NAN, 0.2]), f32::INFINITY);
        assert_eq!(worst([0.1, 0.3, 0.2]), 0.3);
        assert_eq!(worst(std::iter::empty()), 0.0);
        assert_eq!(worst_f64([0.1, f64::NAN]), f64::INFINITY);
    }

    #[test]
    fn byte_planes_round_trip_at_every_length() {
        for n in [0usize, 1, 3, 4, 5, 31, 32, 33, 1000, 4099] {
            let bytes: Vec<u8> = (0..n).map(|i| (i * 7 + i / 5) as u8).collect();
            let packed = derive::planes_xz(&bytes);
            assert_eq!(derive::unxz_planes(&packed).unwrap(), bytes, "length {n}");
        }
        assert!(derive::unxz_planes(b"not xz").is_err());
    }

    fn legacy_err(bytes: &[u8]) -> String {
        derive::legacy_from_mla(bytes).unwrap_err().to_string()
    }

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
