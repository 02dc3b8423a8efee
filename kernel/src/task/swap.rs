//! The swap area: where `madvise(PAGEOUT)` puts anonymous pages.
//!
//! A real kernel writes them to a disk; this one keeps a fixed number of
//! page-sized slots in kernel memory, which is enough to exercise what
//! matters for TLB shootdown: a page's frame is taken away while other CPUs
//! may still hold its translation, so the flush must complete before the
//! contents are copied (a CPU still writing through a stale entry would be
//! lost) and before the frame is reused. See [`super::vm`].
//!
//! Swap can run out in two ways: every slot is taken, or the heap budget for
//! program-caused allocations has no room for one more page of contents
//! ([`crate::memory::heap`]). Either way [`store`] says `None` and the page
//! stays where it was (`PAGEOUT` then reports `ENOSPC`). The bookkeeping
//! itself is static, so no swap operation can need memory it cannot get.

use alloc::boxed::Box;

use abi::PAGE_SIZE;
use spin::Mutex;

use crate::memory::heap;

/// Swap capacity: 16 MiB.
const SLOTS: usize = abi::SWAP_SLOTS;
// Free slots are kept as `u16`s.
const _: () = assert!(SLOTS <= 1 << 16);

struct SwapArea {
    /// Slot contents, one page each while the slot is in use.
    slots: [Option<Box<[u8]>>; SLOTS],
    /// The free slots, `free[..free_count]`, taken from the end.
    free: [u16; SLOTS],
    free_count: usize,
}

/// Every slot free, the lowest handed out first.
const fn all_free() -> [u16; SLOTS] {
    let mut free = [0; SLOTS];
    let mut index = 0;
    while index < SLOTS {
        free[index] = (SLOTS - 1 - index) as u16;
        index += 1;
    }
    free
}

static SWAP: Mutex<SwapArea> = Mutex::new(SwapArea {
    slots: [const { None }; SLOTS],
    free: all_free(),
    free_count: SLOTS,
});

/// Stores a page that `fill` writes, returning its slot, or `None` when
/// swap is full or its contents do not fit in the heap budget.
pub fn store(fill: impl FnOnce(&mut [u8])) -> Option<u64> {
    let mut page = heap::try_zeroed_vec::<u8>(PAGE_SIZE as usize).ok()?;
    fill(&mut page);
    let mut area = SWAP.lock();
    if area.free_count == 0 {
        return None;
    }
    area.free_count -= 1;
    let slot = area.free[area.free_count];
    area.slots[usize::from(slot)] = Some(page.into_boxed_slice());
    Some(u64::from(slot))
}

/// Takes the page out of `slot`, freeing the slot.
pub fn take(slot: u64) -> Box<[u8]> {
    let mut area = SWAP.lock();
    let page = area.slots[slot as usize].take().expect("swap slot in use");
    let free_count = area.free_count;
    area.free[free_count] = slot as u16;
    area.free_count += 1;
    page
}

/// Shows the page in `slot` to `read`, leaving it there (a `fork` child's
/// copy).
pub fn read(slot: u64, read: impl FnOnce(&[u8])) {
    let area = SWAP.lock();
    read(
        area.slots[slot as usize]
            .as_deref()
            .expect("swap slot in use"),
    );
}

/// Frees `slot` without reading it (the page was unmapped).
pub fn discard(slot: u64) {
    drop(take(slot));
}

/// Slots in use.
pub fn used() -> usize {
    SLOTS - SWAP.lock().free_count
}
