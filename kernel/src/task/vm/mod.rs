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

use alloc::{collections::BTreeMap, vec::Vec};

use abi::{Errno, PAGE_SIZE, Prot, USER_END};
use mm::AddressSpaceTlb;
use smallvec::SmallVec;
use spin::Mutex;
use x86_64::PhysAddr;

use hal::phys;
use hal::{
    frames::{self, Frame},
    page_table::{Leaf, OutOfFrames, PageTable},
};
use x86_64::structures::paging::PageTableFlags;

use crate::{memory::heap, tlb};

use super::swap;

/// The data frames one change takes out of the page tables, to be freed
/// after the flush. Most changes take a few (`madvise(DONTNEED)` of one
/// page, in `tlb_flush2`'s loop, takes one), so they are kept inline up to
/// 8: the heap allocation and free of a `Vec` per call were 6% of a
/// one-thread `tlb_flush2` profile (`finish_grow`, `__rust_dealloc`).
type Frames = SmallVec<[Frame; 8]>;

/// Where `mmap` without a fixed address starts looking.
const MMAP_BASE: u64 = 0x1000_0000_0000;
/// The largest single region a program may ask for.
const MAX_REGION: u64 = 1 << 40;
/// What one region record may cost on the heap (its share of a B-tree
/// node), for the heap budget.
const REGION_RECORD_BYTES: usize = 64;

/// A mapped region: `[start, end)` with protection `prot`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Region {
    end: u64,
    prot: Prot,
}

struct Memory {
    table: PageTable,
    /// Regions by start address; they never overlap.
    regions: BTreeMap<u64, Region>,
}

/// How a page fault was resolved.
#[derive(Debug, PartialEq, Eq)]
pub enum FaultError {
    /// No region covers the address.
    Unmapped,
    /// A region covers it but forbids the access.
    Protection,
    /// No frame for the page.
    OutOfMemory,
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

/// Page-table flags for `prot`. x86 cannot express write-only or
/// execute-only pages, so any access right makes the page readable; with no
/// right at all (`PROT_NONE`) the entry keeps its frame but loses the USER
/// bit, so ring 3 faults on it and the contents survive for a later
/// `mprotect`.
fn entry_flags(prot: Prot) -> PageTableFlags {
    let mut flags = if prot == Prot::NONE {
        PageTableFlags::empty()
    } else {
        PageTableFlags::USER_ACCESSIBLE
    };
    if prot.contains(Prot::WRITE) {
        flags |= PageTableFlags::WRITABLE;
    }
    if !prot.contains(Prot::EXEC) {
        flags |= PageTableFlags::NO_EXECUTE;
    }
    flags
}

/// Whether a region with `prot` allows `access` (see [`entry_flags`] for why
/// any right implies reading).
fn permits(prot: Prot, access: Access) -> bool {
    prot != Prot::NONE
        && (!access.write || prot.contains(Prot::WRITE))
        && (!access.execute || prot.contains(Prot::EXEC))
}

fn is_page_aligned(value: u64) -> bool {
    value.is_multiple_of(PAGE_SIZE)
}

/// Checks `[start, start+len)`: page-aligned start, non-zero length that
/// rounds up to pages without overflow, entirely in user space. Returns the
/// page-rounded end.
fn user_range(start: u64, len: u64) -> Result<u64, Errno> {
    if !is_page_aligned(start) || len == 0 || len > MAX_REGION {
        return Err(Errno::Inval);
    }
    let end = start
        .checked_add(len)
        .and_then(|end| end.checked_next_multiple_of(PAGE_SIZE))
        .ok_or(Errno::Inval)?;
    if start < PAGE_SIZE || end > USER_END {
        return Err(Errno::Inval);
    }
    Ok(end)
}

impl Memory {
    /// Whether the table may grow to `count` regions: within
    /// [`abi::MAX_REGIONS`] and, for the records added, the heap budget.
    /// Checked before a change, so that a refused call changes nothing.
    fn room_for_regions(&self, count: usize) -> Result<(), Errno> {
        let growth = count.saturating_sub(self.regions.len());
        if growth == 0 {
            return Ok(());
        }
        if count > abi::MAX_REGIONS {
            return Err(Errno::NoMem);
        }
        heap::check_budget(growth * REGION_RECORD_BYTES)
    }

