//! Page faults: demand-zero pages, pages back from swap, a shared region's
//! pages, and the copy-on-write break (which revokes a translation, so it
//! flushes before it lets go of the shared frame).
//!
//! A fault holds the region table shared, so faults of other threads run
//! beside it: each step that changes an entry is one compare-exchange that
//! succeeds only if the entry still holds what the fault saw, and a fault
//! that loses such a race gives back what it prepared and looks again.

use abi::PAGE_SIZE;
use hal::{
    frames::{self, Frame},
    page_table::{Leaf, OutOfFrames},
    phys,
};
use x86_64::structures::paging::PageTableFlags;

use super::{
    Access, AddressSpace, FaultError, Memory,
    region::{Region, entry_flags, permits},
    swap,
};
use crate::{
    memory::shared_frames,
    tlb,
    vm_bug::{self, VmBug},
};

/// What one attempt at resolving a fault came to.
pub(super) enum Resolution {
    /// The page is mapped to this frame, allowing the access.
    Mapped(Frame),
    /// Another CPU changed the entry meanwhile: look again.
    Raced,
    /// The entry is busy (a copy-on-write break under way): wait for it,
    /// from this mark on, then look again.
    Busy { mark: u64 },
    /// The page is in swap: bring it back under the exclusive lock.
    Swapped,
}

impl AddressSpace {
    /// One attempt at giving `page` (in `region`, which starts at
    /// `region_start` and allows `access`) the frame the access needs: the
    /// one mapped, unless a write must break copy-on-write first; the
    /// shared region's page; or a fresh zeroed one (demand paging).
    pub(super) fn resolve(
        &self,
        memory: &Memory,
        page: u64,
        (region_start, region): (u64, Region),
        access: Access,
    ) -> Result<Resolution, OutOfFrames> {
        let flags = entry_flags(region.prot);
        // Before the entry is read: a busy entry that settles after the read
        // moves the count past this mark, so a wait on it cannot miss that.
        let mark = self.settling.mark();
        match memory.table.leaf(page) {
            Leaf::Present { frame, writable } => {
                if access.write && !writable && region.shared.is_none() {
                    self.break_copy_on_write(memory, page, frame, flags)
                } else {
                    // Already there: another thread of the process resolved
                    // the fault first.
                    Ok(Resolution::Mapped(frame))
                }
            }
            Leaf::Swapped { .. } => Ok(Resolution::Swapped),
            Leaf::Busy if vm_bug::is_on(VmBug::FillBusyEntry) => {
                let frame = frames::allocate().ok_or(OutOfFrames)?;
                phys::zero_frame(frame);
                memory.table.map(page, frame, flags)?;
                Ok(Resolution::Mapped(frame))
            }
            Leaf::Busy => Ok(Resolution::Busy { mark }),
            Leaf::Empty => {
                let frame = match &region.shared {
                    Some(pages) => pages
                        .memory
                        .map_page(pages.first_page + (page - region_start) / PAGE_SIZE)?,
                    None => {
                        let frame = frames::allocate().ok_or(OutOfFrames)?;
                        phys::zero_frame(frame);
                        frame
                    }
                };
                match memory.table.install(page, Leaf::Empty, frame, flags) {
                    Ok(true) => Ok(Resolution::Mapped(frame)),
                    result => {
                        // Never mapped, so no TLB can hold it.
                        shared_frames::release(frame);
                        result.map(|_| Resolution::Raced)
                    }
                }
            }
        }
    }

    /// A write to `page`, mapped read-only to `frame` in a writable private
    /// region: gives the page a frame of its own, mapped with `flags`.
    ///
    /// If no other mapping refers to `frame` any more (the other side of the
    /// fork wrote or left first), this one takes it over: the entry becomes
    /// writable, which revokes nothing. Otherwise the page gets a copy, and
    /// the read-only translation to `frame` must leave every TLB before the
    /// copy is mapped and before this mapping's reference to `frame` goes: a
    /// thread that kept reading the old frame would miss every write made to
    /// the copy (what Dolan's reproducer of CVE-2025-37964 detects). So the
    /// entry is busy from the moment `frame` is out until the copy is in,
    /// and the shared lock is held across the flush (no exclusive holder
    /// ever finds a busy entry).
    fn break_copy_on_write(
        &self,
        memory: &Memory,
        page: u64,
        frame: Frame,
        flags: PageTableFlags,
    ) -> Result<Resolution, OutOfFrames> {
        let seen = Leaf::Present {
            frame,
            writable: false,
        };
        if !shared_frames::is_shared(frame) {
            let taken_over = memory.table.install(page, seen, frame, flags)?;
            return Ok(if taken_over {
                Resolution::Mapped(frame)
            } else {
                Resolution::Raced
            });
        }
        let copy = frames::allocate().ok_or(OutOfFrames)?;
        phys::copy_frame(frame, copy);
        if !memory.table.mark_busy(page, seen) {
            frames::free(copy);
            return Ok(Resolution::Raced);
        }
        tlb::flush_range(&self.tlb, page, page + PAGE_SIZE, false);
        let mapped = memory
            .table
            .install(page, Leaf::Busy, copy, flags)
            .expect("a busy entry's table stays");
        self.settling.settle();
        shared_frames::release(frame);
        if mapped {
            Ok(Resolution::Mapped(copy))
        } else {
            // A discard emptied the busy entry: the page is gone, and the
            // copy was never mapped.
            frames::free(copy);
            Ok(Resolution::Raced)
        }
    }

    /// Brings `page` back from swap, under the exclusive lock (its slot must
    /// be read and freed by one CPU only); a page another CPU brought back
    /// or discarded meanwhile is left as it is.
    pub(super) fn swap_in(&self, page: u64, flags: PageTableFlags) -> Result<(), OutOfFrames> {
        let memory = self.exclusive();
        let Leaf::Swapped { slot } = memory.table.leaf(page) else {
            return Ok(());
        };
        let frame = frames::allocate().ok_or(OutOfFrames)?;
        memory.table.take(page);
        phys::write_frame(frame, 0, &swap::take(slot)[..]);
        memory.table.map(page, frame, flags)
    }

    /// Resolves a page fault at `va`: gives the page a frame (or one of its
    /// own, for a write to a copy-on-write page) if a region allows the
    /// access, else says why not.
    pub fn handle_fault(&self, va: u64, access: Access) -> Result<(), FaultError> {
        let page = va & !(PAGE_SIZE - 1);
        loop {
            let memory = self.shared();
            let found = memory.region_at(page).ok_or(FaultError::Unmapped)?;
            if !permits(found.1.prot, access) {
                return Err(FaultError::Protection);
            }
            let flags = entry_flags(found.1.prot);
            match self.resolve(&memory, page, found, access)? {
                Resolution::Mapped(_) => return Ok(()),
                Resolution::Raced => {}
                Resolution::Busy { mark } => {
                    drop(memory);
                    self.settling.wait(mark);
                }
                Resolution::Swapped => {
                    drop(memory);
                    self.swap_in(page, flags)?;
                }
            }
        }
    }
}
