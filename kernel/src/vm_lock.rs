//! `vm.lock=`: how an address space's threads share it.
//!
//! - `fine` (the default): page faults, `madvise(DONTNEED)` and the
//!   kernel's copies of user memory take the region table shared and
//!   change page-table entries atomically, so threads of one process on
//!   several CPUs fault and discard at once; every shootdown is issued
//!   after the page-table changes are made and, for those, with no lock
//!   held; a waiter blocks instead of spinning.
//! - `coarse`: the discipline this kernel had before, kept for the seed's
//!   experiment (`bench tlb_flush2 --locks coarse,fine`): one exclusive lock
//!   per address space for every change, held across the shootdown, whose
//!   waiters spin. It shows what the lock costs beside what the flush costs,
//!   as seed 000 showed its LRU-lock fix beside INVLPGB.
//!
//! Pure apart from one flag, set at boot before any process runs.

use spin::Once;

/// The address-space locking discipline (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VmLock {
    #[default]
    Fine,
    Coarse,
}

/// Names for `vm.lock=`.
pub const VM_LOCKS: &[(&str, VmLock)] = &[("fine", VmLock::Fine), ("coarse", VmLock::Coarse)];

static CHOSEN: Once<VmLock> = Once::new();

/// Sets the discipline for the rest of the boot.
pub fn choose(discipline: VmLock) {
    CHOSEN.call_once(|| discipline);
}

/// The discipline in force (`fine` until [`choose`] ran).
pub fn discipline() -> VmLock {
    CHOSEN.get().copied().unwrap_or_default()
}
