//! PTX text from a file, plain or xz-compressed.
//!
//! The project commits its PTX as `kernels/ptx/ingot.ptx.xz`: the text is ~20 MB and compresses
//! about 17x, and every byte of the tracked tree travels to a lent GPU machine with each call.

use std::io::Read;
use std::path::Path;

/// The extension that marks an xz-compressed PTX file.
pub const COMPRESSED_EXTENSION: &str = "xz";

/// The text of the PTX file at `path`, decompressed when its extension is `.xz`.
///
/// Errors name the path; a corrupt or truncated `.xz` file is an `InvalidData` error.
pub fn read_ptx(path: &Path) -> std::io::Result<String> {
    let named =
        |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    if path.extension().is_some_and(|e| e == COMPRESSED_EXTENSION) {
        let file = std::fs::File::open(path).map_err(named)?;
        let mut text = String::new();
        xz2::read::XzDecoder::new(file)
            .read_to_string(&mut text)
            .map_err(named)?;
        Ok(text)
    } else {
        std::fs::read_to_string(path).map_err(named)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_plain_and_compressed_files_alike() {
        let dir = std::env::temp_dir().join(format!("ptx-front-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = ".version 7.8\n.target sm_86\n// ünïcode survives\n";
        let plain = dir.join("m.ptx");
        std::fs::write(&plain, text).unwrap();
        let packed = dir.join("m.ptx.xz");
        let mut enc = xz2::write::XzEncoder::new(std::fs::File::create(&packed).unwrap(), 6);
        enc.write_all(text.as_bytes()).unwrap();
        enc.finish().unwrap();
        assert_eq!(read_ptx(&plain).unwrap(), text);
        assert_eq!(read_ptx(&packed).unwrap(), text);

        // A truncated archive is an error naming the file, never a short text.
        let bytes = std::fs::read(&packed).unwrap();
        let cut = dir.join("cut.ptx.xz");
        std::fs::write(&cut, &bytes[..bytes.len() - 8]).unwrap();
        let e = read_ptx(&cut).unwrap_err();
        assert!(e.to_string().contains("cut.ptx.xz"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
