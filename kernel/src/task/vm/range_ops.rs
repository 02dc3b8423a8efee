//! The system calls that change a range of an address space: `mmap`,
//! `munmap`, `mprotect` and `madvise(DONTNEED)` (and `madvise(PAGEOUT)`,
//! in `page_out.rs`).
//!
//! Each is the same sequence, with the steps it needs:
//!
//! 1. check the range and take the address-space lock, exclusive
//!    ([`AddressSpace::lock_range`], which also refuses holes where the call
//!    wants the range mapped throughout; `madvise(DONTNEED)` changes no
//!    region and takes it shared);
//! 2. split the regions at both ends, after checking that the region table
//!    has room for the result, so that a refused call changes nothing
//!    ([`Memory::cut_out`]), and remove or change the regions inside;
//! 3. take the page-table entries out ([`Memory::unmap_pages`]);
//! 4. release the lock, flush, then free
//!    ([`AddressSpace::flush_then_free`]): the order the module docs of `vm`
//!    explain.

use alloc::vec::Vec;

use abi::{Errno, PAGE_SIZE, Prot};
use hal::page_table::Leaf;
use x86_64::structures::paging::PageTableFlags;

use super::{
    AddressSpace, Frames, Memory, Placement, SharedMemory, Sharing,
    region::{Region, SharedPages, entry_flags},
    regions::{Holes, Inside, MAX_REGION, user_range},
    swap,
};
use crate::memory::shared_frames;

impl Memory {
    /// Removes the page-table entries of `[start, end)`: swap slots are freed
    /// at once, frames are returned for release after the TLB flush. Each
    /// entry is taken by an atomic swap, so of two CPUs emptying the same
    /// page only one gets its frame. A busy entry (a copy-on-write break
    /// under way) is emptied too; its breaker then finds it gone and keeps
    /// the page empty.
    pub(super) fn unmap_pages(&self, start: u64, end: u64) -> Frames {
        let mut frames = Frames::new();
        for va in self.table.used_pages(start, end) {
            match self.table.take(va) {
                Leaf::Present { frame, .. } => frames.push(frame),
                Leaf::Swapped { slot } => swap::discard(slot),
                Leaf::Empty | Leaf::Busy => {}
            }
        }
        frames
    }

    /// The entry flags for a page at `va` with `prot`: those of `prot`,
    /// except that a private page whose frame is still shared stays
    /// read-only, so that its first write copies it.
    pub(super) fn page_flags(&self, va: u64, prot: Prot, private: bool) -> PageTableFlags {
        let flags = entry_flags(prot);
        match self.table.leaf(va) {
            Leaf::Present { frame, .. } if private && shared_frames::is_shared(frame) => {
                flags - PageTableFlags::WRITABLE
            }
            _ => flags,
        }
    }
}

impl AddressSpace {
    /// `mmap(MAP_ANONYMOUS)`: a new region of `len` bytes with `prot`,
    /// private to this process (copy-on-write across `fork`) or shared with
    /// the children `fork` makes from now on, placed as `placement` says.
    /// Returns where it is.
    pub fn map_anonymous(
        &self,
        addr: u64,
        len: u64,
        prot: Prot,
        placement: Placement,
        sharing: Sharing,
    ) -> Result<u64, Errno> {
        let region = |end| Region {
            end,
            prot,
            shared: (sharing == Sharing::Shared).then(|| SharedPages {
                memory: SharedMemory::new(),
                first_page: 0,
            }),
        };
        let rounded = len
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or(Errno::Inval)?;
        if placement == Placement::Anywhere {
            if rounded == 0 || rounded > MAX_REGION {
                return Err(Errno::Inval);
            }
            let mut memory = self.exclusive();
            memory.room_for_regions(memory.regions.len() + 1)?;
            let start = memory.find_gap(rounded).ok_or(Errno::NoMem)?;
            memory.regions.insert(start, region(start + rounded));
            return Ok(start);
        }
        let (end, mut memory) = self.lock_range(addr, rounded, Holes::Allowed)?;
        if placement == Placement::FixedNoReplace && memory.overlaps(addr, end) {
            return Err(Errno::Exist);
        }
        memory.cut_out(addr, end, Inside::Go, 1)?;
        let replaced = memory.unmap_pages(addr, end);
        memory.regions.insert(addr, region(end));
        if !replaced.is_empty() {
            self.flush_then_free(memory, (addr, end), replaced, Vec::new());
        }
        Ok(addr)
    }

    /// `munmap`: removes every mapping in the range (holes are fine) and the
    /// page-table pages that no longer map anything.
    pub fn unmap(&self, start: u64, len: u64) -> Result<(), Errno> {
        let (end, mut memory) = self.lock_range(start, len, Holes::Allowed)?;
        memory.cut_out(start, end, Inside::Go, 0)?;
        let pages = memory.unmap_pages(start, end);
        // Page-table pages left empty go too; lazy CPUs must then be flushed
        // as well, since they may still walk the freed tables.
        let tables = memory.table.prune(start, end);
        self.flush_then_free(memory, (start, end), pages, tables);
        Ok(())
    }

    /// `mprotect`: changes the protection of every page in the range, which
    /// must be mapped without holes.
    pub fn protect(&self, start: u64, len: u64, new_prot: Prot) -> Result<(), Errno> {
        let (end, mut memory) = self.lock_range(start, len, Holes::Refused)?;
        for region_start in memory.cut_out(start, end, Inside::Stay, 0)? {
            let Some(region) = memory.regions.get_mut(&region_start) else {
                continue;
            };
            region.prot = new_prot;
            let (region_end, private) = (region.end, region.shared.is_none());
            for va in memory.table.used_pages(region_start, region_end) {
                let flags = memory.page_flags(va, new_prot, private);
                memory.table.protect(va, flags);
            }
        }
        self.flush_then_free(memory, (start, end), Frames::new(), Vec::new());
        Ok(())
    }

    /// `madvise(DONTNEED)`: drops the pages; the regions stay and the next
    /// touch sees zeroes. It changes entries only, so it holds the region
    /// table shared, beside other threads' faults and discards.
    pub fn discard(&self, start: u64, len: u64) -> Result<(), Errno> {
        let end = user_range(start, len)?;
        let memory = self.shared();
        if !memory.covers(start, end) {
            return Err(Errno::NoMem);
        }
        let pages = memory.unmap_pages(start, end);
        self.flush_then_free(memory, (start, end), pages, Vec::new());
        Ok(())
    }
}
