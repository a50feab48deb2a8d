//! `rewrite`: read a GGUF file and write it back through [`GgufWriter`] (a canonicalizing copy).

use std::path::Path;

use crate::error::GgufError;
use crate::file::GgufFile;
use crate::output::{OutputFile, OutputPolicy};
use crate::writer::GgufWriter;

/// Copy `input` to `output` through the reader and the writer. For a canonical file (one this
/// writer produced, or gguf-py / `gguf.cpp` output with zero padding) the bytes are identical.
/// `output` may replace a regular file but never `input` itself (same canonical path, or same
/// device and inode through a hard link): the atomic rename would replace the file being read.
pub fn rewrite(input: &Path, output: &Path) -> Result<(), GgufError> {
    let out = OutputFile::create(
        output,
        &OutputPolicy {
            force: true,
            inputs: &[input],
        },
    )?;
    let src = GgufFile::open(input)?;
    let mut data = GgufWriter::from_header(src.header())?.begin_output(out)?;
    for t in &src.tensors {
        data.write_tensor(src.tensor_data(t))?;
    }
    data.finish()
}
