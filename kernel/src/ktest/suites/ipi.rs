//! In-kernel tests of bring-up, the per-CPU tick and cross-CPU calls.

use alloc::vec::Vec;
use core::{
    sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    time::Duration,
};

use mm::CpuSet;

use crate::{check, check_eq, require_ok, require_some};
use crate::{framework::TestResult};
use kernel::{smp::{self, cpu, online}};
use hal::percpu;
use hal::{ipi, time::{self, Deadline}};

fn total_ipis_sent() -> u64 {
    online()
        .iter()
        .filter_map(cpu)
        .map(|cpu| cpu.ipis_sent.load(Ordering::Relaxed))
        .sum()
}

pub fn round_trip_to_every_cpu() -> TestResult {
    const ROUNDS: usize = 200;
    let me = percpu::current().index;
    let my_cpu = require_some!(cpu(me), "this CPU is not registered");
    let mut samples = Vec::with_capacity(ROUNDS);
    for target in online().iter().filter(|&cpu| cpu != me) {
        let target_cpu = require_some!(cpu(target), "CPU {target} is not registered");
        let sent_before = my_cpu.ipis_sent.load(Ordering::Relaxed);
        let received_before = target_cpu.ipis_received.load(Ordering::Relaxed);
        for _ in 0..ROUNDS {
            let start = time::now_ns();
            require_ok!(smp::call_on(&CpuSet::single(target), &|| {}));
            samples.push(time::now_ns() - start);
        }
        let sent = my_cpu.ipis_sent.load(Ordering::Relaxed) - sent_before;
        check!(
            sent >= ROUNDS as u64,
            "{ROUNDS} calls to CPU {target} sent {sent} IPIs"
        );
        // Each call sends an IPI, but the target need not take one
        // interrupt per IPI: its APIC keeps one pending request per vector,
        // so an IPI that arrives while the last is still pending (the
        // target still in the handler that is serving these very calls,
        // its vCPU thread off its host CPU) merges with it; and a target
        // waiting in a cross-call of its own serves its inbox by polling,
        // taking the IPI only afterwards. What must hold is that IPIs do
        // arrive: wait for the first (within the time a call may take).
        let deadline = Deadline::after(ipi::ANSWER_TIMEOUT);
        let received = loop {
            let received = target_cpu.ipis_received.load(Ordering::Relaxed) - received_before;
            if received >= 1 || deadline.has_passed() {
                break received;
            }
            core::hint::spin_loop();
        };
        check!(
            received >= 1,
            "CPU {target} took none of the {sent} IPIs sent to it"
        );
    }
    if !samples.is_empty() {
        samples.sort_unstable();
        hal::println!(
            "ipi: round trip to {} CPUs x {ROUNDS}: median {} us, p99 {} us",
            online().count() - 1,
            samples[samples.len() / 2] / 1000,
            samples[samples.len() * 99 / 100] / 1000
        );
    }
    Ok(())
}

/// A caller whose target keeps it waiting spins briefly, then halts, and
/// the last answer wakes it with an IPI of its own (`hal::ipi`'s "waiting
/// does not take the CPU it waits for"). The target holds its answer back
/// until it sees the caller halted. A tick can end a halt just as the
/// answer comes, and then no wake-up is owed, so one of a few tries must
/// show the wake-up; a missing one shows in none.
pub fn a_waiting_caller_halts_until_the_last_answer_wakes_it() -> TestResult {
    const TRIES: usize = 5;
    let me = percpu::current();
    let Some(target) = online().iter().find(|&cpu| cpu != me.index) else {
        return Ok(());
    };
    check!(
        hal::cpu::interrupts_enabled(),
        "in-kernel tests run with interrupts on"
    );
    let mut halted = 0;
    let mut woken = 0;
    for _ in 0..TRIES {
        let wakeups_before = ipi::answer_wakeups();
        let saw_halt = AtomicBool::new(false);
        require_ok!(smp::call_on(&CpuSet::single(target), &|| {
            let deadline = Deadline::after(Duration::from_secs(1));
            while !ipi::halted_for_answers(me) && !deadline.has_passed() {
                core::hint::spin_loop();
            }
            saw_halt.store(ipi::halted_for_answers(me), Ordering::Relaxed);
        }));
        halted += usize::from(saw_halt.load(Ordering::Relaxed));
        woken += usize::from(ipi::answer_wakeups() > wakeups_before);
    }
    check_eq!(
        halted,
        TRIES,
        "calls in which CPU {} halted while CPU {target} kept it waiting for a second",
        me.index
    );
    check!(
        woken >= 1,
        "CPU {} halted in {TRIES} calls and no answer woke it",
        me.index
    );
    Ok(())
}

