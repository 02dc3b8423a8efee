//! The pages behind a `MAP_SHARED` region, which every process that
//! inherited the region through `fork` sees.
//!
//! A private page belongs to one page-table entry, so the entry is the only
//! record it needs. A shared page outlives any one entry: one process may
//! drop its mapping (`madvise(DONTNEED)`, `munmap`, exit) while another still
//! uses the page, and a page first touched in one process after the fork
//! must be the page the other one touches. So a shared region points at a
//! [`SharedMemory`], which keeps its pages by index and holds one reference
//! to each resident frame ([`crate::memory::shared_frames`]); each
//! page-table entry that maps one holds another. Every process resolves a
//! fault in the region from here, and an entry's reference goes after the
//! flush that revokes it, as every other mapping's does. The frames
//! themselves go when the last region that shows them has gone and the last
//! entry is released.
//!
//! A page can be in swap instead (`madvise(PAGEOUT)`), but only while no
//! entry maps it: the record says where, and the next fault anywhere brings
//! it back. A page some other process maps stays resident, since its entry
//! cannot be found from here to be taken away.

use alloc::{collections::BTreeMap, sync::Arc};

use hal::{
    frames::{self, Frame},
    page_table::OutOfFrames,
    phys,
};
use spin::Mutex;

use super::swap;
use crate::memory::{heap, shared_frames};

/// What one page's record may cost on the heap (its share of a B-tree
/// node), for the heap budget.
const PAGE_RECORD_BYTES: usize = 32;

/// Where one page of a shared region is.
enum Page {
    Resident(Frame),
    Swapped { slot: u64 },
}

/// The pages of one shared anonymous mapping, by page index from its
/// start.
pub struct SharedMemory {
    pages: Mutex<BTreeMap<u64, Page>>,
}

impl SharedMemory {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            pages: Mutex::new(BTreeMap::new()),
        })
    }

    /// The frame of page `index` (zeroed on first use, brought back if it
    /// is in swap), with a reference taken for the page-table entry the
    /// caller is about to write. `Err` when no frame, or no heap for its
    /// records, is left.
    pub fn map_page(&self, index: u64) -> Result<Frame, OutOfFrames> {
        // The page list's record, if the page is new to it.
        heap::check_budget(PAGE_RECORD_BYTES).map_err(|_| OutOfFrames)?;
        let mut pages = self.pages.lock();
        let frame = match pages.get(&index) {
            Some(&Page::Resident(frame)) => frame,
            Some(&Page::Swapped { slot }) => {
                let frame = frames::allocate().ok_or(OutOfFrames)?;
                phys::write_frame(frame, 0, &swap::take(slot)[..]);
                pages.insert(index, Page::Resident(frame));
                frame
            }
            None => {
                let frame = frames::allocate().ok_or(OutOfFrames)?;
                phys::zero_frame(frame);
                pages.insert(index, Page::Resident(frame));
                frame
            }
        };
        shared_frames::share(frame);
        Ok(frame)
    }

    /// Moves page `index`, resident in `frame`, to the slot `store` fills,
    /// if the caller's entry (already out of the page table and flushed,
    /// its reference still held) was the last to map it. On
    /// [`SwapOut::Done`] the caller releases its entry's reference, which
    /// frees the frame. Checked and copied under the page list's lock, so
    /// no other process can map the page in between and write to a frame
    /// that is no longer the page.
    pub fn swap_out(
        &self,
        index: u64,
        frame: Frame,
        store: impl FnOnce() -> Option<u64>,
    ) -> SwapOut {
        let mut pages = self.pages.lock();
        let resident = matches!(pages.get(&index), Some(&Page::Resident(page)) if page == frame);
        // This list's reference and the caller's entry's, and no other.
        if !resident || shared_frames::references(frame) != 2 {
            return SwapOut::StillMapped;
        }
        let Some(slot) = store() else {
            return SwapOut::NoSlot;
        };
        pages.insert(index, Page::Swapped { slot });
        shared_frames::release(frame);
        SwapOut::Done
    }
}

/// What [`SharedMemory::swap_out`] did.
pub enum SwapOut {
    /// The page is in swap.
    Done,
    /// Another process mapped the page meanwhile: it stays resident.
    StillMapped,
    /// Swap had no room: it stays resident.
    NoSlot,
}

impl Drop for SharedMemory {
    /// The last region showing these pages is gone; entries that still map
    /// some hold their own references, released after their flushes.
    fn drop(&mut self) {
        for page in core::mem::take(self.pages.get_mut()).into_values() {
            match page {
                Page::Resident(frame) => shared_frames::release(frame),
                Page::Swapped { slot } => swap::discard(slot),
            }
        }
    }
}
