//! `rewrite`: read a GGUF file and write it back through [`GgufWriter`] (a canonicalizing copy).

use std::fs;
use std::io;
use std::path::Path;

use crate::error::GgufError;
use crate::file::GgufFile;
use crate::writer::GgufWriter;

/// Copy `input` to `output` through the reader and the writer. For a canonical file (one this
/// writer produced, or gguf-py / `gguf.cpp` output with zero padding) the bytes are identical.
/// Refuses when `output` is the same file as `input` (same canonical path, or same device and
/// inode through a hard link), since the atomic rename would replace the file being read.
pub fn rewrite(input: &Path, output: &Path) -> Result<(), GgufError> {
    refuse_same_file(input, output)?;
    let src = GgufFile::open(input)?;
    let mut data = GgufWriter::from_header(src.header())?.begin(output)?;
    for t in &src.tensors {
        data.write_tensor(src.tensor_data(t))?;
    }
    data.finish()
}

/// [`GgufError::SameFile`] when writing `output` would replace `input` (same canonical path, or the same
/// device and inode through a hard link): every tool that reads one GGUF file and writes another checks
/// this first, since the atomic rename would replace the file being read.
pub fn refuse_same_file(input: &Path, output: &Path) -> Result<(), GgufError> {
    if is_same_file(input, output)? {
        return Err(GgufError::SameFile {
            input: input.to_path_buf(),
            output: output.to_path_buf(),
        });
    }
    Ok(())
}

fn is_same_file(input: &Path, output: &Path) -> Result<bool, GgufError> {
    let in_meta = fs::metadata(input).map_err(|e| GgufError::io(input, "stat", e))?;
    let out_meta = match fs::metadata(output) {
        Ok(m) => m,
        // An output that does not exist yet cannot be the input.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(GgufError::io(output, "stat", e)),
    };
    if same_inode(&in_meta, &out_meta) {
        return Ok(true);
    }
    let canon_in = fs::canonicalize(input).map_err(|e| GgufError::io(input, "canonicalize", e))?;
    let canon_out =
        fs::canonicalize(output).map_err(|e| GgufError::io(output, "canonicalize", e))?;
    Ok(canon_in == canon_out)
}

#[cfg(unix)]
fn same_inode(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// Without inode numbers, only the canonical-path comparison applies.
#[cfg(not(unix))]
fn same_inode(_: &fs::Metadata, _: &fs::Metadata) -> bool {
    false
}
