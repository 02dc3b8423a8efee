//! A reader-writer lock whose waiters spin briefly, then block.
//!
//! The data and the lock word are [`spin::RwLock`]'s; this type adds how
//! to wait. A waiter first retries for [`SPIN_ATTEMPTS`] rounds (most holds
//! are short: one page-table entry, one region lookup), then registers on
//! the lock's [`WaitQueue`] and blocks; every release wakes the registered
//! waiters, which try again. So does a reader's failed attempt: `spin`'s
//! `try_read` adds itself to the reader count before it sees the writer and
//! takes itself off again, and a writer that looked in that moment may have
//! blocked on a lock that then stays free with no release to wake it (a
//! hang that `vmstress` at 8 CPUs found, about one run in four). A writer
//! that blocks makes new readers wait behind it, so a stream of page faults
//! cannot starve an `mmap`.
//!
//! A CPU with interrupts off cannot be woken, so there (and when
//! [`Waiting::Spin`] asks for the old behaviour) the waiter spins.

use core::{
    ops::{Deref, DerefMut},
    sync::atomic::{AtomicUsize, Ordering},
};

use super::WaitQueue;

/// How many times a waiter retries before it blocks.
const SPIN_ATTEMPTS: u32 = 64;

/// How a waiter waits once its brief spin is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// Block: the CPU halts or runs another thread until woken.
    Block,
    /// Keep spinning, as a plain spinlock does.
    Spin,
}

/// A reader-writer lock over `T` (see the module docs).
pub struct RwLock<T> {
    inner: spin::RwLock<T>,
    /// Writers that are blocked: readers arriving now wait behind them.
    writers_blocked: AtomicUsize,
    waiters: WaitQueue,
    waiting: Waiting,
}

/// Shared access; the lock is released when it is dropped.
pub struct ReadGuard<'a, T> {
    guard: Option<spin::RwLockReadGuard<'a, T>>,
    lock: &'a RwLock<T>,
}

/// Exclusive access; the lock is released when it is dropped.
pub struct WriteGuard<'a, T> {
    guard: Option<spin::RwLockWriteGuard<'a, T>>,
    lock: &'a RwLock<T>,
}

impl<T> RwLock<T> {
    pub fn new(value: T, waiting: Waiting) -> Self {
        Self {
            inner: spin::RwLock::new(value),
            writers_blocked: AtomicUsize::new(0),
            waiters: WaitQueue::new(),
            waiting,
        }
    }

    /// Shared access, waiting while a writer holds the lock or is blocked
    /// waiting for it.
    pub fn read(&self) -> ReadGuard<'_, T> {
        let guard = self.acquire(
            || {
                if self.writers_blocked.load(Ordering::Acquire) != 0 {
                    return None;
                }
                let guard = self.inner.try_read();
                if guard.is_none() {
                    // A failed `try_read` counts itself as a reader for a
                    // moment before it undoes that. A writer that looked in
                    // between saw a reader and may have blocked; nobody
                    // else would wake it, so the undo is a release too.
                    self.waiters.wake_all();
                }
                guard
            },
            || self.writers_blocked.load(Ordering::Acquire) == 0 && self.inner.writer_count() == 0,
            false,
        );
        ReadGuard {
            guard: Some(guard),
            lock: self,
        }
    }

    /// Exclusive access, waiting while anyone holds the lock.
    pub fn write(&self) -> WriteGuard<'_, T> {
        let guard = self.acquire(
            || self.inner.try_write(),
            || self.inner.reader_count() == 0 && self.inner.writer_count() == 0,
            true,
        );
        WriteGuard {
            guard: Some(guard),
            lock: self,
        }
    }

    /// Takes the lock with `try_take`: retries a while, then blocks until
    /// `may_succeed` holds (or a release wakes it) and retries again.
    fn acquire<G>(
        &self,
        try_take: impl Fn() -> Option<G>,
        may_succeed: impl Fn() -> bool,
        writer: bool,
    ) -> G {
        for _ in 0..SPIN_ATTEMPTS {
            if let Some(guard) = try_take() {
                return guard;
            }
            core::hint::spin_loop();
        }
        if self.waiting == Waiting::Spin || !hal::cpu::interrupts_enabled() {
            loop {
                if let Some(guard) = try_take() {
                    return guard;
                }
                core::hint::spin_loop();
            }
        }
        if writer {
            self.writers_blocked.fetch_add(1, Ordering::AcqRel);
        }
        let guard = loop {
            if let Some(guard) = try_take() {
                break guard;
            }
            self.waiters.wait_unless(&may_succeed);
        };
        if writer {
            self.writers_blocked.fetch_sub(1, Ordering::AcqRel);
            // Readers that waited only for this writer to arrive will wait
            // for its release now, which wakes them.
        }
        guard
    }
}

impl<T> Deref for ReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl<T> Drop for ReadGuard<'_, T> {
    fn drop(&mut self) {
        drop(self.guard.take());
        self.lock.waiters.wake_all();
    }
}

impl<T> Deref for WriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl<T> DerefMut for WriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.guard.as_mut().expect("held until dropped")
    }
}

impl<T> Drop for WriteGuard<'_, T> {
    fn drop(&mut self) {
        drop(self.guard.take());
        self.lock.waiters.wake_all();
    }
}
