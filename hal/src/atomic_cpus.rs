//! A CPU set several CPUs update at once, for this layer's own bookkeeping: which CPUs are
//! online, which still owe a cross-call its answer, which were already asked where they are
//! stuck.
//!
//! Plain sets are `tlb_types::CpuSet`, the type every layer speaks; a snapshot of this one
//! is one. (The TLB protocol's shared sets are `mm::AtomicCpuSet`, built on atomics the loom
//! checks replace; this layer cannot use them, and needs a set it can put in a `static`.)

use core::sync::atomic::{AtomicU64, Ordering};

use tlb_types::{
    CpuId, CpuSet,
    cpu_set::{WORDS, word_and_bit},
};

/// One bit per CPU, one atomic per 64 CPUs.
pub(crate) struct AtomicCpus {
    words: [AtomicU64; WORDS],
}

impl AtomicCpus {
    /// The empty set.
    pub(crate) const fn new() -> Self {
        Self {
            words: [const { AtomicU64::new(0) }; WORDS],
        }
    }

    pub(crate) fn insert(&self, cpu: CpuId, order: Ordering) {
        let (word, bit) = word_and_bit(cpu);
        self.words[word].fetch_or(bit, order);
    }

    pub(crate) fn remove(&self, cpu: CpuId, order: Ordering) {
        let (word, bit) = word_and_bit(cpu);
        self.words[word].fetch_and(!bit, order);
    }

    pub(crate) fn contains(&self, cpu: CpuId, order: Ordering) -> bool {
        let (word, bit) = word_and_bit(cpu);
        self.words[word].load(order) & bit != 0
    }

    /// The set now, read one word at a time.
    pub(crate) fn snapshot(&self, order: Ordering) -> CpuSet {
        CpuSet::from_words(core::array::from_fn(|word| self.words[word].load(order)))
    }
}
