//! Fixed-capacity sets of CPU numbers: [`CpuSet`] (a plain value) and [`AtomicCpuSet`]
//! (shared between CPUs).
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

use crate::sync::{AtomicU64, Ordering};

/// CPU number, `0..MAX_CPUS`. The kernel's numbering (not APIC ids).
pub type CpuId = usize;

/// Largest number of CPUs any set can hold.
pub const MAX_CPUS: usize = 256;

const WORDS: usize = MAX_CPUS / 64;

fn split(cpu: CpuId) -> (usize, u64) {
    assert!(
        cpu < MAX_CPUS,
        "CPU {cpu} out of range (MAX_CPUS = {MAX_CPUS})"
    );
    (cpu / 64, 1u64 << (cpu % 64))
}

/// A set of CPU numbers, copied by value.
#[derive(Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct CpuSet {
    words: [u64; WORDS],
}

impl CpuSet {
    /// The empty set.
    pub const fn new() -> Self {
        Self { words: [0; WORDS] }
    }

    /// The set whose CPU `64 * w + b` is bit `b` of `words[w]`: how the
    /// kernel moves a set to and from the hardware layer's CPU mask.
    pub const fn from_words(words: [u64; WORDS]) -> Self {
        Self { words }
    }

    /// The set as words (see [`Self::from_words`]).
    pub const fn words(&self) -> [u64; WORDS] {
        self.words
    }

    /// CPUs `0..n`: what a kernel with `n` CPUs online reports.
    pub fn first_n(n: usize) -> Self {
        assert!(n <= MAX_CPUS, "{n} CPUs exceed MAX_CPUS = {MAX_CPUS}");
        let mut set = Self::new();
        for cpu in 0..n {
            set.insert(cpu);
        }
        set
    }

    /// The set holding only `cpu`.
    pub fn single(cpu: CpuId) -> Self {
        let mut set = Self::new();
        set.insert(cpu);
        set
    }

    /// Adds `cpu`; returns whether it was already present.
    pub fn insert(&mut self, cpu: CpuId) -> bool {
        let (w, bit) = split(cpu);
        let was = self.words[w] & bit != 0;
        self.words[w] |= bit;
        was
    }

    /// Removes `cpu`; returns whether it was present.
    pub fn remove(&mut self, cpu: CpuId) -> bool {
        let (w, bit) = split(cpu);
        let was = self.words[w] & bit != 0;
        self.words[w] &= !bit;
        was
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: CpuId) -> bool {
        let (w, bit) = split(cpu);
        self.words[w] & bit != 0
    }

    /// Number of CPUs in the set.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// Adds every CPU of `other`.
    pub fn union_with(&mut self, other: &CpuSet) {
        for (a, b) in self.words.iter_mut().zip(other.words.iter()) {
            *a |= b;
        }
    }

    /// The CPUs in both sets.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        let mut out = *self;
        for (a, b) in out.words.iter_mut().zip(other.words.iter()) {
            *a &= b;
        }
        out
    }

    /// This set without `cpu`.
    pub fn without(&self, cpu: CpuId) -> CpuSet {
        let mut out = *self;
        out.remove(cpu);
        out
    }

    /// Whether the set holds a CPU other than `cpu` (the "one-CPU shortcut" test).
    pub fn has_other_than(&self, cpu: CpuId) -> bool {
        !self.without(cpu).is_empty()
    }

    /// Removes every CPU.
    pub fn clear(&mut self) {
        self.words = [0; WORDS];
    }

    /// The CPUs in increasing order.
    pub fn iter(&self) -> CpuSetIter {
        CpuSetIter {
            words: self.words,
            word: 0,
        }
    }
}

impl core::fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl FromIterator<CpuId> for CpuSet {
    fn from_iter<I: IntoIterator<Item = CpuId>>(iter: I) -> Self {
        let mut set = CpuSet::new();
        for cpu in iter {
            set.insert(cpu);
        }
        set
    }
}

impl IntoIterator for &CpuSet {
    type Item = CpuId;
    type IntoIter = CpuSetIter;
    fn into_iter(self) -> CpuSetIter {
        self.iter()
    }
}

/// Iterator over a [`CpuSet`] in increasing CPU order.
pub struct CpuSetIter {
    words: [u64; WORDS],
    word: usize,
}

impl Iterator for CpuSetIter {
    type Item = CpuId;
    fn next(&mut self) -> Option<CpuId> {
        while self.word < WORDS {
            let w = self.words[self.word];
            if w != 0 {
                let bit = w.trailing_zeros() as usize;
                self.words[self.word] = w & (w - 1);
                return Some(self.word * 64 + bit);
            }
            self.word += 1;
        }
        None
    }
}

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
        let (w, bit) = split(cpu);
        self.words[w].fetch_or(bit, order) & bit != 0
    }

    /// Removes `cpu`; returns whether it was present.
    pub fn remove(&self, cpu: CpuId, order: Ordering) -> bool {
        let (w, bit) = split(cpu);
        self.words[w].fetch_and(!bit, order) & bit != 0
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: CpuId, order: Ordering) -> bool {
        let (w, bit) = split(cpu);
        self.words[w].load(order) & bit != 0
    }

    /// Copies the set, one word at a time (see the module docs).
    pub fn snapshot(&self, order: Ordering) -> CpuSet {
        let mut out = CpuSet::new();
        for (o, w) in out.words.iter_mut().zip(self.words.iter()) {
            *o = w.load(order);
        }
        out
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
    use super::*;
    use std::vec::Vec;

    #[test]
    fn insert_remove_contains_at_word_edges() {
        let mut set = CpuSet::new();
        for cpu in [0, 1, 63, 64, 127, 128, 200, MAX_CPUS - 1] {
            assert!(!set.contains(cpu));
            assert!(!set.insert(cpu));
            assert!(set.insert(cpu), "second insert reports presence");
            assert!(set.contains(cpu));
        }
        assert_eq!(set.count(), 8);
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            [0, 1, 63, 64, 127, 128, 200, 255]
        );
        assert!(set.remove(64));
        assert!(!set.remove(64));
        assert!(!set.contains(64));
        assert_eq!(set.count(), 7);
    }

    #[test]
    fn empty_and_other_than() {
        let mut set = CpuSet::new();
        assert!(set.is_empty());
        assert!(!set.has_other_than(3));
        set.insert(3);
        assert!(!set.is_empty());
        assert!(
            !set.has_other_than(3),
            "only self: the one-CPU shortcut applies"
        );
        assert!(set.has_other_than(4));
        set.insert(130);
        assert!(set.has_other_than(3));
        set.clear();
        assert!(set.is_empty());
    }

    #[test]
    fn set_algebra() {
        let a: CpuSet = [1, 2, 70].into_iter().collect();
        let b: CpuSet = [2, 70, 255].into_iter().collect();
        let mut u = a;
        u.union_with(&b);
        assert_eq!(u.iter().collect::<Vec<_>>(), [1, 2, 70, 255]);
        assert_eq!(a.intersection(&b).iter().collect::<Vec<_>>(), [2, 70]);
        assert_eq!(CpuSet::first_n(3).iter().collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(CpuSet::first_n(MAX_CPUS).count(), MAX_CPUS);
        assert_eq!(CpuSet::single(9).without(9), CpuSet::new());
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn out_of_range_cpu_panics() {
        CpuSet::new().insert(MAX_CPUS);
    }

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
