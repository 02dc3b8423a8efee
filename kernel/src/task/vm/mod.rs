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

mod fork;

use alloc::{collections::BTreeMap, sync::Arc, vec::Vec};

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

use crate::{
    memory::{heap, shared_frames},
    tlb,
};

use super::{
    shared_memory::{SharedMemory, SwapOut},
    swap,
};

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
#[derive(Clone)]
struct Region {
    end: u64,
    prot: Prot,
    /// `Some` for a `MAP_SHARED` region; private regions are copied
    /// (copy-on-write) by `fork`.
    shared: Option<SharedPages>,
}

/// Where a shared region's pages are: `memory`, from page `first_page` on.
#[derive(Clone)]
struct SharedPages {
    memory: Arc<SharedMemory>,
    first_page: u64,
}

impl Region {
    fn private(end: u64, prot: Prot) -> Self {
        Self {
            end,
            prot,
            shared: None,
        }
    }

    /// This region cut to end at `at`.
    fn head(&self, at: u64) -> Self {
        Self {
            end: at,
            ..self.clone()
        }
    }

    /// This region, which starts at `start`, cut to begin at `at`: a
    /// shared one shows the same pages as before at each address.
    fn tail(&self, start: u64, at: u64) -> Self {
        let shared = self.shared.as_ref().map(|pages| SharedPages {
            memory: Arc::clone(&pages.memory),
            first_page: pages.first_page + (at - start) / PAGE_SIZE,
        });
        Self {
            end: self.end,
            prot: self.prot,
            shared,
        }
    }
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

    /// The region containing `va`, and where it starts.
    fn region_at(&self, va: u64) -> Option<(u64, Region)> {
        let (&start, region) = self.regions.range(..=va).next_back()?;
        (va < region.end).then(|| (start, region.clone()))
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
            self.regions.insert(start, region.head(at));
            self.regions.insert(at, region.tail(start, at));
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
    /// at once, frames are returned for release after the TLB flush.
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

    /// The entry flags for a page at `va` with `prot`: those of `prot`,
    /// except that a private page whose frame is still shared stays
    /// read-only, so that its first write copies it.
    fn page_flags(&self, va: u64, prot: Prot, private: bool) -> PageTableFlags {
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

    /// `mmap(MAP_PRIVATE)`: a new anonymous region of `len` bytes with
    /// `prot`, private to this process (copy-on-write across `fork`). With
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
        self.map_new_region(addr, len, prot, fixed, false)
    }

    /// `mmap(MAP_SHARED)`: as [`Self::map_anonymous`], but the region's
    /// pages are shared with the children `fork` makes from now on.
    pub fn map_shared_anonymous(
        &self,
        addr: u64,
        len: u64,
        prot: Prot,
        fixed: bool,
    ) -> Result<u64, Errno> {
        self.map_new_region(addr, len, prot, fixed, true)
    }

    fn map_new_region(
        &self,
        addr: u64,
        len: u64,
        prot: Prot,
        fixed: bool,
        shared: bool,
    ) -> Result<u64, Errno> {
        let region = |end| Region {
            end,
            prot,
            shared: shared.then(|| SharedPages {
                memory: SharedMemory::new(),
                first_page: 0,
            }),
        };
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
            memory.regions.insert(start, region(start + rounded));
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
        memory.regions.insert(addr, region(end));
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
    ///
    /// Only pages this process alone maps go: a page still shared
    /// copy-on-write with a `fork` child, or a `MAP_SHARED` page another
    /// process maps too, stays resident (as Linux leaves a page mapped by
    /// several processes). A `MAP_SHARED` page that goes is recorded in the
    /// region's page list ([`SharedMemory::swap_out`]), where the next
    /// fault in any process that shares it finds it.
    pub fn page_out(&self, start: u64, len: u64) -> Result<(), Errno> {
        let end = user_range(start, len)?;
        let mut memory = self.memory.lock();
        if !memory.covers(start, end) {
            return Err(Errno::NoMem);
        }
        // Each page this mapping alone holds (with, for a shared region's
        // page, the region's page list), and where it is in a shared region.
        let mut taken = Vec::new();
        for va in memory.table.used_pages(start, end) {
            let (Leaf::Present { frame, .. }, Some((region_start, region))) =
                (memory.table.leaf(va), memory.region_at(va))
            else {
                continue;
            };
            let shared = match region.shared {
                None if !shared_frames::is_shared(frame) => None,
                Some(pages) if shared_frames::references(frame) == 2 => Some((
                    pages.memory,
                    pages.first_page + (va - region_start) / PAGE_SIZE,
                )),
                // Another process maps it too: it stays resident.
                _ => continue,
            };
            memory.table.take(va);
            taken.push((va, frame, region.prot, shared));
        }
        if taken.is_empty() {
            return Ok(());
        }
        let pages: Vec<u64> = taken.iter().map(|(va, ..)| *va).collect();
        tlb::flush_reclaimed(&self.tlb, &pages);
        let mut swap_full = false;
        for (va, frame, prot, shared) in taken {
            let store = || swap::store(|page| phys::read_frame(frame, 0, page));
            let outcome = match shared {
                None => match store() {
                    Some(slot) => {
                        memory
                            .table
                            .set_swapped(va, slot)
                            .expect("existing page table");
                        SwapOut::Done
                    }
                    None => SwapOut::NoSlot,
                },
                // The page list records the slot; this entry stays empty
                // and the next touch faults the page back in from there.
                Some((pages, index)) => pages.swap_out(index, frame, store),
            };
            match outcome {
                SwapOut::Done => shared_frames::release(frame),
                SwapOut::StillMapped | SwapOut::NoSlot => {
                    swap_full |= matches!(outcome, SwapOut::NoSlot);
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
    /// everywhere (reaching lazy CPUs too if page-table pages go), then
    /// release the data frames `pages` and free the page-table frames
    /// `tables`.
    fn flush_then_free(&self, start: u64, end: u64, pages: Frames, tables: Vec<Frame>) {
        tlb::flush_range(&self.tlb, start, end, !tables.is_empty());
        pages.into_iter().for_each(shared_frames::release);
        tables.into_iter().for_each(frames::free);
    }

    /// The frame backing `page` (in `region`, which starts at
    /// `region_start` and allows `access`): the one mapped, unless a write
    /// must break copy-on-write first; brought back from swap; the shared
    /// region's page; or a fresh zeroed one (demand paging).
    fn resolve(
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
            let found = memory.region_at(page).ok_or(Errno::Fault)?;
            if !permits(found.1.prot, access) {
                return Err(Errno::Fault);
            }
            let frame = self
                .resolve(&mut memory, page, found, access)
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
            memory
                .regions
                .insert(start, Region::private(end, Prot::READ | Prot::WRITE));
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
