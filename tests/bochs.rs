//! The PCID paths, under Bochs: a smoke test of the instructions QEMU's TCG
//! does not have.
//!
//! With PCIDs on (CR4.PCIDE, set on every CPU after CR4.PGE), every load of
//! an address space is a MOV to CR3 carrying a PCID, with bit 63 set when
//! the PCID's entries may be kept, and the local flushes are whatever
//! `mm::instructions::select` picks for the CPU: INVPCID where the CPU has
//! it, else CR3 reloads and CR4.PGE toggles. QEMU's TCG has neither PCID
//! nor INVPCID, so no QEMU test runs any of this. Bochs's Haswell model has
//! both, its Ivy Bridge model PCID without INVPCID. Each test boots one
//! of them with 2 CPUs (`boot::machine` with a `Bochs` emulator) and
//! checks what the kernel turned on and that a workload passes:
//!
//! - Haswell, the coherence stress in IPI mode (one thread remaps a page
//!   and flushes while one on the other CPU reads through it);
//! - Haswell, the same stress with the address space promoted to a global
//!   ASID (software broadcast, `tlb.promote=2`);
//! - Haswell, 10 processes, more than the 6 dynamic ASID slots per CPU, so
//!   that PCIDs are taken back and reused;
//! - Ivy Bridge, the coherence stress without INVPCID.
//!
//! What the workloads execute was counted once, when this tier was written,
//! with Bochs's debugger stopping at every INVPCID, MOV to CR3 or CR4 and
//! INVLPG of the kernel (not part of the test): the Haswell stress runs
//! INVPCID type 1 (one PCID) hundreds of times, CR3 loads with a PCID, with
//! and without bit 63, and at times INVPCID type 2 (everything, for a
//! kernel-range flush); the Ivy Bridge stress replaces those INVPCIDs by
//! CR3 reloads and toggles CR4.PGE. INVPCID type 3 (every non-global
//! entry) comes only from a global-ASID rollover, which none of these
//! reaches, and type 0 (one address) never: with CR4.PGE the kernel's
//! pages are global and INVLPG drops them, so `select` picks type 0 only in
//! one of the host model's deliberately broken variants.
//!
//! What this cannot show: that entries are kept, or that a missing flush
//! would be caught. Bochs drops every non-global TLB entry on each CR3 load,
//! bit 63 or not, so a kernel that forgot a flush its PCIDs make necessary
//! could pass here. What passes proves that the instructions are legal
//! where the kernel executes them (a bad INVPCID type or descriptor, a CR3
//! value with reserved bits, bit 63 without PCIDE, PCIDE with a non-zero
//! PCID loaded would fault) and that the paths run to the end. Which
//! entries may survive is checked by the host TLB model (`mm/tests/model/`).
//!
//! The tests run only where `SHOOTDOWN_BOCHS` names the `bochs-bin` binary
//! (or is `1`, for the one on `PATH`); `.ci/run` installs Bochs with
//! `.ci/bochs` and sets it. A build without the variable marks them
//! ignored, with the reason (`build.rs` at the workspace root). A run takes
//! 10-30 s.

use std::{io::Write, path::PathBuf, time::Duration};

use boot::machine::{self, Bochs, Config, Outcome, Run};

const CPUS: u32 = 2;
/// Rounds of the coherence stress: each is a remap and a flush while the
/// other CPU reads.
const ROUNDS: u32 = 5000;

/// Bochs's CPU models: both have PCID, PGE and x2APIC; Haswell has INVPCID.
const HASWELL: &str = "corei7_haswell_4770";
const IVY_BRIDGE: &str = "corei7_ivy_bridge_3770k";

/// Writes to the test's stderr past libtest's capture (which takes only
/// `print!` and `eprint!`), so the line shows in every run.
fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// The Bochs binary `SHOOTDOWN_BOCHS` names (`1`: the one on `PATH`).
/// Without the variable the tests are ignored, so this panics only under
/// `cargo test -- --ignored`, saying what to set.
fn bochs_binary() -> PathBuf {
    match std::env::var_os("SHOOTDOWN_BOCHS") {
        Some(value) if value == "1" => PathBuf::from("bochs-bin"),
        Some(path) if !path.is_empty() && path != "0" => PathBuf::from(path),
        _ => panic!(
            "SHOOTDOWN_BOCHS is not set: `.ci/bochs` installs Bochs and prints the binary \
             to set it to (`.ci/run` does both)"
        ),
    }
}

