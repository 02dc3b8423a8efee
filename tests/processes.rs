//! Ring-3 programs from the ramdisk, run with `exec=` under QEMU.
//!
//! Each test boots the kernel with one program and checks what it printed
//! and how it ended. Faulting programs must be killed with a report while
//! the kernel keeps running; system calls with bad arguments must return
//! errors (the `syscall_errors` program checks every case itself).

use std::time::Duration;

use boot::machine::{self, Config, Outcome, Run};

/// A boot with `cmdline` on `cpus` CPUs. The long programs (`cowrace`,
/// `cowdirty`) print a progress line every 1000 rounds, so a hung run is
/// caught by the stall timeout; the overall limit is only a safety net,
/// wide enough for the slowest host these tests run on (two of these boots
/// in parallel beside a 2-thread CPU hog on 2 cores).
fn config(cpus: u32, cmdline: &str) -> Config {
    Config::default()
        .cpus(cpus)
        .cmdline(cmdline)
        .timeout(Duration::from_secs(900))
        .stall_timeout(Duration::from_secs(120))
}

fn boot(config: &Config) -> Run {
    machine::run(config).unwrap_or_else(|error| panic!("cannot boot the kernel: {error}"))
}

fn exec(cpus: u32, program: &str) -> Run {
    boot(&config(cpus, &format!("exec={program}")))
}

fn assert_exit(run: &Run, program: &str, code: i32) {
    let line = format!("exec: {program} (pid 1) exited with {code}");
    assert!(run.printed(&line), "expected '{line}'\n{}", run.describe());
    let expected = if code == 0 {
        Outcome::Success
    } else {
        Outcome::Failure
    };
    assert_eq!(run.outcome, expected, "{}", run.describe());
}

#[test]
fn hello_runs_in_ring_3_with_its_arguments() {
    let run = exec(2, "hello:first,second");
    assert!(
        run.printed("hello from ring 3: args='first second'"),
        "{}",
        run.describe()
    );
    assert_exit(&run, "hello", 0);
}

#[test]
fn exit_codes_reach_the_kernel() {
    assert_exit(&exec(1, "exit_code:7"), "exit_code", 7);
    assert_exit(&exec(1, "exit_code:0"), "exit_code", 0);
}

#[test]
fn threads_run_on_four_cpus_at_once() {
    let run = exec(4, "threads:4,4");
    assert!(
        run.printed("4/4 joined, 4 distinct cpus, all running at once: yes"),
        "{}",
        run.describe()
    );
    assert_exit(&run, "threads", 0);
}

#[test]
fn bad_system_call_arguments_return_errors() {
    for cpus in [1, 4] {
        let run = exec(cpus, "syscall_errors");
        assert!(!run.printed("FAIL "), "{}", run.describe());
        assert_exit(&run, "syscall_errors", 0);
    }
}

#[test]
fn faulting_programs_are_killed_with_a_report() {
    let cases = [
        (
            "kernel-read",
            "read at 0xffffffff80000000 (kernel memory: present, but supervisor-only)",
        ),
        ("null", "read at 0x0 (no mapping)"),
        ("write-ro", "(protection violation)"),
        ("exec-data", "execute at"),
    ];
    for (how, report) in cases {
        let run = exec(2, &format!("fault:{how}"));
        assert!(
            run.printed("process 1 (fault) killed: thread"),
            "{how}: no kill report\n{}",
            run.describe()
        );
        assert!(
            run.printed(report),
            "{how}: expected '{report}'\n{}",
            run.describe()
        );
        assert_exit(&run, "fault", 139);
    }
}

#[test]
fn every_system_call_succeeds_when_used_right() {
    let run = exec(4, "syscalls");
    assert!(!run.printed("FAIL "), "{}", run.describe());
    assert!(
        run.printed("syscalls: 26 cases, 0 failed"),
        "{}",
        run.describe()
    );
    assert_exit(&run, "syscalls", 0);
}

