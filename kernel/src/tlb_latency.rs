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
//! mode's. [`line`] prints them at the end of every run, next to the
//! counters:
//!
//! ```text
//! tlb-latency: mode=ipi remote_count=812 remote_median_ns=47103 remote_p99_ns=180223 remote_max_ns=912345 local_count=40 ...
//! ```
//!
//! An empty distribution prints `count=0` and `none` for the others.

use alloc::string::String;
use core::{
    fmt::{self, Write},
    sync::atomic::{AtomicU64, Ordering},
};

use crate::tlb;
use hal::percpu;
use hal::time;

/// Each power of two is split into `1 << SUB_BITS` buckets.
const SUB_BITS: u32 = 3;
const SUBS: usize = 1 << SUB_BITS;
/// Values from `2^TOP_EXPONENT` ns (about 69 s) on share the last bucket.
const TOP_EXPONENT: u32 = 36;
/// Group 0 holds `0..SUBS` one value per bucket; group `g >= 1` holds
/// `SUBS << (g - 1) .. SUBS << g`.
const BUCKETS: usize = (TOP_EXPONENT - SUB_BITS + 1) as usize * SUBS;

/// The bucket that counts `value`.
fn bucket_of(value: u64) -> usize {
    if value < SUBS as u64 {
        return value as usize;
    }
    let exponent = 63 - value.leading_zeros();
    if exponent >= TOP_EXPONENT {
        return BUCKETS - 1;
    }
    let group = (exponent - SUB_BITS + 1) as usize;
    let part = (value >> (exponent - SUB_BITS)) as usize & (SUBS - 1);
    group * SUBS + part
}

/// The smallest and largest value bucket `index` counts (the last bucket
/// also counts everything above its range).
fn bucket_bounds(index: usize) -> (u64, u64) {
    let (group, part) = (index / SUBS, (index % SUBS) as u64);
    if group == 0 {
        return (part, part);
    }
    let shift = group - 1;
    let low = (SUBS as u64 + part) << shift;
    let high = if index == BUCKETS - 1 {
        u64::MAX
    } else {
        low + (1 << shift) - 1
    };
    (low, high)
}

/// A distribution of durations (see the module docs).
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS],
    max: AtomicU64,
}

impl Histogram {
    pub const fn new() -> Self {
        Self {
            buckets: [const { AtomicU64::new(0) }; BUCKETS],
            max: AtomicU64::new(0),
        }
    }

    pub fn record(&self, ns: u64) {
        self.buckets[bucket_of(ns)].fetch_add(1, Ordering::Relaxed);
        self.max.fetch_max(ns, Ordering::Relaxed);
    }

    /// Count, median, 99th percentile and maximum of what was recorded.
    pub fn summary(&self) -> Summary {
        let counts: [u64; BUCKETS] =
            core::array::from_fn(|index| self.buckets[index].load(Ordering::Relaxed));
        let count = counts.iter().sum();
        // `record` bumps the bucket before the maximum, so a concurrent
        // sample can be counted before its maximum is seen: take the
        // larger of the two, never a value below a counted sample's bucket.
        let highest_bucket = counts.iter().rposition(|&n| n > 0);
        let max = highest_bucket.map(|index| {
            let recorded = self.max.load(Ordering::Relaxed);
            recorded.max(bucket_bounds(index).0)
        });
        let percentile = |numerator: u64, denominator: u64| {
            percentile(&counts, count, numerator, denominator).map(|ns| ns.min(max.unwrap_or(ns)))
        };
        Summary {
            count,
            median_ns: percentile(1, 2),
            p99_ns: percentile(99, 100),
            max_ns: max,
        }
    }
}

/// The nearest-rank `numerator/denominator` percentile of `count` samples
/// distributed as `counts`: the upper edge of the bucket holding the sample
/// of rank `ceil(count * numerator / denominator)` (at least 1).
fn percentile(counts: &[u64], count: u64, numerator: u64, denominator: u64) -> Option<u64> {
    if count == 0 {
        return None;
    }
    let rank = (u128::from(count) * u128::from(numerator))
        .div_ceil(u128::from(denominator))
        .max(1);
    let mut seen = 0u128;
    counts.iter().enumerate().find_map(|(index, &n)| {
        seen += u128::from(n);
        (seen >= rank).then(|| bucket_bounds(index).1)
    })
}

/// What [`Histogram::summary`] reports; `None` for an empty histogram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    pub count: u64,
    pub median_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub max_ns: Option<u64>,
}

impl Summary {
    /// `<prefix>_count=N <prefix>_median_ns=... <prefix>_p99_ns=... <prefix>_max_ns=...`
    fn write_fields(&self, out: &mut impl Write, prefix: &str) -> fmt::Result {
        write!(out, "{prefix}_count={}", self.count)?;
        for (name, value) in [
            ("median_ns", self.median_ns),
            ("p99_ns", self.p99_ns),
            ("max_ns", self.max_ns),
        ] {
            match value {
                Some(ns) => write!(out, " {prefix}_{name}={ns}")?,
                None => write!(out, " {prefix}_{name}=none")?,
            }
        }
        Ok(())
    }
}

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
    started_ns: u64,
}

/// The initiator-side operations that reach other CPUs, as counted on `cpu`.
fn remote_ops(cpu: usize) -> u64 {
    let counters = tlb::system().cpu(cpu).counters();
    counters.ipis_sent.load(Ordering::Relaxed) + counters.broadcast_ops.load(Ordering::Relaxed)
}

