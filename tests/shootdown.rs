//! TLB shootdown end to end, under QEMU: coherence in every mode, promotion
//! to a global ASID, batched reclaim, and proof that the coherence check
//! catches a broken kernel.
//!
//! The programs (`coherence`, `tlbtest`) print one summary line each; these
//! tests read the numbers from it. Rounds are sized for CI; the programs
//! take larger counts for longer runs (`cargo run -- exec=coherence:20000,4`).

use std::time::Duration;

use boot::machine::{self, Config, Outcome, Run};

/// What the coherence boots add to their command line: freed user frames
/// wait in a quarantine of 4096 (16 MiB) before reuse.
///
/// The coherence stress catches a missing shootdown when a reader uses a
/// stale translation while it still leads to the old frame's old data.
/// Without the quarantine, the frame freed by the writer's unmap could be
/// handed out again and zeroed while the reader's virtual CPU waited for
/// the host, and the stale translation then read the zeroes it expected.
/// With `tlb.bug=no-flush-ipis` and three other such boots running beside
/// it, 16 of 20 boots caught the bug without the quarantine and 20 of 20
/// with it (each with 0.4 to 9 million stale reads in 300 rounds).
const QUARANTINE: &str = "frames.quarantine=4096";

fn boot(cpus: u32, cmdline: &str) -> Run {
    run_machine(cpus, cmdline)
}

fn run_machine(cpus: u32, cmdline: &str) -> Run {
    let config = Config::default()
        .cpus(cpus)
        .cmdline(cmdline)
        .timeout(Duration::from_secs(400))
        .stall_timeout(Duration::from_secs(120));
    machine::run(&config).unwrap_or_else(|error| panic!("cannot boot the kernel: {error}"))
}

fn coherence(mode: &str, cpus: u32, rounds: u32) {
    let run = boot(
        cpus,
        &format!("tlb={mode} {QUARANTINE} exec=coherence:{rounds},{cpus}"),
    );
    let summary = run
        .coherence()
        .unwrap_or_else(|| panic!("{mode} at {cpus} CPUs: no summary\n{}", run.describe()));
    assert_eq!(
        (summary.rounds, summary.readers),
        (rounds.into(), (cpus - 1).into()),
        "{mode} at {cpus} CPUs: {summary:?}"
    );
    assert!(
        summary.coherent(),
        "{mode} at {cpus} CPUs: incoherent, {summary:?}\n{}",
        run.describe()
    );
    assert_eq!(run.outcome, Outcome::Success, "{}", run.describe());
    assert!(
        run.printed(&format!("tlb-counters: mode={mode} cpus={cpus}")),
        "{}",
        run.describe()
    );
    assert!(
        !run.serial.iter().any(|line| line.starts_with("profile: ")),
        "no profile without profile=on\n{}",
        run.describe()
    );
}

