//! A latency distribution that every CPU records into without a lock: a
//! log-linear histogram of relaxed atomic counters.
//!
//! Each power of two is split into 8 equal buckets, so a bucket is at most
//! 1/8 of its lower bound wide. A percentile is reported as the upper edge
//! of the bucket it falls in (capped at the largest value recorded), hence
//! at most 12.5% above the true value and never below it. Nothing decides
//! anything from these numbers, so no ordering is needed.
//!
//! Pure: unit-tested on the host. [`crate::tlb::latency`] keeps two of them,
//! for the kernel's shootdown latency.

use core::{
    fmt::{self, Write},
    sync::atomic::{AtomicU64, Ordering},
};

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

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
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

    /// How many samples each bucket holds now.
    pub fn counts(&self) -> Counts {
        Counts {
            buckets: core::array::from_fn(|index| self.buckets[index].load(Ordering::Relaxed)),
        }
    }

    /// Count, median, 99th percentile and maximum of what was recorded.
    pub fn summary(&self) -> Summary {
        let counts = self.counts().buckets;
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

/// A histogram's bucket counts at one moment: the difference of two tells
/// what was recorded in between (the demo's per-phase medians).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counts {
    buckets: [u64; BUCKETS],
}

impl Counts {
    /// What was recorded after `earlier` (counts only grow).
    pub fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            buckets: core::array::from_fn(|index| {
                self.buckets[index].saturating_sub(earlier.buckets[index])
            }),
        }
    }

    /// Both sets of samples together.
    pub fn plus(&self, other: &Counts) -> Counts {
        Counts {
            buckets: core::array::from_fn(|index| self.buckets[index] + other.buckets[index]),
        }
    }

    /// How many samples there are.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The median, as the upper edge of its bucket; `None` without samples.
    pub fn median_ns(&self) -> Option<u64> {
        percentile(&self.buckets, self.count(), 1, 2)
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
    pub fn write_fields(&self, out: &mut impl Write, prefix: &str) -> fmt::Result {
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

#[cfg(test)]
mod tests;
