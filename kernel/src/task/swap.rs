//! The swap area: where `madvise(PAGEOUT)` puts anonymous pages.
//!
//! A real kernel writes them to a disk; this one keeps a fixed number of
//! page-sized slots in kernel memory, which is enough to exercise what
//! matters for TLB shootdown: a page's frame is taken away while other CPUs
//! may still hold its translation, so the flush must complete before the
//! contents are copied (a CPU still writing through a stale entry would be
//! lost) and before the frame is reused. See [`super::vm`].

use alloc::{boxed::Box, vec::Vec};

use abi::PAGE_SIZE;
use spin::Mutex;

/// Swap capacity: 16 MiB.
pub const SLOTS: usize = 4096;

type Page = [u8; PAGE_SIZE as usize];

struct SwapArea {
    /// Slot contents; a slot is allocated on first use.
    slots: Vec<Option<Box<Page>>>,
    free: Vec<u64>,
}

static SWAP: Mutex<Option<SwapArea>> = Mutex::new(None);

fn with_area<R>(f: impl FnOnce(&mut SwapArea) -> R) -> R {
    let mut area = SWAP.lock();
    let area = area.get_or_insert_with(|| SwapArea {
        slots: (0..SLOTS).map(|_| None).collect(),
        free: (0..SLOTS as u64).rev().collect(),
    });
    f(area)
}

/// Stores a page that `fill` writes, returning its slot, or `None` when
/// swap is full.
pub fn store(fill: impl FnOnce(&mut Page)) -> Option<u64> {
    let slot = with_area(|area| area.free.pop())?;
    let mut page: Box<Page> = Box::new([0; PAGE_SIZE as usize]);
    fill(&mut page);
    with_area(|area| area.slots[slot as usize] = Some(page));
    Some(slot)
}

/// Takes the page out of `slot`, freeing the slot.
pub fn take(slot: u64) -> Box<Page> {
    with_area(|area| {
        let page = area.slots[slot as usize].take().expect("swap slot in use");
        area.free.push(slot);
        page
    })
}

/// Frees `slot` without reading it (the page was unmapped).
pub fn discard(slot: u64) {
    drop(take(slot));
}

/// Slots in use.
pub fn used() -> usize {
    with_area(|area| SLOTS - area.free.len())
}
