//! Test helpers: an independent little-endian byte builder (so hand-built files do not depend on
//! the writer under test) and the location of the shared golden models.

#![allow(dead_code)] // each test binary uses a different subset

use std::path::PathBuf;

#[derive(Default)]
pub struct Builder {
    pub buf: Vec<u8>,
}

impl Builder {
    pub fn new() -> Self {
        Builder::default()
    }

    pub fn pos(&self) -> u64 {
        self.buf.len() as u64
    }

    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(bytes);
        self
    }

    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.raw(&[v])
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// A GGUF string: u64 length + bytes.
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64).raw(s.as_bytes())
    }

    /// Magic, version, tensor count, kv count.
    pub fn header(&mut self, version: u32, tensors: u64, kvs: u64) -> &mut Self {
        self.raw(b"GGUF").u32(version).u64(tensors).u64(kvs)
    }

    /// A string-valued key/value pair (type tag 8).
    pub fn kv_str(&mut self, key: &str, value: &str) -> &mut Self {
        self.str(key).u32(8).str(value)
    }

    /// A u32-valued key/value pair (type tag 4).
    pub fn kv_u32(&mut self, key: &str, value: u32) -> &mut Self {
        self.str(key).u32(4).u32(value)
    }

    /// A string-array key/value pair (type 9, element type 8).
    pub fn kv_str_array(&mut self, key: &str, items: &[&str]) -> &mut Self {
        self.str(key).u32(9).u32(8).u64(items.len() as u64);
        for s in items {
            self.str(s);
        }
        self
    }

    /// One tensor info: name, n_dims, ne..., ggml type id, offset.
    pub fn tensor(&mut self, name: &str, ne: &[u64], ty: u32, offset: u64) -> &mut Self {
        self.str(name).u32(ne.len() as u32);
        for &d in ne {
            self.u64(d);
        }
        self.u32(ty).u64(offset)
    }

    /// Zero bytes up to a multiple of `align`.
    pub fn pad(&mut self, align: usize) -> &mut Self {
        while !self.buf.len().is_multiple_of(align) {
            self.buf.push(0);
        }
        self
    }

    /// `n` bytes counting up from `seed`, so misplaced slices are detected.
    pub fn data(&mut self, n: usize, seed: u8) -> &mut Self {
        for i in 0..n {
            self.buf.push(seed.wrapping_add(i as u8));
        }
        self
    }
}

pub const GOLDEN_MODELS: [&str; 3] = ["tiny-mla-f32", "tiny-legacy-f32", "tiny-mla-q4_k_m"];

pub fn golden_model(name: &str) -> PathBuf {
    assert!(
        GOLDEN_MODELS.contains(&name),
        "{name} is not one of {GOLDEN_MODELS:?}"
    );
    ingot_testdata::golden_model(name)
}
