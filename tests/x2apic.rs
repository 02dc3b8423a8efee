//! The x2APIC path (`hal/src/apic.rs`, AP start-up in `hal/src/smp.rs`),
//! under QEMU 10, whose TCG emulates x2APIC; Debian bookworm's QEMU 7.2,
//! which every other tier runs, does not.
//!
//! QEMU 10 comes from bookworm-backports, unpacked into a private prefix by
//! `.ci/qemu10`; `.ci/run` names that prefix in `SHOOTDOWN_QEMU10`. A build
//! without the variable marks every test here ignored, with the reason
//! (`build.rs` at the workspace root), so that a plain `cargo test` needs
//! only the default QEMU and says what it did not run. By hand:
//!
//! ```sh
//! SHOOTDOWN_QEMU10=$(.ci/qemu10) cargo test --test x2apic
//! cargo run -- --qemu-prefix target/qemu10 --cpu EPYC-Milan,+x2apic test=ipi::
//! ```
//!
//! Each boot asks for x2APIC in one of the two ways QEMU offers
//! (`EPYC-Milan,+x2apic`, and `max`), checks that the banner says the CPUs
//! run their local APICs in x2APIC mode, and runs what depends on the APIC:
//! the in-kernel IPI, SMP, timer, scheduler and kernel-stack shootdown tests,
//! promotion with broadcast flushes, and the coherence stress with targeted
//! IPIs. A boot with plain `EPYC-Milan` on the same QEMU is the control: it
//! must run xAPIC. Every boot also checks that QEMU 10's exit device ended
//! the run before the kernel could say it found none (QEMU 10 stops the
//! machine a moment after the write, where 7.2 stopped it at once).

use std::time::Duration;

use boot::machine::{self, Config, Outcome, Qemu, Run};

/// The environment variable that names QEMU 10's prefix.
const PREFIX_VARIABLE: &str = "SHOOTDOWN_QEMU10";

/// The in-kernel tests that exercise the local APIC: cross-calls and the
/// unanswered-call NMI, bring-up and per-CPU timers, scheduling IPIs, and a
/// kernel-range shootdown.
const APIC_TESTS: [&str; 4] = ["ipi::", "smp::", "kernel_stack::", "sched::"];

const X2APIC_FEATURE: &str = "  x2APIC   yes  IPIs through MSRs";
const X2APIC_MODE: &str = "local APIC x2APIC (MSRs)";
const XAPIC_FEATURE: &str = "  x2APIC   no   IPIs through MSRs";
const XAPIC_MODE: &str = "local APIC xAPIC (MMIO, uncached)";

/// QEMU 10 from `SHOOTDOWN_QEMU10`.
fn qemu10() -> Qemu {
    Qemu::from_prefix_variable(PREFIX_VARIABLE, ".ci/run installs QEMU 10")
}

/// What one boot is: a CPU model, a CPU count and a kernel command line.
struct Boot<'a> {
    cpu: &'a str,
    cpus: u32,
    cmdline: &'a str,
}

impl Boot<'_> {
    /// Boots under `qemu`; returns the run and a label for messages.
    fn run(&self, qemu: &Qemu) -> (Run, String) {
        let version = qemu
            .version()
            .unwrap_or_else(|error| panic!("{PREFIX_VARIABLE}: {error}"));
        let label = format!(
            "QEMU {version}, -cpu {} -smp {}, '{}'",
            self.cpu, self.cpus, self.cmdline
        );
        let config = Config::default()
            .emulator(qemu.clone())
            .cpu_model(self.cpu)
            .cpus(self.cpus)
            .cmdline(self.cmdline)
            .timeout(Duration::from_secs(900))
            .stall_timeout(Duration::from_secs(120));
        let run = machine::run(&config)
            .unwrap_or_else(|error| panic!("{label}: cannot boot the kernel: {error}"));
        assert_the_exit_device_ended_the_run(&run, &label);
        (run, label)
    }
}

/// What `hal::qemu_exit::exit_qemu` prints when its write to
/// `isa-debug-exit` did not end the run.
const NO_EXIT_DEVICE: &str = "no isa-debug-exit device: halting this CPU";

/// QEMU has the exit device, so no part of the kernel's "no device" line
/// may reach the console. QEMU 10 stops the machine a moment after the
/// write (QEMU 7.2 at once); before `exit_qemu` waited for it, 5 of 8 boots
/// here ended with a stray start of that line, such as `no isa-debu`.
fn assert_the_exit_device_ended_the_run(run: &Run, label: &str) {
    let stray = run.serial.iter().map(|line| line.trim_end()).find(|line| {
        line.starts_with(NO_EXIT_DEVICE) || (line.len() >= 2 && NO_EXIT_DEVICE.starts_with(line))
    });
    assert!(
        stray.is_none(),
        "{label}: QEMU's exit device ended the run, yet the kernel printed {stray:?} after its \
         write: exit_qemu must give the emulator time to stop the machine\n{}",
        run.describe()
    );
}

/// Checks that every CPU came up and that the banner reports the APIC
/// mode: `feature` is the x2APIC line of the feature list, `mode` what the
/// `cpus:` line says.
fn assert_banner(run: &Run, label: &str, cpus: u32, feature: &str, mode: &str) {
    assert!(
        run.printed(feature),
        "{label}: no '{feature}' line\n{}",
        run.describe()
    );
    let online = format!("cpus: {cpus}/{cpus} CPUs online");
    assert!(
        run.serial
            .iter()
            .any(|line| line.starts_with(&online) && line.ends_with(mode)),
        "{label}: no '{online} ... {mode}' line\n{}",
        run.describe()
    );
}

