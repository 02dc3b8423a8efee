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
use hal::time;

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
    let before = ticks();
    time::delay(Duration::from_millis(100));
    for ((index, before), after) in online().iter().zip(before).zip(ticks()) {
        check!(
            after > before,
            "CPU {index} took no timer tick in 100 ms ({before} -> {after})"
        );
    }
    Ok(())
}
