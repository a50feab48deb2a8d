//! `OutputFile`, the one writer of every path a user names: an existing file only with `force`,
//! never an input, never anything but a regular file, nothing at the path before the commit, no
//! temporary left.

use std::io::Write;
use std::path::Path;

use ingot_gguf::{OutputError, OutputFile, OutputPolicy};

fn write(path: &Path, policy: &OutputPolicy, bytes: &[u8]) -> Result<(), OutputError> {
    let mut out = OutputFile::create(path, policy)?;
    out.write_all(bytes).unwrap();
    out.commit()
}

fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp."))
        .collect()
}

#[test]
fn an_existing_file_is_replaced_only_with_force() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.bin");
    write(&path, &OutputPolicy::NEW, b"first").unwrap();
    let err = write(&path, &OutputPolicy::NEW, b"second").unwrap_err();
    assert!(matches!(err, OutputError::Exists { .. }), "{err}");
    assert!(err.to_string().contains("--force"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"first");
    write(&path, &OutputPolicy::REPLACE, b"third").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"third");
    assert!(temporaries(dir.path()).is_empty());
}

#[test]
fn nothing_is_at_the_path_before_commit_and_a_dropped_file_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.bin");
    let mut out = OutputFile::create(&path, &OutputPolicy::NEW).unwrap();
    out.write_all(b"partial").unwrap();
    assert!(!path.exists());
    drop(out);
    assert!(!path.exists());
    assert!(temporaries(dir.path()).is_empty());
}

#[test]
fn a_path_created_while_writing_is_not_replaced_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.bin");
    let mut out = OutputFile::create(&path, &OutputPolicy::NEW).unwrap();
    out.write_all(b"mine").unwrap();
    std::fs::write(&path, b"someone else's").unwrap();
    let err = out.commit().unwrap_err();
    assert!(matches!(err, OutputError::Exists { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"someone else's");
    assert!(temporaries(dir.path()).is_empty());
}

#[test]
fn an_input_is_refused_by_path_by_alias_and_by_hard_link_even_with_force() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.gguf");
    std::fs::write(&input, b"model").unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let link = dir.path().join("hard.gguf");
    std::fs::hard_link(&input, &link).unwrap();
    let policy = OutputPolicy {
        force: true,
        inputs: &[&input],
    };
    for same in [input.clone(), sub.join("../in.gguf"), link] {
        let err = write(&same, &policy, b"x").unwrap_err();
        assert!(
            matches!(err, OutputError::IsInput { .. }),
            "{same:?}: {err}"
        );
    }
    assert_eq!(std::fs::read(&input).unwrap(), b"model");
}

#[test]
fn a_directory_or_device_is_refused_even_with_force() {
    let dir = tempfile::tempdir().unwrap();
    for (path, kind) in [
        (dir.path().to_path_buf(), "a directory"),
        ("/dev/null".into(), "a character device"),
    ] {
        let err = OutputFile::create(&path, &OutputPolicy::REPLACE)
            .err()
            .unwrap_or_else(|| panic!("{path:?} accepted"));
        match &err {
            OutputError::NotRegular { kind: k, .. } => assert_eq!(*k, kind),
            other => panic!("{path:?}: {other}"),
        }
    }
    assert!(temporaries(dir.path()).is_empty());
}
