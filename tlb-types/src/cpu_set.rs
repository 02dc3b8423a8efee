//! A set of CPU numbers, copied by value.
//!
//! The protocol works on a [`CpuSet`] whenever it holds a picture rather than the live
//! state: a flush's target list (a snapshot of an address space's CPUs, trimmed), a
//! deferred-reclaim batch's CPUs, the CPUs online. The hardware layer takes the same type
//! for a cross-call's targets, so a set goes from the decision to the IPIs as it is.
//!
//! The live sets that several CPUs update at once (Linux's `mm_cpumask`) are `mm`'s
//! `AtomicCpuSet`, whose atomics the loom checks replace.

/// CPU number, `0..MAX_CPUS`. The kernel's numbering (not APIC ids).
pub type CpuId = usize;

/// Largest number of CPUs any set can hold.
pub const MAX_CPUS: usize = 256;

/// Words of a set.
pub const WORDS: usize = MAX_CPUS / 64;

/// The word of a set that holds `cpu`, and `cpu`'s bit in it. Panics on a CPU number of
/// `MAX_CPUS` or more.
#[inline]
pub fn word_and_bit(cpu: CpuId) -> (usize, u64) {
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
    #[inline]
    pub const fn new() -> Self {
        Self { words: [0; WORDS] }
    }

    /// The set whose CPU `64 * w + b` is bit `b` of `words[w]` (how an atomic set's
    /// snapshot is taken, one word at a time).
    #[inline]
    pub const fn from_words(words: [u64; WORDS]) -> Self {
        Self { words }
    }

    /// The set as words (see [`Self::from_words`]).
    #[inline]
    pub const fn words(&self) -> [u64; WORDS] {
        self.words
    }

    /// CPUs `0..n`: what a kernel with `n` CPUs online reports.
    #[inline]
    pub fn first_n(n: usize) -> Self {
        assert!(n <= MAX_CPUS, "{n} CPUs exceed MAX_CPUS = {MAX_CPUS}");
        let mut set = Self::new();
        for cpu in 0..n {
            set.insert(cpu);
        }
        set
    }

    /// The set holding only `cpu`.
    #[inline]
    pub fn single(cpu: CpuId) -> Self {
        let mut set = Self::new();
        set.insert(cpu);
        set
    }

    /// Adds `cpu`; returns whether it was already present.
    #[inline]
    pub fn insert(&mut self, cpu: CpuId) -> bool {
        let (w, bit) = word_and_bit(cpu);
        let was = self.words[w] & bit != 0;
        self.words[w] |= bit;
        was
    }

    /// Removes `cpu`; returns whether it was present.
    #[inline]
    pub fn remove(&mut self, cpu: CpuId) -> bool {
        let (w, bit) = word_and_bit(cpu);
        let was = self.words[w] & bit != 0;
        self.words[w] &= !bit;
        was
    }

    /// Whether `cpu` is in the set.
    #[inline]
    pub fn contains(&self, cpu: CpuId) -> bool {
        let (w, bit) = word_and_bit(cpu);
        self.words[w] & bit != 0
    }

    /// Number of CPUs in the set.
    #[inline]
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// Adds every CPU of `other`.
    #[inline]
    pub fn union_with(&mut self, other: &CpuSet) {
        for (a, b) in self.words.iter_mut().zip(other.words.iter()) {
            *a |= b;
        }
    }

    /// The CPUs in both sets.
    #[inline]
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        let mut out = *self;
        for (a, b) in out.words.iter_mut().zip(other.words.iter()) {
            *a &= b;
        }
        out
    }

    /// The CPUs of this set that are not in `other`.
    #[inline]
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        let mut out = *self;
        for (a, b) in out.words.iter_mut().zip(other.words.iter()) {
            *a &= !b;
        }
        out
    }

    /// This set without `cpu`.
    #[inline]
    pub fn without(&self, cpu: CpuId) -> CpuSet {
        let mut out = *self;
        out.remove(cpu);
        out
    }

    /// Whether the set holds a CPU other than `cpu` (the "one-CPU shortcut" test).
    #[inline]
    pub fn has_other_than(&self, cpu: CpuId) -> bool {
        !self.without(cpu).is_empty()
    }

    /// Removes every CPU.
    #[inline]
    pub fn clear(&mut self) {
        self.words = [0; WORDS];
    }

    /// The CPUs in increasing order.
    #[inline]
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
    #[inline]
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
    #[inline]
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
    #[inline]
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

#[cfg(test)]
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
        assert_eq!(a.difference(&b).iter().collect::<Vec<_>>(), [1]);
        assert_eq!(b.difference(&a).iter().collect::<Vec<_>>(), [255]);
        assert_eq!(CpuSet::first_n(3).iter().collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(CpuSet::first_n(MAX_CPUS).count(), MAX_CPUS);
        assert_eq!(CpuSet::single(9).without(9), CpuSet::new());
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn out_of_range_cpu_panics() {
        CpuSet::new().insert(MAX_CPUS);
    }
}
