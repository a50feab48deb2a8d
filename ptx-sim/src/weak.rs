//! The weak global-memory model of [`crate::Schedule::Random`]: a store buffer per block.
//!
//! A block's weak global stores (`st` without a qualifier, or `.weak`) go into its [`StoreBuf`]
//! instead of global memory; they become visible to other blocks only when the buffer drains: at
//! a fence or release access executed by any thread of the block (`fence.*`, `membar.*`,
//! `st.release`, `atom`/`red` `.release`/`.acq_rel`), at a random later scheduling point
//! (possibly after the block has exited), and at the end of the launch. The block's own loads see
//! its buffered bytes over global memory. Atomics and strong stores (`.relaxed`, `.volatile`,
//! `.release`) act on global memory directly, after draining the block's buffered bytes of the
//! same words (a thread's store and its later access to one address stay in program order). A
//! drain makes the whole buffer visible at once.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, DefaultHasher};

use crate::memory::GlobalMem;
use crate::slots::SLOT_MASK;

/// Buffered global stores of one block, by 4-byte word: `(bits, byte mask)`.
///
/// Invariant: every key is a 4-byte aligned address inside a live allocation (checked when the
/// store is buffered, and allocations cannot be freed during a launch). The hasher is fixed, so
/// the drain order, like everything else under a seed, is the same on every run.
#[derive(Default)]
pub(crate) struct StoreBuf {
    words: HashMap<u64, (u32, u32), BuildHasherDefault<DefaultHasher>>,
}

/// The word address and the in-word byte shift of an access at `a`; the access (1, 2 or 4
/// bytes, naturally aligned) lies inside that word.
#[inline]
fn word(a: u64) -> (u64, u32) {
    (a & !3, ((a & 3) * 8) as u32)
}

/// The byte mask (in bit form) of a `size`-byte (1, 2 or 4) access at bit `shift` of its word.
#[inline]
fn mask(size: u32, shift: u32) -> u32 {
    ((((1u64 << (8 * size)) - 1) << shift) & 0xFFFF_FFFF) as u32
}

impl StoreBuf {
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Buffered words.
    pub(crate) fn len(&self) -> usize {
        self.words.len()
    }

    /// Buffers a naturally aligned store of 1, 2, 4 or 8 bytes at global address `a` (already
    /// checked to land inside an allocation).
    pub(crate) fn store(&mut self, a: u64, size: u32, v: u64) {
        if size == 8 {
            self.store(a, 4, v & 0xFFFF_FFFF);
            self.store(a + 4, 4, v >> 32);
            return;
        }
        let (w, shift) = word(a);
        let m = mask(size, shift);
        let bits = ((v << shift) & 0xFFFF_FFFF) as u32 & m;
        let e = self.words.entry(w).or_insert((0, 0));
        e.0 = (e.0 & !m) | bits;
        e.1 |= m;
    }

    /// `v`, the value a `size`-byte load at `a` read from global memory, with the bytes this
    /// buffer holds for that range put in.
    #[inline]
    pub(crate) fn overlay(&self, a: u64, size: u32, v: u64) -> u64 {
        if self.words.is_empty() {
            return v;
        }
        if size == 8 {
            let lo = self.overlay(a, 4, v & 0xFFFF_FFFF);
            let hi = self.overlay(a + 4, 4, v >> 32);
            return lo | (hi << 32);
        }
        let (w, shift) = word(a);
        let Some(&(bits, m)) = self.words.get(&w) else {
            return v;
        };
        let word_v = ((v << shift) & 0xFFFF_FFFF) as u32;
        let merged = (word_v & !m) | (bits & m);
        (u64::from(merged) >> shift) & ((1u64 << (8 * size)) - 1)
    }

    /// Makes every buffered store visible in global memory and empties the buffer.
    pub(crate) fn drain(&mut self, mem: &GlobalMem) {
        for (w, (bits, m)) in self.words.drain() {
            write(mem, w, bits, m);
        }
    }

    /// Makes the buffered bytes of the words overlapping `[a, a + size)` visible.
    pub(crate) fn drain_range(&mut self, mem: &GlobalMem, a: u64, size: u32) {
        if self.words.is_empty() {
            return;
        }
        // Saturating: `a` may be any address, also one whose access is about to fault.
        for w in ((a & !3)..a.saturating_add(u64::from(size))).step_by(4) {
            if let Some((bits, m)) = self.words.remove(&w) {
                write(mem, w, bits, m);
            }
        }
    }
}

fn write(mem: &GlobalMem, w: u64, bits: u32, m: u32) {
    // The word holds bytes of a checked access, so it exists even when the allocation's length
    // is not a multiple of 4.
    let a = mem
        .region(w)
        .expect("buffered stores were checked against a live allocation");
    a.mark_written();
    a.store_masked(w & SLOT_MASK, bits, m);
}