    /// What a change to `[start, end)` does to the region count: how many
    /// regions it splits (one for each end that falls inside a region) and
    /// how many regions lie inside it once split.
    fn cut(&self, start: u64, end: u64) -> (usize, usize) {
        let splits = [start, end]
            .into_iter()
            .filter(|&at| {
                self.region_at(at)
                    .is_some_and(|(region_start, _)| region_start != at)
            })
            .count();
        let inside = self
            .regions
            .range(..end)
            .rev()
            .take_while(|(_, region)| region.end > start)
            .count();
        (splits, inside)
    }

    /// The region containing `va`.
    fn region_at(&self, va: u64) -> Option<(u64, Region)> {
        let (&start, &region) = self.regions.range(..=va).next_back()?;
        (va < region.end).then_some((start, region))
    }

    fn overlaps(&self, start: u64, end: u64) -> bool {
        self.regions
            .range(..end)
            .next_back()
            .is_some_and(|(_, region)| region.end > start)
    }

    /// A free gap of `len` bytes at or above `MMAP_BASE`.
    fn find_gap(&self, len: u64) -> Option<u64> {
        let mut candidate = MMAP_BASE;
        for (&start, region) in self.regions.range(MMAP_BASE..) {
            if start >= candidate.checked_add(len)? {
                break;
            }
            candidate = candidate.max(region.end);
        }
        (candidate.checked_add(len)? <= USER_END).then_some(candidate)
    }

    /// Splits regions so that `at` is a region boundary.
    fn split_at(&mut self, at: u64) {
        if let Some((start, region)) = self.region_at(at)
            && start != at
        {
            self.regions.insert(
                start,
                Region {
                    end: at,
                    prot: region.prot,
                },
            );
            self.regions.insert(at, region);
        }
    }

    /// The region starts inside `[start, end)` after splitting at both ends.
    fn isolate(&mut self, start: u64, end: u64) -> Vec<u64> {
        self.split_at(start);
        self.split_at(end);
        self.regions
            .range(start..end)
            .map(|(&start, _)| start)
            .collect()
    }

    /// Whether regions cover all of `[start, end)`.
    fn covers(&self, start: u64, end: u64) -> bool {
        let mut covered = start;
        while covered < end {
            match self.region_at(covered) {
                Some((_, region)) => covered = region.end,
                None => return false,
            }
        }
        true
    }

    /// Removes the page-table entries of `[start, end)`: swap slots are freed
    /// at once, frames are returned for freeing after the TLB flush.
    fn unmap_pages(&mut self, start: u64, end: u64) -> Frames {
        let mut frames = Frames::new();
        for va in self.table.used_pages(start, end) {
            match self.table.take(va) {
                Leaf::Present { frame, .. } => frames.push(frame),
                Leaf::Swapped { slot } => swap::discard(slot),
                Leaf::Empty => {}
            }
        }
        frames
    }

    /// The frame backing `va` in a region with `prot`: already there,
    /// brought back from swap, or a fresh zeroed one (demand paging).
    fn resident_frame(&mut self, va: u64, prot: Prot) -> Result<Frame, OutOfFrames> {
        match self.table.leaf(va) {
            Leaf::Present { frame, .. } => Ok(frame),
            Leaf::Empty => self.populate(va, prot),
            Leaf::Swapped { slot } => {
                let frame = frames::allocate().ok_or(OutOfFrames)?;
                self.table.take(va);
                phys::write_frame(frame, 0, &swap::take(slot)[..]);
                self.table.map(va, frame, entry_flags(prot))?;
                Ok(frame)
            }
        }
    }

