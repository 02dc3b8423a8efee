//! Frames that more than one mapping refers to, and how many do.
//!
//! After `fork`, parent and child map the same frame for every private page
//! until one of them writes it (copy-on-write), and a `MAP_SHARED` region's
//! pages are mapped by every process that inherited it. Such a frame may be
//! freed only when its *last* reference goes, and only after the TLB flush
//! that revoked that reference (the rule of [`crate::task::vm`]).
//!
//! Most user frames have exactly one reference all their life, so only the
//! others are recorded: a table from frame to the number of references
//! *beyond the first*. A frame missing from it has one. The table costs heap
//! for each shared frame; whoever is about to share frames asks for room
//! first ([`room_for`]), so that a `fork` that would not fit fails with
//! `ENOMEM` instead of running the kernel out of heap.
//!
//! References are taken only by someone who holds one already (the address
//! space being forked holds the parent's, under its lock; a shared region's
//! page list holds one), so a count can never rise from zero: a frame whose
//! last reference was released is gone for good.

use alloc::collections::BTreeMap;

use abi::Errno;
use hal::frames::Frame;
use spin::Mutex;

use super::{heap, quarantine};

/// What one recorded frame may cost on the heap (its share of a B-tree
/// node), for the heap budget.
const RECORD_BYTES: usize = 32;

/// Frame address to references beyond the first (always at least 1).
static EXTRA_REFERENCES: Mutex<BTreeMap<u64, u32>> = Mutex::new(BTreeMap::new());

/// `Ok` if the heap budget has room to record `frames` more shared frames.
pub fn room_for(frames: usize) -> Result<(), Errno> {
    heap::check_budget(frames.saturating_mul(RECORD_BYTES))
}

/// Adds a reference to `frame`, whose caller already holds one.
pub fn share(frame: Frame) {
    *EXTRA_REFERENCES
        .lock()
        .entry(frame.address().as_u64())
        .or_insert(0) += 1;
}

/// Gives up one reference to `frame`, freeing it if that was the last. The
/// caller has flushed every TLB that may hold the translation it gives up.
pub fn release(frame: Frame) {
    let last = {
        let mut table = EXTRA_REFERENCES.lock();
        let address = frame.address().as_u64();
        match table.get_mut(&address) {
            Some(1) => {
                table.remove(&address);
                false
            }
            Some(extra) => {
                *extra -= 1;
                false
            }
            None => true,
        }
    };
    if last {
        quarantine::free(frame);
    }
}

/// How many references `frame` has (1 if it is not shared).
pub fn references(frame: Frame) -> usize {
    EXTRA_REFERENCES
        .lock()
        .get(&frame.address().as_u64())
        .map_or(1, |&extra| extra as usize + 1)
}

/// Whether another mapping refers to `frame` too.
pub fn is_shared(frame: Frame) -> bool {
    references(frame) > 1
}

/// How many frames have more than one reference, for tests and the boot's
/// leak checks.
pub fn shared_count() -> usize {
    EXTRA_REFERENCES.lock().len()
}
