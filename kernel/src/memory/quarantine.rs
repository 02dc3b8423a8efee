//! Freed user frames held back from reuse for a while
//! (`frames.quarantine=N`), for tests that hunt stale translations.
//!
//! A CPU that kept a stale TLB entry after a missed flush reads whatever
//! the old frame holds now. If the allocator hands that frame out again at
//! once and its new owner zeroes it, a reader that expects zeroes (the
//! coherence stress after a discard) sees exactly that, and the missing
//! flush goes unnoticed. How quickly that happens depends on how the host
//! schedules the emulated CPUs, so the same broken kernel was caught in one
//! run and missed in another. With a quarantine, the last N frames freed
//! wait in a queue, contents untouched, before they go back to the
//! allocator: a stale entry keeps reading the old data for as long as N more
//! frames take to be freed, whatever the host does.
//!
//! Off (N = 0) by default: a queue costs N frames of memory, and the kernel
//! is correct without it.

use alloc::collections::VecDeque;

use hal::frames::{self, Frame};
use spin::{Mutex, Once};

/// The held-back frames, oldest first, and how many may wait.
struct Queue {
    frames: VecDeque<Frame>,
    capacity: usize,
}

static QUARANTINE: Once<Mutex<Queue>> = Once::new();

/// Holds the last `capacity` freed user frames back from reuse from now
/// on. Called once, at boot, before any program runs.
pub fn init(capacity: usize) {
    if capacity > 0 {
        QUARANTINE.call_once(|| {
            Mutex::new(Queue {
                frames: VecDeque::with_capacity(capacity),
                capacity,
            })
        });
    }
}

/// Frees `frame`, a user page's, once the TLB flush covering its last
/// mapping has completed: at once without a quarantine, else it waits in
/// the queue and the oldest frame there is freed instead when it is full.
pub fn free(frame: Frame) {
    let Some(queue) = QUARANTINE.get() else {
        frames::free(frame);
        return;
    };
    let oldest = {
        let mut queue = queue.lock();
        let oldest = if queue.frames.len() == queue.capacity {
            queue.frames.pop_front()
        } else {
            None
        };
        queue.frames.push_back(frame);
        oldest
    };
    if let Some(oldest) = oldest {
        frames::free(oldest);
    }
}

/// How many frames wait in the queue (they count as in use).
pub fn held() -> usize {
    QUARANTINE
        .get()
        .map_or(0, |queue| queue.lock().frames.len())
}
