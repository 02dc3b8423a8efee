//! A process's memory: its regions (VMAs), page tables and TLB context.
//!
//! Regions record what the program asked for (`mmap`, the program image, the
//! stacks); page-table entries appear only when a page is first touched
//! (demand-zero) or loaded. Every change that removes or weakens a mapping
//! follows the order that makes TLB shootdown correct:
//!
//! 1. change the page tables;
//! 2. flush, through `mm`, every CPU that may cache the old translation;
//! 3. only then free the frames that the old entries pointed to.
//!
//! Freeing before the flush returns would let a thread on another CPU keep
//! reading (or writing!) a frame that already belongs to someone else.
//!
//! ## Many CPUs in one address space
//!
//! Threads of one process fault and discard pages on several CPUs at once,
//! so the address space is locked the way Linux's `mmap_lock` and split
//! page-table locks do it:
//!
//! - the region table is under a reader-writer lock
//!   ([`crate::task::sync::RwLock`]). Page faults, `madvise(DONTNEED)` and
//!   the kernel's copies of user memory take it *shared*: they change no
//!   region, only entries. `mmap`, `munmap`, `mprotect`, `fork`, tear-down
//!   and `madvise(PAGEOUT)` take it *exclusive*: they change regions, prune
//!   tables, or (PAGEOUT) hold entries out of the table while their pages
//!   travel to swap, where a shared fault would mistake them for holes and
//!   fill them with zeroes;
//! - under the shared lock, entries change only by atomic operations on one
//!   entry at a time ([`hal::page_table`]): a fault installs its page if the
//!   entry is still empty, a discard swaps the entry out, so two CPUs never
//!   both own one frame and a table two CPUs create at once is installed
//!   once;
//! - a change releases the lock *before* its shootdown
//!   (`AddressSpace::flush_then_free`): the entries are already out, so
//!   nothing the lock protects is in flux, and the other threads' faults go
//!   on while the IPIs or the TLBSYNC are in flight. Only a copy-on-write
//!   break keeps the shared lock across its flush (its entry is *busy*
//!   meanwhile, and no exclusive holder may find it so), and `fork` keeps
//!   the exclusive lock across its write-protect flush, so that no thread
//!   copies a page while another may still write it through an old
//!   writable translation;
//! - waiters block instead of spinning, so a CPU that waits does not take
//!   the (virtual) CPU that the holder's shootdown waits for.
//!
//! `vm.lock=coarse` ([`crate::vm_lock`]) brings back the old discipline,
//! one exclusive spinning lock held across the shootdown, for comparison.
//!
//! ## Sharing
//!
//! A frame may be mapped by several address spaces: after `fork` every
//! private page is shared *copy-on-write* (both entries read-only, the
//! region still writable; the first write copies, see `vm/fork.rs`), and a
//! `MAP_SHARED` region's pages are shared for good
//! ([`super::shared_memory`]). So step 3 above is a *release* of the
//! entry's reference ([`shared_frames::release`]): the frame is freed when
//! its last one goes. A copy-on-write break replaces a read-only entry by a
//! writable one to a copy, which revokes a translation too: it flushes
//! before it releases, like every other change here.
//!
//! ## Files
//!
//! | file | what it holds |
//! |---|---|
//! | `mod.rs` | [`AddressSpace`], its locks, creation and tear-down, and `flush_then_free`, the last step of every change |
//! | `region.rs` | a region (VMA) and what its protection means in page-table bits |
//! | `regions.rs` | the region table: lookup, splitting, the limits, and the first two steps of a range operation |
//! | `range_ops.rs` | `mmap`, `munmap`, `mprotect`, `madvise(DONTNEED)`: one sequence of steps |
//! | `page_out.rs` | `madvise(PAGEOUT)`: reclaim with one batched flush |
//! | `fault.rs` | page faults and the copy-on-write break |
//! | `settling.rs` | where a fault waits for a busy entry |
//! | `fork.rs` | the child's copy |
//! | `user_copy.rs` | reads and writes of user memory, and the loader's regions |

mod fault;
mod fork;
mod page_out;
mod range_ops;
mod region;
mod regions;
mod settling;
mod user_copy;

use alloc::{collections::BTreeMap, vec::Vec};

use mm::AddressSpaceTlb;
use mm::PageTableRoot;
use smallvec::SmallVec;

use hal::{
    frames::{self, Frame},
    page_table::{OutOfFrames, PageTable},
};

use crate::{
    memory::shared_frames,
    tlb,
    vm_lock::{self, VmLock},
};

use super::{
    shared_memory::{SharedMemory, SwapOut},
    swap,
    sync::{self, ReadGuard, RwLock, Waiting, WriteGuard},
};
use region::Region;
use settling::Settling;

/// The data frames one change takes out of the page tables, to be freed
/// after the flush. Most changes take a few (`madvise(DONTNEED)` of one
/// page, in `tlb_flush2`'s loop, takes one), so they are kept inline up to
/// 8: the heap allocation and free of a `Vec` per call were 6% of a
/// one-thread `tlb_flush2` profile (`finish_grow`, `__rust_dealloc`).
type Frames = SmallVec<[Frame; 8]>;