/// A C program written for Linux, built static with musl and with glibc,
/// runs unmodified: each C library starts (entry stack, auxiliary vector,
/// TLS through `arch_prctl`, its heap), its pthreads keep their own TLS and
/// join (the clear-tid futex wake), a condition variable's broadcast wakes
/// every waiter (musl's needs `FUTEX_REQUEUE`), and a bad pointer and an
/// unknown call come back as `EFAULT` and `ENOSYS`.
#[test]
fn static_c_programs_run_unmodified() {
    for program in ["libc_smoke-musl", "libc_smoke-glibc"] {
        let run = exec(4, program);
        assert!(!run.printed("FAIL "), "{program}:\n{}", run.describe());
        assert!(
            run.printed("libc_smoke: 7 checks, 0 failed"),
            "{program}:\n{}",
            run.describe()
        );
        assert!(
            !run.printed("which this kernel does not offer"),
            "{program}: logged unasked"
        );
        assert_exit(&run, program, 0);
    }
}

/// With `syscall.unknown=log`, a call the kernel does not offer is named in
/// the log with the program that made it (and still fails with `ENOSYS`).
#[test]
fn unknown_system_calls_are_named_when_asked() {
    let run = boot(&config(2, "syscall.unknown=log exec=libc_smoke-musl"));
    assert!(
        run.printed("syscall: libc_smoke-musl (pid 1, thread ")
            && run.printed(" made system call 999, which this kernel does not offer"),
        "{}",
        run.describe()
    );
    assert!(
        run.printed("libc_smoke: 7 checks, 0 failed"),
        "{}",
        run.describe()
    );
    assert_exit(&run, "libc_smoke-musl", 0);
}

/// Each forbidden access (kernel memory read, written or executed, a
/// read-only page written, a data page executed, another process's address
/// read) kills only its process, while two guards with private data at one
/// address keep running and find their data intact.
#[test]
fn faults_kill_only_the_faulting_process() {
    let run = exec(4, "isolation");
    assert_eq!(
        run.serial
            .iter()
            .filter(|line| line.contains(") killed: thread"))
            .count(),
        6,
        "{}",
        run.describe()
    );
    let reports = [
        (
            "kernel-read",
            "read at 0xffffffff80000000 (kernel memory: present, but supervisor-only)",
        ),
        (
            "kernel-write",
            "write at 0xffffffff80000000 (kernel memory: present, but supervisor-only)",
        ),
        (
            "kernel-exec",
            "execute at 0xffffffff80000000 (kernel memory: present, but supervisor-only)",
        ),
        ("write-ro", "(protection violation)"),
        ("exec-data", "(protection violation)"),
        ("peek", "read at 0x200000000000 (no mapping)"),
    ];
    for (mode, report) in reports {
        assert!(
            run.printed(&format!(
                "isolation: fault {mode} exited with 139, as expected"
            )),
            "{mode}\n{}",
            run.describe()
        );
        assert!(
            run.printed(report),
            "{mode}: expected '{report}'\n{}",
            run.describe()
        );
    }
    for guard in ["guard 170", "guard 85"] {
        assert!(
            run.printed(&format!(
                "isolation: isolation {guard} exited with 0, as expected"
            )),
            "{guard}\n{}",
            run.describe()
        );
    }
    assert!(
        run.printed("isolation: 0 unexpected outcomes"),
        "{}",
        run.describe()
    );
    assert_exit(&run, "isolation", 0);
}

#[test]
fn latency_program_reports_both_medians() {
    let run = exec(2, "latency:500");
    assert!(
        run.printed("latency: syscall round trip (getpid): median "),
        "{}",
        run.describe()
    );
    assert!(
        run.printed("latency: context switch (yield ping-pong, per switch): median "),
        "{}",
        run.describe()
    );
    assert_exit(&run, "latency", 0);
}

