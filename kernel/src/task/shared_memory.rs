//! The pages behind a `MAP_SHARED` region, which every process that
//! inherited the region through `fork` sees.
//!
//! A private page belongs to one page-table entry, so the entry is the only
//! record it needs. A shared page outlives any one entry: one process may
//! drop its mapping (`madvise(DONTNEED)`, `munmap`, exit) while another still
//! uses the page, and a page first touched in one process after the fork
//! must be the page the other one touches. So a shared region points at a
//! [`SharedMemory`], which keeps its pages by index and holds one reference
//! to each frame ([`crate::memory::shared_frames`]); each page-table entry
//! that maps one holds another. Every process resolves a fault in the
//! region from here, and an entry's reference goes after the flush that
//! revokes it, as every other mapping's does. The frames themselves go when
//! the last region that shows them has gone and the last entry is released.

use alloc::{collections::BTreeMap, sync::Arc};

use hal::{
    frames::{self, Frame},
    page_table::OutOfFrames,
    phys,
};
use spin::Mutex;

use crate::memory::shared_frames;

/// The pages of one shared anonymous mapping, by page index from its
/// start.
pub struct SharedMemory {
    pages: Mutex<BTreeMap<u64, Frame>>,
}

impl SharedMemory {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            pages: Mutex::new(BTreeMap::new()),
        })
    }

    /// The frame of page `index` (zeroed on first use), with a reference
    /// taken for the page-table entry the caller is about to write. `Err`
    /// when no frame, or no heap for its records, is left.
    pub fn map_page(&self, index: u64) -> Result<Frame, OutOfFrames> {
        // Two records at most: the page list's and the frame's share count.
        shared_frames::room_for(2).map_err(|_| OutOfFrames)?;
        let mut pages = self.pages.lock();
        let frame = match pages.get(&index) {
            Some(&frame) => frame,
            None => {
                let frame = frames::allocate().ok_or(OutOfFrames)?;
                phys::zero_frame(frame);
                pages.insert(index, frame);
                frame
            }
        };
        shared_frames::share(frame);
        Ok(frame)
    }
}

impl Drop for SharedMemory {
    /// The last region showing these pages is gone; entries that still map
    /// some hold their own references, released after their flushes.
    fn drop(&mut self) {
        let pages = core::mem::take(self.pages.get_mut());
        pages.into_values().for_each(shared_frames::release);
    }
}
