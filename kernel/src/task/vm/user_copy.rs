//! The kernel's reads and writes of user memory (system-call buffers), and
//! the program loader's regions, filled through the same path.

use alloc::vec::Vec;
use core::sync::atomic::{Ordering, fence};

use abi::{Errno, PAGE_SIZE, Prot, USER_END};
use hal::{
    frames::Frame,
    page_table::{Leaf, OutOfFrames},
    phys,
};

use super::{
    Access, AddressSpace,
    fault::Resolution,
    region::{Region, entry_flags, permits},
    regions::user_range,
};
use crate::{
    memory::{heap, shared_frames},
    tlb,
    vm_bug::{self, VmBug},
};

impl AddressSpace {
    /// Visits each page of `[va, va+len)` with the frame backing it (faulting
    /// it in if needed), checking the access against the regions.
    ///
    /// The region table is held shared, so another thread may discard a
    /// page while the kernel copies it. The kernel reaches the frame through
    /// its own mapping of physical memory, which no user TLB flush covers,
    /// so the discard's flush would not wait for the copy: the copy *pins*
    /// the frame (takes a reference) and then checks that the page still
    /// maps it. Whichever of the two lets go last frees the frame.
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
        let resolve_for = resolved_as(access);
        let mut memory = self.shared();
        let mut cursor = va;
        while cursor < end {
            let page = cursor & !(PAGE_SIZE - 1);
            let found = memory.region_at(page).ok_or(Errno::Fault)?;
            if !permits(found.1.prot, access) {
                return Err(Errno::Fault);
            }
            let flags = entry_flags(found.1.prot);
            let frame = match self
                .resolve(&memory, page, found, resolve_for)
                .map_err(|OutOfFrames| Errno::NoMem)?
            {
                Resolution::Mapped(frame) => frame,
                Resolution::Raced => continue,
                Resolution::Busy { mark } => {
                    drop(memory);
                    self.settling.wait(mark);
                    memory = self.shared();
                    continue;
                }
                Resolution::Swapped => {
                    drop(memory);
                    self.swap_in(page, flags)
                        .map_err(|OutOfFrames| Errno::NoMem)?;
                    memory = self.shared();
                    continue;
                }
            };
            shared_frames::share(frame);
            // The pin against a discard's take (an entry swap, then its flush's
            // SeqCst fence, then the release) is the store-buffering pattern:
            // without a full fence on this side too, the check below could
            // still see the frame mapped while the discard's release missed
            // the pin and freed it (loom scenario 9, `mm/src/races.rs`). On
            // x86 the locked increment is a full barrier already; the fence
            // makes it so for the language's memory model.
            fence(Ordering::SeqCst);
            if !matches!(memory.table.leaf(page), Leaf::Present { frame: now, .. } if now == frame)
            {
                // Discarded between the lookup and the pin.
                shared_frames::release(frame);
                continue;
            }
            let chunk_end = end.min(page + PAGE_SIZE);
            let done = (cursor - va) as usize;
            visit(
                frame,
                (cursor - page) as usize,
                done..done + (chunk_end - cursor) as usize,
            );
            shared_frames::release(frame);
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
            let mut memory = self.exclusive();
            if memory.overlaps(start, end) {
                return Err(Errno::Inval);
            }
            memory.room_for_regions(memory.regions.len() + 1)?;
            memory
                .regions
                .insert(start, Region::private(end, Prot::READ | Prot::WRITE));
        }
        self.copy_out(start, contents)?;
        let mut memory = self.exclusive();
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
}

/// The access a page is resolved for when the kernel reads or writes it for
/// a system call: `access` itself, so that a write breaks copy-on-write and
/// lands in this process's own copy. With `vm.bug=kernel-write-skips-cow`
/// a write is resolved as a read: the page keeps the frame it shares with
/// the other side of a fork, and the kernel writes into that (Dirty COW).
fn resolved_as(access: Access) -> Access {
    if access.write && vm_bug::is_on(VmBug::KernelWriteSkipsCopyOnWrite) {
        Access {
            write: false,
            ..access
        }
    } else {
        access
    }
}
