//! In-kernel tests of threads, the scheduler and address spaces that need
//! no user program.

use alloc::vec::Vec;
use core::{
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use mm::MAX_CPUS;

use kernel::task::{
    sched,
    thread::Thread,
};
use crate::{check, check_eq, framework::TestResult};
use kernel::smp;
use hal::time;
use hal::{context::ThreadStart, percpu};

/// Where each test thread records the CPU it ran on (+1, 0 = never ran).
static RAN_ON: [AtomicUsize; MAX_CPUS] = [const { AtomicUsize::new(0) }; MAX_CPUS];

extern "C" fn record_cpu(slot: u64) -> ! {
    RAN_ON[slot as usize].store(percpu::current().index + 1, Ordering::Relaxed);
    sched::exit_current(slot as i64)
}

pub fn kernel_threads_run_on_every_cpu() -> TestResult {
    let online = smp::online();
    let threads: Vec<_> = online
        .iter()
        .map(|cpu| {
            RAN_ON[cpu].store(0, Ordering::Relaxed);
            let thread = Thread::new_kernel(ThreadStart::Kernel {
                entry: record_cpu,
                argument: cpu as u64,
            });
            thread.set_affinity(cpu as u64);
            sched::spawn(alloc::sync::Arc::clone(&thread));
            (cpu, thread)
        })
        .collect();
    for (cpu, thread) in &threads {
        check_eq!(
            sched::join(thread),
            Some(*cpu as i64),
            "exit value of the thread pinned to CPU {cpu}"
        );
        check_eq!(
            RAN_ON[*cpu].load(Ordering::Relaxed),
            cpu + 1,
            "where the thread pinned to CPU {cpu} ran"
        );
    }
    Ok(())
}

pub fn sleep_lasts_at_least_its_time() -> TestResult {
    let start = time::now_ns();
    sched::sleep(30_000_000);
    let slept = time::now_ns() - start;
    check!(slept >= 30_000_000, "slept {slept} ns of 30 ms");
    check!(
        slept < Duration::from_secs(5).as_nanos() as u64,
        "slept {slept} ns: the wake-up came very late"
    );
    Ok(())
}
