//! Host tests of the profile's numbers, its table and its parsable line.

use std::{string::String, vec, vec::Vec};

use super::{CpuTotals, IDLE, Profile, USER};

/// A name with spaces and a `; ` (an array type) in it.
const TRAIT_METHOD: &str =
    "<kernel::tlb::KernelTlb as mm::hardware::TlbHardware>::local::<[u64; 8]>";

/// Two CPUs; `kernel::a` sampled at two addresses; a trait method whose
/// name has spaces.
fn two_cpus() -> Profile {
    let cpus = vec![
        CpuTotals {
            kernel: 6,
            user: 3,
            idle: 1,
            held: 2,
        },
        CpuTotals {
            kernel: 4,
            user: 0,
            idle: 6,
            held: 1,
        },
    ];
    let samples: Vec<(String, u64, u64)> = vec![
        ("kernel::a".into(), 3, 1),
        ("kernel::b".into(), 2, 0),
        ("kernel::a".into(), 2, 1),
        (TRAIT_METHOD.into(), 3, 0),
        (USER.into(), 3, 1),
        (IDLE.into(), 7, 0),
        ("kernel::never".into(), 0, 0),
    ];
    Profile::new(1000, 2.5, cpus, 0, 4, samples)
}

fn names(profile: &Profile) -> Vec<&str> {
    profile.rows.iter().map(|row| row.name.as_str()).collect()
}

#[test]
fn rows_add_up_per_function_most_samples_first() {
    let profile = two_cpus();
    assert_eq!(profile.samples(), 20);
    assert_eq!(profile.totals.kernel, 10);
    assert_eq!(profile.totals.held, 3);
    // Equal counts (kernel::a 5 ... user and the trait method 3) in name order.
    assert_eq!(
        names(&profile),
        [IDLE, "kernel::a", TRAIT_METHOD, USER, "kernel::b"]
    );
    let a = &profile.rows[1];
    assert_eq!((a.samples, a.held), (5, 2));
}

#[test]
fn the_table_shows_shares_late_samples_and_cpus() {
    let table = two_cpus().table(3);
    assert!(
        table.starts_with("where the time went: 20 samples at 1000 Hz on 2 CPUs over 2.50 s\n"),
        "{table}"
    );
    assert!(
        table.contains("    35.0%        7      -  [idle]\n"),
        "{table}"
    );
    assert!(
        table.contains("    25.0%        5  40.0%  kernel::a\n"),
        "{table}"
    );
    assert!(table.contains("(2 more functions)"), "{table}");
    assert!(!table.contains("kernel::b"), "only the top 3: {table}");
    assert!(
        table.contains("cpu 0: kernel 60.0% user 30.0% idle 10.0% (10 samples, 20.0% held)"),
        "{table}"
    );
    assert!(
        table.contains("cpu 1: kernel 40.0% user 0.0% idle 60.0%"),
        "{table}"
    );
}

#[test]
fn the_line_reads_back() {
    let profile = two_cpus();
    let line = profile.line(40);
    assert!(
        line.starts_with(
            "profile: hz=1000 cpus=2 seconds=2.50 samples=20 kernel=10 user=3 idle=7 held=3 unplaced=0 missed=4 runs=1 top=7:0 [idle] | 5:2 kernel::a | "
        ),
        "{line}"
    );
    let read = Profile::parse_line(&line).expect("its own line");
    assert_eq!(read.rows, profile.rows);
    assert_eq!(read.totals, profile.totals);
    assert_eq!((read.hz, read.runs, read.seconds), (1000, 1, 2.5));
    assert_eq!(read.missed, 4, "missed periods read back");
    assert!(read.cpus.is_empty(), "the line has no per-CPU part");
    // A shorter line lists fewer rows, and still reads back.
    assert_eq!(Profile::parse_line(&profile.line(2)).unwrap().rows.len(), 2);
}

#[test]
fn runs_add_up() {
    let mut sum = Profile::default();
    let one = Profile::parse_line(&two_cpus().line(40)).unwrap();
    sum.add(&one);
    sum.add(&one);
    assert_eq!(sum.runs, 2);
    assert_eq!(sum.samples(), 40);
    assert_eq!(sum.seconds, 5.0);
    assert_eq!(names(&sum), names(&one));
    assert_eq!(sum.rows[1].samples, 10);
    assert_eq!(sum.rows[1].held, 4);
    assert!(sum.table(5).contains("over 5.00 s, 2 runs added up"));
    let again = Profile::parse_line(&sum.line(40)).unwrap();
    assert_eq!(again.runs, 2);
}

#[test]
fn bad_lines_are_refused_with_the_reason() {
    let good = two_cpus().line(40);
    let cases = [
        (String::from("profiles: hz=1"), "does not start"),
        (good.replace(" top=", " tops="), "no top="),
        (good.replace("hz=1000", "hz=fast"), "hz= is not"),
        (
            good.replace("samples=20", "samples=21"),
            "samples= is not kernel=",
        ),
        (
            good.replace("5:2 kernel::a", "5kernel::a"),
            "is not 'samples:held name'",
        ),
        (good.replace(" kernel=10", ""), "no kernel="),
        (
            good.replace("seconds=2.50", "seconds=soon"),
            "seconds= is not",
        ),
    ];
    for (line, why) in cases {
        let error = Profile::parse_line(&line).expect_err(&line);
        assert!(error.0.contains(why), "{line}: {error:?}");
    }
}
