//! Host tests of the histogram's buckets and percentiles.

use super::{BUCKETS, Histogram, SUBS, Summary, bucket_bounds, bucket_of};

/// Consecutive buckets leave no gap and do not overlap; each is at most
/// an eighth of its lower bound wide.
#[test]
fn buckets_tile_the_number_line() {
    assert_eq!(bucket_bounds(0), (0, 0));
    assert_eq!(bucket_bounds(BUCKETS - 1).1, u64::MAX);
    for index in 1..BUCKETS {
        let (previous_low, previous_high) = bucket_bounds(index - 1);
        let (low, high) = bucket_bounds(index);
        assert!(
            previous_low <= previous_high,
            "bucket {} is empty",
            index - 1
        );
        assert_eq!(
            previous_high + 1,
            low,
            "between buckets {} and {index}",
            index - 1
        );
        if (SUBS..BUCKETS - 1).contains(&index) {
            assert!(
                (high - low + 1) * 8 <= low,
                "bucket {index} ({low}..={high}) is wider than 1/8 of its start"
            );
        }
    }
}

#[test]
fn every_value_lands_in_its_bucket() {
    let mut values: alloc::vec::Vec<u64> = (0..5000).collect();
    for shift in 3..64 {
        let power = 1u64 << shift;
        values.extend([power - 1, power, power + 1, power + power / 2]);
    }
    values.push(u64::MAX);
    for value in values {
        let index = bucket_of(value);
        assert!(index < BUCKETS, "{value} -> bucket {index} out of range");
        let (low, high) = bucket_bounds(index);
        assert!(
            low <= value && value <= high,
            "{value} -> bucket {index} = {low}..={high}"
        );
    }
}

/// 1..=1000 ns once each: the median is 500 and the 99th percentile 990
/// exactly; the histogram may report them up to 12.5% higher, never
/// lower, and never above the maximum.
#[test]
fn percentiles_of_a_uniform_spread() {
    let histogram = Histogram::new();
    for ns in 1..=1000 {
        histogram.record(ns);
    }
    let summary = histogram.summary();
    assert_eq!(summary.count, 1000);
    assert_eq!(summary.max_ns, Some(1000));
    let median = summary.median_ns.unwrap_or(0);
    assert!(
        (500..=562).contains(&median),
        "median {median}, want 500..=562"
    );
    let p99 = summary.p99_ns.unwrap_or(0);
    assert!((990..=1000).contains(&p99), "p99 {p99}, want 990..=1000");
}

/// 98 fast flushes and 2 slow ones: the median stays with the fast
/// ones, the 99th percentile (rank 99) is the first slow one.
#[test]
fn percentiles_of_a_skewed_spread() {
    let histogram = Histogram::new();
    for _ in 0..98 {
        histogram.record(2_000);
    }
    histogram.record(1_000_000);
    histogram.record(5_000_000);
    let summary = histogram.summary();
    assert_eq!(summary.count, 100);
    let median = summary.median_ns.unwrap_or(0);
    assert!((2_000..=2_250).contains(&median), "median {median}");
    let p99 = summary.p99_ns.unwrap_or(0);
    assert!((1_000_000..=1_125_000).contains(&p99), "p99 {p99}");
    assert_eq!(summary.max_ns, Some(5_000_000));
}

#[test]
fn empty_and_single_valued() {
    assert_eq!(
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
        assert_eq!(summary.count, 5);
        assert_eq!(summary.median_ns, Some(value), "value {value}");
        assert_eq!(summary.p99_ns, Some(value), "value {value}");
        assert_eq!(summary.max_ns, Some(value), "value {value}");
    }
}

#[test]
fn counts_since_an_earlier_moment() {
    let histogram = Histogram::new();
    for value in [100, 100, 100] {
        histogram.record(value);
    }
    let earlier = histogram.counts();
    for value in [5000, 5000, 5000, 100] {
        histogram.record(value);
    }
    let recent = histogram.counts().since(&earlier);
    assert_eq!(recent.count(), 4);
    let median = recent
        .median_ns()
        .unwrap_or_else(|| panic!("four samples, no median"));
    assert!(
        (5000..=5000 + 5000 / 8).contains(&median),
        "median {median} of three 5000s and one 100"
    );
    assert_eq!(earlier.plus(&recent), histogram.counts());
    assert_eq!(
        histogram.counts().since(&histogram.counts()).median_ns(),
        None
    );
}
