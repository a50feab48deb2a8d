//! The generic address map, in 64 GiB slots (`addr >> SLOT_SHIFT`): slot 0 is null, global
//! allocation `i` owns slot `i + 1` (`memory.rs`), module-scope variables own one slot each above
//! the allocations (`module_vars.rs`), and two high slots are the generic windows of the block's
//! shared memory and the thread's local memory (`cvta`, generic loads and stores).

pub(crate) const SLOT_SHIFT: u32 = 36;
pub(crate) const SLOT_MASK: u64 = (1 << SLOT_SHIFT) - 1;
/// Generic-address slot of the executing block's shared memory.
pub(crate) const SHARED_SLOT: u64 = 0xF_FFF0;
/// Generic-address slot of the executing thread's local memory.
pub(crate) const LOCAL_SLOT: u64 = 0xF_FFE0;
/// Highest slot usable by global allocations.
pub(crate) const MAX_GLOBAL_SLOT: u64 = 0xF_0000;
/// Slots `VAR_FIRST_SLOT .. VAR_FIRST_SLOT + VAR_SLOTS` hold module-scope variables
/// (`module_vars.rs`), one each, between the allocations and the shared/local windows.
pub(crate) const VAR_FIRST_SLOT: u64 = MAX_GLOBAL_SLOT;
pub(crate) const VAR_SLOTS: u64 = LOCAL_SLOT - VAR_FIRST_SLOT;
