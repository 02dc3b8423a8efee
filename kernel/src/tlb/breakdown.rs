//! One shootdown, step by step: where the initiator's wait goes.
//!
//! [`super::latency`] says how long a flush request that reached other CPUs
//! took; this says which part of it each step took, for the requests that
//! sent targeted IPIs (mode `ipi`, and the unpromoted address spaces of the
//! broadcast modes). The steps, on the initiating CPU's clock:
//!
//! | step          | from                              | to                                      |
//! |---------------|-----------------------------------|-----------------------------------------|
//! | `bookkeeping` | the request (`tlb::flush_range`)  | the first IPI is queued: `mm` bumped the generation and chose the targets |
//! | `send`        | queueing                          | every target's ICR write is done        |
//! | `delivery`    | the last ICR write                | the last target enters its handler      |
//! | `handler`     | a target starts its handler       | it has flushed (the longest target, on its own clock) |
//! | `acknowledge` | the last target's flush           | the initiator sees it                   |
//! | `finish`      | the initiator sees the last answer| the request returns: its own flush, the trace, `mm`'s accounting |
//!
//! The times between `send` and `acknowledge` come from [`hal::ipi`]'s
//! [`CallSteps`]; the first and the last from per-CPU timestamps that the
//! request's [`super::latency::Timing`] sets. Each step is a [`Histogram`];
//! [`line()`] prints their medians at the end of a run:
//!
//! ```text
//! tlb-breakdown: requests=48210 bookkeeping_ns=1023 send_ns=2559 delivery_ns=5119 handler_ns=1791 acknowledge_ns=639 finish_ns=1151
//! ```
//!
//! Medians of the steps need not add up to the median request: each is the
//! middle of its own distribution, and under an emulator one step can
//! absorb another's time (see [`CallSteps`]). Under QEMU's TCG every value is emulated
//! time and mostly the cost of emulation; the point is which step is large.

use alloc::string::String;
use core::{
    fmt::Write,
    sync::atomic::{AtomicU64, Ordering},
};

use hal::{ipi::CallSteps, percpu, time};
use mm::MAX_CPUS;

use crate::histogram::Histogram;

/// The steps, in order, with their histograms.
static STEPS: [(&str, Histogram); 6] = [
    ("bookkeeping", Histogram::new()),
    ("send", Histogram::new()),
    ("delivery", Histogram::new()),
    ("handler", Histogram::new()),
    ("acknowledge", Histogram::new()),
    ("finish", Histogram::new()),
];

const BOOKKEEPING: usize = 0;
const FINISH: usize = 5;

/// Per CPU: the TSC when its current flush request began (0: none is
/// timed), and when its last IPI round was answered (0: none yet).
static REQUEST_STARTED: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];
static ANSWERED: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];

/// A timed flush request begins on `cpu` (this one) at TSC `now`.
pub fn request_started(cpu: usize, now: u64) {
    REQUEST_STARTED[cpu].store(now, Ordering::Relaxed);
}

/// This CPU is about to send a request's IPIs: the bookkeeping is over.
/// Returns the TSC now, for [`ipis_answered`].
pub fn sending() -> u64 {
    time::ticks()
}

/// The IPI round that began at `sending` (from [`sending`]) was answered
/// with `steps`.
pub fn ipis_answered(sending: u64, steps: &CallSteps) {
    let cpu = percpu::current().index;
    let started = REQUEST_STARTED[cpu].load(Ordering::Relaxed);
    if started == 0 {
        // Not inside a timed request (an eviction, a test's own call).
        return;
    }
    STEPS[BOOKKEEPING]
        .1
        .record(time::ticks_to_ns(sending.saturating_sub(started)));
    for (step, ns) in [
        steps.send_ns,
        steps.delivery_ns,
        steps.handler_ns,
        steps.acknowledge_ns,
    ]
    .into_iter()
    .enumerate()
    {
        STEPS[1 + step].1.record(ns);
    }
    ANSWERED[cpu].store(time::ticks(), Ordering::Relaxed);
}

/// Per CPU, with `tlb.trace=on`: the steps of its last answered IPI round,
/// until the trace line of that flush prints them (`send`, `delivery`,
/// `handler`, `acknowledge`; all 0: nothing kept).
static FOR_TRACE: [[AtomicU64; 4]; MAX_CPUS] =
    [const { [const { AtomicU64::new(0) }; 4] }; MAX_CPUS];

/// Keeps `steps` of this CPU's IPI round for [`take_for_trace`].
pub fn keep_for_trace(steps: &CallSteps) {
    let kept = &FOR_TRACE[percpu::current().index];
    let values = [
        steps.send_ns,
        steps.delivery_ns,
        steps.handler_ns,
        steps.acknowledge_ns,
    ];
    for (slot, ns) in kept.iter().zip(values) {
        // At least 1, so that a kept round is never all zeroes.
        slot.store(ns.max(1), Ordering::Relaxed);
    }
}

/// The steps [`keep_for_trace`] kept on `cpu` (this one), once, as the
/// line the trace prints under its flush decision:
///
/// ```text
/// tlb-trace: cpu=0 ctx=2 range=0x10000001f000..0x100000020000 targets={0, 1} reason=Ipi
/// tlb-trace:   the IPI round took send_ns=2303 delivery_ns=831 handler_ns=1023 acknowledge_ns=575
/// ```
pub fn take_for_trace(cpu: usize) -> Option<String> {
    let kept = &FOR_TRACE[cpu];
    let values: [u64; 4] = core::array::from_fn(|step| kept[step].swap(0, Ordering::Relaxed));
    if values.iter().all(|&ns| ns == 0) {
        return None;
    }
    Some(alloc::format!(
        "tlb-trace:   the IPI round took send_ns={} delivery_ns={} handler_ns={} acknowledge_ns={}",
        values[0],
        values[1],
        values[2],
        values[3]
    ))
}

/// The timed request on `cpu` (this one) returns at TSC `now`.
pub fn request_finished(cpu: usize, now: u64) {
    let answered = ANSWERED[cpu].swap(0, Ordering::Relaxed);
    if answered != 0 {
        STEPS[FINISH]
            .1
            .record(time::ticks_to_ns(now.saturating_sub(answered)));
    }
    REQUEST_STARTED[cpu].store(0, Ordering::Relaxed);
}

/// The medians of every step since boot, as one parsable line (`none` for a
/// step without samples: no request sent IPIs).
pub fn line() -> String {
    let requests = STEPS[BOOKKEEPING].1.summary().count;
    let mut line = alloc::format!("tlb-breakdown: requests={requests}");
    for (name, histogram) in &STEPS {
        // Writing into a `String` cannot fail.
        let _ = match histogram.summary().median_ns {
            Some(ns) => write!(line, " {name}_ns={ns}"),
            None => write!(line, " {name}_ns=none"),
        };
    }
    line
}
