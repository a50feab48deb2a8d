//! Bad PTX never panics: every prefix of a real module and byte-level corruptions of it parse to
//! a module or to a typed error.

use std::path::Path;

use ptx_front::PtxModule;

fn fixture_text(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn truncated_ptx_never_panics() {
    let text = fixture_text("bounds_check.ptx");
    let mut errors = 0;
    for end in (0..text.len()).filter(|e| text.is_char_boundary(*e)) {
        if PtxModule::parse(&text[..end]).is_err() {
            errors += 1;
        }
    }
    // Most prefixes cut a function body short, so most must be rejected.
    assert!(
        errors > text.len() / 2,
        "{errors} of {} rejected",
        text.len()
    );
}

#[test]
fn corrupted_ptx_never_panics() {
    let text = fixture_text("local_array.ptx");
    let bytes = text.as_bytes();
    assert!(PtxModule::parse(&text).is_ok());
    let replacements = [b'{', b'}', b';', b'$', b'%', b'@', b' ', b'\n', b'9', b'.'];
    let mut rejected = 0;
    for (i, &replacement) in (0..bytes.len()).step_by(7).zip(replacements.iter().cycle()) {
        let mut corrupted = bytes.to_vec();
        corrupted[i] = replacement;
        if let Ok(s) = std::str::from_utf8(&corrupted) {
            rejected += usize::from(PtxModule::parse(s).is_err());
        }
    }
    assert!(rejected > 0, "no corruption was rejected");
}
