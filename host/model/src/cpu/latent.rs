//! The CPU backend's latent cache: per layer, one row `[c (kv_lora) | k_pe (d_rope)]` per cached
//! position, stored in the bytes of its [`CacheType`].
//!
//! * [`CacheType::F16`] is full precision: f32 rows (4 bytes a value).
//! * [`CacheType::Q8_0`] stores ggml's q8_0 blocks (32 values in 34 bytes; a row's last short group
//!   padded with zeros, as [`crate::cache_type::round_row`] rounds it): 612 bytes a row at
//!   DeepSeek-V2 shapes instead of 2,304, so attention at depth reads a quarter of the bytes.
//!
//! Invariant: a row read back ([`Latents::decode`]) is [`crate::cache_type::round_row`] of the
//! values written, bit for bit (each value `q·d` with `d` the block's f16 scale, exact in f32), so
//! every consumer computes on exactly the values a cache of that type holds, whichever storage it
//! reads.

use std::borrow::Cow;

use bytemuck::Zeroable;
use ingot_quant::blocks::{BlockQ8_0, QK8_0};
use ingot_quant::q8_0;

use crate::cache_type::CacheType;

/// The stored rows of one layer.
#[derive(Clone)]
enum Storage {
    F32(Vec<f32>),
    /// `width.div_ceil(QK8_0)` blocks per row.
    Q8_0(Vec<BlockQ8_0>),
}

/// One layer's latent cache: room for `len` rows of `width` values in the format `ty`.
#[derive(Clone)]
pub(super) struct LatentCache {
    storage: Storage,
    width: usize,
    len: usize,
    pub(super) ty: CacheType,
    /// Fault injection for the gates' mutation tests, 0 otherwise: a row of a cache narrower than
    /// f16 is written this many positions late (past the cache's end: not at all).
    pub(super) write_skew: usize,
}

impl LatentCache {
    /// Room for `len` rows of `width` values, all zero, in the format `ty`.
    pub fn new(ty: CacheType, len: usize, width: usize) -> Self {
        let storage = match ty {
            CacheType::F16 => Storage::F32(vec![0.0; len * width]),
            CacheType::Q8_0 => {
                Storage::Q8_0(vec![BlockQ8_0::zeroed(); len * width.div_ceil(QK8_0)])
            }
        };
        LatentCache {
            storage,
            width,
            len,
            ty,
            write_skew: 0,
        }
    }

    /// Stores `values` (`width` of them) as row `pos` in the cache's format; a row past the end is
    /// dropped (only a skewed writer reaches it).
    pub fn write_row(&mut self, pos: usize, values: &[f32]) {
        debug_assert_eq!(values.len(), self.width);
        if pos >= self.len {
            return;
        }
        match &mut self.storage {
            Storage::F32(rows) => {
                rows[pos * self.width..][..self.width].copy_from_slice(values);
            }
            Storage::Q8_0(blocks) => {
                let per_row = self.width.div_ceil(QK8_0);
                let row = &mut blocks[pos * per_row..][..per_row];
                for (b, part) in row.iter_mut().zip(values.chunks(QK8_0)) {
                    *b = crate::cache_type::q8_0_group(part);
                }
            }
        }
    }

    /// Every row, read-only.
    pub fn latents(&self) -> Latents<'_> {
        let rows = match &self.storage {
            Storage::F32(r) => Rows::F32(r),
            Storage::Q8_0(b) => Rows::Q8_0(b),
        };
        Latents {
            rows,
            width: self.width,
        }
    }

    /// The stored bytes (tests compare two caches with them).
    pub fn bytes(&self) -> &[u8] {
        match &self.storage {
            Storage::F32(r) => bytemuck::cast_slice(r),
            Storage::Q8_0(b) => bytemuck::cast_slice(b),
        }
    }
}

impl PartialEq for LatentCache {
    fn eq(&self, other: &Self) -> bool {
        (self.ty, self.width, self.len, self.write_skew)
            == (other.ty, other.width, other.len, other.write_skew)
            && self.bytes() == other.bytes()
    }
}

impl std::fmt::Debug for LatentCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "LatentCache({} x {} {:?})",
            self.len, self.width, self.ty
        )
    }
}

