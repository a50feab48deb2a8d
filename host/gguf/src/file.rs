//! `GgufFile`: a memory-mapped, validated GGUF file with zero-copy tensor views.

use std::fs::File;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use memmap2::Mmap;

use crate::error::GgufError;
use crate::header::{Gguf, TensorInfo};
use crate::output::non_regular_kind;
use crate::parse::parse_header;

pub struct GgufFile {
    path: PathBuf,
    map: Mmap,
    header: Gguf,
    /// One cell per tensor of the table: its data in a consumer's own layout, built at most once
    /// ([`GgufFile::derived_data`]) and kept as long as the mapping.
    derived: Vec<OnceLock<Derived>>,
}

/// A tensor's data rewritten into a named layout, 8-byte aligned.
struct Derived {
    layout: &'static str,
    words: Box<[u64]>,
}

impl GgufFile {
    /// Map `path`, parse its header and validate it (including that all tensor data lies in the
    /// file). Every error names the path. Anything but a regular file (a FIFO would block the open
    /// forever, a directory fails to map with "No such device") is refused by name before it is
    /// opened.
    pub fn open(path: &Path) -> Result<GgufFile, GgufError> {
        let not_regular = |meta: &std::fs::Metadata| {
            non_regular_kind(meta).map(|kind| GgufError::NotRegularFile {
                path: path.to_path_buf(),
                kind,
            })
        };
        let meta = std::fs::metadata(path).map_err(|e| GgufError::io(path, "open", e))?;
        if let Some(e) = not_regular(&meta) {
            return Err(e);
        }
        let file = File::open(path).map_err(|e| GgufError::io(path, "open", e))?;
        // The path may have been replaced between the check and the open.
        let meta = file
            .metadata()
            .map_err(|e| GgufError::io(path, "stat", e))?;
        if let Some(e) = not_regular(&meta) {
            return Err(e);
        }
        // SAFETY: the mapping is read-only and private to this process. Like every mmap-based model
        // loader, it relies on the file not being truncated or rewritten while mapped; writers in
        // this crate never modify a file in place (they write a temporary file and rename it).
        let map = unsafe { Mmap::map(&file) }.map_err(|e| GgufError::io(path, "mmap", e))?;
        let header = parse_header(&map).map_err(|e| e.in_file(path))?;
        Ok(GgufFile {
            path: path.to_path_buf(),
            derived: header.tensors.iter().map(|_| OnceLock::new()).collect(),
            map,
            header,
        })
    }

    /// Maps every page of the file into this process now (reading it from disk if it is not
    /// cached), as llama.cpp does when it loads a model, so that the decoder never takes a
    /// first-touch page fault. A hint: where the kernel cannot, pages still map on first use.
    pub fn populate(&self) {
        #[cfg(target_os = "linux")]
        if self.map.advise(memmap2::Advice::PopulateRead).is_err() {
            let _ = self.map.advise(memmap2::Advice::WillNeed);
        }
        // And one byte of every page read now: on the virtual machines measured (2-core AMD EPYC,
        // Linux 6.18) a process's first pass over mapped pages ran at 5-16 GB/s even after
        // MADV_POPULATE_READ, later passes at 20; this loop (10 ms per 1.5 GB there) makes the
        // first pass as fast as the rest. 4 KiB is the smallest page size of the targets built for.
        let mut seen = 0u8;
        for i in (0..self.map.len()).step_by(4096) {
            // SAFETY: `i` is inside the mapping; a volatile read keeps the loop from being removed.
            seen ^= unsafe { std::ptr::read_volatile(self.map.as_ptr().add(i)) };
        }
        std::hint::black_box(seen);
    }

    pub fn header(&self) -> &Gguf {
        &self.header
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// The data of `t`, without copying. `t` must come from this file's header, whose ranges were
    /// validated at open; a foreign `TensorInfo` that does not fit this file yields an empty slice.
    pub fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        self.header
            .data_range(t)
            .and_then(|r| self.map.get(r))
            .unwrap_or(&[])
    }

    /// `t`'s data rewritten by `build` into the layout called `layout` (a CPU backend's packed
    /// rows): built on the first call for `t`, then the same bytes for as long as the file is open,
    /// like the mapped data (so views of either live equally long). The bytes start 8-byte
    /// aligned. `None` when `t` is not this file's tensor, or when its data was already derived
    /// into another layout (one per tensor); `build`'s error when it fails.
    pub fn derived_data<E>(
        &self,
        t: &TensorInfo,
        layout: &'static str,
        build: impl FnOnce(&[u8]) -> Result<Vec<u64>, E>,
    ) -> Result<Option<&[u8]>, E> {
        let Some(i) = self
            .header
            .tensors
            .iter()
            .position(|x| x.name == t.name && x.offset == t.offset)
        else {
            return Ok(None);
        };
        let cell = &self.derived[i];
        if cell.get().is_none() {
            let words = build(self.tensor_data(t))?.into_boxed_slice();
            // Another thread may have built it meanwhile: either copy is the same bytes.
            let _ = cell.set(Derived { layout, words });
        }
        Ok(cell
            .get()
            .filter(|d| d.layout == layout)
            .map(|d| bytemuck::cast_slice(&d.words)))
    }

    /// The data of the tensor called `name`.
    pub fn tensor_bytes(&self, name: &str) -> Result<&[u8], GgufError> {
        let t = self
            .header
            .tensor(name)
            .ok_or_else(|| GgufError::TensorNotFound {
                name: name.to_owned(),
            })?;
        Ok(self.tensor_data(t))
    }
}

impl Deref for GgufFile {
    type Target = Gguf;

    fn deref(&self) -> &Gguf {
        &self.header
    }
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("len", &self.map.len())
            .field("kv", &self.header.kv.len())
            .field("tensors", &self.header.tensors.len())
            .finish()
    }
}
