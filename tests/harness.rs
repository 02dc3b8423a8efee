//! Tests of the test harness and of the boot path.
//!
//! The harness must turn every way a kernel test can go wrong into a visible
//! failure: a failed check, a panic, a CPU exception and a hang each boot the
//! kernel with one deliberately broken test selected; a panic or kernel
//! fault must also print a backtrace naming the failing function. The boot
//! path must reject bad command lines with a message, and must boot on the
//! configurations a student is likely to try (UEFI, small and large memory).

use std::time::Duration;

use boot::{
    machine::{self, Config, Firmware, Outcome, Run},
    report::TestOutcome,
};

fn boot(config: Config) -> Run {
    machine::run(&config).unwrap_or_else(|error| panic!("cannot boot the kernel: {error}"))
}

fn boot_cmdline(cmdline: &str) -> Run {
    boot(Config::default().cpus(2).cmdline(cmdline))
}

/// Checks that `run` ended with `outcome` after printing a line that
/// contains each of `texts`; on failure, says which text is missing and
/// describes the run.
fn assert_ended_printing(run: &Run, outcome: Outcome, texts: &[&str]) {
    assert_eq!(run.outcome, outcome, "{}", run.describe());
    for text in texts {
        assert!(
            run.printed(text),
            "no line contains {text:?}\n{}",
            run.describe()
        );
    }
}

/// The failure reason the kernel reported for `test`.
fn failure_reason(run: &Run, test: &str) -> String {
    match run.test_report().outcome(test) {
        Some(TestOutcome::Failed(reason)) => reason.clone(),
        other => panic!(
            "expected {test} to be reported as failed, got {other:?}\n{}",
            run.describe()
        ),
    }
}

#[test]
fn failing_check_fails_the_run_and_names_the_test() {
    let run = boot_cmdline("test=harness::fails");
    assert_eq!(run.outcome, Outcome::Failure, "{}", run.describe());
    let reason = failure_reason(&run, "harness::fails");
    assert!(
        reason.contains("kernel/src/ktest/suites/harness.rs")
            && reason.contains("arithmetic is broken on purpose"),
        "{reason}"
    );
    assert!(reason.contains("left 4, right 5"), "{reason}");
    assert_eq!(run.test_report().summary, Some((0, 1)));
}

#[test]
fn panicking_test_is_reported_with_message_and_location() {
    let run = boot_cmdline("test=harness::panics");
    assert_eq!(run.outcome, Outcome::Failure, "{}", run.describe());
    let reason = failure_reason(&run, "harness::panics");
    assert!(
        reason.contains("kernel panic at ")
            && reason.contains("kernel/src/ktest/suites/harness.rs"),
        "{reason}"
    );
    assert!(reason.contains("deliberate panic in a test"), "{reason}");
    assert_eq!(run.test_report().summary, Some((0, 1)));
    assert_backtrace_names(&run, &["kernel_tests::suites::harness::panics+0x"]);
}

/// Checks that the crash report's backtrace (the first after the `FATAL`
/// line) has a line naming each of `functions`, in that order (innermost
/// first).
fn assert_backtrace_names(run: &Run, functions: &[&str]) {
    let fatal = run
        .serial
        .iter()
        .position(|line| line.starts_with("FATAL"))
        .unwrap_or_else(|| panic!("no crash report\n{}", run.describe()));
    let start = run.serial[fatal..]
        .iter()
        .position(|line| line == "backtrace (innermost first):")
        .map(|offset| fatal + offset)
        .unwrap_or_else(|| panic!("no backtrace in the report\n{}", run.describe()));
    let frames: Vec<&String> = run.serial[start + 1..]
        .iter()
        .take_while(|line| line.starts_with("  #") || line.starts_with("  ..."))
        .collect();
    let mut position = 0;
    for function in functions {
        match frames[position..]
            .iter()
            .position(|line| line.contains(function))
        {
            Some(found) => position += found + 1,
            None => panic!(
                "the backtrace does not name {function} (after the frames before it)\n{}",
                run.describe()
            ),
        }
    }
}

