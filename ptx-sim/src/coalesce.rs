//! Coalescing and bank-conflict counting for one warp-level memory request, without heap
//! allocation.
//!
//! A request records at most one access per lane (address, bytes). Every access the simulator lets
//! through is naturally aligned to its size, and sizes are at most 32 bytes, so each access lies in
//! a single 32-byte sector and spans at most eight 4-byte words; the fixed arrays below rely on
//! that, and a request that breaks it is still counted correctly by a general (allocating) path.

use crate::lanes::WARP;

/// Bytes per global-memory sector.
const SECTOR_SHIFT: u32 = 5;
/// Bytes per shared-memory bank word, and banks.
const WORD_SHIFT: u32 = 2;
const BANKS: u64 = 32;
/// Words one access may span on the fixed-array path (a 32-byte access).
const MAX_WORDS_PER_ACCESS: u64 = 8;

/// The accesses of one request in one memory space, in lane order.
#[derive(Clone, Copy)]
pub(crate) struct Accesses {
    addr: [u64; WARP],
    bytes: [u32; WARP],
    len: usize,
}

impl Default for Accesses {
    fn default() -> Self {
        Accesses {
            addr: [0; WARP],
            bytes: [0; WARP],
            len: 0,
        }
    }
}

impl Accesses {
    /// Records one lane's access of `bytes` (at least 1) at `addr`. A warp has 32 lanes; further
    /// accesses cannot occur and are ignored.
    #[inline]
    pub(crate) fn push(&mut self, addr: u64, bytes: u32) {
        if self.len < WARP {
            self.addr[self.len] = addr;
            self.bytes[self.len] = bytes.max(1);
            self.len += 1;
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The accesses for which `pred(addr)` holds, and the rest.
    pub(crate) fn split(&self, pred: impl Fn(u64) -> bool) -> (Accesses, Accesses) {
        let (mut yes, mut no) = (Accesses::default(), Accesses::default());
        for (a, n) in self.iter() {
            if pred(a) {
                yes.push(a, n);
            } else {
                no.push(a, n);
            }
        }
        (yes, no)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.addr[..self.len]
            .iter()
            .copied()
            .zip(self.bytes[..self.len].iter().copied())
    }

    /// Total bytes requested.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes[..self.len].iter().map(|&b| u64::from(b)).sum()
    }

    /// Distinct 32-byte sectors touched.
    pub(crate) fn sectors(&self) -> u64 {
        let mut s = [0u64; WARP];
        for (i, (a, n)) in self.iter().enumerate() {
            let (first, last) = span(a, n, SECTOR_SHIFT);
            if first != last {
                return self.sectors_general();
            }
            s[i] = first;
        }
        distinct(&mut s[..self.len])
    }

    fn sectors_general(&self) -> u64 {
        let mut s: Vec<u64> = self
            .iter()
            .flat_map(|(a, n)| {
                let (first, last) = span(a, n, SECTOR_SHIFT);
                first..=last
            })
            .collect();
        distinct(&mut s)
    }

    /// Extra shared-memory wavefronts (see [`crate::LaunchStats::shared_bank_conflicts`]).
    pub(crate) fn bank_conflicts(&self) -> u64 {
        let mut words = [0u64; WARP * MAX_WORDS_PER_ACCESS as usize];
        let mut n = 0;
        for (a, bytes) in self.iter() {
            let (first, last) = span(a, bytes, WORD_SHIFT);
            if last - first >= MAX_WORDS_PER_ACCESS {
                return self.bank_conflicts_general();
            }
            for wd in first..=last {
                words[n] = wd;
                n += 1;
            }
        }
        conflicts(&mut words[..n])
    }

    fn bank_conflicts_general(&self) -> u64 {
        let mut words: Vec<u64> = self
            .iter()
            .flat_map(|(a, n)| {
                let (first, last) = span(a, n, WORD_SHIFT);
                first..=last
            })
            .collect();
        conflicts(&mut words)
    }
}

/// First and last unit (of `1 << shift` bytes) that `bytes` bytes at `addr` touch.
#[inline]
fn span(addr: u64, bytes: u32, shift: u32) -> (u64, u64) {
    (
        addr >> shift,
        addr.wrapping_add(u64::from(bytes) - 1) >> shift,
    )
}

/// Sorts `v` in place if needed and returns its number of distinct values.
fn distinct(v: &mut [u64]) -> u64 {
    // Lanes usually access ascending addresses, which needs no sort.
    if !v.is_sorted() {
        v.sort_unstable();
    }
    let mut n = 0;
    for i in 0..v.len() {
        if i == 0 || v[i] != v[i - 1] {
            n += 1;
        }
    }
    n
}

/// Wavefronts beyond the minimum for the distinct words in `words`: the most distinct words in one
/// bank, minus `ceil(distinct words / 32)`. Lanes sharing a word are a broadcast, not a conflict.
fn conflicts(words: &mut [u64]) -> u64 {
    if !words.is_sorted() {
        words.sort_unstable();
    }
    let mut per_bank = [0u64; BANKS as usize];
    let mut distinct = 0u64;
    for i in 0..words.len() {
        if i == 0 || words[i] != words[i - 1] {
            per_bank[(words[i] % BANKS) as usize] += 1;
            distinct += 1;
        }
    }
    let wavefronts = per_bank.iter().copied().max().unwrap_or(0);
    wavefronts.saturating_sub(distinct.div_ceil(BANKS))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition: distinct sectors / per-bank distinct words of all the bytes touched.
    fn reference(acc: &[(u64, u32)]) -> (u64, u64) {
        let mut sectors: Vec<u64> = acc
            .iter()
            .flat_map(|&(a, n)| (a >> 5)..=((a + u64::from(n) - 1) >> 5))
            .collect();
        sectors.sort_unstable();
        sectors.dedup();
        let mut words: Vec<u64> = acc
            .iter()
            .flat_map(|&(a, n)| (a >> 2)..=((a + u64::from(n) - 1) >> 2))
            .collect();
        words.sort_unstable();
        words.dedup();
        let mut per_bank = [0u64; 32];
        for w in &words {
            per_bank[(w % 32) as usize] += 1;
        }
        let extra = per_bank.iter().max().unwrap() - (words.len() as u64).div_ceil(32);
        (sectors.len() as u64, extra)
    }

    #[test]
    fn matches_the_definition() {
        let mut seed = 0x9e37_79b9u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for case in 0..2000 {
            let size = [1u32, 2, 4, 8, 16, 32, 64][case % 7];
            let lanes = 1 + (next() % 32) as usize;
            let pattern = case % 4;
            let acc: Vec<(u64, u32)> = (0..lanes as u64)
                .map(|l| {
                    let a = match pattern {
                        0 => l * u64::from(size),
                        1 => (lanes as u64 - l) * u64::from(size) * 3,
                        2 => (next() % 64) * u64::from(size),
                        _ => 1000 * u64::from(size),
                    };
                    (a, size)
                })
                .collect();
            let mut r = Accesses::default();
            for &(a, n) in &acc {
                r.push(a, n);
            }
            let (sectors, extra) = reference(&acc);
            assert_eq!(r.sectors(), sectors, "{acc:?}");
            assert_eq!(r.bank_conflicts(), extra, "{acc:?}");
            assert_eq!(r.bytes(), acc.iter().map(|a| u64::from(a.1)).sum::<u64>());
        }
    }
}
