//! Many CPUs in one address space: `vmstress` (`user/src/bin/vmstress.rs`)
//! races page faults, `madvise(DONTNEED)`, `mmap(MAP_FIXED)`, `munmap`,
//! `mprotect`, `madvise(PAGEOUT)` and `fork` across threads on every CPU and
//! checks every value it reads. These tests run it in both of stock QEMU's
//! TLB modes at 4 and 8 CPUs, under the old single-lock discipline too
//! (`vm.lock=coarse`), and show that it catches the two bugs that the
//! fine-grained locking could let in (`vm.bug=`): a page table installed
//! without the compare-exchange, and a fault that fills an entry a
//! copy-on-write break holds busy. `tests/invlpgb.rs` runs it with INVLPGB
//! and PCIDs on the patched QEMU. Longer runs:
//! `cargo run -- --smp 8 exec=vmstress:1000000,8`.

use std::time::Duration;

use boot::machine::{self, Config, Outcome, Run};

/// Operations per run: 25 meetings of all threads and 5 forks at 4
/// threads, enough to see each checked race many times.
const OPS: u32 = 20_000;

fn vmstress(cpus: u32, options: &str) -> (Run, String) {
    let cmdline = format!("{options} exec=vmstress:{OPS},{cpus}");
    let label = format!("{cpus} CPUs, '{cmdline}'");
    let config = Config::default()
        .cpus(cpus)
        .cmdline(&cmdline)
        // A safety net for a slow, busy host; the program prints a progress
        // line about every 5 s of its main thread's clock.
        .timeout(Duration::from_secs(900))
        .stall_timeout(Duration::from_secs(120));
    let run = machine::run(&config)
        .unwrap_or_else(|error| panic!("{label}: cannot boot the kernel: {error}"));
    (run, label)
}

/// A run with no violation, every frame given back, and a clean exit.
fn assert_clean(run: &Run, label: &str, cpus: u32) {
    let ops = OPS / cpus * cpus;
    assert!(
        run.printed(&format!("vmstress: ops={ops} threads={cpus} ")),
        "{label}: no summary\n{}",
        run.describe()
    );
    assert_eq!(
        run.number("vmstress: ops=", "violations"),
        0,
        "{label}\n{}",
        run.describe()
    );
    assert!(
        run.number("vmstress: ops=", "forks") > 0,
        "{label}: no fork ran\n{}",
        run.describe()
    );
    assert!(
        run.printed("exec: frames not given back: 0, frames still shared: 0"),
        "{label}: frames leaked\n{}",
        run.describe()
    );
    assert_eq!(run.outcome, Outcome::Success, "{label}\n{}", run.describe());
}

#[test]
fn targeted_ipis_keep_every_value_at_4_and_8_cpus() {
    for cpus in [4, 8] {
        let (run, label) = vmstress(cpus, "tlb=ipi");
        assert_clean(&run, &label, cpus);
        assert!(
            run.number("tlb-counters: mode=ipi", "ipis_sent") > 0,
            "{label}: no shootdown was sent\n{}",
            run.describe()
        );
    }
}

#[test]
fn the_software_broadcast_keeps_every_value_at_4_and_8_cpus() {
    for cpus in [4, 8] {
        let (run, label) = vmstress(cpus, "tlb=broadcast-sw");
        assert_clean(&run, &label, cpus);
        assert!(
            run.number("tlb-counters: mode=broadcast-sw", "promotions") > 0,
            "{label}: the process was never promoted\n{}",
            run.describe()
        );
    }
}

/// The old discipline is kept for the benchmark's comparison, so it must
/// stay correct too.
#[test]
fn the_coarse_lock_keeps_every_value() {
    let (run, label) = vmstress(4, "tlb=ipi vm.lock=coarse");
    assert_clean(&run, &label, 4);
}

/// With `vm.bug=racy-table-install` two threads that map their scratch
/// pages at once each install the last-level table by a plain store: the
/// mapping made in the overwritten table is lost (its page reads back 0
/// once its TLB entry goes) and the table leaks.
#[test]
fn a_table_installed_without_compare_exchange_is_caught() {
    let (run, label) = vmstress(4, "vm.bug=racy-table-install");
    assert!(
        run.printed("vm: deliberate bug RacyTableInstall is switched on (vm.bug=)"),
        "{label}\n{}",
        run.describe()
    );
    // Which sign shows depends on the interleaving: a thread whose TLB
    // entry came from the overwritten table reads the lost page back as 0
    // later (a violation, and the run fails); one that faulted again first
    // maps the page afresh in the winning table, and only the leak of the
    // overwritten table and its page shows.
    let violations = run
        .value("vmstress: ops=", "violations")
        .is_some_and(|v| v != "0");
    let leaked = !run.printed("exec: frames not given back: 0,");
    assert!(
        violations || leaked,
        "{label}: a lost mapping went unnoticed\n{}",
        run.describe()
    );
    if violations {
        assert_eq!(run.outcome, Outcome::Failure, "{label}\n{}", run.describe());
    }
}

/// With `vm.bug=fill-busy-entry` a fault on a page whose copy-on-write
/// break is under way maps a zeroed page there: the threads' words (or,
/// when the page is a thread's stack, the thread itself) are lost.
#[test]
fn a_fault_that_fills_a_busy_entry_is_caught() {
    let (run, label) = vmstress(4, "vm.bug=fill-busy-entry");
    assert!(
        run.printed("vm: deliberate bug FillBusyEntry is switched on (vm.bug=)"),
        "{label}\n{}",
        run.describe()
    );
    assert!(
        !run.printed("exec: vmstress (pid 1) exited with 0"),
        "{label}: the lost page went unnoticed\n{}",
        run.describe()
    );
    assert_eq!(run.outcome, Outcome::Failure, "{label}\n{}", run.describe());
}
