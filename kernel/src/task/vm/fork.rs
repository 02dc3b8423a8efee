//! `fork`'s half of an address space: the child's copy.
//!
//! Copying every page would make `fork` cost the parent's whole memory, and
//! most of it is never written again before the child exits or starts
//! something else. So private pages are *shared copy-on-write*: the child's
//! entry maps the parent's frame read-only, the parent's entry loses its
//! write permission too, and whichever side writes first gets a copy
//! ([`AddressSpace::break_copy_on_write`]). `MAP_SHARED` regions are shared
//! as they are: the child's region shows the same pages and faults them in
//! from there.
//!
//! Write-protecting the parent's entries *weakens* mappings that other
//! threads of the parent may be using on other CPUs this very moment, so it
//! is a TLB shootdown like any other: until it completes, such a thread
//! could still write the frame that is now the child's too. The parent's
//! address-space lock is held exclusive from the first entry changed until
//! that flush has returned (so no thread of the parent copies a page for a
//! copy-on-write break while another may still write it), and the child
//! cannot run before `fork` returns.
//!
//! A page the parent has in swap is copied into a frame of the child's own
//! (swap keeps one owner per slot).

use hal::{
    frames::{self, Frame},
    page_table::{Leaf, OutOfFrames},
    phys,
};
use x86_64::structures::paging::PageTableFlags;

use abi::Errno;

use super::{AddressSpace, Memory, region::entry_flags, swap};
use crate::{memory::shared_frames, tlb};

impl AddressSpace {
    /// A copy of this address space for a `fork` child: the same regions,
    /// private pages shared copy-on-write, shared regions shared. `NoMem`
    /// (with nothing left behind) when frames or the heap budget run out.
    pub fn fork(&self) -> Result<AddressSpace, Errno> {
        let kernel_root = tlb::system().kernel_address_space().root();
        let child = AddressSpace::new(kernel_root).map_err(|OutOfFrames| Errno::NoMem)?;
        let copied = {
            let mut parent = self.exclusive();
            let mut child_memory = child.exclusive();
            let copied = copy_into(&mut parent, &mut child_memory);
            // Whether or not the copy finished, parent entries may have lost
            // their write permission: the flush is owed either way.
            if !matches!(copied, Ok(false)) {
                tlb::flush_all(&self.tlb, false);
            }
            copied
        };
        match copied {
            Ok(_) => Ok(child),
            Err(errno) => {
                child.tear_down();
                Err(errno)
            }
        }
    }
}

/// Copies `parent`'s regions and entries into the empty `child`. Returns
/// whether any parent entry was write-protected.
fn copy_into(parent: &mut Memory, child: &mut Memory) -> Result<bool, Errno> {
    child.room_for_regions(parent.regions.len())?;
    child.regions = parent.regions.clone();
    let mut protected = false;
    let private: alloc::vec::Vec<(u64, u64, PageTableFlags)> = parent
        .regions
        .iter()
        .filter(|(_, region)| region.shared.is_none())
        .map(|(&start, region)| (start, region.end, entry_flags(region.prot)))
        .collect();
    for (start, end, flags) in private {
        let pages = parent.table.used_pages(start, end);
        let read_only = flags - PageTableFlags::WRITABLE;
        for va in pages {
            match parent.table.leaf(va) {
                Leaf::Present { frame, writable } => {
                    child
                        .table
                        .map(va, frame, read_only)
                        .map_err(|OutOfFrames| Errno::NoMem)?;
                    shared_frames::share(frame);
                    if writable {
                        parent.table.protect(va, read_only);
                        protected = true;
                    }
                }
                Leaf::Swapped { slot } => {
                    let copy = copy_of_swapped(slot).ok_or(Errno::NoMem)?;
                    if let Err(OutOfFrames) = child.table.map(va, copy, flags) {
                        frames::free(copy);
                        return Err(Errno::NoMem);
                    }
                }
                Leaf::Empty => {}
                Leaf::Busy => unreachable!("only a shared holder marks entries busy"),
            }
        }
    }
    Ok(protected)
}

/// A fresh frame holding the contents of swap slot `slot`.
fn copy_of_swapped(slot: u64) -> Option<Frame> {
    let frame = frames::allocate()?;
    swap::read(slot, |contents| phys::write_frame(frame, 0, contents));
    Some(frame)
}
