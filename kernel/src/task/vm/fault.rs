//! Page faults: demand-zero pages, pages back from swap, a shared region's
//! pages, and the copy-on-write break (which revokes a translation, so it
//! flushes before it lets go of the shared frame).

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
use crate::{memory::shared_frames, tlb};

impl AddressSpace {
    /// The frame backing `page` (in `region`, which starts at
    /// `region_start` and allows `access`): the one mapped, unless a write
    /// must break copy-on-write first; brought back from swap; the shared
    /// region's page; or a fresh zeroed one (demand paging).
    pub(super) fn resolve(
        &self,
        memory: &mut Memory,
        page: u64,
        (region_start, region): (u64, Region),
        access: Access,
    ) -> Result<Frame, OutOfFrames> {
        let flags = entry_flags(region.prot);
        match memory.table.leaf(page) {
            Leaf::Present { frame, writable } => {
                if access.write && !writable && region.shared.is_none() {
                    self.break_copy_on_write(memory, page, frame, flags)
                } else {
                    // Already there: another thread of the process resolved
                    // the fault first.
                    Ok(frame)
                }
            }
            Leaf::Swapped { slot } => {
                let frame = frames::allocate().ok_or(OutOfFrames)?;
                memory.table.take(page);
                phys::write_frame(frame, 0, &swap::take(slot)[..]);
                memory.table.map(page, frame, flags)?;
                Ok(frame)
            }
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
                if let Err(error) = memory.table.map(page, frame, flags) {
                    // Never mapped, so no TLB can hold it.
                    shared_frames::release(frame);
                    return Err(error);
                }
                Ok(frame)
            }
        }
    }

    /// A write to `page`, mapped read-only to `frame` in a writable private
    /// region: gives the page a frame of its own, mapped with `flags`.
    ///
    /// If no other mapping refers to `frame` any more (the other side of the
    /// fork wrote or left first), this one takes it over: the entry becomes
    /// writable, which revokes nothing. Otherwise the page gets a copy, and
    /// the read-only translation to `frame` must leave every TLB before this
    /// mapping's reference to it goes: a thread that kept reading the old
    /// frame would miss every write made to the copy from now on (what
    /// Dolan's reproducer of CVE-2025-37964 detects).
    fn break_copy_on_write(
        &self,
        memory: &mut Memory,
        page: u64,
        frame: Frame,
        flags: PageTableFlags,
    ) -> Result<Frame, OutOfFrames> {
        if !shared_frames::is_shared(frame) {
            memory.table.protect(page, flags);
            return Ok(frame);
        }
        let copy = frames::allocate().ok_or(OutOfFrames)?;
        phys::copy_frame(frame, copy);
        memory.table.take(page);
        memory
            .table
            .map(page, copy, flags)
            .expect("the entry's table exists");
        tlb::flush_range(&self.tlb, page, page + PAGE_SIZE, false);
        shared_frames::release(frame);
        Ok(copy)
    }

    /// Resolves a page fault at `va`: gives the page a frame (or one of its
    /// own, for a write to a copy-on-write page) if a region allows the
    /// access, else says why not.
    pub fn handle_fault(&self, va: u64, access: Access) -> Result<(), FaultError> {
        let page = va & !(PAGE_SIZE - 1);
        let mut memory = self.memory.lock();
        let found = memory.region_at(page).ok_or(FaultError::Unmapped)?;
        if !permits(found.1.prot, access) {
            return Err(FaultError::Protection);
        }
        self.resolve(&mut memory, page, found, access)?;
        Ok(())
    }
}
