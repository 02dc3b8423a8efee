//! The in-kernel test suite, one host test per in-kernel test.
//!
//! This boots the kernel once with `run=list` to learn the test names, then
//! for each CPU count (on the first test that needs it) once with `run=tests`
//! to run them all. Each in-kernel test becomes a host test named
//! `smp<N>::<kernel test>`, so `cargo test` prints every kernel test by name
//! and a failure says which one and why. One more test per configuration
//! checks the run as a whole: QEMU's exit status and the closing summary.

use std::{
    sync::{Arc, OnceLock},
    time::Duration,
};

use boot::{
    machine::{self, Config, Outcome, Run},
    report::TestOutcome,
};
use libtest_mimic::{Arguments, Failed, Trial};

/// The CPU counts the whole suite runs with: one CPU (where no IPI may be
/// sent), the default four, and odd and larger counts.
const CPU_COUNTS: &[u32] = &[1, 2, 3, 4, 8];

/// A safety net, not a measure (with the default 120 s stall limit): two
/// suites boot at once, beside whatever else the host runs.
const TIMEOUT: Duration = Duration::from_secs(900);

fn boot(config: &Config) -> Run {
    machine::run(config).unwrap_or_else(|error| panic!("cannot boot the kernel: {error}"))
}

/// One configuration's suite run, booted by whichever trial needs it first.
struct SuiteRun {
    config: Config,
    run: OnceLock<Run>,
}

impl SuiteRun {
    fn get(&self) -> &Run {
        self.run.get_or_init(|| boot(&self.config))
    }
}

/// Checks that in-kernel test `name` passed in the suite run.
fn check_test(suite: &SuiteRun, name: &str) -> Result<(), Failed> {
    let run = suite.get();
    let report = run.test_report();
    match report.outcome(name) {
        Some(TestOutcome::Passed) => Ok(()),
        Some(TestOutcome::Failed(reason)) => {
            Err(format!("in-kernel test {name} failed: {reason}").into())
        }
        None if report.unfinished.as_deref() == Some(name) => Err(format!(
            "in-kernel test {name} started but never finished\n{}",
            run.describe()
        )
        .into()),
        None => Err(format!("in-kernel test {name} never ran\n{}", run.describe()).into()),
    }
}

/// Checks the run as a whole: exit status and a summary that matches.
fn check_whole_run(suite: &SuiteRun, expected_tests: usize) -> Result<(), Failed> {
    let run = suite.get();
    let report = run.test_report();
    if run.outcome != Outcome::Success {
        return Err(run.describe().into());
    }
    match report.summary {
        Some((passed, 0)) if passed == expected_tests => Ok(()),
        summary => Err(format!(
            "expected the summary '{expected_tests} passed, 0 failed', got {summary:?}\n{}",
            run.describe()
        )
        .into()),
    }
}

/// The names of the kernel's ordinary (not deliberately failing) tests.
fn kernel_test_names() -> Vec<String> {
    let listing = boot(
        &Config::default()
            .cpus(1)
            .timeout(TIMEOUT)
            .cmdline("run=list"),
    );
    assert_eq!(
        listing.outcome,
        Outcome::Success,
        "run=list failed:\n{}",
        listing.describe()
    );
    let names: Vec<String> = listing
        .test_report()
        .listed
        .into_iter()
        .filter(|test| !test.explicit_only)
        .map(|test| test.name)
        .collect();
    assert!(
        !names.is_empty(),
        "the kernel listed no tests:\n{}",
        listing.describe()
    );
    names
}

/// The trials of one CPU count.
fn trials_for(cpus: u32, names: &[String]) -> Vec<Trial> {
    let config = Config::default().cpus(cpus).timeout(TIMEOUT);
    let suite = Arc::new(SuiteRun {
        config: config.cmdline("run=tests"),
        run: OnceLock::new(),
    });
    let mut trials: Vec<Trial> = names
        .iter()
        .map(|name| {
            let (suite, name) = (Arc::clone(&suite), name.clone());
            Trial::test(format!("smp{cpus}::{name}"), move || {
                check_test(&suite, &name)
            })
        })
        .collect();
    let expected = names.len();
    trials.push(Trial::test(
        format!("smp{cpus}::whole_run_succeeds"),
        move || check_whole_run(&suite, expected),
    ));
    trials
}

fn main() {
    let arguments = Arguments::from_args();
    let names = kernel_test_names();
    let trials = CPU_COUNTS
        .iter()
        .flat_map(|&cpus| trials_for(cpus, &names))
        .collect();
    libtest_mimic::run(&arguments, trials).exit();
}