    /// Maps a fresh zeroed frame at `va`.
    fn populate(&mut self, va: u64, prot: Prot) -> Result<Frame, OutOfFrames> {
        let frame = frames::allocate().ok_or(OutOfFrames)?;
        phys::zero_frame(frame);
        if let Err(error) = self.table.map(va, frame, entry_flags(prot)) {
            frames::free(frame);
            return Err(error);
        }
        Ok(frame)
    }
}

impl AddressSpace {
    /// An empty address space sharing the kernel's upper half.
    pub fn new(kernel_root: PhysAddr) -> Result<Self, OutOfFrames> {
        let table = PageTable::new(kernel_root)?;
        let tlb = tlb::system().new_address_space(table.root().as_u64());
        Ok(Self {
            memory: Mutex::new(Memory {
                table,
                regions: BTreeMap::new(),
            }),
            tlb,
        })
    }

    /// `mmap`: a new anonymous region of `len` bytes with `prot`. With
    /// `fixed`, exactly at `addr`, replacing whatever was mapped there (as
    /// one step: another thread sees the old page or the new one, never a
    /// hole); otherwise wherever there is room.
    pub fn map_anonymous(
        &self,
        addr: u64,
        len: u64,
        prot: Prot,
        fixed: bool,
    ) -> Result<u64, Errno> {
        let rounded = len
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or(Errno::Inval)?;
        let mut memory = self.memory.lock();
        if !fixed {
            if rounded == 0 || rounded > MAX_REGION {
                return Err(Errno::Inval);
            }
            memory.room_for_regions(memory.regions.len() + 1)?;
            let start = memory.find_gap(rounded).ok_or(Errno::NoMem)?;
            memory.regions.insert(
                start,
                Region {
                    end: start + rounded,
                    prot,
                },
            );
            return Ok(start);
        }
        let end = user_range(addr, rounded)?;
        // The regions inside go, one new region comes.
        let (splits, inside) = memory.cut(addr, end);
        memory.room_for_regions(memory.regions.len() + splits - inside + 1)?;
        for region_start in memory.isolate(addr, end) {
            memory.regions.remove(&region_start);
        }
        let replaced = memory.unmap_pages(addr, end);
        memory.regions.insert(addr, Region { end, prot });
        if !replaced.is_empty() {
            self.flush_then_free(addr, end, replaced, Vec::new());
        }
        Ok(addr)
    }

    /// `munmap`: removes every mapping in the range (holes are fine) and the
    /// page-table pages that no longer map anything.
    pub fn unmap(&self, start: u64, len: u64) -> Result<(), Errno> {
        let end = user_range(start, len)?;
        let mut memory = self.memory.lock();
        // Unmapping the middle of a region leaves two where there was one.
        let (splits, inside) = memory.cut(start, end);
        memory.room_for_regions(memory.regions.len() + splits - inside)?;
        for region_start in memory.isolate(start, end) {
            memory.regions.remove(&region_start);
        }
        let pages = memory.unmap_pages(start, end);
        // Page-table pages left empty go too; lazy CPUs must then be flushed
        // as well, since they may still walk the freed tables.
        let tables = memory.table.prune(start, end);
        self.flush_then_free(start, end, pages, tables);
        Ok(())
    }

    /// `mprotect`: changes the protection of every page in the range, which
    /// must be mapped without holes.
    pub fn protect(&self, start: u64, len: u64, new_prot: Prot) -> Result<(), Errno> {
        let end = user_range(start, len)?;
        let mut memory = self.memory.lock();
        if !memory.covers(start, end) {
            return Err(Errno::NoMem);
        }
        // The pieces inside stay, with the new protection.
        let (splits, _) = memory.cut(start, end);
        memory.room_for_regions(memory.regions.len() + splits)?;
        for region_start in memory.isolate(start, end) {
            if let Some(region) = memory.regions.get_mut(&region_start) {
                region.prot = new_prot;
            }
        }
        let flags = entry_flags(new_prot);
        for va in memory.table.used_pages(start, end) {
            memory.table.protect(va, flags);
        }
        self.flush_then_free(start, end, Frames::new(), Vec::new());
        Ok(())
    }