/// The profiler on a shootdown loop: as many samples as its rate says, the
/// kernel's functions by name (the initiator's wait for acknowledgements
/// among them), ring 3 as its own row, and the steps of the shootdowns.
#[test]
fn the_profiler_names_where_a_shootdown_loop_spends_its_time() {
    const HZ: f64 = 2000.0;
    let run = boot(2, "tlb=ipi profile=2000 exec=tlb_flush2:threads,2,200,1500");
    assert_eq!(run.outcome, Outcome::Success, "{}", run.describe());
    assert!(
        run.printed("sampling profiler at 2000 Hz per CPU"),
        "{}",
        run.describe()
    );
    let line = run
        .serial
        .iter()
        .find(|line| line.starts_with("profile: "))
        .unwrap_or_else(|| panic!("no profile: line\n{}", run.describe()));
    let profile = kernel::profile::Profile::parse_line(line)
        .unwrap_or_else(|error| panic!("{error:?}: {line}"));
    // What the rate promises for the time sampled, by the kernel's own
    // clock: every period brought a sample, or was missed (its vCPU's
    // host thread did not run, so its interrupts came late and as one).
    // Samples alone depend on how busy the host is; the sum does not.
    let expected = HZ * profile.seconds * 2.0;
    let samples = profile.samples() as f64;
    let accounted = samples + profile.missed as f64;
    assert!(
        (0.9 * expected..=1.1 * expected).contains(&accounted),
        "{samples} samples + {} missed periods in {} s on 2 CPUs at {HZ} Hz: {line}",
        profile.missed,
        profile.seconds
    );
    assert!(samples > 0.0, "no samples: {line}");
    let share = |name: &str| {
        profile
            .rows
            .iter()
            .find(|row| row.name == name)
            .map_or(0.0, |row| row.samples as f64 / samples)
    };
    assert!(share("[user]") > 0.0, "{line}");
    assert!(
        share("hal::ipi::call_on_within") > 0.005,
        "the wait for acknowledgements: {line}"
    );
    assert!(
        share("[unknown]") < 0.05,
        "kernel samples without a name: {line}"
    );
    assert!(run.printed("where the time went: "), "{}", run.describe());
    assert!(
        run.number("tlb-breakdown:", "requests") > 100,
        "{}",
        run.describe()
    );
    run.number("tlb-breakdown:", "delivery_ns");
}

#[test]
fn coherence_with_targeted_ipis() {
    for (cpus, rounds) in [(2, 2000), (4, 2000), (8, 1000)] {
        coherence("ipi", cpus, rounds);
    }
}

#[test]
fn coherence_with_software_broadcast() {
    for (cpus, rounds) in [(2, 2000), (4, 2000), (8, 1000)] {
        coherence("broadcast-sw", cpus, rounds);
    }
}

#[test]
fn coherence_check_catches_missing_flush_ipis() {
    let run = boot(
        2,
        &format!("tlb=ipi tlb.bug=no-flush-ipis {QUARANTINE} exec=coherence:300,2"),
    );
    assert_eq!(run.outcome, Outcome::Failure, "{}", run.describe());
    let summary = run
        .coherence()
        .unwrap_or_else(|| panic!("no summary\n{}", run.describe()));
    assert_eq!(summary.rounds, 300, "{summary:?}");
    assert!(
        !summary.coherent(),
        "the broken kernel went unnoticed: {summary:?}"
    );
}

fn promote(cmdline: &str, cpus: u32) -> Run {
    let run = boot(4, &format!("{cmdline} exec=tlbtest:promote,{cpus},200"));
    assert_eq!(run.outcome, Outcome::Success, "{}", run.describe());
    run
}

#[test]
fn four_busy_cpus_promote_to_a_global_asid_and_stop_targeted_ipis() {
    let run = promote("tlb=broadcast-sw", 4);
    let line = "tlbtest promote:";
    assert_eq!(
        run.value(line, "promoted").unwrap_or(""),
        "yes",
        "{}",
        run.describe()
    );
    assert_eq!(
        run.number(line, "transitions_finished"),
        1,
        "{}",
        run.describe()
    );
    assert_eq!(
        run.number(line, "ipis_sent"),
        0,
        "flushes after promotion sent targeted IPIs"
    );
    assert!(
        run.number(line, "broadcast_ops") >= 200,
        "{}",
        run.describe()
    );
}

#[test]
fn three_busy_cpus_and_single_threads_are_never_promoted() {
    for cpus in [3, 1] {
        let run = promote("tlb=broadcast-sw", cpus);
        assert_eq!(
            run.value("tlbtest promote:", "promoted").unwrap_or(""),
            "no",
            "{cpus} CPUs\n{}",
            run.describe()
        );
        assert_eq!(
            run.number("tlbtest promote:", "broadcast_ops"),
            0,
            "{}",
            run.describe()
        );
    }
}