/// What a program and its children left behind: `exec:` reports it after
/// every program, and it must be nothing.
fn assert_nothing_leaked(run: &Run) {
    assert!(
        run.printed("exec: frames not given back: 0, frames still shared: 0"),
        "frames leaked or still recorded as shared\n{}",
        run.describe()
    );
}

/// `fork`: copy-on-write copies, shared mappings, swap, `mprotect`, kernel
/// writes, one thread in the child, and the process limit (the `forks`
/// program checks each case itself), with every frame given back after.
#[test]
fn fork_copies_on_write_and_shares_what_is_shared() {
    for cpus in [1, 2, 4] {
        let run = exec(cpus, "forks");
        assert!(!run.printed("FAIL "), "{cpus} CPUs\n{}", run.describe());
        assert!(
            run.printed("PASS fork/a-fork-bomb-ends-in-eagain"),
            "{cpus} CPUs\n{}",
            run.describe()
        );
        assert_exit(&run, "forks", 0);
        assert_nothing_leaked(&run);
    }
}

/// Dolan's reproducer of CVE-2025-37964 and CVE-2025-40174: a thread that
/// switches address spaces after every read never sees the counter on a
/// copy-on-write page behind the one on a shared page. (With the two bugs
/// put back, `tlb.bug=skip-switching` and `generation-before-cpuset`, only
/// a TLB that keeps entries per PCID across address-space switches can show
/// a violation; no emulator here has one: see docs/10-model-and-loom.md.)
#[test]
fn cowrace_finds_no_stale_copy_on_write_translation() {
    for cpus in [2, 4] {
        let run = exec(cpus, "cowrace:10000");
        assert!(
            run.printed("cowrace: iterations=10000 ")
                && run.printed(" violations=0 failed_forks=0 "),
            "{cpus} CPUs\n{}",
            run.describe()
        );
        assert_exit(&run, "cowrace", 0);
        assert_nothing_leaked(&run);
    }
}

/// The reproducer can fail: with the flush IPIs left out
/// (`tlb.bug=no-flush-ipis`), a reader that stays on the address space
/// keeps reading `A`'s old frame after the copy-on-write break. The C
/// version, written for Linux and built with musl, catches it the same way.
#[test]
fn cowrace_catches_a_flush_that_misses_the_reader() {
    for program in ["cowrace", "cowrace-musl"] {
        let run = boot(&config(
            2,
            &format!("tlb.bug=no-flush-ipis exec={program}:2000,stay"),
        ));
        assert!(
            run.printed("cowrace: iterations=2000 reader=stay "),
            "{program}\n{}",
            run.describe()
        );
        assert!(
            run.number("cowrace: iterations=", "violations") > 0,
            "{program}: the missing flush went unnoticed\n{}",
            run.describe()
        );
        assert!(
            run.printed("cowrace: first violation: read B="),
            "{program}\n{}",
            run.describe()
        );
        assert_exit(&run, program, 1);
    }
}

/// The C reproducer finds nothing on the correct kernel either.
#[test]
fn the_c_cowrace_finds_no_stale_translation() {
    let run = exec(4, "cowrace-glibc:3000");
    assert!(
        run.printed("cowrace: iterations=3000 reader=switch ")
            && run.printed(" violations=0 failed_forks=0 "),
        "{}",
        run.describe()
    );
    assert_exit(&run, "cowrace-glibc", 0);
}