    /// `madvise(DONTNEED)`: drops the pages; the regions stay and the next
    /// touch sees zeroes.
    pub fn discard(&self, start: u64, len: u64) -> Result<(), Errno> {
        let end = user_range(start, len)?;
        let mut memory = self.memory.lock();
        if !memory.covers(start, end) {
            return Err(Errno::NoMem);
        }
        let pages = memory.unmap_pages(start, end);
        self.flush_then_free(start, end, pages, Vec::new());
        Ok(())
    }

    /// `madvise(PAGEOUT)`: moves the resident pages of the range to swap.
    ///
    /// All entries are cleared first and flushed with **one** deferred batch
    /// flush (unless `tlb.batch=off`); only then are the contents copied (a
    /// CPU writing through a stale translation could otherwise change a page
    /// after its copy) and the frames freed.
    ///
    /// When swap is full (or the heap budget has no room for a slot's
    /// contents), the pages that found no slot are mapped back, resident and
    /// intact, and the call reports `NoSpc`; the pages that did go to swap
    /// stay there. Nothing is lost either way.
    pub fn page_out(&self, start: u64, len: u64) -> Result<(), Errno> {
        let end = user_range(start, len)?;
        let mut memory = self.memory.lock();
        if !memory.covers(start, end) {
            return Err(Errno::NoMem);
        }
        let mut taken = Vec::new();
        for va in memory.table.used_pages(start, end) {
            match memory.table.take(va) {
                Leaf::Present { frame, .. } => taken.push((va, frame)),
                // The entry's table exists (it was just read), so putting it
                // back needs no memory.
                Leaf::Swapped { slot } => memory
                    .table
                    .set_swapped(va, slot)
                    .expect("existing page table"),
                Leaf::Empty => {}
            }
        }
        if taken.is_empty() {
            return Ok(());
        }
        let pages: Vec<u64> = taken.iter().map(|&(va, _)| va).collect();
        tlb::flush_reclaimed(&self.tlb, &pages);
        let mut swap_full = false;
        for (va, frame) in taken {
            let prot = memory
                .region_at(va)
                .map_or(Prot::NONE, |(_, region)| region.prot);
            match swap::store(|page| phys::read_frame(frame, 0, page)) {
                Some(slot) => {
                    memory
                        .table
                        .set_swapped(va, slot)
                        .expect("existing page table");
                    frames::free(frame);
                }
                None => {
                    swap_full = true;
                    memory
                        .table
                        .map(va, frame, entry_flags(prot))
                        .expect("existing page table");
                }
            }
        }
        if swap_full { Err(Errno::NoSpc) } else { Ok(()) }
    }

    /// The end of every change that revokes translations: flush `start..end`
    /// everywhere (reaching lazy CPUs too if page-table pages go), then free
    /// the data frames `pages` and page-table frames `tables`.
    fn flush_then_free(&self, start: u64, end: u64, pages: Frames, tables: Vec<Frame>) {
        tlb::flush_range(&self.tlb, start, end, !tables.is_empty());
        pages.into_iter().chain(tables).for_each(frames::free);
    }

    /// Resolves a page fault at `va`: maps a zeroed page if a region allows
    /// the access, else says why not.
    pub fn handle_fault(&self, va: u64, access: Access) -> Result<(), FaultError> {
        let page = va & !(PAGE_SIZE - 1);
        let mut memory = self.memory.lock();
        let (_, region) = memory.region_at(page).ok_or(FaultError::Unmapped)?;
        if !permits(region.prot, access) {
            return Err(FaultError::Protection);
        }
        // Already present means another thread of the process resolved it
        // first; swapped means swap it in; empty means demand-zero.
        memory
            .resident_frame(page, region.prot)
            .map(|_| ())
            .map_err(|OutOfFrames| FaultError::OutOfMemory)
    }