/// Boots `model` with [`CPUS`] CPUs and `cmdline`, and checks what every
/// run must show: the command line taken from the image's slot, every CPU
/// online, PCID, PGE and PCIDs on, and whether INVPCID is there.
fn boot(test: &str, model: &str, cmdline: &str) -> Run {
    let binary = bochs_binary();
    let config = Config::default()
        .emulator(Bochs::new(&binary))
        .cpu_model(model)
        .cpus(CPUS)
        .cmdline(cmdline)
        .timeout(Duration::from_secs(900));
    let run = machine::run(&config).unwrap_or_else(|error| {
        panic!(
            "cannot boot the kernel under Bochs ({}): {error}",
            binary.display()
        )
    });
    let invpcid = if model == IVY_BRIDGE { "no " } else { "yes" };
    for line in [
        &format!("cmdline: no fw_cfg; from the kernel image's slot: {cmdline}"),
        &format!("cpus: {CPUS}/{CPUS} CPUs online"),
        "  PCID     yes",
        &format!("  INVPCID  {invpcid}"),
        "  PGE      yes",
        "tlb: PCIDs on:",
    ] {
        assert!(
            run.printed(line),
            "{model}: no line '{line}'\n{}",
            run.describe()
        );
    }
    let shown = [
        "cpus:",
        "  PCID ",
        "  INVPCID ",
        "tlb: PCIDs",
        "tlb-counters:",
    ];
    for line in run
        .serial
        .iter()
        .filter(|line| shown.iter().any(|start| line.starts_with(start)))
    {
        say(&format!("bochs: {test}: {line}"));
    }
    say(&format!(
        "bochs: {test}: {model}, {CPUS} CPUs, `{cmdline}`: kernel entered after {:.1} s, \
         run took {:.1} s: {}",
        run.kernel_entry.unwrap_or_default().as_secs_f64(),
        run.elapsed.as_secs_f64(),
        run.ending()
    ));
    run
}

/// The coherence stress on [`CPUS`] CPUs in `mode` (`cmdline` adds options)
/// passed: no stale read, no lost write, the program and the run succeeded.
fn check_coherence(run: &Run, mode: &str) {
    let summary = run
        .coherence()
        .unwrap_or_else(|| panic!("no summary\n{}", run.describe()));
    assert_eq!(
        (summary.rounds, summary.readers),
        (u64::from(ROUNDS), u64::from(CPUS - 1)),
        "{summary:?}"
    );
    assert!(
        summary.coherent(),
        "incoherent, {summary:?}\n{}",
        run.describe()
    );
    assert!(
        run.printed("exec: coherence (pid 1) exited with 0"),
        "{}",
        run.describe()
    );
    assert!(
        run.printed(&format!("tlb-counters: mode={mode} cpus={CPUS}")),
        "{}",
        run.describe()
    );
    assert_eq!(run.outcome, Outcome::Success, "{}", run.describe());
}

#[test]
#[cfg_attr(not(tier_bochs), ignore = "needs Bochs: SHOOTDOWN_BOCHS=$(.ci/bochs)")]
fn pcid_and_invpcid_pass_the_coherence_stress() {
    let cmdline = format!("exec=coherence:{ROUNDS},{CPUS}");
    let run = boot("pcid_and_invpcid", HASWELL, &cmdline);
    check_coherence(&run, "ipi");
}

#[test]
#[cfg_attr(not(tier_bochs), ignore = "needs Bochs: SHOOTDOWN_BOCHS=$(.ci/bochs)")]
fn a_global_asid_under_pcids_passes_the_coherence_stress() {
    let cmdline = format!("tlb=broadcast-sw tlb.promote={CPUS} exec=coherence:{ROUNDS},{CPUS}");
    let run = boot("global_asid", HASWELL, &cmdline);
    check_coherence(&run, "broadcast-sw");
    assert_eq!(
        run.number("tlb-counters:", "promotions"),
        1,
        "{}",
        run.describe()
    );
    assert!(
        run.number("tlb-counters:", "broadcast_ops") >= u64::from(ROUNDS),
        "{}",
        run.describe()
    );
}

#[test]
#[cfg_attr(not(tier_bochs), ignore = "needs Bochs: SHOOTDOWN_BOCHS=$(.ci/bochs)")]
fn pcids_are_reused_by_more_processes_than_asid_slots() {
    let run = boot("reused_pcids", HASWELL, "exec=tlbtest:many,10");
    assert!(
        run.printed("tlbtest children: started=10 failed=0"),
        "{}",
        run.describe()
    );
    assert_eq!(run.outcome, Outcome::Success, "{}", run.describe());
}

#[test]
#[cfg_attr(not(tier_bochs), ignore = "needs Bochs: SHOOTDOWN_BOCHS=$(.ci/bochs)")]
fn pcids_without_invpcid_pass_the_coherence_stress() {
    let cmdline = format!("exec=coherence:{ROUNDS},{CPUS}");
    let run = boot("pcid_without_invpcid", IVY_BRIDGE, &cmdline);
    check_coherence(&run, "ipi");
}