struct Memory {
    table: PageTable,
    /// Regions by start address; they never overlap.
    regions: BTreeMap<u64, Region>,
}

/// What `fork` does with a new anonymous region's pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sharing {
    /// The child gets its own copy, made on the first write
    /// (`MAP_PRIVATE`).
    Private,
    /// Parent and child keep the same frames (`MAP_SHARED`).
    Shared,
}

/// Where `mmap` puts a new region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Wherever there is room (the address is only a hint, ignored here).
    Anywhere,
    /// Exactly at the address, replacing what was mapped there, as one
    /// step: another thread sees the old page or the new one, never a hole
    /// (`MAP_FIXED`).
    Fixed,
    /// Exactly at the address, or `EEXIST` if anything is mapped there
    /// (`MAP_FIXED_NOREPLACE`; how `brk` grows the heap).
    FixedNoReplace,
}

/// How a page fault was resolved.
#[derive(Debug, PartialEq, Eq)]
pub enum FaultError {
    /// No region covers the address.
    Unmapped,
    /// A region covers it but forbids the access.
    Protection,
    /// No frame for the page (or no heap to record a shared one).
    OutOfMemory,
}

impl From<OutOfFrames> for FaultError {
    fn from(OutOfFrames: OutOfFrames) -> Self {
        Self::OutOfMemory
    }
}

/// What the faulting access was.
#[derive(Clone, Copy, Debug)]
pub struct Access {
    pub write: bool,
    pub execute: bool,
}

/// One process's address space.
pub struct AddressSpace {
    memory: RwLock<Memory>,
    /// Where faults wait for a busy entry to get its new frame.
    settling: Settling,
    /// `mm`'s record of which CPUs may cache this address space.
    pub tlb: AddressSpaceTlb,
}

/// The region table held for a fault, a discard or a kernel copy: shared,
/// or exclusive under `vm.lock=coarse`.
enum MemoryGuard<'a> {
    Shared(ReadGuard<'a, Memory>),
    Exclusive(WriteGuard<'a, Memory>),
}

impl core::ops::Deref for MemoryGuard<'_> {
    type Target = Memory;
    fn deref(&self) -> &Memory {
        match self {
            Self::Shared(guard) => guard,
            Self::Exclusive(guard) => guard,
        }
    }
}

impl AddressSpace {
    /// An empty address space sharing the kernel's upper half.
    pub fn new(kernel_root: PageTableRoot) -> Result<Self, OutOfFrames> {
        let table = PageTable::new(kernel_root)?;
        let tlb = tlb::system().new_address_space(table.root());
        let waiting = match vm_lock::discipline() {
            VmLock::Fine => Waiting::Block,
            VmLock::Coarse => Waiting::Spin,
        };
        Ok(Self {
            memory: RwLock::new(
                Memory {
                    table,
                    regions: BTreeMap::new(),
                },
                waiting,
            ),
            settling: Settling::new(),
            tlb,
        })
    }

    /// The region table for a change of entries only (see the module docs).
    fn shared(&self) -> MemoryGuard<'_> {
        match vm_lock::discipline() {
            VmLock::Fine => MemoryGuard::Shared(self.memory.read()),
            VmLock::Coarse => MemoryGuard::Exclusive(self.memory.write()),
        }
    }

    /// The region table for a change of regions or tables.
    fn exclusive(&self) -> WriteGuard<'_, Memory> {
        self.memory.write()
    }

    /// The last step of every change that revokes translations: flush
    /// `start..end` everywhere (reaching lazy CPUs too if page-table pages
    /// go), then release the data frames `pages` and free the page-table
    /// frames `tables`. `held` is the lock the entries were taken out
    /// under: released before the flush, so that the other threads' faults
    /// and discards go on while it is in flight (or after it, under
    /// `vm.lock=coarse`).
    fn flush_then_free<Held>(
        &self,
        held: Held,
        range: (u64, u64),
        pages: Frames,
        tables: Vec<Frame>,
    ) {
        let (start, end) = range;
        let held = match vm_lock::discipline() {
            VmLock::Fine => {
                drop(held);
                None
            }
            VmLock::Coarse => Some(held),
        };
        tlb::flush_range(&self.tlb, start, end, !tables.is_empty());
        pages.into_iter().for_each(shared_frames::release);
        tables.into_iter().for_each(frames::free);
        drop(held);
    }

    /// Tears the address space down once no thread runs in it: makes the
    /// CPUs that still have it loaded lazily leave it, flushes it
    /// everywhere, gives back the global ASID if it had one, frees every
    /// frame, the page tables' root included. Nothing may use it afterwards.
    pub fn tear_down(&self) {
        tlb::evict(&self.tlb);
        tlb::flush_all(&self.tlb, true);
        tlb::system().release_address_space(&self.tlb);
        let mut memory = self.exclusive();
        memory.regions.clear();
        let cleared = memory.table.destroy();
        cleared.pages.into_iter().for_each(shared_frames::release);
        cleared.tables.into_iter().for_each(frames::free);
        cleared.slots.into_iter().for_each(swap::discard);
    }
}