    /// Visits each page of `[va, va+len)` with the frame backing it (faulting
    /// it in if needed), checking the access against the regions.
    fn for_each_page(
        &self,
        va: u64,
        len: usize,
        access: Access,
        mut visit: impl FnMut(Frame, usize, core::ops::Range<usize>),
    ) -> Result<(), Errno> {
        let end = va
            .checked_add(len as u64)
            .filter(|&end| end <= USER_END)
            .ok_or(Errno::Fault)?;
        let mut memory = self.memory.lock();
        let mut cursor = va;
        while cursor < end {
            let page = cursor & !(PAGE_SIZE - 1);
            let (_, region) = memory.region_at(page).ok_or(Errno::Fault)?;
            if !permits(region.prot, access) {
                return Err(Errno::Fault);
            }
            let frame = memory
                .resident_frame(page, region.prot)
                .map_err(|OutOfFrames| Errno::NoMem)?;
            let chunk_end = end.min(page + PAGE_SIZE);
            let done = (cursor - va) as usize;
            visit(
                frame,
                (cursor - page) as usize,
                done..done + (chunk_end - cursor) as usize,
            );
            cursor = chunk_end;
        }
        Ok(())
    }

    /// Copies `len` bytes of user memory at `va` into the kernel (a buffer
    /// from the programs' heap budget).
    pub fn copy_in(&self, va: u64, len: usize) -> Result<Vec<u8>, Errno> {
        let mut buffer = heap::try_zeroed_vec::<u8>(len)?;
        self.for_each_page(
            va,
            len,
            Access {
                write: false,
                execute: false,
            },
            |frame, offset, range| {
                phys::read_frame(frame, offset, &mut buffer[range]);
            },
        )?;
        Ok(buffer)
    }

    /// Copies `data` into user memory at `va`.
    pub fn copy_out(&self, va: u64, data: &[u8]) -> Result<(), Errno> {
        self.for_each_page(
            va,
            data.len(),
            Access {
                write: true,
                execute: false,
            },
            |frame, offset, range| {
                phys::write_frame(frame, offset, &data[range]);
            },
        )
    }

    /// Creates a region at a fixed, free address and fills it with
    /// `contents` (zero beyond), for the program loader. The pages are mapped writable
    /// while loading and get `prot` at the end.
    pub fn load_region(
        &self,
        start: u64,
        len: u64,
        prot: Prot,
        contents: &[u8],
    ) -> Result<(), Errno> {
        let end = user_range(start, len)?;
        {
            let mut memory = self.memory.lock();
            if memory.overlaps(start, end) {
                return Err(Errno::Inval);
            }
            memory.room_for_regions(memory.regions.len() + 1)?;
            memory.regions.insert(
                start,
                Region {
                    end,
                    prot: Prot::READ | Prot::WRITE,
                },
            );
        }
        self.copy_out(start, contents)?;
        let mut memory = self.memory.lock();
        if let Some(region) = memory.regions.get_mut(&start) {
            region.prot = prot;
        }
        for va in memory.table.used_pages(start, end) {
            memory.table.protect(va, entry_flags(prot));
        }
        // `copy_out` wrote through the physical window, so no CPU can have
        // cached these pages with the loading permissions yet; the flush
        // only keeps the generation bookkeeping exact and sends no IPI.
        drop(memory);
        tlb::flush_range(&self.tlb, start, end, false);
        Ok(())
    }

    /// Tears the user half down once no thread runs in it: makes the CPUs
    /// that still have it loaded lazily leave it, flushes it everywhere,
    /// gives back the global ASID if it had one, frees every frame. The root
    /// table goes when the address space is dropped.
    pub fn tear_down(&self) {
        tlb::evict(&self.tlb);
        tlb::flush_all(&self.tlb, true);
        tlb::system().release_address_space(&self.tlb);
        let mut memory = self.memory.lock();
        memory.regions.clear();
        let (frames, slots) = memory.table.clear_user_half();
        frames.into_iter().for_each(frames::free);
        slots.into_iter().for_each(swap::discard);
    }
}
