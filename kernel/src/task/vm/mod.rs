//! A process's memory: its regions (VMAs), page tables and TLB context.
//!
//! Regions record what the program asked for (`mmap`, the program image, the
//! stacks); page-table entries appear only when a page is first touched
//! (demand-zero) or loaded. Every change that removes or weakens a mapping
//! follows the order that makes TLB shootdown correct:
//!
//! 1. change the page tables (under the address-space lock);
//! 2. flush, through `mm`, every CPU that may cache the old translation;
//! 3. only then free the frames that the old entries pointed to.
//!
//! Freeing before the flush returns would let a thread on another CPU keep
//! reading (or writing!) a frame that already belongs to someone else.
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
//! | `mod.rs` | [`AddressSpace`], its creation and tear-down, and `flush_then_free`, the last step of every change |
//! | `region.rs` | a region (VMA) and what its protection means in page-table bits |
//! | `regions.rs` | the region table: lookup, splitting, the limits, and the first two steps of a range operation |
//! | `range_ops.rs` | `mmap`, `munmap`, `mprotect`, `madvise(DONTNEED)`: one sequence of steps |
//! | `page_out.rs` | `madvise(PAGEOUT)`: reclaim with one batched flush |
//! | `fault.rs` | page faults and the copy-on-write break |
//! | `fork.rs` | the child's copy |
//! | `user_copy.rs` | reads and writes of user memory, and the loader's regions |

mod fault;
mod fork;
mod page_out;
mod range_ops;
mod region;
mod regions;
mod user_copy;

use alloc::{collections::BTreeMap, vec::Vec};

use mm::AddressSpaceTlb;
use mm::PageTableRoot;
use smallvec::SmallVec;
use spin::Mutex;

use hal::{
    frames::{self, Frame},
    page_table::{OutOfFrames, PageTable},
};

use crate::{memory::shared_frames, tlb};

use super::{
    shared_memory::{SharedMemory, SwapOut},
    swap,
};
use region::Region;

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
    memory: Mutex<Memory>,
    /// `mm`'s record of which CPUs may cache this address space.
    pub tlb: AddressSpaceTlb,
}

impl AddressSpace {
    /// An empty address space sharing the kernel's upper half.
    pub fn new(kernel_root: PageTableRoot) -> Result<Self, OutOfFrames> {
        let table = PageTable::new(kernel_root)?;
        let tlb = tlb::system().new_address_space(table.root());
        Ok(Self {
            memory: Mutex::new(Memory {
                table,
                regions: BTreeMap::new(),
            }),
            tlb,
        })
    }

    /// The last step of every change that revokes translations: flush `start..end`
    /// everywhere (reaching lazy CPUs too if page-table pages go), then
    /// release the data frames `pages` and free the page-table frames
    /// `tables`.
    fn flush_then_free(&self, start: u64, end: u64, pages: Frames, tables: Vec<Frame>) {
        tlb::flush_range(&self.tlb, start, end, !tables.is_empty());
        pages.into_iter().for_each(shared_frames::release);
        tables.into_iter().for_each(frames::free);
    }

    /// Tears the address space down once no thread runs in it: makes the
    /// CPUs that still have it loaded lazily leave it, flushes it
    /// everywhere, gives back the global ASID if it had one, frees every
    /// frame, the page tables' root included. Nothing may use it afterwards.
    pub fn tear_down(&self) {
        tlb::evict(&self.tlb);
        tlb::flush_all(&self.tlb, true);
        tlb::system().release_address_space(&self.tlb);
        let mut memory = self.memory.lock();
        memory.regions.clear();
        let cleared = memory.table.destroy();
        cleared.pages.into_iter().for_each(shared_frames::release);
        cleared.tables.into_iter().for_each(frames::free);
        cleared.slots.into_iter().for_each(swap::discard);
    }
}
