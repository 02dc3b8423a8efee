//! `madvise(PAGEOUT)`: reclaim of a range to swap, with one deferred batch
//! flush for all of its pages.

use alloc::{sync::Arc, vec::Vec};

use abi::{Errno, PAGE_SIZE, Prot};
use hal::{frames::Frame, page_table::Leaf, phys};

use super::{
    AddressSpace, Memory, SharedMemory, SwapOut, region::entry_flags, regions::Holes, swap,
};
use crate::{memory::shared_frames, tlb};

impl AddressSpace {
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
        let (end, mut memory) = self.lock_range(start, len, Holes::Refused)?;
        let taken = memory.take_private_pages(start, end);
        if taken.is_empty() {
            return Ok(());
        }
        let pages: Vec<u64> = taken.iter().map(|page| page.va).collect();
        tlb::flush_reclaimed(&self.tlb, &pages);
        let mut swap_full = false;
        for page in taken {
            swap_full |= matches!(memory.swap_out(page), SwapOut::NoSlot);
        }
        if swap_full { Err(Errno::NoSpc) } else { Ok(()) }
    }
}

/// A page `page_out` took out of the page table, to be stored after the
/// flush.
struct TakenPage {
    va: u64,
    frame: Frame,
    prot: Prot,
    /// For a page of a `MAP_SHARED` region: the region's page list and the
    /// page's index in it.
    shared: Option<(Arc<SharedMemory>, u64)>,
}

impl Memory {
    /// Takes out of the page table each resident page of `[start, end)` that
    /// this mapping alone holds (a shared region's page counts its page
    /// list's reference too).
    fn take_private_pages(&mut self, start: u64, end: u64) -> Vec<TakenPage> {
        let mut taken = Vec::new();
        for va in self.table.used_pages(start, end) {
            let (Leaf::Present { frame, .. }, Some((region_start, region))) =
                (self.table.leaf(va), self.region_at(va))
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
            self.table.take(va);
            taken.push(TakenPage {
                va,
                frame,
                prot: region.prot,
                shared,
            });
        }
        taken
    }

    /// Stores `page` in swap (a private page's entry then names its slot; a
    /// shared page's slot goes in the region's page list and its entry stays
    /// empty, so the next touch faults it back in from there) and releases
    /// its frame; or, if it found no slot or is mapped again, maps it back as
    /// it was. Says which.
    fn swap_out(&mut self, page: TakenPage) -> SwapOut {
        let TakenPage {
            va,
            frame,
            prot,
            shared,
        } = page;
        let store = || swap::store(|contents| phys::read_frame(frame, 0, contents));
        let outcome = match shared {
            None => match store() {
                Some(slot) => {
                    self.table
                        .set_swapped(va, slot)
                        .expect("existing page table");
                    SwapOut::Done
                }
                None => SwapOut::NoSlot,
            },
            Some((pages, index)) => pages.swap_out(index, frame, store),
        };
        match outcome {
            SwapOut::Done => shared_frames::release(frame),
            SwapOut::StillMapped | SwapOut::NoSlot => self
                .table
                .map(va, frame, entry_flags(prot))
                .expect("existing page table"),
        }
        outcome
    }
}
