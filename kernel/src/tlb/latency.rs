//! How long a flush takes, as the CPU that asked for it sees it.
//!
//! The counters say *how many* IPIs and broadcasts a workload causes; they
//! cannot say what each one costs. The cost that matters is the initiator's
//! wait: a thread that unmaps a page cannot reuse the frame (or return to
//! user space) until every CPU that may cache the translation has dropped
//! it. That wait is the *shootdown latency*: from the flush request to its
//! completion, measured on the initiating CPU around the wrappers in
//! [`crate::tlb`] (`flush_range`, `flush_all` and the batched reclaim
//! flush), which bracket their call to `mm` with [`Timing::start`] and
//! [`Timing::finish`].
//!
//! A flush that only touched the local TLB (one thread, or every other CPU
//! lazy) takes a few microseconds; one that had to reach other CPUs waits
//! for their acknowledgements. Mixing both would hide the shootdowns among
//! the cheap local flushes, so each flush is put in one of two
//! distributions: **remote** if the initiating CPU's `ipis_sent` or
//! `broadcast_ops` counter moved during the flush, **local** otherwise. (A
//! flush preempted in the middle could be charged with another thread's
//! IPIs on the same CPU; flushes run with few instructions between
//! preemption points, so this is rare and only moves a sample between the
//! two distributions.)
//!
//! Each distribution is a [`Histogram`] of relaxed atomics: every CPU
//! records without a lock, and nothing ever decides anything from these
//! numbers, so no ordering is needed. Buckets are *log-linear*: each power
//! of two is split into 8 equal parts, so a bucket is at most 1/8 of its
//! lower bound wide. A percentile is reported as the upper edge of the
//! bucket it falls in (capped at the largest value recorded), hence at most
//! 12.5% above the true value and never below it. Values are nanoseconds
//! from [`hal::time::now_ns`]; under QEMU's TCG they are emulated time,
//! useful for comparing modes, not as hardware numbers.
//!
//! The mode is chosen once per boot, so one run's distributions are that
//! mode's. [`line()`] prints them at the end of every run, next to the
//! counters:
//!
//! ```text
//! tlb-latency: mode=ipi remote_count=812 remote_median_ns=47103 remote_p99_ns=180223 remote_max_ns=912345 local_count=40 ...
//! ```
//!
//! An empty distribution prints `count=0` and `none` for the others.

use alloc::string::String;
use core::sync::atomic::Ordering;

use crate::{
    histogram::{Counts, Histogram},
    tlb,
};
use hal::percpu;
use hal::time;

/// Flushes that interrupted other CPUs (IPIs or broadcast operations).
static REMOTE: Histogram = Histogram::new();
/// Flushes that stayed on the initiating CPU.
static LOCAL: Histogram = Histogram::new();

/// One flush being timed: created just before the request, consumed when
/// it has completed.
#[must_use = "a timing records nothing until `finish` is called"]
pub struct Timing {
    cpu: usize,
    remote_ops: u64,
    /// The TSC at the request (one reading, shared with the breakdown).
    started: u64,
}

/// The initiator-side operations that reach other CPUs, as counted on `cpu`.
fn remote_ops(cpu: usize) -> u64 {
    let counters = tlb::system().cpu(cpu).counters();
    counters.ipis_sent.load(Ordering::Relaxed) + counters.broadcast_ops.load(Ordering::Relaxed)
}

impl Timing {
    pub fn start() -> Self {
        let cpu = percpu::current().index;
        let started = time::ticks();
        tlb::breakdown::request_started(cpu, started);
        Self {
            cpu,
            remote_ops: remote_ops(cpu),
            started,
        }
    }

    /// Records the flush's duration in the remote or local distribution,
    /// and returns when it started and finished (TSC), for the timeline.
    pub fn finish(self) -> (u64, u64) {
        let now = time::ticks();
        let took = time::ticks_to_ns(now.saturating_sub(self.started));
        tlb::breakdown::request_finished(self.cpu, now);
        if remote_ops(self.cpu) != self.remote_ops {
            REMOTE.record(took);
        } else {
            LOCAL.record(took);
        }
        (self.started, now)
    }
}

/// Every flush request timed so far, remote and local together, to tell
/// what a stretch of work cost (see [`Counts::since`]).
pub fn all_requests() -> Counts {
    REMOTE.counts().plus(&LOCAL.counts())
}

/// Both distributions since boot, as one parsable line.
pub fn line() -> String {
    let mut line = alloc::format!("tlb-latency: mode={} ", tlb::mode());
    // Writing into a `String` cannot fail.
    let _ = REMOTE.summary().write_fields(&mut line, "remote");
    line.push(' ');
    let _ = LOCAL.summary().write_fields(&mut line, "local");
    line
}
