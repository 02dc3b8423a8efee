//! The one place this crate gets its atomics, fences and locks from.
//!
//! Every other module writes `use crate::sync::...` and never names `core::sync` or `spin`
//! directly. The reason is model checking: the shootdown protocol is a handful of
//! store-to-load races (publish "switching", then read the flush generation; bump the
//! generation, then read who is loaded), and those races are exactly what random testing on
//! x86 almost never hits. The [`loom`](https://docs.rs/loom) model checker explores every
//! interleaving and every reordering the C11 memory model allows, but only if the code under
//! test uses *its* atomic types. Building with `RUSTFLAGS="--cfg loom"` swaps the types below
//! for loom's; a normal build is untouched (`no_std`, no unsafe, zero cost).
//!
//! Rules the rest of the crate follows so the switch stays trivial:
//! - constructors are plain (not `const fn`), because loom's atomics cannot be built in a
//!   constant; the kernel creates this crate's objects at boot;
//! - the only lock is [`Mutex`], whose `lock()` returns a guard directly in both builds;
//! - busy-wait loops call [`spin_loop`], which under loom yields to the scheduler so that a
//!   spinning thread cannot hide the thread it is waiting for.

#[cfg(not(loom))]
pub use core::sync::atomic::{
    AtomicBool, AtomicU8, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

#[cfg(loom)]
pub use loom::sync::atomic::{
    AtomicBool, AtomicU8, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

/// A mutual-exclusion lock that spins (normal builds) or is modelled by loom.
pub struct Mutex<T> {
    #[cfg(not(loom))]
    inner: spin::Mutex<T>,
    #[cfg(loom)]
    inner: loom::sync::Mutex<T>,
}

/// The guard returned by [`Mutex::lock`].
#[cfg(not(loom))]
pub type MutexGuard<'a, T> = spin::MutexGuard<'a, T>;
/// The guard returned by [`Mutex::lock`].
#[cfg(loom)]
pub type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    /// Wraps `value` in an unlocked mutex.
    pub fn new(value: T) -> Self {
        Self {
            #[cfg(not(loom))]
            inner: spin::Mutex::new(value),
            #[cfg(loom)]
            inner: loom::sync::Mutex::new(value),
        }
    }

    /// Takes the lock, spinning until it is free.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        #[cfg(not(loom))]
        {
            self.inner.lock()
        }
        #[cfg(loom)]
        {
            // loom's mutex can only be poisoned by a panicking model thread, which already
            // fails the test.
            self.inner.lock().unwrap()
        }
    }
}

/// The body of every busy-wait loop in this crate.
#[inline]
pub fn spin_loop() {
    #[cfg(not(loom))]
    core::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}
