//! Simulated device memory: the global allocations shared by all blocks, and the generic address
//! map.
//!
//! Generic addresses are split into 64 GiB slots (`addr >> SLOT_SHIFT`). Global allocation `i`
//! lives alone at the start of slot `i + 1`, so every allocation is 256-byte (indeed 64 GiB)
//! aligned and followed by a red zone of unmapped addresses up to the next slot: an out-of-bounds
//! index faults instead of reaching a neighbour, and a freed slot is never reused, so
//! use-after-free faults too. Slot 0 (null) is unmapped. Two high slots are the generic windows of
//! the block's shared memory and the thread's local memory.
//!
//! Global memory is accessed concurrently by blocks running on different host threads. It is stored
//! as `AtomicU32` words accessed with relaxed ordering, so racing kernels are well-defined on the
//! host (CUDA makes such races undefined; here they just produce one of the racing values), and
//! `atom`/`red` are real atomic read-modify-writes (64-bit ones are serialised by a lock).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use crate::error::SimError;
use crate::module_vars::ModuleVars;
use crate::slots::{MAX_GLOBAL_SLOT, SLOT_MASK, SLOT_SHIFT, VAR_FIRST_SLOT};

/// Why an access failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemErr {
    OutOfBounds,
    Misaligned,
}

/// One global allocation: `len` bytes in little-endian 32-bit words.
pub(crate) struct Alloc {
    words: Box<[AtomicU32]>,
    len: u64,
    /// Host memory mapped into the device's address space (`cuMemHostAlloc` with `DEVICEMAP`):
    /// kernels access it like global memory, but its traffic crosses the host link and is counted
    /// apart.
    host_mapped: bool,
    /// For host-mapped allocations, one bit per byte: read in the current launch. A GPU fetches a
    /// host line over the link once and serves a repeat from its caches, so
    /// [`crate::LaunchStats::host_bytes_fetched`] counts each byte once per launch.
    fetched: Option<Box<[AtomicU64]>>,
    /// Whether a kernel loaded from (or atomically read) the allocation since the last
    /// [`GlobalMem::clear_read`]: what tells a buffer a launch reads from one it only writes.
    read: AtomicBool,
    /// Whether a kernel stored to (or atomically updated) the allocation since the last
    /// [`GlobalMem::clear_written`].
    written: AtomicBool,
    /// Per word, the launch ([`GlobalMem::begin_launch`]'s number) that last stored to it (0:
    /// none); zeroed pages cost nothing until a word is written.
    word_launch: Box<[AtomicU32]>,
    /// The launch that last stored to any word: a load from an allocation no kernel of the
    /// current launch wrote checks no word.
    last_launch: AtomicU32,
    /// The current launch's number, shared by every allocation of the [`GlobalMem`].
    launch: Arc<AtomicU32>,
}

impl Alloc {
    /// Records that the current launch stored to the words covering `bytes` bytes at `off`.
    #[inline]
    fn note_store(&self, off: u64, bytes: u64) {
        let e = self.launch.load(Relaxed);
        if self.last_launch.load(Relaxed) != e {
            self.last_launch.store(e, Relaxed);
        }
        for w in off / 4..(off + bytes).div_ceil(4) {
            self.word_launch[w as usize].store(e, Relaxed);
        }
    }

    /// Whether a kernel of the current launch stored to a word of the `bytes` bytes at `off`
    /// (inside the allocation).
    #[inline]
    pub(crate) fn stored_this_launch(&self, off: u64, bytes: u64) -> bool {
        let e = self.launch.load(Relaxed);
        self.last_launch.load(Relaxed) == e
            && (off / 4..(off + bytes).div_ceil(4))
                .any(|w| self.word_launch[w as usize].load(Relaxed) == e)
    }

    /// Records that a kernel wrote the allocation (one relaxed load when already recorded).
    #[inline]
    pub(crate) fn mark_written(&self) {
        if !self.written.load(Relaxed) {
            self.written.store(true, Relaxed);
        }
    }

    /// Replaces the bytes of `mask` in the word at byte offset `off` (a multiple of 4, inside
    /// the allocation) with those of `bits`.
    pub(crate) fn store_masked(&self, off: u64, bits: u32, mask: u32) {
        self.note_store(off, 4);
        let w = &self.words[(off / 4) as usize];
        if mask == u32::MAX {
            w.store(bits, Relaxed);
        } else {
            let _ = w.fetch_update(Relaxed, Relaxed, |old| Some((old & !mask) | (bits & mask)));
        }
    }

