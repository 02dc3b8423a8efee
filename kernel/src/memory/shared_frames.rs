//! Frames that more than one mapping refers to, and how many do.
//!
//! After `fork`, parent and child map the same frame for every private page
//! until one of them writes it (copy-on-write), and a `MAP_SHARED` region's
//! pages are mapped by every process that inherited it. Such a frame may be
//! freed only when its *last* reference goes, and only after the TLB flush
//! that revoked that reference (the rule of [`crate::task::vm`]).
//!
//! Each frame of RAM has one atomic counter here (like the reference count
//! in Linux's `struct page`), holding the references *beyond the first*: a
//! frame with one owner, which is nearly every frame all its life, has 0,
//! and releasing it reads one word and changes nothing shared. The
//! counters cost 4 bytes per 4 KiB of RAM (0.1%), taken once at boot, so
//! sharing a frame never needs the heap and no lock is ever taken: threads
//! releasing frames on several CPUs at once do not meet.
//!
//! References are taken only by someone who holds one already (the address
//! space being forked holds the parent's, under its lock; a shared region's
//! page list holds one; the kernel copying a system call's buffer pins the
//! frame it found mapped, then checks the mapping is still there), so a
//! count never rises for a frame nobody holds, except for the moment a pin
//! takes to see that the mapping it pinned is gone; the releases balance
//! that, and whichever release finds no reference beyond its own frees
//! the frame.

use core::sync::atomic::{AtomicU32, Ordering};

use hal::frames::{FRAME_SIZE, Frame};
use spin::Once;

use super::quarantine;

/// One counter per frame of RAM, by frame number: references beyond the
/// first.
static EXTRA_REFERENCES: Once<&'static [AtomicU32]> = Once::new();

/// No room for the counters at boot.
#[derive(Debug)]
pub struct NoRoomForCounters {
    pub bytes: usize,
}

/// Sets the counters up for `frame_count` frames of RAM. Called once at
/// boot, after the frame allocator.
pub fn init(frame_count: usize) -> Result<(), NoRoomForCounters> {
    let bytes = frame_count * size_of::<AtomicU32>();
    let storage = hal::frames::allocate_permanent(bytes.div_ceil(FRAME_SIZE))
        .ok_or(NoRoomForCounters { bytes })?;
    let counters = hal::phys::permanent_counters(storage);
    EXTRA_REFERENCES.call_once(|| counters);
    Ok(())
}

fn counter(frame: Frame) -> &'static AtomicU32 {
    let counters = EXTRA_REFERENCES
        .get()
        .expect("shared_frames::init runs before any user frame is mapped");
    &counters[frame.address().as_u64() as usize / FRAME_SIZE]
}

/// Adds a reference to `frame`, whose caller already holds one.
pub fn share(frame: Frame) {
    counter(frame).fetch_add(1, Ordering::AcqRel);
}

/// Gives up one reference to `frame`, freeing it if that was the last. The
/// caller has flushed every TLB that may hold the translation it gives up.
pub fn release(frame: Frame) {
    let extra = counter(frame);
    let mut seen = extra.load(Ordering::Acquire);
    loop {
        if seen == 0 {
            quarantine::free(frame);
            return;
        }
        match extra.compare_exchange_weak(seen, seen - 1, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(now) => seen = now,
        }
    }
}

/// How many references `frame` has (1 if it is not shared).
pub fn references(frame: Frame) -> usize {
    counter(frame).load(Ordering::Acquire) as usize + 1
}

/// Whether another mapping refers to `frame` too.
pub fn is_shared(frame: Frame) -> bool {
    references(frame) > 1
}

/// How many frames have more than one reference, for tests and the boot's
/// leak checks.
pub fn shared_count() -> usize {
    EXTRA_REFERENCES.get().map_or(0, |counters| {
        counters
            .iter()
            .filter(|extra| extra.load(Ordering::Relaxed) > 0)
            .count()
    })
}
