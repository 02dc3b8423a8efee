//! The in-kernel test framework.
//!
//! Tests are plain functions returning [`TestResult`], one suite file per
//! area in `src/ktest/suites/`. Every `pub fn name() -> TestResult` in
//! `suites/area.rs` is the test `area::name`: the build script
//! (`kernel/build.rs`) collects them into [`ALL`], so no list is kept by
//! hand. The tests of `suites/harness.rs` fail, panic or hang on purpose, to
//! prove the harness reports each case; they run only when named exactly.
//! One test image holds every test; the command line (`test=<filter>`)
//! selects which run, so the host can run many scenarios without building
//! many images.
//!
//! The output is line-based and meant to be parsed by the host runner:
//!
//! ```text
//! ktest: running 9 tests
//! ktest: run frames::free_makes_frame_reusable
//! ktest: ok frames::free_makes_frame_reusable
//! ktest: run harness::fails
//! ktest: FAIL harness::fails: kernel/src/ktest/suites/harness.rs:20: 2 + 2 == 5 was false
//! ktest: 8 passed, 1 failed
//! ```
//!
//! A test that panics or faults cannot return; [`report_abort`] (called on the
//! fatal path) prints its FAIL line and the closing summary before the run
//! ends. A test that hangs prints `run` with no result, and the host's timeout
//! names it.

use alloc::{string::String, vec::Vec};
use core::{
    fmt,
    sync::atomic::{AtomicUsize, Ordering},
};

use hal::println;
use spin::Mutex;

/// Why a test failed: the message and where the failing check is.
#[derive(Debug)]
pub struct TestFailure {
    pub message: String,
    pub file: &'static str,
    pub line: u32,
}

impl fmt::Display for TestFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The build script names suite files by their full path (see
        // build.rs); from the workspace on is what a reader needs.
        let file = self
            .file
            .find("kernel/src/")
            .map_or(self.file, |start| &self.file[start..]);
        write!(f, "{file}:{}: {}", self.line, self.message)
    }
}

pub type TestResult = Result<(), TestFailure>;

/// One registered test.
pub struct Test {
    pub name: &'static str,
    run: fn() -> TestResult,
    /// Runs only when named exactly (the harness's own failure checks).
    explicit_only: bool,
}

impl Test {
    pub const fn new(name: &'static str, run: fn() -> TestResult) -> Self {
        Self {
            name,
            run,
            explicit_only: false,
        }
    }

    /// A test that must be named exactly on the command line to run: it is
    /// meant to fail, panic or hang, to prove the harness reports it.
    pub const fn explicit(name: &'static str, run: fn() -> TestResult) -> Self {
        Self {
            name,
            run,
            explicit_only: true,
        }
    }

    fn selected_by(&self, filters: &[String]) -> bool {
        if self.explicit_only {
            filters.iter().any(|filter| filter == self.name)
        } else {
            filters.is_empty()
                || filters
                    .iter()
                    .any(|filter| self.name.contains(filter.as_str()))
        }
    }
}

/// Every test of the suites, in file and then source order.
pub const ALL: &[Test] = crate::suites::ALL;

fn all_tests() -> impl Iterator<Item = &'static Test> {
    ALL.iter()
}

/// The test running right now, for [`report_abort`].
static CURRENT: Mutex<Option<&'static str>> = Mutex::new(None);
static PASSED: AtomicUsize = AtomicUsize::new(0);
static FAILED: AtomicUsize = AtomicUsize::new(0);

/// A filter that selects no test: almost certainly a typo.
#[derive(Debug)]
pub struct UnmatchedFilter(pub String);

impl fmt::Display for UnmatchedFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "test filter '{}' matches no test (boot with run=list to see them)",
            self.0
        )
    }
}

/// Runs the tests selected by `filters` (all ordinary tests when empty) and
/// returns whether every one passed.
pub fn run(filters: &[String]) -> Result<bool, UnmatchedFilter> {
    if let Some(unmatched) = filters
        .iter()
        .find(|filter| !all_tests().any(|test| test.selected_by(core::slice::from_ref(filter))))
    {
        return Err(UnmatchedFilter(unmatched.clone()));
    }
    let selected: Vec<&Test> = all_tests()
        .filter(|test| test.selected_by(filters))
        .collect();
    println!("ktest: running {} tests", selected.len());
    for test in selected {
        start_on_the_boot_cpu();
        println!("ktest: run {}", test.name);
        *CURRENT.lock() = Some(test.name);
        let result = (test.run)();
        *CURRENT.lock() = None;
        match result {
            Ok(()) => {
                PASSED.fetch_add(1, Ordering::Relaxed);
                println!("ktest: ok {}", test.name);
            }
            Err(failure) => {
                FAILED.fetch_add(1, Ordering::Relaxed);
                println!("ktest: FAIL {}: {failure}", test.name);
            }
        }
    }
    print_summary(hal::serial::write_fmt);
    Ok(FAILED.load(Ordering::Relaxed) == 0)
}

/// Every test starts on the boot CPU (CPU 0), whatever the one before it
/// did: the thread that runs them may have been woken on another CPU after
/// a sleep, or re-pinned, and tests that pick CPUs by number (a stuck CPU
/// 1 called from CPU 2) rely on where they start.
fn start_on_the_boot_cpu() {
    let runner = kernel::task::sched::current();
    runner.set_affinity(0);
    if hal::percpu::current().index != 0 {
        // A yielding thread is queued on its pinned CPU.
        kernel::task::sched::yield_now();
    }
    assert_eq!(
        hal::percpu::current().index,
        0,
        "the test runner could not move back to the boot CPU"
    );
}

/// Prints the name of every test, one per line, for `run=list`.
pub fn list() {
    for test in all_tests() {
        let note = if test.explicit_only {
            " (runs only when named exactly)"
        } else {
            ""
        };
        println!("ktest: test {}{note}", test.name);
    }
}

/// Called on the fatal path: if a test was running, report it as failed with
/// `reason` and print the summary, so the host sees which test died.
pub fn report_abort(reason: fmt::Arguments<'_>) {
    // The fatal path may run while this CPU holds `CURRENT` (a fault between
    // lock and unlock); never wait for it.
    let Some(current) = CURRENT.try_lock().and_then(|current| *current) else {
        return;
    };
    FAILED.fetch_add(1, Ordering::Relaxed);
    hal::serial::write_emergency(format_args!("ktest: FAIL {current}: {reason}\n"));
    print_summary(hal::serial::write_emergency);
}

fn print_summary(write: fn(fmt::Arguments<'_>)) {
    write(format_args!(
        "ktest: {} passed, {} failed\n",
        PASSED.load(Ordering::Relaxed),
        FAILED.load(Ordering::Relaxed)
    ));
}