    /// Records that a kernel read the allocation (one relaxed load when already recorded).
    #[inline]
    pub(crate) fn mark_read(&self) {
        if !self.read.load(Relaxed) {
            self.read.store(true, Relaxed);
        }
    }

    /// Bytes of the allocation.
    #[inline]
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Loads a 1-, 2-, 4- or 8-byte value at `off`, which must be aligned to `size` with
    /// `off + size <= len()` (the callers check; a violation would index past the words and panic).
    #[inline]
    pub(crate) fn load(&self, off: u64, size: u32) -> u64 {
        let w = (off / 4) as usize;
        match size {
            8 => {
                u64::from(self.words[w].load(Relaxed))
                    | (u64::from(self.words[w + 1].load(Relaxed)) << 32)
            }
            4 => u64::from(self.words[w].load(Relaxed)),
            _ => {
                let shift = (off % 4) * 8;
                (u64::from(self.words[w].load(Relaxed)) >> shift) & ((1u64 << (8 * size)) - 1)
            }
        }
    }

    /// Stores a 1-, 2-, 4- or 8-byte value at `off`, under the same conditions as [`Alloc::load`].
    #[inline]
    pub(crate) fn store(&self, off: u64, size: u32, v: u64) {
        self.note_store(off, u64::from(size));
        let w = (off / 4) as usize;
        match size {
            8 => {
                self.words[w].store(v as u32, Relaxed);
                self.words[w + 1].store((v >> 32) as u32, Relaxed);
            }
            4 => self.words[w].store(v as u32, Relaxed),
            _ => {
                let shift = (off % 4) * 8;
                let mask = (((1u64 << (8 * size)) - 1) << shift) as u32;
                let bits = ((v << shift) as u32) & mask;
                // Only this access's bytes change; the CAS loop keeps concurrent writers of the
                // other bytes.
                let _ =
                    self.words[w].fetch_update(Relaxed, Relaxed, |old| Some((old & !mask) | bits));
            }
        }
    }
}

/// All global allocations of a [`crate::Sim`].
pub(crate) struct GlobalMem {
    slots: Vec<Option<Alloc>>,
    /// Whether any allocation was ever host-mapped: until then the counters skip the per-access
    /// split.
    pub(crate) any_host_mapped: bool,
    /// Storage of module-scope variables by slot, with the identity of the module that owns it.
    vars: HashMap<u64, (u64, Alloc)>,
    live_bytes: u64,
    pub(crate) limit: u64,
    wide_atomics: Mutex<()>,
    /// The current launch's number (see [`Alloc::stored_this_launch`]); 0 before the first.
    launch: Arc<AtomicU32>,
}

impl GlobalMem {
    pub(crate) fn new(limit: u64) -> GlobalMem {
        GlobalMem {
            slots: Vec::new(),
            any_host_mapped: false,
            vars: HashMap::new(),
            live_bytes: 0,
            limit,
            wide_atomics: Mutex::new(()),
            launch: Arc::new(AtomicU32::new(0)),
        }
    }

    /// Starts a launch: stores from here on belong to it ([`Alloc::stored_this_launch`]).
    pub(crate) fn begin_launch(&self) {
        self.launch.fetch_add(1, Relaxed);
    }

    /// Allocates `bytes` zeroed bytes of host-mapped memory (see [`Alloc`]) and returns the base
    /// address.
    pub(crate) fn alloc_host_mapped(&mut self, bytes: usize) -> Result<u64, SimError> {
        let base = self.alloc(bytes)?;
        let slot = (base >> SLOT_SHIFT) as usize - 1;
        if let Some(a) = self.slots[slot].as_mut() {
            a.host_mapped = true;
            a.fetched = Some(bytemuck::allocation::zeroed_slice_box(
                (bytes as u64).div_ceil(64).max(1) as usize,
            ));
        }
        self.any_host_mapped = true;
        Ok(base)
    }

    /// Forgets which allocations kernels read (see [`GlobalMem::was_read`]).
    pub(crate) fn clear_read(&self) {
        for a in self.slots.iter().flatten() {
            a.read.store(false, Relaxed);
        }
    }

    /// Whether a kernel read the allocation holding `addr` since the last
    /// [`GlobalMem::clear_read`].
    pub(crate) fn was_read(&self, addr: u64) -> bool {
        self.region(addr).is_some_and(|a| a.read.load(Relaxed))
    }