pub fn concurrent_cross_calls_complete() -> TestResult {
    const ROUNDS: u64 = 100;
    let calls_made = AtomicU64::new(0);
    let failures = AtomicU64::new(0);
    let all = online();
    // Every CPU (this one included) makes ROUNDS calls to every other CPU
    // at the same time, from interrupt context on the others: each must
    // serve incoming calls while it waits for its own.
    require_ok!(smp::call_on(&all, &|| {
        let others = online().without(percpu::current().index);
        for _ in 0..ROUNDS {
            if smp::call_on(&others, &|| {
                calls_made.fetch_add(1, Ordering::Relaxed);
            })
            .is_err()
            {
                failures.fetch_add(1, Ordering::Relaxed);
            }
        }
    }));
    let cpus = all.count() as u64;
    check_eq!(
        failures.load(Ordering::Relaxed),
        0,
        "cross-calls that were not answered"
    );
    check_eq!(
        calls_made.load(Ordering::Relaxed),
        cpus * (cpus - 1) * ROUNDS,
        "calls executed"
    );
    Ok(())
}

pub fn local_calls_send_no_ipi() -> TestResult {
    let me = percpu::current();
    let ran = AtomicUsize::new(0);
    // Only this CPU's count, and with interrupts off: nothing but the call
    // can send from here meanwhile (a tick could wake a thread elsewhere),
    // and other CPUs may still send the last test's late wake-ups.
    let (outcome, sent) = hal::cpu::without_interrupts(|| {
        let before = me.ipis_sent.load(Ordering::Relaxed);
        let outcome = smp::call_on(&CpuSet::single(me.index), &|| {
            ran.fetch_add(1, Ordering::Relaxed);
        });
        (outcome, me.ipis_sent.load(Ordering::Relaxed) - before)
    });
    require_ok!(outcome);
    check_eq!(ran.load(Ordering::Relaxed), 1);
    check_eq!(sent, 0, "calling only yourself must not send an IPI");
    if online().count() == 1 {
        require_ok!(smp::call_on(&CpuSet::first_n(mm::MAX_CPUS), &|| {}));
        check_eq!(
            total_ipis_sent(),
            0,
            "with one CPU online no IPI is ever sent"
        );
    }
    Ok(())
}

/// CPU 1 sits in a cross-call with interrupts off; CPU 2 calls it with a
/// short timeout and must get `Err` naming CPU 1, with its request
/// retracted (CPU 1 must never run it afterwards).
pub fn unanswered_call_is_retracted() -> TestResult {
    if online().count() < 3 {
        hal::println!("ipi: unanswered_call_is_retracted needs 3 CPUs; nothing to check");
        return Ok(());
    }
    let release = AtomicBool::new(false);
    let late_runs = AtomicUsize::new(0);
    let outcome = AtomicUsize::new(0);
    let (stuck, caller) = (1, 2);
    require_ok!(smp::call_on(&CpuSet::from_iter([stuck, caller]), &|| {
        if percpu::current().index == stuck {
            while !release.load(Ordering::Acquire) {
                core::hint::spin_loop();
            }
            return;
        }
        let result = smp::call_on_within(
            &CpuSet::single(stuck),
            &|| {
                late_runs.fetch_add(1, Ordering::Relaxed);
            },
            Duration::from_millis(200),
        );
        let named_stuck = matches!(&result, Err(unanswered) if unanswered.cpus.words() == CpuSet::single(stuck).words());
        outcome.store(if named_stuck { 1 } else { 2 }, Ordering::Relaxed);
        release.store(true, Ordering::Release);
    }));
    time::delay(Duration::from_millis(50));
    check_eq!(
        outcome.load(Ordering::Relaxed),
        1,
        "1 = Err naming CPU 1; 2 = anything else"
    );
    check_eq!(
        late_runs.load(Ordering::Relaxed),
        0,
        "the retracted request ran anyway"
    );
    Ok(())
}

/// A call's steps are measured where they happen: a handler that spins for
/// 2 ms is a `handler` step of at least 2 ms (timed on the target), no step
/// is longer than the whole call as the caller timed it, and a call to
/// oneself has no IPI steps at all. (Which step absorbs an emulator's
/// pauses is not checked: under QEMU 10 an ICR write was seen to return
/// only after the target's whole handler, making `send` 2 ms.)
pub fn call_steps_say_where_the_time_went() -> TestResult {
    const SPIN: Duration = Duration::from_millis(2);
    let me = percpu::current().index;
    let alone = require_ok!(smp::call_on(&CpuSet::single(me), &|| time::delay(SPIN)));
    check_eq!(alone.targets, 0, "a call to oneself sends no IPI");
    check!(
        alone.own_work_ns >= SPIN.as_nanos() as u64 && alone.handler_ns == 0,
        "a call to oneself is all own work: {alone:?}"
    );
    let Some(other) = online().iter().find(|&cpu| cpu != me) else {
        return Ok(());
    };
    let started = time::now_ns();
    let steps = require_ok!(smp::call_on(&CpuSet::single(other), &|| time::delay(SPIN)));
    let whole = time::now_ns() - started;
    check_eq!(steps.targets, 1);
    check!(
        steps.handler_ns >= SPIN.as_nanos() as u64,
        "the target's 2 ms of work is its handler step: {steps:?}"
    );
    for (name, ns) in [
        ("send", steps.send_ns),
        ("delivery", steps.delivery_ns),
        ("handler", steps.handler_ns),
        ("acknowledge", steps.acknowledge_ns),
    ] {
        check!(
            ns <= whole,
            "the {name} step ({ns} ns) is part of the call ({whole} ns): {steps:?}"
        );
    }
    Ok(())
}
