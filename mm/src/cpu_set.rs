//! [`AtomicCpuSet`]: a set of CPU numbers shared between CPUs (the plain [`CpuSet`] is
//! `tlb_types`', a value every layer speaks).
//!
//! Linux calls the shared form `mm_cpumask`. For every address space it records a
//! *superset* of the CPUs that may hold TLB entries for it: a CPU sets its own bit when it
//! switches to the address space and clears it only later, lazily (when a flush reaches it
//! and it no longer has the address space loaded). A flusher reads the set to decide whom to
//! interrupt, so a bit that is set too late is a missed flush, and a bit that is cleared too
//! early is a missed flush too. That is why every operation of [`AtomicCpuSet`] takes an
//! explicit [`Ordering`]: the caller is the one who knows which race it is closing.
//!
//! The plain [`CpuSet`] is what a flusher works on after taking a snapshot (target lists,
//! deferred-reclaim batches, the set of online CPUs reported by the kernel).
//!
//! A snapshot of an [`AtomicCpuSet`] reads one 64-bit word at a time, so it is not an atomic
//! picture of the whole set. The protocol never needs one: each bit is a fact about one CPU,
//! and the barriers that order a CPU's bit against the flush generation are per bit.

use tlb_types::{
    CpuId, CpuSet, CpuSetIter,
    cpu_set::{WORDS, word_and_bit},
};

use crate::sync::{AtomicU64, Ordering};

/// A CPU set that several CPUs update concurrently (one bit per CPU, one atomic per 64 CPUs).
pub struct AtomicCpuSet {
    words: [AtomicU64; WORDS],
}

impl Default for AtomicCpuSet {
    fn default() -> Self {
        Self::new()
    }
}

impl AtomicCpuSet {
    /// The empty set.
    pub fn new() -> Self {
        Self {
            words: core::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Adds `cpu` with one atomic read-modify-write; returns whether it was already present.
    pub fn insert(&self, cpu: CpuId, order: Ordering) -> bool {
        let (w, bit) = word_and_bit(cpu);
        self.words[w].fetch_or(bit, order) & bit != 0
    }

    /// Removes `cpu`; returns whether it was present.
    pub fn remove(&self, cpu: CpuId, order: Ordering) -> bool {
        let (w, bit) = word_and_bit(cpu);
        self.words[w].fetch_and(!bit, order) & bit != 0
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: CpuId, order: Ordering) -> bool {
        let (w, bit) = word_and_bit(cpu);
        self.words[w].load(order) & bit != 0
    }

    /// Copies the set, one word at a time (see the module docs).
    pub fn snapshot(&self, order: Ordering) -> CpuSet {
        CpuSet::from_words(core::array::from_fn(|w| self.words[w].load(order)))
    }

    /// Number of CPUs in a snapshot.
    pub fn count(&self, order: Ordering) -> usize {
        self.snapshot(order).count()
    }

    /// Whether a snapshot is empty.
    pub fn is_empty(&self, order: Ordering) -> bool {
        self.snapshot(order).is_empty()
    }

    /// Iterates over a snapshot.
    pub fn iter(&self, order: Ordering) -> CpuSetIter {
        self.snapshot(order).iter()
    }
}

impl core::fmt::Debug for AtomicCpuSet {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.snapshot(Ordering::Relaxed).fmt(f)
    }
}

// loom's atomics only work inside a loom model.
#[cfg(all(test, not(loom)))]
mod tests {
    use std::vec::Vec;

    use tlb_types::MAX_CPUS;

    use super::*;

    #[test]
    fn atomic_set_matches_plain_set() {
        let shared = AtomicCpuSet::new();
        let mut plain = CpuSet::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let cpu = (x % MAX_CPUS as u64) as usize;
            if x & (1 << 40) != 0 {
                assert_eq!(shared.insert(cpu, Ordering::SeqCst), plain.insert(cpu));
            } else {
                assert_eq!(shared.remove(cpu, Ordering::SeqCst), plain.remove(cpu));
            }
            assert_eq!(shared.contains(cpu, Ordering::Relaxed), plain.contains(cpu));
        }
        assert_eq!(shared.snapshot(Ordering::Relaxed), plain);
        assert_eq!(shared.count(Ordering::Relaxed), plain.count());
        assert_eq!(shared.is_empty(Ordering::Relaxed), plain.is_empty());
        assert!(shared.iter(Ordering::Relaxed).eq(plain.iter()));
    }

    #[test]
    fn atomic_set_concurrent_inserts_all_land() {
        let shared = std::sync::Arc::new(AtomicCpuSet::new());
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let s = shared.clone();
                std::thread::spawn(move || {
                    for cpu in (t..MAX_CPUS).step_by(4) {
                        s.insert(cpu, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(shared.count(Ordering::Relaxed), MAX_CPUS);
    }
}
