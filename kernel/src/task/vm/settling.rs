//! Where a fault waits for a busy entry.
//!
//! A copy-on-write break takes the old frame out of its entry, flushes it
//! from every TLB, and only then maps the copy: were the copy mapped first,
//! a thread on a third CPU could write the copy while a reader still saw
//! the old frame through a stale translation, and miss the write. Between
//! the two steps the entry is *busy* ([`hal::page_table::Leaf::Busy`]). A
//! fault on it must neither fill it (with a zeroed page) nor spin for the
//! length of a shootdown, so it blocks here until some busy entry of the
//! address space settles, and then looks again.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::task::sync::WaitQueue;

/// Busy entries settling, and the threads waiting for them.
pub(super) struct Settling {
    /// Bumped each time a busy entry gets its new frame.
    settled: AtomicU64,
    waiters: WaitQueue,
}

impl Settling {
    pub(super) const fn new() -> Self {
        Self {
            settled: AtomicU64::new(0),
            waiters: WaitQueue::new(),
        }
    }

    /// A mark to wait on, taken *before* the caller reads the entry that it
    /// may find busy. Taken after, it could already count the settling the
    /// caller means to wait for, and the wait would last until some other
    /// entry settled, perhaps for ever.
    pub(super) fn mark(&self) -> u64 {
        self.settled.load(Ordering::Acquire)
    }

    /// Blocks until a busy entry settled after `mark` was taken.
    pub(super) fn wait(&self, mark: u64) {
        self.waiters
            .wait_unless(|| self.settled.load(Ordering::Acquire) != mark);
    }

    /// A busy entry got its new frame: wakes the waiters.
    pub(super) fn settle(&self) {
        self.settled.fetch_add(1, Ordering::AcqRel);
        self.waiters.wake_all();
    }
}
