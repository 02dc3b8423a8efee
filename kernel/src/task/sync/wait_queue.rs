//! A queue of blocked threads waiting for a condition.
//!
//! The waiter registers itself, then checks the condition, then blocks; the
//! waker changes the state, then wakes whoever is registered. Each side's
//! first step is ordered before its second by a full fence, so either the
//! waiter sees the new state and does not block, or the waker sees the
//! waiter and wakes it: no wake-up is lost.

use alloc::{sync::Arc, vec::Vec};
use core::sync::atomic::{AtomicUsize, Ordering, fence};

use spin::Mutex;

use super::super::{
    sched,
    thread::{Thread, ThreadState},
};
use hal::cpu::without_interrupts;

/// Threads blocked until [`WaitQueue::wake_all`].
pub struct WaitQueue {
    sleepers: Mutex<Vec<Arc<Thread>>>,
    /// How many are registered: the waker's cheap check.
    registered: AtomicUsize,
}

impl WaitQueue {
    pub const fn new() -> Self {
        Self {
            sleepers: Mutex::new(Vec::new()),
            registered: AtomicUsize::new(0),
        }
    }

    /// Blocks the current thread until a [`WaitQueue::wake_all`] that comes
    /// after this call, unless `ready` already holds once it is registered.
    /// Returns when woken; the caller looks at its condition again.
    pub fn wait_unless(&self, ready: impl FnOnce() -> bool) {
        let me = sched::current();
        let blocked = without_interrupts(|| {
            let mut sleepers = self.sleepers.lock();
            self.registered.fetch_add(1, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            if ready() {
                self.registered.fetch_sub(1, Ordering::Relaxed);
                return false;
            }
            *me.state.lock() = ThreadState::Blocked;
            sleepers.push(Arc::clone(&me));
            true
        });
        if blocked {
            sched::block();
        }
    }

    /// Wakes every registered thread. The caller has changed the state the
    /// waiters' conditions read.
    pub fn wake_all(&self) {
        fence(Ordering::SeqCst);
        if self.registered.load(Ordering::Relaxed) == 0 {
            return;
        }
        let woken = without_interrupts(|| {
            let woken = core::mem::take(&mut *self.sleepers.lock());
            self.registered.fetch_sub(woken.len(), Ordering::Relaxed);
            woken
        });
        for thread in &woken {
            sched::wake(thread);
        }
    }
}

impl Default for WaitQueue {
    fn default() -> Self {
        Self::new()
    }
}
