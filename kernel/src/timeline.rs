//! The timeline of `tlb.timeline=on`: what each CPU did in each shootdown,
//! and when, as events the host turns into a picture.
//!
//! The text trace (`tlb.trace=on`) says what `mm` decided; it cannot show
//! that CPU 1 was still in its flush handler while CPU 0 spun for its
//! answer, or how long the IPI took to arrive. A timeline can: every CPU
//! records, on its own clock (nanoseconds since boot, from a TSC that runs
//! in step on every CPU), the steps it took part in:
//!
//! | event          | on            | recorded when                   | says                                                      |
//! |----------------|---------------|---------------------------------|-----------------------------------------------------------|
//! | `decision`     | the initiator | `mm` decides                    | address space, range, reason, CPUs skipped                |
//! | `ipi-round`    | the initiator | every target of the round has answered | round `round` went out `sent` to `targets`, `for` a flush or a broadcast |
//! | `handler`      | each target   | its handler returns             | it `began` for `from`'s round, and what it flushed (full, pages, trims, lazy leaves) |
//! | `invlpgb`      | the initiator | it issues one                   | the INVLPGB's operands                                    |
//! | `tlbsync`      | the initiator | TLBSYNC completes               | it `began` waiting for this CPU's INVLPGBs                |
//! | `request`      | the initiator | the flush request returns       | it `began` (`tlb::flush_range` and friends)               |
//! | `switch-flush` | the switcher  | a switch into an address space flushed | it caught up with flushes it missed (`lazy=yes`: coming back from lazy mode) |
//!
//! A span is one event, written when it ends, with the time it began: one
//! record where a begin and an end would take two, and none on the way in,
//! where the shootdown waits for it. A round of the software broadcast
//! backend is a round of IPIs too (`for=broadcast`; its `decision` follows
//! with reason `Broadcast`). Each event goes into its CPU's bounded buffer
//! while the system runs ([`crate::tlb::recorder`]) and is printed at the
//! end of the run as one line; the host runner reads the lines back
//! (`cargo run -- --timeline DIR`):
//!
//! ```text
//! timeline: cpu=1 ns=81237120 handler from=0 round=3 began=81236012 full=0 partial=1 pages=1 trims=0 lazy_leaves=0
//! timeline: cpu=0 ns=81238003 ipi-round round=3 for=flush targets=1,2 sent=81234567
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

/// How many events each CPU keeps with `tlb.timeline=on`: a two-thread
/// `tlbtest` run of a few hundred flushes records a few thousand; longer
/// runs keep their start, or ask for more with `tlb.timeline=N`.
pub const DEFAULT_CAPACITY: usize = 4096;

/// The capacities `tlb.timeline=N` takes. A slot is 80 bytes, and the
/// buffers come from the kernel's heap: the largest needs 80 MiB per CPU,
/// more than any heap has, and is refused at boot with what it needs.
pub const CAPACITIES: core::ops::RangeInclusive<usize> = 16..=1 << 20;

/// One event of one CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// The CPU that recorded it.
    pub cpu: usize,
    /// When, in nanoseconds since boot.
    pub ns: u64,
    pub kind: Kind,
}

/// What happened (see the module docs' table). A time inside an event
/// (`began`, `sent`) is in the same unit as the event's own: TSC ticks in a
/// buffer slot, nanoseconds since boot on a line ([`Kind::map_times`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Decision(Decision),
    IpiRound {
        round: u64,
        purpose: Purpose,
        targets: CpuSet,
        sent: u64,
    },
    Handler {
        from: usize,
        round: u64,
        began: u64,
        flushed: Flushed,
    },
    Invlpgb(InvlpgbOperands),
    Tlbsync {
        began: u64,
    },
    Request {
        began: u64,
    },
    SwitchFlush {
        ctx: u64,
        lazy: bool,
    },
}

impl Kind {
    /// When a span began (a request, a round's IPIs, a handler, a TLBSYNC);
    /// `None` for a moment (a decision, an INVLPGB, a switch).
    pub fn began(&self) -> Option<u64> {
        match *self {
            Self::IpiRound { sent, .. } => Some(sent),
            Self::Handler { began, .. } | Self::Tlbsync { began } | Self::Request { began } => {
                Some(began)
            }
            Self::Decision(_) | Self::Invlpgb(_) | Self::SwitchFlush { .. } => None,
        }
    }

    /// The same event with `convert` applied to the times it carries, as the
    /// recorder turns a slot's TSC values into nanoseconds since boot.
    pub fn map_times(self, convert: impl Fn(u64) -> u64) -> Self {
        match self {
            Self::IpiRound {
                round,
                purpose,
                targets,
                sent,
            } => Self::IpiRound {
                round,
                purpose,
                targets,
                sent: convert(sent),
            },
            Self::Handler {
                from,
                round,
                began,
                flushed,
            } => Self::Handler {
                from,
                round,
                began: convert(began),
                flushed,
            },
            Self::Tlbsync { began } => Self::Tlbsync {
                began: convert(began),
            },
            Self::Request { began } => Self::Request {
                began: convert(began),
            },
            Self::Decision(_) | Self::Invlpgb(_) | Self::SwitchFlush { .. } => self,
        }
    }
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
    /// Times the CPU, lazy, left the address space for the kernel's (a
    /// flush that frees page tables reaches lazy CPUs this way).
    pub lazy_leaves: u64,
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