/// The C `pageout`, the file `bench pageout --against linux` runs on both
/// kernels, pages its region out and back in with this kernel's batched
/// reclaim flush (one per `madvise(PAGEOUT)`): with busy helpers each one
/// reaches the three other CPUs, with sleeping ones nobody (their CPUs are
/// lazy, or on the kernel's address space after a flush that freed page
/// tables moved them there). Every page must come back as it went out.
#[test]
fn the_c_pageout_batches_its_reclaim_flush() {
    for (program, helpers, ipis) in [("pageout-musl", "busy", 3), ("pageout-glibc", "sleep", 0)] {
        let run = exec(4, &format!("{program}:3,{helpers}"));
        let line = "pageout: helpers=";
        assert!(
            run.printed(&format!("pageout: helpers={helpers} pages=256 loops=3 ")),
            "{program}\n{}",
            run.describe()
        );
        assert_eq!(
            run.value(line, "batch_flushes_per_loop"),
            Some("1.000"),
            "{program}\n{}",
            run.describe()
        );
        assert_eq!(
            run.value(line, "ipis_sent_per_loop"),
            Some(format!("{ipis}.000").as_str()),
            "{program}\n{}",
            run.describe()
        );
        assert_exit(&run, program, 0);
    }
}

/// The C `tlb_flush2`, the file `bench --against linux` runs on both
/// kernels, does the Rust program's work and prints its summary line, with
/// this kernel's counters (its own `tlb_stats` call), in both modes and
/// with both C libraries.
#[test]
fn the_c_tlb_flush2_runs_both_modes() {
    for (program, kind) in [
        ("tlb_flush2-musl", "threads"),
        ("tlb_flush2-glibc", "processes"),
    ] {
        let run = exec(2, &format!("{program}:{kind},2,200,500"));
        let line = "tlb_flush2: kind=";
        assert!(
            run.printed(&format!(
                "tlb_flush2: kind={kind} tasks=2 cpus=2 measured_ms=500 "
            )),
            "{program}\n{}",
            run.describe()
        );
        assert_eq!(
            run.number(line, "failed_tasks"),
            0,
            "{program}\n{}",
            run.describe()
        );
        assert!(
            run.number(line, "iterations") > 0,
            "{program}\n{}",
            run.describe()
        );
        assert!(
            run.printed(" ipis_sent_per_iter=") && !run.printed("counters=none"),
            "{program}: no kernel counters\n{}",
            run.describe()
        );
        assert_exit(&run, program, 0);
    }
}

/// A Dirty-COW-style race: a write through a copy-on-write fault against
/// `madvise(DONTNEED)` of the same page on another CPU, while the child
/// reads its copy; the write is the parent's store, or the kernel's for a
/// system call (`kernel`). Neither process ever sees the other's data.
#[test]
fn cowdirty_keeps_each_processs_copy_its_own() {
    for cpus in [2, 4] {
        for (program, rounds) in [
            ("cowdirty:10000", 10000),
            ("cowdirty:5000,0,1,kernel", 5000),
        ] {
            let run = exec(cpus, program);
            assert!(
                run.printed(&format!("cowdirty: rounds={rounds} violations=0")),
                "{program} at {cpus} CPUs\n{}",
                run.describe()
            );
            assert_exit(&run, "cowdirty", 0);
            assert_nothing_leaked(&run);
        }
    }
}

/// The race's checks can fail: with `vm.bug=kernel-write-skips-cow` the
/// kernel's write for a system call lands in the frame the child still
/// maps (Dirty COW), and the child sees its copy change.
#[test]
fn cowdirty_catches_a_kernel_write_that_skips_copy_on_write() {
    let run = boot(&config(
        2,
        "vm.bug=kernel-write-skips-cow exec=cowdirty:200,0,1,kernel",
    ));
    assert!(
        run.printed("vm: deliberate bug KernelWriteSkipsCopyOnWrite is switched on (vm.bug=)"),
        "{}",
        run.describe()
    );
    assert!(
        run.number("cowdirty: rounds=200 ", "violations") > 0,
        "the kernel's write into the shared frame went unnoticed\n{}",
        run.describe()
    );
    assert!(
        run.printed("the child's copy changed (its exit code): 0x1"),
        "{}",
        run.describe()
    );
    assert_exit(&run, "cowdirty", 1);
    assert_nothing_leaked(&run);
}
