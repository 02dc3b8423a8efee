//! Waiting that gives the CPU away.
//!
//! A spinlock's waiter keeps its CPU busy until the holder lets go. That is
//! fine when holders are quick, and ruinous when a holder waits for other
//! CPUs itself, as a TLB shootdown does: on real hardware the spinning CPU
//! could have run another thread; under an emulator that runs each virtual
//! CPU as a host thread on fewer host cores it is worse, because the
//! spinning vCPU takes the host core from the very vCPU that the holder's
//! IPI or TLBSYNC is waiting for, so the holder waits longer, so more CPUs
//! spin. Linux's `mmap_lock` is a sleeping lock for this reason.
//!
//! [`WaitQueue`] parks threads until a condition may have changed;
//! [`RwLock`] is a reader-writer lock built on it that spins only briefly
//! and then blocks, so its waiter's CPU halts (or runs another thread) until
//! the holder wakes it.

mod rw_lock;
mod wait_queue;

pub use rw_lock::{ReadGuard, RwLock, Waiting, WriteGuard};
pub use wait_queue::WaitQueue;