#[test]
fn page_fault_in_a_test_prints_registers_and_fails() {
    let run = boot_cmdline("test=harness::page_fault");
    assert_eq!(run.outcome, Outcome::Failure, "{}", run.describe());
    let reason = failure_reason(&run, "harness::page_fault");
    assert!(reason.contains("page fault (#PF)"), "{reason}");
    assert!(
        reason.contains("kernel read from 0xdead0000000 (page not present)"),
        "{reason}"
    );
    assert!(
        run.printed("cr2 0x00000dead0000000"),
        "no register dump:\n{}",
        run.describe()
    );
    assert!(
        run.printed("  rax 0x"),
        "no register dump:\n{}",
        run.describe()
    );
    assert_backtrace_names(
        &run,
        &[
            "hal::cpu::read_to_fault+0x",
            "kernel_tests::suites::harness::page_fault+0x",
            "kernel_tests::framework::run+0x",
        ],
    );
}

#[test]
fn kernel_read_of_a_user_page_is_stopped_by_smap_and_explained() {
    let run = boot_cmdline("test=harness::smap_violation");
    assert_eq!(run.outcome, Outcome::Failure, "{}", run.describe());
    let reason = failure_reason(&run, "harness::smap_violation");
    assert!(
        reason.contains(
            "kernel read from 0x50000000 (SMAP: the kernel may not touch user pages); SMEP on, SMAP on"
        ),
        "{reason}"
    );
    assert_backtrace_names(&run, &["kernel_tests::suites::harness::smap_violation+0x"]);
}

/// A CPU that spins with interrupts off never answers a TLB shootdown: the
/// initiator must name it (and an NMI make it say where it spins) and end
/// the run with the failure status instead of waiting forever.
#[test]
fn cpu_that_stops_answering_ipis_is_reported_not_waited_for() {
    let run = boot(Config::default().cpus(2).cmdline("test=harness::stuck_cpu"));
    assert_eq!(run.outcome, Outcome::Failure, "{}", run.describe());
    let reason = failure_reason(&run, "harness::stuck_cpu");
    assert!(
        reason.contains("TLB shootdown not acknowledged: cpu 1 did not answer a cross-call IPI"),
        "{reason}"
    );
    assert!(
        run.printed("cpu 1 did not answer a cross-call; an NMI found it at rip 0x")
            && run.printed("(kernel_tests::suites::harness::spin_with_interrupts_off+0x"),
        "no NMI report from the stuck CPU\n{}",
        run.describe()
    );
    // The initiator's report walks back through the shootdown request
    // (mm's entry point: the kernel's thin `tlb::flush_range` wrapper may be
    // inlined) to the test that asked for it.
    assert_backtrace_names(
        &run,
        &[
            "<mm::system::TlbSystem>::flush_tlb_mm_range::<kernel::tlb::KernelTlb>+0x",
            "kernel_tests::suites::harness::stuck_cpu+0x",
        ],
    );
}

#[test]
fn hanging_test_is_caught_by_the_stall_timeout_and_named() {
    let silence = Duration::from_secs(20);
    let run = boot(
        Config::default()
            .cpus(1)
            .cmdline("test=harness::hangs")
            .stall_timeout(silence),
    );
    assert_eq!(run.outcome, Outcome::Stalled(silence), "{}", run.describe());
    assert_eq!(
        run.test_report().unfinished.as_deref(),
        Some("harness::hangs"),
        "{}",
        run.describe()
    );
}

#[test]
fn overall_timeout_stops_a_busy_run() {
    let limit = Duration::from_secs(25);
    let run = boot(
        Config::default()
            .cpus(1)
            .cmdline("test=harness::hangs")
            .timeout(limit),
    );
    assert_eq!(run.outcome, Outcome::Timeout(limit), "{}", run.describe());
}

#[test]
fn unknown_option_is_rejected_with_the_known_ones() {
    assert_ended_printing(
        &boot_cmdline("frobnicate=1"),
        Outcome::Failure,
        &[
            "rejected kernel command line: unknown option 'frobnicate=1'",
            "    run=<demo | tests | list>",
        ],
    );
}

#[test]
fn malformed_value_is_rejected() {
    assert_ended_printing(
        &boot_cmdline("log=loud"),
        Outcome::Failure,
        &["invalid value 'loud' for option 'log'"],
    );
}

/// QEMU's TCG has neither INVLPGB nor PCID: asking for the hardware
/// broadcast stops the boot with the reason and the alternative, and the
/// banner says why PCIDs are off.
#[test]
fn impossible_tlb_mode_is_refused_with_the_reason() {
    assert_ended_printing(
        &boot_cmdline("tlb=invlpgb"),
        Outcome::Failure,
        &[
            "tlb=invlpgb is not possible: the CPU reports no usable INVLPGB",
            "tlb=broadcast-sw runs global ASIDs",
        ],
    );
    assert_ended_printing(
        &boot_cmdline("run=list tlb.pcid=off"),
        Outcome::Success,
        &["tlb: PCIDs off: the CPU has no PCID"],
    );
}