impl Timing {
    pub fn start() -> Self {
        let cpu = percpu::current().index;
        Self {
            cpu,
            remote_ops: remote_ops(cpu),
            started_ns: time::now_ns(),
        }
    }

    /// Records the flush's duration in the remote or local distribution.
    pub fn finish(self) {
        let took = time::now_ns().saturating_sub(self.started_ns);
        if remote_ops(self.cpu) != self.remote_ops {
            REMOTE.record(took);
        } else {
            LOCAL.record(took);
        }
    }
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

pub mod tests {
    //! In-kernel tests of the histogram's buckets and percentiles.

    use super::{BUCKETS, Histogram, SUBS, Summary, bucket_bounds, bucket_of};
    use crate::ktest::{Test, TestResult};
    use crate::{check, check_eq};

    pub const TESTS: &[Test] = &[
        Test::new(
            "tlb_latency::buckets_tile_the_number_line",
            buckets_tile_the_number_line,
        ),
        Test::new(
            "tlb_latency::every_value_lands_in_its_bucket",
            every_value_lands_in_its_bucket,
        ),
        Test::new(
            "tlb_latency::percentiles_of_a_uniform_spread",
            percentiles_of_a_uniform_spread,
        ),
        Test::new(
            "tlb_latency::percentiles_of_a_skewed_spread",
            percentiles_of_a_skewed_spread,
        ),
        Test::new(
            "tlb_latency::empty_and_single_valued",
            empty_and_single_valued,
        ),
    ];

    /// Consecutive buckets leave no gap and do not overlap; each is at most
    /// an eighth of its lower bound wide.
    fn buckets_tile_the_number_line() -> TestResult {
        check_eq!(bucket_bounds(0), (0, 0));
        check_eq!(bucket_bounds(BUCKETS - 1).1, u64::MAX);
        for index in 1..BUCKETS {
            let (previous_low, previous_high) = bucket_bounds(index - 1);
            let (low, high) = bucket_bounds(index);
            check!(
                previous_low <= previous_high,
                "bucket {} is empty",
                index - 1
            );
            check_eq!(
                previous_high + 1,
                low,
                "between buckets {} and {index}",
                index - 1
            );
            if (SUBS..BUCKETS - 1).contains(&index) {
                check!(
                    (high - low + 1) * 8 <= low,
                    "bucket {index} ({low}..={high}) is wider than 1/8 of its start"
                );
            }
        }
        Ok(())
    }

    fn every_value_lands_in_its_bucket() -> TestResult {
        let mut values: alloc::vec::Vec<u64> = (0..5000).collect();
        for shift in 3..64 {
            let power = 1u64 << shift;
            values.extend([power - 1, power, power + 1, power + power / 2]);
        }
        values.push(u64::MAX);
        for value in values {
            let index = bucket_of(value);
            check!(index < BUCKETS, "{value} -> bucket {index} out of range");
            let (low, high) = bucket_bounds(index);
            check!(
                low <= value && value <= high,
                "{value} -> bucket {index} = {low}..={high}"
            );
        }
        Ok(())
    }

    /// 1..=1000 ns once each: the median is 500 and the 99th percentile 990
    /// exactly; the histogram may report them up to 12.5% higher, never
    /// lower, and never above the maximum.
    fn percentiles_of_a_uniform_spread() -> TestResult {
        let histogram = Histogram::new();
        for ns in 1..=1000 {
            histogram.record(ns);
        }
        let summary = histogram.summary();
        check_eq!(summary.count, 1000);
        check_eq!(summary.max_ns, Some(1000));
        let median = summary.median_ns.unwrap_or(0);
        check!(
            (500..=562).contains(&median),
            "median {median}, want 500..=562"
        );
        let p99 = summary.p99_ns.unwrap_or(0);
        check!((990..=1000).contains(&p99), "p99 {p99}, want 990..=1000");
        Ok(())
    }

    /// 98 fast flushes and 2 slow ones: the median stays with the fast
    /// ones, the 99th percentile (rank 99) is the first slow one.
    fn percentiles_of_a_skewed_spread() -> TestResult {
        let histogram = Histogram::new();
        for _ in 0..98 {
            histogram.record(2_000);
        }
        histogram.record(1_000_000);
        histogram.record(5_000_000);
        let summary = histogram.summary();
        check_eq!(summary.count, 100);
        let median = summary.median_ns.unwrap_or(0);
        check!((2_000..=2_250).contains(&median), "median {median}");
        let p99 = summary.p99_ns.unwrap_or(0);
        check!((1_000_000..=1_125_000).contains(&p99), "p99 {p99}");
        check_eq!(summary.max_ns, Some(5_000_000));
        Ok(())
    }

    fn empty_and_single_valued() -> TestResult {
        check_eq!(
            Histogram::new().summary(),
            Summary {
                count: 0,
                median_ns: None,
                p99_ns: None,
                max_ns: None,
            }
        );
        // One repeated value: every percentile is that value (the bucket's
        // upper edge is capped by the maximum), even in the last bucket.
        for value in [0, 7, 12_345, u64::MAX] {
            let histogram = Histogram::new();
            for _ in 0..5 {
                histogram.record(value);
            }
            let summary = histogram.summary();
            check_eq!(summary.count, 5);
            check_eq!(summary.median_ns, Some(value), "value {value}");
            check_eq!(summary.p99_ns, Some(value), "value {value}");
            check_eq!(summary.max_ns, Some(value), "value {value}");
        }
        Ok(())
    }
}
