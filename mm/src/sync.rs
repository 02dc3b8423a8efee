//! The one place this crate gets its atomics, fences and locks from.
//!
//! Every other module writes `use crate::sync::...` and never names `core::sync` or `spin`
//! directly. The reason is model checking: the shootdown protocol is a handful of
//! store-to-load races (publish "switching", then read the flush generation; bump the
//! generation, then read who is loaded), and those races are exactly what random testing on
//! x86 almost never hits. The [`loom`](https://docs.rs/loom) model checker explores every
//! interleaving and every reordering the C11 memory model allows, but only if the code under
//! test uses *its* atomic types. Building with `--cfg loom` swaps the types below for loom's
//! (`RUSTFLAGS="--cfg loom" RUSTDOCFLAGS="--cfg loom" cargo test -p mm`; loom is a
//! dependency only under that cfg, and `spin` only without it). A normal build is untouched
//! (`no_std`, no unsafe, zero cost). Tests that touch atomics outside a loom model are
//! compiled out under loom.
//!
//! Rules the rest of the crate follows so the switch stays trivial:
//! - constructors are plain (not `const fn`), because loom's atomics cannot be built in a
//!   constant; the kernel creates this crate's objects at boot;
//! - the only lock is [`Mutex`], whose `lock()` returns a guard directly in both builds;
//! - busy-wait loops call [`spin_loop`], which under loom yields to the scheduler so that a
//!   spinning thread cannot hide the thread it is waiting for.
//!
//! A third build, feature `model-hooks` (tests only), keeps the real atomics but makes every
//! operation a scheduling point for the host TLB model's deterministic scheduler.

#[cfg(not(any(loom, feature = "model-hooks")))]
pub use core::sync::atomic::{
    AtomicBool, AtomicU8, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

#[cfg(loom)]
pub use loom::sync::atomic::{
    AtomicBool, AtomicU8, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

#[cfg(all(feature = "model-hooks", not(loom)))]
pub use hooked::{
    AtomicBool, AtomicU8, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
    set_schedule_hook,
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
        #[cfg(all(not(loom), not(feature = "model-hooks")))]
        {
            self.inner.lock()
        }
        #[cfg(all(not(loom), feature = "model-hooks"))]
        {
            // Yield to the model's scheduler while the lock is taken, so the holder can run.
            loop {
                hooked::schedule_point();
                if let Some(guard) = self.inner.try_lock() {
                    return guard;
                }
            }
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
    #[cfg(all(not(loom), feature = "model-hooks"))]
    hooked::schedule_point();
    #[cfg(not(loom))]
    core::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// Atomics that call a scheduling hook before every operation (feature `model-hooks`).
///
/// The host model runs each simulated CPU on its own thread but lets only one run at a time;
/// the hook is where it may hand over to another, chosen by a seeded random generator. Every
/// atomic access of this crate is such a point, so the model can stop a CPU between
/// "publish SWITCHING" and "read the generation", which is exactly where the bugs live.
#[cfg(all(feature = "model-hooks", not(loom)))]
// The wrappers mirror core's API; each type uses only part of it.
#[allow(dead_code)]
mod hooked {
    pub use core::sync::atomic::Ordering;

    static HOOK: spin::Once<fn()> = spin::Once::new();

    /// Installs the hook (once per process; later calls are ignored).
    pub fn set_schedule_hook(hook: fn()) {
        HOOK.call_once(|| hook);
    }

    #[inline]
    pub(crate) fn schedule_point() {
        if let Some(hook) = HOOK.get() {
            hook();
        }
    }

    /// A full fence, preceded by a scheduling point.
    pub fn fence(order: Ordering) {
        schedule_point();
        core::sync::atomic::fence(order);
    }

    macro_rules! hooked_atomic {
        ($name:ident, $t:ty) => {
            /// An atomic whose every operation is a scheduling point.
            #[derive(Default)]
            pub struct $name(core::sync::atomic::$name);

            impl $name {
                pub fn new(v: $t) -> Self {
                    Self(core::sync::atomic::$name::new(v))
                }
                pub fn load(&self, o: Ordering) -> $t {
                    schedule_point();
                    self.0.load(o)
                }
                pub fn store(&self, v: $t, o: Ordering) {
                    schedule_point();
                    self.0.store(v, o)
                }
                pub fn swap(&self, v: $t, o: Ordering) -> $t {
                    schedule_point();
                    self.0.swap(v, o)
                }
                pub fn compare_exchange(
                    &self,
                    current: $t,
                    new: $t,
                    success: Ordering,
                    failure: Ordering,
                ) -> Result<$t, $t> {
                    schedule_point();
                    self.0.compare_exchange(current, new, success, failure)
                }
                pub fn fetch_or(&self, v: $t, o: Ordering) -> $t {
                    schedule_point();
                    self.0.fetch_or(v, o)
                }
                pub fn fetch_and(&self, v: $t, o: Ordering) -> $t {
                    schedule_point();
                    self.0.fetch_and(v, o)
                }
            }
        };
    }

    macro_rules! hooked_int {
        ($name:ident, $t:ty) => {
            hooked_atomic!($name, $t);
            impl $name {
                pub fn fetch_add(&self, v: $t, o: Ordering) -> $t {
                    schedule_point();
                    self.0.fetch_add(v, o)
                }
            }
        };
    }

    hooked_atomic!(AtomicBool, bool);
    hooked_int!(AtomicU8, u8);
    hooked_int!(AtomicU16, u16);
    hooked_int!(AtomicU32, u32);
    hooked_int!(AtomicU64, u64);
    hooked_int!(AtomicUsize, usize);
}
