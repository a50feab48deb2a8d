//! [`OutputFile`]: the one way the project writes a file a user named. It checks the path before
//! any work and again when committing, writes into a temporary file beside it, and renames that
//! into place.
//!
//! Invariants:
//! * A path that exists is refused unless the policy says `force`.
//! * A path that is not a regular file (directory, FIFO, device node, socket) is refused even with
//!   `force`: writing would block on a FIFO, hit a device, or fail late on a directory, and the
//!   rename would replace the node itself.
//! * A path that is one of the command's inputs (the same file by device and inode, or by canonical
//!   path) is refused even with `force`: the rename would replace the file being read.
//! * Nothing is written at the path until [`OutputFile::commit`]: the data goes to
//!   `.<name>.tmp.<pid>` in the same directory (same file system, so the rename is atomic), which
//!   is removed when the writer is dropped uncommitted. Without `force` the commit links the file
//!   into place, which fails if anything appeared at the path meanwhile, instead of renaming over
//!   it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Why an output path was refused or could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{} already exists (pass --force to replace it)", path.display())]
    Exists { path: PathBuf },
    #[error(
        "{} is {kind}, not a regular file: refusing to write there, even with --force (name a file)",
        path.display()
    )]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error(
        "{} is the input {} of this command: refusing to overwrite it, even with --force (name another output)",
        path.display(),
        input.display()
    )]
    IsInput { path: PathBuf, input: PathBuf },
    #[error("{}: {op}: {source}", path.display())]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: io::Error,
    },
}

fn io_err(path: &Path, op: &'static str, source: io::Error) -> OutputError {
    OutputError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}

/// What an output may replace.
#[derive(Clone, Copy, Debug)]
pub struct OutputPolicy<'a> {
    /// Replace an existing regular file (never a non-regular one, never an input).
    pub force: bool,
    /// The files the command reads: never written, whatever `force` says.
    pub inputs: &'a [&'a Path],
}

impl OutputPolicy<'static> {
    /// Libraries' default: replace a regular file; still never a directory, FIFO or device.
    pub const REPLACE: OutputPolicy<'static> = OutputPolicy {
        force: true,
        inputs: &[],
    };
    /// Refuse any existing path.
    pub const NEW: OutputPolicy<'static> = OutputPolicy {
        force: false,
        inputs: &[],
    };
}

/// Checks `path` against `policy` without writing anything (see the module's invariants).
pub fn check_output(path: &Path, policy: &OutputPolicy) -> Result<(), OutputError> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(path, "stat", e)),
        Ok(_) => {}
    }
    // What the path names (through a symbolic link): a dangling link has no target to compare.
    let target = match fs::metadata(path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err(path, "stat", e)),
    };
    if let Some(meta) = &target {
        for &input in policy.inputs {
            if is_same_file(meta, path, input) {
                return Err(OutputError::IsInput {
                    path: path.to_path_buf(),
                    input: input.to_path_buf(),
                });
            }
        }
        if let Some(kind) = non_regular_kind(meta) {
            return Err(OutputError::NotRegular {
                path: path.to_path_buf(),
                kind,
            });
        }
    }
    if !policy.force {
        return Err(OutputError::Exists {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// `path` (whose metadata is `meta`) and `input` are one file: same device and inode, or the same
/// canonical path. An input that cannot be inspected is not the output (the command reports the
/// input's own error).
fn is_same_file(meta: &fs::Metadata, path: &Path, input: &Path) -> bool {
    let Ok(in_meta) = fs::metadata(input) else {
        return false;
    };
    if same_inode(meta, &in_meta) {
        return true;
    }
    match (fs::canonicalize(path), fs::canonicalize(input)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
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

/// "a directory", "a FIFO", ... for anything but a regular file.
pub fn non_regular_kind(meta: &fs::Metadata) -> Option<&'static str> {
    let ft = meta.file_type();
    if ft.is_file() {
        return None;
    }
    if ft.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return Some("a FIFO");
        }
        if ft.is_char_device() {
            return Some("a character device");
        }
        if ft.is_block_device() {
            return Some("a block device");
        }
        if ft.is_socket() {
            return Some("a socket");
        }
    }
    Some("a special file")
}

/// A file being written at a checked path; see the module documentation.
pub struct OutputFile {
    /// `None` after commit.
    out: Option<BufWriter<File>>,
    tmp: PathBuf,
    dest: PathBuf,
    force: bool,
    inputs: Vec<PathBuf>,
}

impl OutputFile {
    /// Checks `dest` against `policy`, then creates the temporary file beside it (buffered by 1
    /// MiB).
    pub fn create(dest: &Path, policy: &OutputPolicy) -> Result<Self, OutputError> {
        check_output(dest, policy)?;
        let name = dest.file_name().ok_or_else(|| {
            io_err(
                dest,
                "create",
                io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"),
            )
        })?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".tmp.{}", std::process::id()));
        let tmp = dest.with_file_name(tmp_name);
        // create_new: never follow or truncate something already at the temporary name.
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| io_err(&tmp, "create", e))?;
        Ok(OutputFile {
            out: Some(BufWriter::with_capacity(1 << 20, file)),
            tmp,
            dest: dest.to_path_buf(),
            force: policy.force,
            inputs: policy.inputs.iter().map(|p| p.to_path_buf()).collect(),
        })
    }

    /// The path the file is committed to.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// The temporary file being written (named in write errors).
    pub fn tmp(&self) -> &Path {
        &self.tmp
    }

    /// Flushes and fsyncs the data, checks the destination again, and moves the file into place.
    pub fn commit(mut self) -> Result<(), OutputError> {
        let out = self.out.take().expect("an OutputFile is committed once");
        let file = out
            .into_inner()
            .map_err(|e| io_err(&self.tmp, "write", e.into_error()))?;
        file.sync_all().map_err(|e| io_err(&self.tmp, "fsync", e))?;
        drop(file);
        // The path may have changed while the data was written (a long synth or trace).
        let inputs: Vec<&Path> = self.inputs.iter().map(PathBuf::as_path).collect();
        let policy = OutputPolicy {
            force: self.force,
            inputs: &inputs,
        };
        check_output(&self.dest, &policy)?;
        if self.force {
            fs::rename(&self.tmp, &self.dest).map_err(|e| io_err(&self.dest, "rename", e))?;
        } else {
            // A hard link fails if the name exists by now, where a rename would replace it.
            match fs::hard_link(&self.tmp, &self.dest) {
                Ok(()) => {
                    let _ = fs::remove_file(&self.tmp);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    return Err(OutputError::Exists {
                        path: self.dest.clone(),
                    })
                }
                // File systems without hard links: the check above is the last word.
                Err(_) => {
                    fs::rename(&self.tmp, &self.dest)
                        .map_err(|e| io_err(&self.dest, "rename", e))?;
                }
            }
        }
        self.tmp = PathBuf::new();
        sync_parent(&self.dest);
        Ok(())
    }
}

/// Persists the rename itself. Best effort: not every platform can fsync a directory, and the file
/// is complete either way.
fn sync_parent(dest: &Path) {
    if let Some(dir) = dest.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out
            .as_mut()
            .expect("not written after commit")
            .write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.out
            .as_mut()
            .expect("not written after commit")
            .write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.as_mut().expect("not written after commit").flush()
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        drop(self.out.take());
        if !self.tmp.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}
