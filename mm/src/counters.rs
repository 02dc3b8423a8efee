//! Event counters and the optional trace hook: how a student *sees* the protocol work.
//!
//! [`Counters`] is a plain struct of relaxed atomics; each CPU owns one (inside its
//! [`crate::CpuTlbState`]) and increments it without contention. Relaxed is enough: the
//! numbers are statistics, never used to decide anything. [`CounterSnapshot`] is a plain copy
//! that can be summed over CPUs, subtracted (deltas of a demo phase) and printed as one
//! parsable `key=value` line.
//!
//! [`TraceEvent`] describes one flush decision (who asked, for which address space, what
//! range, which CPUs were targeted, and why); the kernel receives it through
//! [`crate::TlbHardware::trace`] and may print it or drop it.

use crate::sync::{AtomicU64, Ordering};
use tlb_types::{CpuId, CpuSet};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Per-CPU event counters (see the module docs).
        pub struct Counters {
            $($(#[$doc])* pub $name: AtomicU64,)*
        }

        /// A plain copy of [`Counters`].
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct CounterSnapshot {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl Counters {
            /// All zero.
            pub fn new() -> Self {
                Self { $($name: AtomicU64::new(0),)* }
            }

            /// Reads every counter.
            pub fn snapshot(&self) -> CounterSnapshot {
                CounterSnapshot { $($name: self.$name.load(Ordering::Relaxed),)* }
            }
        }

        impl CounterSnapshot {
            /// Field-wise sum (totals over CPUs).
            pub fn add(&self, other: &Self) -> Self {
                Self { $($name: self.$name + other.$name,)* }
            }

            /// Field-wise difference, saturating at zero (deltas of a phase).
            pub fn delta_since(&self, earlier: &Self) -> Self {
                Self { $($name: self.$name.saturating_sub(earlier.$name),)* }
            }

            /// `(name, value)` pairs in declaration order.
            pub fn fields(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$((stringify!($name), self.$name),)*].into_iter()
            }
        }
    };
}

counters! {
    /// Flush IPIs this CPU sent (one per target CPU).
    ipis_sent,
    /// Flush IPIs this CPU handled.
    ipis_received,
    /// Runs of the flush handler, local or by IPI.
    flush_handler_runs,
    /// Full flushes of the current PCID by the flush handler or an address-space load.
    local_full_flushes,
    /// Address-space loads (context switches) that flushed the new PCID.
    switch_flushes,
    /// Partial (per-page) flushes by the flush handler.
    local_partial_flushes,
    /// Pages invalidated one at a time (INVLPG).
    pages_invalidated,
    /// Operations handed to the broadcast backend.
    broadcast_ops,
    /// Broadcast syncs (TLBSYNC or equivalent).
    broadcast_syncs,
    /// Address spaces this CPU promoted to a global ASID.
    promotions,
    /// ASID transitions this CPU completed.
    transitions_finished,
    /// Global ASID rollovers (flush of all non-global entries everywhere).
    rollovers,
    /// Deferred reclaim batches flushed.
    batch_flushes,
    /// Promotions refused because the global ASID space was exhausted.
    exhaustion_fallbacks,
    /// Times this CPU removed itself from an address space's CPU set.
    cpu_set_trims,
    /// Flush requests turned into full flushes by the page ceiling.
    ceiling_full_flushes,
}

impl Default for Counters {
    fn default() -> Self {
        Self::new()
    }
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64, by: u64) {
        counter.fetch_add(by, Ordering::Relaxed);
    }
}

impl core::fmt::Display for CounterSnapshot {
    /// One line: `ipis_sent=3 ipis_received=0 ...`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut first = true;
        for (name, value) in self.fields() {
            if !first {
                f.write_str(" ")?;
            }
            first = false;
            write!(f, "{name}={value}")?;
        }
        Ok(())
    }
}

/// Why a flush went the way it went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceReason {
    /// Only this CPU could hold the translations: flushed locally, no IPI.
    LocalOnly,
    /// No CPU has the address space loaded; the generation bump is enough.
    GenerationOnly,
    /// Targeted IPIs to the CPUs in `targets`.
    Ipi,
    /// The address space has a global ASID: broadcast invalidation.
    Broadcast,
    /// A kernel-address flush.
    Kernel,
    /// A deferred reclaim batch.
    Batch,
    /// The address space was promoted to a global ASID.
    Promotion,
    /// A global ASID rollover flush.
    Rollover,
}

/// One flush decision, handed to [`crate::TlbHardware::trace`].
#[derive(Clone, Copy, Debug)]
pub struct TraceEvent {
    /// The CPU that asked.
    pub initiator: CpuId,
    /// The address space, if the flush concerns one.
    pub ctx_id: Option<u64>,
    /// The range (`None`: everything).
    pub range: Option<(u64, u64)>,
    /// The CPUs interrupted (empty for broadcast and local-only flushes).
    pub targets: CpuSet,
    /// CPUs of the address space's CPU set that the decision left out: lazy ones, and ones
    /// that run another address space now (each catches up when it next switches in). Empty
    /// unless the decision chose targets among that set.
    pub skipped: CpuSet,
    /// Why.
    pub reason: TraceReason,
}

// loom's atomics only work inside a loom model.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn snapshot_sum_delta_and_line() {
        let c = Counters::new();
        Counters::bump(&c.ipis_sent, 3);
        Counters::bump(&c.rollovers, 1);
        let a = c.snapshot();
        Counters::bump(&c.ipis_sent, 2);
        let b = c.snapshot();
        assert_eq!(b.delta_since(&a).ipis_sent, 2);
        assert_eq!(b.delta_since(&a).rollovers, 0);
        assert_eq!(a.add(&b).ipis_sent, 8);
        let line = b.to_string();
        assert!(line.starts_with("ipis_sent=5 ipis_received=0 "), "{line}");
        assert!(line.contains(" rollovers=1 "), "{line}");
        assert_eq!(line.split(' ').count(), b.fields().count());
    }
}