    /// Forgets which allocations kernels wrote (see [`GlobalMem::was_written`]).
    pub(crate) fn clear_written(&self) {
        for a in self.slots.iter().flatten() {
            a.written.store(false, Relaxed);
        }
        for (_, a) in self.vars.values() {
            a.written.store(false, Relaxed);
        }
    }

    /// Whether a kernel wrote the allocation holding `addr` since the last
    /// [`GlobalMem::clear_written`].
    pub(crate) fn was_written(&self, addr: u64) -> bool {
        self.region(addr).is_some_and(|a| a.written.load(Relaxed))
    }

    /// Base addresses of the allocations and module variables kernels wrote since the last
    /// [`GlobalMem::clear_written`], in address order.
    pub(crate) fn written(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, a)| a.as_ref().is_some_and(|a| a.written.load(Relaxed)))
            .map(|(i, _)| (i as u64 + 1) << SLOT_SHIFT)
            .chain(
                self.vars
                    .iter()
                    .filter(|(_, (_, a))| a.written.load(Relaxed))
                    .map(|(slot, _)| slot << SLOT_SHIFT),
            )
            .collect();
        v.sort_unstable();
        v
    }

    /// Forgets which host-mapped bytes were read: called at the start of each launch.
    pub(crate) fn reset_fetched(&self) {
        for a in self.slots.iter().flatten() {
            if let Some(bits) = &a.fetched {
                bits.iter().for_each(|w| w.store(0, Relaxed));
            }
        }
    }

    /// Of the `bytes` (at most 32, naturally aligned, so within one 64-byte bit word) read at
    /// host-mapped `addr`, how many no access of this launch has read before; marks them read.
    #[inline]
    pub(crate) fn fetch_new(&self, addr: u64, bytes: u32) -> u64 {
        let Some(bits) = self.region(addr).and_then(|a| a.fetched.as_ref()) else {
            return 0;
        };
        let off = addr & SLOT_MASK;
        let Some(word) = bits.get((off / 64) as usize) else {
            return 0;
        };
        let n = bytes.min(64 - (off % 64) as u32);
        let mask = if n >= 64 {
            u64::MAX
        } else {
            ((1u64 << n) - 1) << (off % 64)
        };
        let old = word.fetch_or(mask, Relaxed);
        u64::from((mask & !old).count_ones())
    }

    /// Whether `addr` lies in a host-mapped allocation's slot.
    #[inline]
    pub(crate) fn is_host_mapped(&self, addr: u64) -> bool {
        self.region(addr).is_some_and(|a| a.host_mapped)
    }

    /// Allocates `bytes` zeroed bytes and returns the base address.
    pub(crate) fn alloc(&mut self, bytes: usize) -> Result<u64, SimError> {
        if self.slots.len() as u64 >= MAX_GLOBAL_SLOT - 1 {
            return Err(SimError::OutOfMemory {
                requested: bytes as u64,
                available: 0,
            });
        }
        let a = self.new_alloc(bytes as u64)?;
        self.slots.push(Some(a));
        Ok((self.slots.len() as u64) << SLOT_SHIFT)
    }

    /// `bytes` zeroed bytes, counted against the limit.
    fn new_alloc(&mut self, bytes: u64) -> Result<Alloc, SimError> {
        let available = self.limit.saturating_sub(self.live_bytes);
        if bytes > available {
            return Err(SimError::OutOfMemory {
                requested: bytes,
                available,
            });
        }
        let nwords = bytes.div_ceil(4).max(1) as usize;
        // alloc_zeroed: the OS maps pages on first write, so untouched memory costs nothing.
        let words: Box<[AtomicU32]> = bytemuck::allocation::zeroed_slice_box(nwords);
        self.live_bytes += bytes;
        Ok(Alloc {
            words,
            len: bytes,
            host_mapped: false,
            fetched: None,
            read: AtomicBool::new(false),
            written: AtomicBool::new(false),
            word_launch: bytemuck::allocation::zeroed_slice_box(nwords),
            last_launch: AtomicU32::new(0),
            launch: Arc::clone(&self.launch),
        })
    }

    /// Creates the storage of `m`'s variables that does not exist yet (or belongs to another module
    /// whose variable slot was reused), initialised from their initializers. Existing storage keeps
    /// its contents.
    pub(crate) fn ensure_module_vars(&mut self, m: &ModuleVars) -> Result<(), SimError> {
        for v in &m.vars {
            if self
                .vars
                .get(&v.slot)
                .is_some_and(|(id, _)| *id == m.module_id)
            {
                continue;
            }
            if let Some((_, old)) = self.vars.remove(&v.slot) {
                self.live_bytes -= old.len;
            }
            let a = self.new_alloc(v.size)?;
            self.vars.insert(v.slot, (m.module_id, a));
            self.write_bytes(v.address(), &v.init)?;
        }
        Ok(())
    }

    /// The allocation or module variable in `slot`, if live.
    #[inline]
    fn slot(&self, slot: u64) -> Option<&Alloc> {
        if slot >= VAR_FIRST_SLOT {
            return self.vars.get(&slot).map(|(_, a)| a);
        }
        (slot as usize)
            .checked_sub(1)
            .and_then(|i| self.slots.get(i))
            .and_then(Option::as_ref)
    }

    /// Frees the allocation starting at `base`; anything else is ignored (like `cudaFree` of a bad
    /// pointer, but without an error path).
    pub(crate) fn free(&mut self, base: u64) {
        if base & SLOT_MASK != 0 {
            return;
        }
        let slot = (base >> SLOT_SHIFT) as usize;
        if let Some(entry) = slot.checked_sub(1).and_then(|i| self.slots.get_mut(i)) {
            if let Some(a) = entry.take() {
                self.live_bytes -= a.len;
            }
        }
    }

    /// The live allocation whose slot contains `addr` (the address may still be past its end).
    #[inline]
    pub(crate) fn region(&self, addr: u64) -> Option<&Alloc> {
        self.slot(addr >> SLOT_SHIFT)
    }

    fn find(&self, addr: u64, size: u64) -> Result<(&Alloc, u64), MemErr> {
        let off = addr & SLOT_MASK;
        match self.slot(addr >> SLOT_SHIFT) {
            Some(a) if off + size <= a.len => Ok((a, off)),
            _ => Err(MemErr::OutOfBounds),
        }
    }

    /// Loads a naturally aligned value of 1, 2, 4 or 8 bytes.
    pub(crate) fn load(&self, addr: u64, size: u32) -> Result<u64, MemErr> {
        if !addr.is_multiple_of(u64::from(size)) {
            return Err(MemErr::Misaligned);
        }
        let (a, off) = self.find(addr, u64::from(size))?;
        a.mark_read();
        Ok(a.load(off, size))
    }

    /// Stores a naturally aligned value of 1, 2, 4 or 8 bytes.
    pub(crate) fn store(&self, addr: u64, size: u32, v: u64) -> Result<(), MemErr> {
        let a = self.check(addr, size)?;
        a.mark_written();
        a.store(addr & SLOT_MASK, size, v);
        Ok(())
    }

    /// The allocation a naturally aligned access of 1, 2, 4 or 8 bytes at `addr` lands in, or
    /// why it would fault.
    pub(crate) fn check(&self, addr: u64, size: u32) -> Result<&Alloc, MemErr> {
        if !addr.is_multiple_of(u64::from(size)) {
            return Err(MemErr::Misaligned);
        }
        self.find(addr, u64::from(size)).map(|(a, _)| a)
    }

    /// Atomic read-modify-write of a naturally aligned 4- or 8-byte value; returns the old value.
    pub(crate) fn rmw(&self, addr: u64, size: u32, f: impl Fn(u64) -> u64) -> Result<u64, MemErr> {
        if !addr.is_multiple_of(u64::from(size)) {
            return Err(MemErr::Misaligned);
        }
        let (a, off) = self.find(addr, u64::from(size))?;
        a.mark_read();
        a.mark_written();
        a.note_store(off, u64::from(size));
        let w = (off / 4) as usize;
        if size == 4 {
            let old = a.words[w]
                .fetch_update(Relaxed, Relaxed, |old| Some(f(u64::from(old)) as u32))
                .unwrap_or_else(|x| x);
            return Ok(u64::from(old));
        }
        let _guard = self.wide_atomics.lock().unwrap_or_else(|p| p.into_inner());
        let old =
            u64::from(a.words[w].load(Relaxed)) | (u64::from(a.words[w + 1].load(Relaxed)) << 32);
        let new = f(old);
        a.words[w].store(new as u32, Relaxed);
        a.words[w + 1].store((new >> 32) as u32, Relaxed);
        Ok(old)
    }

    /// A copy of the words of the allocation (or module variable) whose base is `base`.
    pub(crate) fn snapshot(&self, base: u64) -> Option<Vec<u32>> {
        let a = self.region(base)?;
        Some(a.words.iter().map(|w| w.load(Relaxed)).collect())
    }

    /// Puts back the words [`GlobalMem::snapshot`] took of the allocation at `base`.
    pub(crate) fn restore(&self, base: u64, words: &[u32]) {
        if let Some(a) = self.region(base) {
            for (w, &v) in a.words.iter().zip(words) {
                w.store(v, Relaxed);
            }
        }
    }

    /// The first byte offset at which the allocation at `base` differs from `words` (a
    /// [`GlobalMem::snapshot`] of it), with its byte now and in `words`.
    pub(crate) fn first_difference(&self, base: u64, words: &[u32]) -> Option<(u64, u8, u8)> {
        let a = self.region(base)?;
        let (i, (now, was)) = a
            .words
            .iter()
            .map(|w| w.load(Relaxed))
            .zip(words.iter().copied())
            .enumerate()
            .find(|(_, (now, was))| now != was)?;
        let byte = (now ^ was).trailing_zeros() / 8;
        let at = |v: u32| v.to_le_bytes()[byte as usize];
        Some((i as u64 * 4 + u64::from(byte), at(now), at(was)))
    }

    /// Base addresses of the module variables' storage.
    pub(crate) fn var_bases(&self) -> Vec<u64> {
        self.vars.keys().map(|slot| slot << SLOT_SHIFT).collect()
    }

    /// Host copy in.
    pub(crate) fn write_bytes(&self, addr: u64, data: &[u8]) -> Result<(), SimError> {
        let err = SimError::HostAccess {
            address: addr,
            len: data.len(),
        };
        let (a, off) = self.find(addr, data.len() as u64).map_err(|_| err)?;
        // Whole words are stored at once; the partial words at either end merge their bytes.
        let mut pos = 0usize;
        while pos < data.len() {
            let o = off + pos as u64;
            let in_word = (o % 4) as usize;
            let n = (4 - in_word).min(data.len() - pos);
            let w = &a.words[(o / 4) as usize];
            if n == 4 {
                let bytes: [u8; 4] = data[pos..pos + 4].try_into().expect("4 bytes");
                w.store(u32::from_le_bytes(bytes), Relaxed);
            } else {
                let mut word = [0u8; 4];
                word[in_word..in_word + n].copy_from_slice(&data[pos..pos + n]);
                let mask = (((1u64 << (8 * n)) - 1) << (8 * in_word)) as u32;
                let bits = u32::from_le_bytes(word);
                let _ = w.fetch_update(Relaxed, Relaxed, |old| Some((old & !mask) | bits));
            }
            pos += n;
        }
        Ok(())
    }

    /// Host copy out.
    pub(crate) fn read_bytes(&self, addr: u64, out: &mut [u8]) -> Result<(), SimError> {
        let err = SimError::HostAccess {
            address: addr,
            len: out.len(),
        };
        let (a, off) = self.find(addr, out.len() as u64).map_err(|_| err)?;
        let mut pos = 0usize;
        while pos < out.len() {
            let o = off + pos as u64;
            let in_word = (o % 4) as usize;
            let n = (4 - in_word).min(out.len() - pos);
            let word = a.words[(o / 4) as usize].load(Relaxed).to_le_bytes();
            out[pos..pos + n].copy_from_slice(&word[in_word..in_word + n]);
            pos += n;
        }
        Ok(())
    }
}

