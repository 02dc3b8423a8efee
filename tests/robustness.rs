//! Hostile input must never take the kernel down: a seeded system-call
//! fuzzer runs from four threads on four CPUs at once.

use std::time::Duration;

use boot::qemu::{self, Outcome, QemuConfig};

#[test]
fn hundred_thousand_hostile_syscalls_on_four_cpus() {
    let config = QemuConfig::default()
        .cpus(4)
        .cmdline("exec=fuzz:7,100000,4")
        .timeout(Duration::from_secs(400))
        .stall_timeout(Duration::from_secs(120));
    let run = qemu::run(&config).unwrap_or_else(|error| panic!("cannot boot the kernel: {error}"));
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
