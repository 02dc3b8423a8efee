//! Hostile input and exhausted resources must never take the kernel down.
//!
//! - A seeded system-call fuzzer runs from four threads on four CPUs at once
//!   (`user/src/bin/fuzz.rs`; long runs: `cargo run -- fuzz --calls N --seed S`).
//! - Each exhaustible resource is run out by a *hog* while a *guard* process
//!   keeps private data and probes the same resource: the hog must get an
//!   error (or, for a page it touches with no frame left, be killed with a
//!   report), the guard must see the error too and then the resource come
//!   back, and its data must stay intact (`user/src/bin/exhaust.rs`).
//!
//! ASIDs are exhausted in `tests/shootdown.rs`: more processes than dynamic
//! ASID slots (`more_processes_than_dynamic_asid_slots_keep_working`) and
//! one global ASID for two promoted processes
//! (`global_asid_exhaustion_falls_back_to_ipis`).

use std::time::Duration;

use boot::machine::{self, Config, Outcome, Run};

#[test]
fn hundred_thousand_hostile_syscalls_on_four_cpus() {
    let config = Config::default()
        .cpus(4)
        .cmdline("exec=fuzz:7,100000,4")
        .timeout(Duration::from_secs(400))
        .stall_timeout(Duration::from_secs(120));
    let run =
        machine::run(&config).unwrap_or_else(|error| panic!("cannot boot the kernel: {error}"));
    assert!(
        run.printed("fuzz: done, seed 7:"),
        "the fuzzer did not finish\n{}",
        run.describe()
    );
    assert!(
        run.printed("exec: fuzz (pid 1) exited with 0"),
        "{}",
        run.describe()
    );
    assert_eq!(run.outcome, Outcome::Success, "{}", run.describe());
}

/// Runs `exhaust <case>` on 4 CPUs with `memory` and checks that it
/// reported success and the kernel never stopped.
fn exhaust(case: &str, memory: &str) -> Run {
    let config = Config::default()
        .cpus(4)
        .memory(memory)
        .cmdline(format!("exec=exhaust:{case}"))
        .timeout(Duration::from_secs(900))
        .stall_timeout(Duration::from_secs(120));
    let run =
        machine::run(&config).unwrap_or_else(|error| panic!("cannot boot the kernel: {error}"));
    assert!(
        !run.printed("FATAL"),
        "the kernel stopped\n{}",
        run.describe()
    );
    assert!(
        run.printed(&format!("exhaust {case}: ok")),
        "{}",
        run.describe()
    );
    assert!(
        run.printed("exec: exhaust (pid 1) exited with 0"),
        "{}",
        run.describe()
    );
    assert_eq!(run.outcome, Outcome::Success, "{}", run.describe());
    run
}

fn assert_printed(run: &Run, text: &str) {
    assert!(run.printed(text), "expected '{text}'\n{}", run.describe());
}

#[test]
fn out_of_frames_is_enomem_or_a_reported_kill_and_others_keep_running() {
    let run = exhaust("frames", "64M");
    assert_printed(&run, "then NoMem from a system call");
    assert_printed(
        &run,
        "frame-hog: spawn while memory is exhausted: Err(NoMem)",
    );
    assert_printed(
        &run,
        "frame-hog: fork while memory is exhausted: Err(NoMem)",
    );
    assert_printed(&run, "(out of memory: no free frame for the page)");
    assert_printed(&run, "guard frames: refused ");
    assert_printed(&run, "then granted; private data intact");
}

#[test]
fn programs_cannot_exhaust_the_kernel_heap() {
    let run = exhaust("heap", "64M");
    assert_printed(&run, "refused with Some(NoMem)");
    assert_printed(&run, "guard heap: refused ");
    assert_printed(&run, "then granted; private data intact");
}

#[test]
fn full_swap_is_enospc_and_leaves_every_page_intact() {
    let run = exhaust("swap", "512M");
    let pages = abi::SWAP_SLOTS + 64;
    assert_printed(
        &run,
        &format!("swap-hog: PAGEOUT of {pages} pages: Err(NoSpc)"),
    );
    assert_printed(
        &run,
        &format!("swap-hog: {pages} of {pages} pages intact afterwards"),
    );
    assert_printed(&run, "guard swap: refused ");
    assert_printed(&run, "then granted; private data intact");
}

#[test]
fn thread_and_process_limits_are_eagain_and_places_come_back() {
    let run = exhaust("limits", "512M");
    let threads = abi::MAX_THREADS - 1;
    let processes = abi::MAX_PROCESSES - 1;
    assert_printed(
        &run,
        &format!("limits: threads: {threads} started besides the first, then Some(Again)"),
    );
    assert_printed(&run, "limits: a thread after joining them all: Ok(0)");
    assert_printed(
        &run,
        &format!("limits: processes: {processes} started besides this one, then Some(Again)"),
    );
    assert_printed(
        &run,
        &format!("limits: processes: {processes} again after orphans were left behind"),
    );
}