/// Loads from a byte buffer (shared or local memory) with bounds and alignment checks.
pub(crate) fn buf_load(buf: &[u8], off: u64, size: u32) -> Result<u64, MemErr> {
    if !off.is_multiple_of(u64::from(size)) {
        return Err(MemErr::Misaligned);
    }
    let end = off
        .checked_add(u64::from(size))
        .ok_or(MemErr::OutOfBounds)?;
    let s = buf
        .get(off as usize..end as usize)
        .filter(|_| end <= buf.len() as u64)
        .ok_or(MemErr::OutOfBounds)?;
    let mut b = [0u8; 8];
    b[..s.len()].copy_from_slice(s);
    Ok(u64::from_le_bytes(b))
}

/// Stores into a byte buffer (shared or local memory) with bounds and alignment checks.
pub(crate) fn buf_store(buf: &mut [u8], off: u64, size: u32, v: u64) -> Result<(), MemErr> {
    if !off.is_multiple_of(u64::from(size)) {
        return Err(MemErr::Misaligned);
    }
    let end = off
        .checked_add(u64::from(size))
        .ok_or(MemErr::OutOfBounds)?;
    if end > buf.len() as u64 {
        return Err(MemErr::OutOfBounds);
    }
    buf[off as usize..end as usize].copy_from_slice(&v.to_le_bytes()[..size as usize]);
    Ok(())
}
