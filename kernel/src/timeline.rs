//! The timeline of `tlb.timeline=on`: what each CPU did in each shootdown,
//! and when, as events the host turns into a picture.
//!
//! The text trace (`tlb.trace=on`) says what `mm` decided; it cannot show
//! that CPU 1 was still in its flush handler while CPU 0 spun for its
//! answer, or how long the IPI took to arrive. A timeline can: every CPU
//! records, on its own clock (nanoseconds since boot, from a TSC that runs
//! in step on every CPU), the steps it took part in:
//!
//! | event            | on              | meaning                                                   |
//! |------------------|-----------------|-----------------------------------------------------------|
//! | `request-begin`  | the initiator   | a flush request starts (`tlb::flush_range` and friends)   |
//! | `decision`       | the initiator   | `mm`'s choice: address space, range, reason, CPUs skipped |
//! | `ipis-sent`      | the initiator   | round `round` of IPIs goes out to `targets`, `for` a flush or a broadcast |
//! | `handler-begin`  | each target     | the target enters its handler for `from`'s round          |
//! | `handler-end`    | each target     | it is done, with what it flushed (full, pages, trims)     |
//! | `answers-seen`   | the initiator   | every target of the round has answered                    |
//! | `invlpgb`        | the initiator   | one INVLPGB with its operands                             |
//! | `tlbsync-begin`/`-end` | the initiator | the wait for this CPU's INVLPGBs                    |
//! | `request-end`    | the initiator   | the request returns                                       |
//!
//! A round of the software broadcast backend is a round of IPIs too
//! (`for=broadcast`; its `decision` follows with reason `Broadcast`). Each event goes into its
//! CPU's bounded buffer while the system runs ([`crate::tlb::recorder`]) and
//! is printed at the end of the run as one line; the host runner reads the
//! lines back (`cargo run -- --timeline DIR`):
//!
//! ```text
//! timeline: cpu=0 ns=81234567 ipis-sent round=3 for=flush targets=1,2
//! timeline: cpu=1 ns=81236012 handler-begin from=0 round=3
//! timeline: cpu=1 ns=81237120 handler-end from=0 round=3 full=0 partial=1 pages=1 trims=0
//! timeline-end: cpus=4 capacity=4096 recorded=9120 dropped=0
//! ```
//!
//! This module is pure (built and tested on the host too): the events,
//! their packing into a buffer slot's words, and their line format in both
//! directions.

mod line;
mod slot;

use mm::CpuSet;
use tlb_types::InvlpgbOperands;

/// Why a flush went the way it went: `mm`'s word, which a [`Decision`]
/// carries.
pub use mm::TraceReason;

pub use line::{END_PREFIX, PREFIX, ParseError, Summary, parse_lines};
pub use slot::PAYLOAD_WORDS;

/// One event of one CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// The CPU that recorded it.
    pub cpu: usize,
    /// When, in nanoseconds since boot.
    pub ns: u64,
    pub kind: Kind,
}

/// What happened (see the module docs' table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    RequestBegin,
    Decision(Decision),
    IpisSent {
        round: u64,
        purpose: Purpose,
        targets: CpuSet,
    },
    HandlerBegin {
        from: usize,
        round: u64,
    },
    HandlerEnd {
        from: usize,
        round: u64,
        flushed: Flushed,
    },
    AnswersSeen {
        round: u64,
    },
    Invlpgb(InvlpgbOperands),
    TlbsyncBegin,
    TlbsyncEnd,
    RequestEnd,
}

/// What a round of IPIs carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// A targeted flush: `mm` chose the targets (mode `ipi`, and address
    /// spaces without a global ASID).
    Flush,
    /// The software broadcast backend's stand-in for INVLPGB: every
    /// online CPU.
    Broadcast,
}

impl Purpose {
    fn name(self) -> &'static str {
        match self {
            Self::Flush => "flush",
            Self::Broadcast => "broadcast",
        }
    }

    fn named(name: &str) -> Option<Self> {
        [Self::Flush, Self::Broadcast]
            .into_iter()
            .find(|purpose| purpose.name() == name)
    }
}

/// `mm`'s decision about one flush request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The address space (`None`: the kernel's mappings, or whatever a
    /// batch found loaded).
    pub ctx: Option<u64>,
    /// The range (`None`: everything).
    pub range: Option<(u64, u64)>,
    pub reason: TraceReason,
    /// CPUs of the address space's CPU set that got no IPI: lazy ones, and
    /// ones that run something else (they catch up when they switch in).
    pub skipped: CpuSet,
}

/// What one run of the flush handler did on its CPU, from that CPU's
/// counters before and after it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flushed {
    /// Full flushes of the loaded PCID.
    pub full: u64,
    /// Partial flushes (one INVLPG per page).
    pub partial: u64,
    /// Pages invalidated one at a time.
    pub pages: u64,
    /// Times the CPU left the address space's CPU set (it no longer runs it).
    pub trims: u64,
}

/// Every reason, with its name on the line (its `Debug` form) and its
/// number in a slot (its index).
const REASONS: [TraceReason; 8] = [
    TraceReason::LocalOnly,
    TraceReason::GenerationOnly,
    TraceReason::Ipi,
    TraceReason::Broadcast,
    TraceReason::Kernel,
    TraceReason::Batch,
    TraceReason::Promotion,
    TraceReason::Rollover,
];

#[cfg(test)]
mod tests;