#[test]
fn lowering_the_threshold_promotes_three_cpus() {
    let run = promote("tlb=broadcast-sw tlb.promote=3", 3);
    assert_eq!(
        run.value("tlbtest promote:", "promoted").unwrap_or(""),
        "yes",
        "{}",
        run.describe()
    );
}

#[test]
fn ipi_mode_never_promotes() {
    let run = promote("tlb=ipi", 4);
    assert_eq!(
        run.value("tlbtest promote:", "promoted").unwrap_or(""),
        "no",
        "{}",
        run.describe()
    );
    assert!(
        run.number("tlbtest promote:", "ipis_sent") >= 200,
        "{}",
        run.describe()
    );
}

#[test]
fn batched_pageout_costs_one_flush_round() {
    let batched = boot(4, "tlb=ipi exec=tlbtest:pageout,256,3");
    assert_eq!(batched.outcome, Outcome::Success, "{}", batched.describe());
    assert_eq!(batched.number("tlbtest pageout:", "batch_flushes"), 1);
    assert!(
        batched.number("tlbtest pageout:", "ipis_sent") <= 3,
        "{}",
        batched.describe()
    );

    let unbatched = boot(4, "tlb=ipi tlb.batch=off exec=tlbtest:pageout,256,3");
    assert_eq!(
        unbatched.outcome,
        Outcome::Success,
        "{}",
        unbatched.describe()
    );
    assert_eq!(unbatched.number("tlbtest pageout:", "batch_flushes"), 0);
    assert!(
        unbatched.number("tlbtest pageout:", "ipis_sent") >= 256,
        "{}",
        unbatched.describe()
    );
}

#[test]
fn lazy_cpus_are_skipped_until_page_tables_are_freed() {
    let run = boot(2, "tlb=ipi exec=tlbtest:lazy");
    assert_eq!(run.outcome, Outcome::Success, "{}", run.describe());
    let line = "tlbtest lazy:";
    assert_eq!(
        run.number(line, "ipis_ordinary"),
        0,
        "ordinary flushes interrupted a lazy CPU"
    );
    assert!(
        run.number(line, "ipis_freed_tables") >= 1,
        "freeing page tables skipped the lazy CPU"
    );
    assert_eq!(
        run.value(line, "stale").unwrap_or(""),
        "no",
        "{}",
        run.describe()
    );
}

/// The kernel's closing counter line's value of `key`.
fn kernel_counter(run: &Run, key: &str) -> u64 {
    run.number("tlb-counters:", key)
}

#[test]
fn global_asid_exhaustion_falls_back_to_ipis() {
    let run = boot(
        4,
        "tlb=broadcast-sw tlb.promote=2 tlb.asids=1 exec=tlbtest:pair",
    );
    assert_eq!(run.outcome, Outcome::Success, "{}", run.describe());
    assert!(
        run.printed("tlbtest children: started=2 failed=0"),
        "{}",
        run.describe()
    );
    assert_eq!(kernel_counter(&run, "promotions"), 1, "{}", run.describe());
    assert!(
        kernel_counter(&run, "exhaustion_fallbacks") >= 1,
        "{}",
        run.describe()
    );
}

#[test]
fn more_processes_than_dynamic_asid_slots_keep_working() {
    let run = boot(4, "tlb=ipi exec=tlbtest:many,10");
    assert_eq!(run.outcome, Outcome::Success, "{}", run.describe());
    assert!(
        run.printed("tlbtest children: started=10 failed=0"),
        "{}",
        run.describe()
    );
}

#[test]
fn one_cpu_never_sends_a_flush_ipi() {
    for mode in ["ipi", "broadcast-sw"] {
        let run = boot(1, &format!("tlb={mode} exec=syscalls"));
        assert_eq!(run.outcome, Outcome::Success, "{}", run.describe());
        // A software broadcast on one CPU runs locally: no IPI either.
        assert_eq!(
            kernel_counter(&run, "ipis_sent"),
            0,
            "{mode}: {}",
            run.describe()
        );
    }
}
