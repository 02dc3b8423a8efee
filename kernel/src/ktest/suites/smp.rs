//! In-kernel tests of bring-up, the per-CPU tick and cross-CPU calls.

use alloc::vec::Vec;
use core::{
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use mm::CpuSet;

use crate::{check, check_eq, require_ok, require_some};
use crate::{framework::TestResult};
use kernel::{smp::{self, cpu, online}};
use hal::percpu;
use hal::time::{self, Deadline};

pub fn every_listed_cpu_is_online() -> TestResult {
    let summary = require_some!(
        kernel::boot::SMP_SUMMARY.get(),
        "smp::init did not record a summary"
    );
    check_eq!(
        summary.online,
        summary.listed,
        "CPUs listed in the MADT vs online"
    );
    check_eq!(online().count(), summary.online);
    Ok(())
}

pub fn percpu_is_found_through_gs() -> TestResult {
    check_eq!(percpu::current().index, 0, "tests run on the boot CPU");
    for index in &online() {
        let seen = AtomicUsize::new(usize::MAX);
        require_ok!(smp::call_on(&CpuSet::single(index), &|| {
            seen.store(percpu::current().index, Ordering::Relaxed)
        }));
        check_eq!(
            seen.load(Ordering::Relaxed),
            index,
            "the call ran on the wrong CPU"
        );
    }
    Ok(())
}

pub fn timer_ticks_on_every_cpu() -> TestResult {
    let ticks = || -> Vec<u64> {
        online()
            .iter()
            .filter_map(cpu)
            .map(|cpu| cpu.ticks.load(Ordering::Relaxed))
            .collect()
    };
    // A tick every 10 ms, but an emulated CPU whose host thread is not
    // running takes none until it runs again: wait for every CPU's next
    // tick, as long as a stuck CPU may take to be noticed anywhere else.
    const PATIENCE: Duration = Duration::from_secs(5);
    let before = ticks();
    let deadline = Deadline::after(PATIENCE);
    let mut after = ticks();
    while !deadline.has_passed() && before.iter().zip(&after).any(|(before, after)| after <= before) {
        time::delay(Duration::from_millis(10));
        after = ticks();
    }
    for ((index, before), after) in online().iter().zip(before).zip(after) {
        check!(
            after > before,
            "CPU {index} took no timer tick in {PATIENCE:?} ({before} -> {after})"
        );
    }
    Ok(())
}
