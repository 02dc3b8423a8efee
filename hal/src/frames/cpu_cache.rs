//! Per-CPU caches of free frames in front of the global bitmap.
//!
//! Every page fault takes a frame and every `madvise(DONTNEED)` gives one
//! back. With one global allocator lock, threads of one process faulting
//! on four CPUs queue on that lock (with interrupts off, so a queued CPU
//! cannot even answer a TLB shootdown meanwhile), and under an emulator a
//! vCPU that the host descheduled while holding it stalls all the others.
//! So each CPU keeps a small stack of free frames of its own: it takes and
//! returns frames there, touching the global lock only once per
//! [`BATCH`] frames in either direction.
//!
//! A frame in a cache is free: it counts in [`super::free_count`], and an
//! allocation that finds the global bitmap empty takes frames from the
//! other CPUs' caches before it reports exhaustion, so caching never makes
//! memory run out sooner.

use spin::Mutex;
use tlb_types::MAX_CPUS;
use x86_64::PhysAddr;

/// How many frames one CPU keeps at most.
const CAPACITY: usize = 64;
/// How many frames move between a cache and the bitmap at a time.
pub(super) const BATCH: usize = CAPACITY / 2;

/// One CPU's free frames.
pub(super) struct CpuCache {
    frames: [PhysAddr; CAPACITY],
    len: usize,
}

impl CpuCache {
    const fn new() -> Self {
        Self {
            frames: [PhysAddr::zero(); CAPACITY],
            len: 0,
        }
    }

    /// A cached frame, if any.
    pub(super) fn pop(&mut self) -> Option<PhysAddr> {
        self.len = self.len.checked_sub(1)?;
        Some(self.frames[self.len])
    }

    /// Caches `frame`; gives it back if the cache is full.
    pub(super) fn push(&mut self, frame: PhysAddr) -> Result<(), PhysAddr> {
        if self.len == CAPACITY {
            return Err(frame);
        }
        self.frames[self.len] = frame;
        self.len += 1;
        Ok(())
    }

    /// Whether `frame` is cached (a double free).
    pub(super) fn contains(&self, frame: PhysAddr) -> bool {
        self.frames[..self.len].contains(&frame)
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }
}

/// Each CPU's cache, by CPU index. A CPU uses its own with interrupts off
/// (so an interrupt handler on the same CPU cannot find it half-changed);
/// another CPU takes the lock only to drain it when memory runs out.
pub(super) static CACHES: [Mutex<CpuCache>; MAX_CPUS] =
    [const { Mutex::new(CpuCache::new()) }; MAX_CPUS];
