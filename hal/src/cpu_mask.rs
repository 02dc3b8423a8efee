//! Sets of CPUs as the hardware layer sees them: which CPUs are online, which
//! a cross-call targets, which still owe it an answer.
//!
//! The TLB protocol has its own CPU set (`mm::CpuSet`), built on atomics that
//! the loom checks can replace. This layer may not depend on `mm` (nothing in
//! `hal` knows what sits above it), so it keeps this small bitmap of the same
//! width; the kernel converts between the two with [`CpuMask::from_words`]
//! and [`CpuMask::words`], four words copied.

use core::sync::atomic::{AtomicU64, Ordering};

/// A CPU's number in the kernel: 0 for the boot CPU, then in start-up order.
pub type CpuIndex = usize;

/// The most CPUs the kernel runs on.
pub const MAX_CPUS: usize = 256;

/// Words of a mask.
pub const MASK_WORDS: usize = MAX_CPUS / 64;

fn split(cpu: CpuIndex) -> (usize, u64) {
    assert!(
        cpu < MAX_CPUS,
        "CPU {cpu} out of range (MAX_CPUS = {MAX_CPUS})"
    );
    (cpu / 64, 1 << (cpu % 64))
}

/// A set of CPUs, copied by value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuMask {
    words: [u64; MASK_WORDS],
}

impl CpuMask {
    /// The empty set.
    pub const fn new() -> Self {
        Self {
            words: [0; MASK_WORDS],
        }
    }

    /// The set whose CPU `64 * w + b` is bit `b` of `words[w]`.
    pub const fn from_words(words: [u64; MASK_WORDS]) -> Self {
        Self { words }
    }

    /// The set as words (see [`Self::from_words`]).
    pub const fn words(&self) -> [u64; MASK_WORDS] {
        self.words
    }

    pub fn insert(&mut self, cpu: CpuIndex) {
        let (word, bit) = split(cpu);
        self.words[word] |= bit;
    }

    pub fn contains(&self, cpu: CpuIndex) -> bool {
        let (word, bit) = split(cpu);
        self.words[word] & bit != 0
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&word| word == 0)
    }

    /// The CPUs in both sets.
    pub fn intersection(&self, other: &CpuMask) -> CpuMask {
        Self::from_words(core::array::from_fn(|word| {
            self.words[word] & other.words[word]
        }))
    }

    /// The set without `cpu`.
    pub fn without(&self, cpu: CpuIndex) -> CpuMask {
        let (word, bit) = split(cpu);
        let mut mask = *self;
        mask.words[word] &= !bit;
        mask
    }

    pub fn count(&self) -> usize {
        self.words
            .iter()
            .map(|word| word.count_ones() as usize)
            .sum()
    }

    /// The CPUs in increasing order.
    pub fn iter(&self) -> CpuMaskIter {
        self.into_iter()
    }
}

impl IntoIterator for &CpuMask {
    type Item = CpuIndex;
    type IntoIter = CpuMaskIter;

    fn into_iter(self) -> CpuMaskIter {
        CpuMaskIter {
            mask: *self,
            next: 0,
        }
    }
}

/// The CPUs of a [`CpuMask`], in increasing order.
pub struct CpuMaskIter {
    mask: CpuMask,
    next: CpuIndex,
}

impl Iterator for CpuMaskIter {
    type Item = CpuIndex;

    fn next(&mut self) -> Option<CpuIndex> {
        while self.next < MAX_CPUS {
            let word = self.mask.words[self.next / 64] >> (self.next % 64);
            if word == 0 {
                self.next = (self.next / 64 + 1) * 64;
                continue;
            }
            let cpu = self.next + word.trailing_zeros() as usize;
            self.next = cpu + 1;
            return Some(cpu);
        }
        None
    }
}

/// A CPU set several CPUs update at once (one atomic per 64 CPUs).
pub struct AtomicCpuMask {
    words: [AtomicU64; MASK_WORDS],
}

impl AtomicCpuMask {
    /// The empty set.
    pub const fn new() -> Self {
        Self {
            words: [const { AtomicU64::new(0) }; MASK_WORDS],
        }
    }

    pub fn insert(&self, cpu: CpuIndex, order: Ordering) {
        let (word, bit) = split(cpu);
        self.words[word].fetch_or(bit, order);
    }

    pub fn remove(&self, cpu: CpuIndex, order: Ordering) {
        let (word, bit) = split(cpu);
        self.words[word].fetch_and(!bit, order);
    }

    pub fn contains(&self, cpu: CpuIndex, order: Ordering) -> bool {
        let (word, bit) = split(cpu);
        self.words[word].load(order) & bit != 0
    }

    /// The set now, read one word at a time.
    pub fn snapshot(&self, order: Ordering) -> CpuMask {
        CpuMask::from_words(core::array::from_fn(|word| self.words[word].load(order)))
    }

    pub fn is_empty(&self, order: Ordering) -> bool {
        self.words.iter().all(|word| word.load(order) == 0)
    }
}

impl Default for AtomicCpuMask {
    fn default() -> Self {
        Self::new()
    }
}