#[test]
fn filter_matching_nothing_is_rejected() {
    assert_ended_printing(
        &boot_cmdline("test=no_such_test"),
        Outcome::Failure,
        &["test filter 'no_such_test' matches no test"],
    );
}

#[test]
fn filter_selects_only_matching_tests() {
    let run = boot_cmdline("test=smp::,heap::box_and_vec");
    assert_eq!(run.outcome, Outcome::Success, "{}", run.describe());
    let report = run.test_report();
    assert!(
        report
            .results
            .iter()
            .all(|(name, _)| name.starts_with("smp::") || name == "heap::box_and_vec")
    );
    assert_eq!(report.summary, Some((report.results.len(), 0)));
    assert!(report.results.len() >= 2, "{report:?}");
}

/// Checks the default run (what `cargo run` shows): banner, then power-off.
fn assert_banner_and_clean_exit(run: &Run) {
    assert_eq!(run.outcome, Outcome::Success, "{}", run.describe());
    assert!(
        run.printed("cpu: AuthenticAMD family 0x19 model 0x1"),
        "{}",
        run.describe()
    );
    for feature in ["PCID", "INVPCID", "INVLPGB", "x2APIC", "TCE", "SMEP"] {
        assert!(
            run.printed(&format!("  {feature} ")),
            "banner lacks {feature}:\n{}",
            run.describe()
        );
    }
    assert!(run.printed("MiB usable"), "{}", run.describe());
    assert!(
        run.kernel_entry.is_some(),
        "the kernel never printed its first line"
    );
}

#[test]
fn default_run_prints_banner_runs_the_demo_and_powers_off() {
    let run = boot(Config::default());
    assert_banner_and_clean_exit(&run);
    assert!(
        run.printed("demo: TLB shootdown in 4 phases (mode ipi)"),
        "{}",
        run.describe()
    );
    assert!(
        run.printed("tlbtest promote: cpus=3 promoted=no"),
        "{}",
        run.describe()
    );
    // The promotion phase runs by default, with the software broadcast
    // backend lent to it on a CPU without INVLPGB.
    assert!(
        run.printed("tlbtest promote: cpus=4 promoted=yes"),
        "{}",
        run.describe()
    );
    assert!(
        run.printed("demo:   4 CPUs, promoted   broadcast-sw"),
        "the summary table names the promoted phase's mode\n{}",
        run.describe()
    );
    assert!(
        run.printed("tlbtest pageout: pages=256"),
        "{}",
        run.describe()
    );
    assert!(
        run.printed("tlb-counters: mode=ipi cpus=4 "),
        "{}",
        run.describe()
    );
}

#[test]
fn uefi_image_boots() {
    assert_banner_and_clean_exit(&boot(Config::default().firmware(Firmware::Uefi)));
}

#[test]
fn boots_with_small_and_large_memory() {
    for memory in ["64M", "3G"] {
        assert_banner_and_clean_exit(&boot(Config::default().cpus(2).memory(memory)));
    }
}

#[test]
fn stack_overflow_reaches_the_double_fault_handler() {
    let run = boot_cmdline("test=harness::stack_overflow");
    assert_eq!(run.outcome, Outcome::Failure, "{}", run.describe());
    let reason = failure_reason(&run, "harness::stack_overflow");
    assert!(reason.contains("double fault (#DF)"), "{reason}");
    assert!(
        run.printed("vector 8"),
        "no register dump:\n{}",
        run.describe()
    );
    assert_backtrace_names(
        &run,
        &["kernel_tests::suites::harness::stack_overflow::recurse+0x"],
    );
    assert!(
        run.printed("  ... the same return address "),
        "the recursion was not summarised:\n{}",
        run.describe()
    );
}

#[test]
fn banner_reports_every_cpu_online() {
    for cpus in [1, 3, 8] {
        let run = boot(Config::default().cpus(cpus));
        assert_eq!(run.outcome, Outcome::Success, "{}", run.describe());
        assert!(
            run.printed(&format!("cpus: {cpus}/{cpus} CPUs online")),
            "{}",
            run.describe()
        );
    }
}