/// Boots `cpu` at `cpus` CPUs with the APIC tests, and checks the banner
/// and that every selected test ran and passed.
fn apic_tests(qemu: &Qemu, cpu: &str, cpus: u32, feature: &str, mode: &str) {
    let cmdline = format!("test={}", APIC_TESTS.join(","));
    let (run, label) = Boot {
        cpu,
        cpus,
        cmdline: &cmdline,
    }
    .run(qemu);
    assert_banner(&run, &label, cpus, feature, mode);
    let report = run.test_report();
    if let Err(why) = report.all_passed() {
        panic!("{label}: {why}\n{}", run.describe());
    }
    for area in APIC_TESTS {
        assert!(
            report.ran_any(area),
            "{label}: no {area} test ran\n{}",
            run.describe()
        );
    }
    assert_eq!(run.outcome, Outcome::Success, "{label}\n{}", run.describe());
}

#[test]
#[cfg_attr(not(tier_qemu10), ignore = "needs SHOOTDOWN_QEMU10=$(.ci/qemu10)")]
fn epyc_milan_with_x2apic_passes_the_apic_tests_on_4_cpus() {
    let qemu = qemu10();
    apic_tests(&qemu, "EPYC-Milan,+x2apic", 4, X2APIC_FEATURE, X2APIC_MODE);
}

#[test]
#[cfg_attr(not(tier_qemu10), ignore = "needs SHOOTDOWN_QEMU10=$(.ci/qemu10)")]
fn cpu_max_passes_the_apic_tests_on_4_cpus_in_x2apic_mode() {
    let qemu = qemu10();
    apic_tests(&qemu, "max", 4, X2APIC_FEATURE, X2APIC_MODE);
}

#[test]
#[cfg_attr(not(tier_qemu10), ignore = "needs SHOOTDOWN_QEMU10=$(.ci/qemu10)")]
fn epyc_milan_with_x2apic_passes_the_apic_tests_on_2_cpus() {
    let qemu = qemu10();
    apic_tests(&qemu, "EPYC-Milan,+x2apic", 2, X2APIC_FEATURE, X2APIC_MODE);
}

#[test]
#[cfg_attr(not(tier_qemu10), ignore = "needs SHOOTDOWN_QEMU10=$(.ci/qemu10)")]
fn control_plain_epyc_milan_on_qemu10_runs_xapic() {
    let qemu = qemu10();
    apic_tests(&qemu, "EPYC-Milan", 4, XAPIC_FEATURE, XAPIC_MODE);
}

/// Promotion needs four CPUs running the process at once; its flushes then
/// go out as broadcasts, and the transition's IPIs went through the x2APIC.
#[test]
#[cfg_attr(not(tier_qemu10), ignore = "needs SHOOTDOWN_QEMU10=$(.ci/qemu10)")]
fn x2apic_promotes_four_busy_cpus_to_a_global_asid() {
    let qemu = qemu10();
    let (run, label) = Boot {
        cpu: "EPYC-Milan,+x2apic",
        cpus: 4,
        cmdline: "tlb=broadcast-sw exec=tlbtest:promote,4,20",
    }
    .run(&qemu);
    assert_banner(&run, &label, 4, X2APIC_FEATURE, X2APIC_MODE);
    assert_eq!(run.outcome, Outcome::Success, "{label}\n{}", run.describe());
    let line = "tlbtest promote:";
    assert_eq!(
        run.value(line, "promoted").unwrap_or(""),
        "yes",
        "{label}\n{}",
        run.describe()
    );
    assert_eq!(
        run.number(line, "transitions_finished"),
        1,
        "{label}\n{}",
        run.describe()
    );
    assert_eq!(
        run.number(line, "ipis_sent"),
        0,
        "{label}: flushes after promotion sent targeted IPIs\n{}",
        run.describe()
    );
    assert!(
        run.number(line, "broadcast_ops") >= 20,
        "{label}\n{}",
        run.describe()
    );
}

/// Every flush of the coherence stress reaches the other CPUs as a targeted
/// IPI through the x2APIC's ICR; a lost or early one shows as a stale read.
#[test]
#[cfg_attr(not(tier_qemu10), ignore = "needs SHOOTDOWN_QEMU10=$(.ci/qemu10)")]
fn x2apic_targeted_ipis_keep_the_coherence_stress_coherent() {
    let qemu = qemu10();
    let rounds: u32 = 1000;
    let cmdline = format!("tlb=ipi exec=coherence:{rounds},4");
    let (run, label) = Boot {
        cpu: "max",
        cpus: 4,
        cmdline: &cmdline,
    }
    .run(&qemu);
    assert_banner(&run, &label, 4, X2APIC_FEATURE, X2APIC_MODE);
    let summary = run
        .coherence()
        .unwrap_or_else(|| panic!("{label}: no summary\n{}", run.describe()));
    assert_eq!(
        (summary.rounds, summary.readers),
        (u64::from(rounds), 3),
        "{label}: {summary:?}"
    );
    assert!(
        summary.coherent(),
        "{label}: incoherent, {summary:?}\n{}",
        run.describe()
    );
    assert_eq!(run.outcome, Outcome::Success, "{label}\n{}", run.describe());
    assert!(
        run.number("tlb-counters: mode=ipi", "ipis_sent") > 0,
        "{label}: the stress sent no IPI\n{}",
        run.describe()
    );
}