#[derive(Clone, Copy)]
enum Rows<'a> {
    F32(&'a [f32]),
    Q8_0(&'a [BlockQ8_0]),
}

/// A read-only view of a layer's rows: what attention reads.
#[derive(Clone, Copy)]
pub(super) struct Latents<'a> {
    rows: Rows<'a>,
    width: usize,
}

impl<'a> Latents<'a> {
    /// f32 rows held as they are (tests and benches).
    #[cfg(test)]
    pub fn f32(rows: &'a [f32], width: usize) -> Self {
        Latents {
            rows: Rows::F32(rows),
            width,
        }
    }

    /// Values per row.
    pub fn width(self) -> usize {
        self.width
    }

    /// Every row as stored, where the cache stores f32.
    pub fn as_f32(self) -> Option<&'a [f32]> {
        match self.rows {
            Rows::F32(r) => Some(r),
            Rows::Q8_0(_) => None,
        }
    }

    /// Rows `0..n` as f32 values (the prefill forms that take every row at once).
    pub fn to_f32(self, n: usize) -> Cow<'a, [f32]> {
        match self.rows {
            Rows::F32(r) => Cow::Borrowed(&r[..n * self.width]),
            Rows::Q8_0(_) => {
                let mut out = vec![0.0; n * self.width];
                self.decode(0, n, &mut out);
                Cow::Owned(out)
            }
        }
    }

    /// Writes rows `t0..t0 + n` into `out` (`n · width` values).
    pub fn decode(self, t0: usize, n: usize, out: &mut [f32]) {
        let w = self.width;
        match self.rows {
            Rows::F32(r) => out[..n * w].copy_from_slice(&r[t0 * w..(t0 + n) * w]),
            Rows::Q8_0(blocks) => {
                let per_row = w.div_ceil(QK8_0);
                let src = &blocks[t0 * per_row..(t0 + n) * per_row];
                for (row, o) in src.chunks_exact(per_row).zip(out.chunks_exact_mut(w)) {
                    for (b, part) in row.iter().zip(o.chunks_mut(QK8_0)) {
                        let mut x = [0.0f32; QK8_0];
                        q8_0::dequantize(b, &mut x);
                        part.copy_from_slice(&x[..part.len()]);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows read back are `round_row` of the rows written, for both formats, including a width
    /// whose last group is short (80 = 2.5 groups, the trained model's) and rows written out of
    /// order.
    #[test]
    fn rows_read_back_are_the_rounded_rows_written() {
        let mut seed = 0x1234_5678_9abc_def1u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 40) as f32 / (1u64 << 24) as f32 * 6.0 - 3.0
        };
        for ty in CacheType::ALL {
            for width in [80, 576] {
                let len = 7;
                let mut cache = LatentCache::new(ty, len, width);
                let rows: Vec<Vec<f32>> = (0..len)
                    .map(|_| (0..width).map(|_| rnd()).collect())
                    .collect();
                for pos in [3, 0, 6, 1, 5, 2, 4] {
                    cache.write_row(pos, &rows[pos]);
                }
                let mut want: Vec<f32> = rows.concat();
                want.chunks_exact_mut(width)
                    .for_each(|r| crate::cache_type::round_row(ty, r));
                let got = cache.latents().to_f32(len);
                assert_eq!(bits(&got), bits(&want), "{ty:?} width {width}");
                let mut part = vec![0.0; 3 * width];
                cache.latents().decode(2, 3, &mut part);
                assert_eq!(
                    bits(&part),
                    bits(&want[2 * width..5 * width]),
                    "{ty:?} width {width}"
                );
                // Past the end: dropped, nothing else touched.
                let before = cache.clone();
                cache.write_row(len, &rows[0]);
                assert!(cache == before);
            }
        }
    }

    #[test]
    fn a_q8_0_row_takes_its_blocks_bytes() {
        let c = LatentCache::new(CacheType::Q8_0, 10, 576);
        assert_eq!(c.bytes().len(), 10 * 18 * 34);
        let f = LatentCache::new(CacheType::F16, 10, 576);
        assert_eq!(f.bytes().len(), 10 * 576 * 4);
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }
}
