//! Exhaustive loom checks of the shootdown protocol's races (issue 10).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p mm --release --test loom` (add
//! `-- --nocapture` to see how many interleavings each scenario explored and how long it
//! took). Each scenario drives the real `mm` code on two or three loom threads over the
//! simulated machine of `machine.rs`, then runs its oracle. Each has mutated twins, which
//! switch on one deliberate bug (a [`Fault`] of `mm`, or a weakened cross-call handshake)
//! and must be **rejected** by loom: they fail if loom finds nothing, so the proof cannot
//! silently go stale. The races themselves are explained in `mm/src/races.rs`.

#![cfg(loom)]

mod address_space;
mod machine;

use machine::{Cfg, Handshake, Hw, World};
use mm::{AddressSpaceTlb, Fault, FlushBatch, FlushRange};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// A scenario: the faults to switch on and the hardware configuration.
#[derive(Clone, Copy)]
struct Setup {
    faults: &'static [Fault],
    cfg: Cfg,
}

const CLEAN_IPI: Setup = Setup {
    faults: &[],
    cfg: Cfg::IPI,
};
const CLEAN_INVLPGB: Setup = Setup {
    faults: &[],
    cfg: Cfg::INVLPGB,
};

fn with_faults(cfg: Cfg, faults: &'static [Fault]) -> Setup {
    Setup { faults, cfg }
}

fn arm(w: &World, setup: Setup) {
    for &f in setup.faults {
        w.sys.faults().set(f, true);
    }
}

/// Explores `body` exhaustively (within the preemption bound), counting interleavings in
/// `count`; returns how many there were.
fn explore_counted(
    name: &str,
    preemptions: usize,
    body: fn(Setup),
    setup: Setup,
    count: &Arc<AtomicUsize>,
) -> usize {
    let counter = count.clone();
    let start = Instant::now();
    let mut builder = loom::model::Builder::new();
    // A bound keeps the spin loops (IPI waits, the SWITCHING wait) finite in practice.
    builder.preemption_bound = Some(preemptions);
    builder.max_branches = 100_000;
    builder.check(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        body(setup);
    });
    let n = count.load(Ordering::Relaxed);
    eprintln!(
        "loom: {name}: {n} interleavings, {:.2?} (preemption bound {preemptions})",
        start.elapsed()
    );
    n
}

/// Explores a correct scenario; every interleaving must pass.
fn explore(name: &str, preemptions: usize, body: fn(Setup), setup: Setup) -> usize {
    explore_counted(
        name,
        preemptions,
        body,
        setup,
        &Arc::new(AtomicUsize::new(0)),
    )
}

/// Runs a mutated scenario and demands that loom reject it with a message containing `needle`.
fn rejected(name: &str, preemptions: usize, body: fn(Setup), setup: Setup, needle: &str) {
    let start = Instant::now();
    let count = Arc::new(AtomicUsize::new(0));
    let result = catch_unwind(AssertUnwindSafe(|| {
        explore_counted(name, preemptions, body, setup, &count)
    }));
    let Err(payload) = result else {
        panic!("{name}: loom found no failure, but the mutation must be rejected");
    };
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(
        message.contains(needle),
        "{name}: rejected for the wrong reason: {message}"
    );
    eprintln!(
        "loom: {name}: rejected at interleaving {}, after {:.2?}: {}",
        count.load(Ordering::Relaxed),
        start.elapsed(),
        message.lines().next().unwrap_or("")
    );
}

const STALE: &str = "stale translation";

/// Scenario `body` (called `name`) in mode `cfg` with the deliberate bug
/// `fault` switched on: loom must find a stale translation within three
/// preemptions. The label names the scenario and the fault.
fn fault_rejected(name: &str, body: fn(Setup), cfg: Cfg, fault: &'static Fault) {
    let label = format!("{name} / {fault:?}");
    let setup = with_faults(cfg, std::slice::from_ref(fault));
    rejected(&label, 3, body, setup, STALE);
}

// ---------------------------------------------------------------------------------------
// 1. Switch versus flush (CVE-2025-40174, CVE-2025-37964).

/// CPU 1 ran `mm` (generation 2 in its slot, its bit still in `mm`'s CPU set) and is on
/// the address space `away` picks. It switches back to `mm` while CPU 0 unmaps a page of
/// `mm` and runs `flush`; the page's version counts as revoked once `flush` returns.
/// Shared by scenario 1 and the second half of scenario 5.
fn cpu_switches_back_during(
    setup: Setup,
    away: fn(&'static World) -> &'static AddressSpaceTlb,
    flush: fn(&'static World, &Hw),
) {
    let w = World::boot();
    let s1 = w.setup(1, setup.cfg);
    w.sys.switch_mm(&s1, &w.mm);
    // A first flush uses up the periodic CPU-set trim (it would interrupt CPU 1 anyway).
    w.setup_flush(0, setup.cfg);
    w.sys.switch_mm(&s1, away(w));
    arm(w, setup);

    let switcher = loom::thread::spawn(move || {
        let hw = w.cpu(1, setup.cfg);
        hw.begin();
        w.sys.switch_mm(&hw, &w.mm);
        hw.serve_until_finished();
    });
    let hw = w.cpu(0, setup.cfg);
    let version = w.unmap_page();
    flush(w, &hw);
    w.flush_returned(version);
    w.finish();
    switcher.join().unwrap();
    w.check();
}

/// Scenario 1: CPU 1 comes back from another process's address space during an ordinary
/// flush of one page.
fn switch_vs_flush(setup: Setup) {
    cpu_switches_back_during(
        setup,
        |w| &w.other,
        |w, hw| {
            w.sys
                .flush_tlb_mm_range(hw, &w.mm, FlushRange::pages(0x4000, 0x5000), false);
        },
    );
}

#[test]
fn switch_vs_flush_is_safe() {
    explore("switch vs flush", 3, switch_vs_flush, CLEAN_IPI);
}

#[test]
fn switch_vs_flush_rejects_weak_switch_fence() {
    fault_rejected(
        "switch vs flush",
        switch_vs_flush,
        Cfg::IPI,
        &Fault::SwitchFenceAcqRel,
    );
}

#[test]
fn switch_vs_flush_rejects_weak_bump_fence() {
    fault_rejected(
        "switch vs flush",
        switch_vs_flush,
        Cfg::IPI,
        &Fault::BumpFenceAcqRel,
    );
}

#[test]
fn switch_vs_flush_rejects_generation_read_first() {
    fault_rejected(
        "switch vs flush",
        switch_vs_flush,
        Cfg::IPI,
        &Fault::GenerationReadBeforeCpuSet,
    );
}

#[test]
fn switch_vs_flush_rejects_skipping_switching_cpus() {
    fault_rejected(
        "switch vs flush",
        switch_vs_flush,
        Cfg::IPI,
        &Fault::SkipSwitchingCpus,
    );
}

// ---------------------------------------------------------------------------------------
// 2. Global-ASID publication.

/// CPU 1 runs `mm` on a dynamic ASID. CPU 2 promotes `mm` to a global ASID while CPU 0
/// unmaps a page and flushes: if CPU 0 sees the global ASID it broadcasts, and must then
/// also see the transition flag and IPI CPU 1.
fn publication(setup: Setup) {
    let w = World::boot();
    let s1 = w.setup(1, setup.cfg);
    w.sys.switch_mm(&s1, &w.mm);
    w.setup_flush(0, setup.cfg);
    arm(w, setup);

    let runner = loom::thread::spawn(move || {
        let hw = w.cpu(1, setup.cfg);
        hw.begin();
        hw.serve_until_finished();
    });
    let promoter = loom::thread::spawn(move || {
        let hw = w.cpu(2, setup.cfg);
        hw.begin();
        w.sys.use_global_asid(&hw, &w.mm).expect("a global ASID");
    });
    let hw = w.cpu(0, setup.cfg);
    let version = w.unmap_page();
    w.sys.flush_tlb_mm_range(&hw, &w.mm, FlushRange::All, false);
    w.flush_returned(version);
    w.finish();
    promoter.join().unwrap();
    runner.join().unwrap();
    w.check();
}

#[test]
fn publication_is_safe() {
    explore("global ASID publication", 3, publication, CLEAN_INVLPGB);
}

#[test]
fn publication_rejects_relaxed_publish() {
    fault_rejected(
        "global ASID publication",
        publication,
        Cfg::INVLPGB,
        &Fault::PublishGlobalAsidRelaxed,
    );
}

// ---------------------------------------------------------------------------------------
// 3. Transition completion versus a concurrent switch.

/// CPU 1 ran `mm` (slot current, bit set) and is elsewhere. CPU 0 promotes `mm`, unmaps a
/// page and flushes by broadcast, which tries to finish the ASID transition, while CPU 1
/// switches back to `mm` (and may have read "no global ASID" just before the promotion).
fn transition_vs_switch(setup: Setup) {
    let w = World::boot();
    let s1 = w.setup(1, setup.cfg);
    w.sys.switch_mm(&s1, &w.mm);
    w.setup_flush(0, setup.cfg);
    w.sys.switch_mm(&s1, &w.other);
    arm(w, setup);

    let switcher = loom::thread::spawn(move || {
        let hw = w.cpu(1, setup.cfg);
        hw.begin();
        w.sys.switch_mm(&hw, &w.mm);
        hw.serve_until_finished();
    });
    let hw = w.cpu(0, setup.cfg);
    hw.begin();
    w.sys.use_global_asid(&hw, &w.mm).expect("a global ASID");
    let version = w.unmap_page();
    w.sys.flush_tlb_mm_range(&hw, &w.mm, FlushRange::All, false);
    w.flush_returned(version);
    w.finish();
    switcher.join().unwrap();
    w.check();
}

#[test]
fn transition_vs_switch_is_safe() {
    explore(
        "transition completion vs switch",
        2,
        transition_vs_switch,
        CLEAN_INVLPGB,
    );
}

#[test]
fn transition_vs_switch_rejects_ignoring_switching() {
    fault_rejected(
        "transition completion vs switch",
        transition_vs_switch,
        Cfg::INVLPGB,
        &Fault::TransitionIgnoresSwitching,
    );
}

// ---------------------------------------------------------------------------------------
// 4. Lazy-CPU skipping versus a return from idle.

/// CPU 1 ran `mm` and went idle (lazy, `mm` still loaded). It returns to `mm` while CPU 0
/// unmaps a page and runs `flush`; the page's version counts as revoked once `flush`
/// returns. Shared by scenarios 4 and 5, which differ only in the flush.
fn idle_cpu_returns_during(setup: Setup, flush: fn(&'static World, &Hw)) {
    let w = World::boot();
    let s1 = w.setup(1, setup.cfg);
    w.sys.switch_mm(&s1, &w.mm);
    w.setup_flush(0, setup.cfg);
    w.sys.enter_lazy(&s1);
    arm(w, setup);

    let idle = loom::thread::spawn(move || {
        let hw = w.cpu(1, setup.cfg);
        hw.begin();
        w.sys.switch_mm(&hw, &w.mm);
        hw.serve_until_finished();
    });
    let hw = w.cpu(0, setup.cfg);
    let version = w.unmap_page();
    flush(w, &hw);
    w.flush_returned(version);
    w.finish();
    idle.join().unwrap();
    w.check();
}

/// Scenario 4: an ordinary flush (no page tables freed, so lazy CPUs may be skipped).
fn lazy_vs_return(setup: Setup) {
    idle_cpu_returns_during(setup, |w, hw| {
        w.sys.flush_tlb_mm_range(hw, &w.mm, FlushRange::All, false);
    });
}

#[test]
fn lazy_vs_return_is_safe() {
    explore(
        "lazy skip vs return from idle",
        3,
        lazy_vs_return,
        CLEAN_IPI,
    );
}

#[test]
fn lazy_vs_return_rejects_weak_switch_fence() {
    fault_rejected(
        "lazy skip vs return from idle",
        lazy_vs_return,
        Cfg::IPI,
        &Fault::SwitchFenceAcqRel,
    );
}

#[test]
fn lazy_vs_return_rejects_weak_bump_fence() {
    fault_rejected(
        "lazy skip vs return from idle",
        lazy_vs_return,
        Cfg::IPI,
        &Fault::BumpFenceAcqRel,
    );
}

// ---------------------------------------------------------------------------------------
// 5. Batch add-pending versus batch flush.

/// Scenario 5: CPU 0 reclaims the page with a deferred batch (`batch_add_pending`, then
/// `batch_flush`, which skips lazy CPUs).
fn batch_vs_return(setup: Setup) {
    idle_cpu_returns_during(setup, |w, hw| {
        let mut batch = FlushBatch::new();
        w.sys.batch_add_pending(&mut batch, &w.mm);
        w.sys.batch_flush(hw, &mut batch);
    });
}

#[test]
fn batch_vs_return_is_safe() {
    explore("batch add-pending vs flush", 3, batch_vs_return, CLEAN_IPI);
}

#[test]
fn batch_vs_return_rejects_weak_bump_fence() {
    fault_rejected(
        "batch add-pending vs flush",
        batch_vs_return,
        Cfg::IPI,
        &Fault::BumpFenceAcqRel,
    );
}

/// Scenario 5, second half: CPU 1 comes back from the kernel's address space, where a
/// batch does not interrupt it, while CPU 0 reclaims the page with a batch.
fn batch_vs_switch_in(setup: Setup) {
    cpu_switches_back_during(
        setup,
        |w| w.sys.kernel_address_space(),
        |w, hw| {
            let mut batch = FlushBatch::new();
            w.sys.batch_add_pending(&mut batch, &w.mm);
            w.sys.batch_flush(hw, &mut batch);
        },
    );
}

#[test]
fn batch_vs_switch_in_is_safe() {
    explore(
        "batch vs switch-in from the kernel",
        3,
        batch_vs_switch_in,
        CLEAN_IPI,
    );
}

#[test]
fn batch_vs_switch_in_rejects_skipping_switching_cpus() {
    fault_rejected(
        "batch vs switch-in from the kernel",
        batch_vs_switch_in,
        Cfg::IPI,
        &Fault::SkipSwitchingCpus,
    );
}

#[test]
fn batch_vs_switch_in_rejects_weak_switch_fence() {
    fault_rejected(
        "batch vs switch-in from the kernel",
        batch_vs_switch_in,
        Cfg::IPI,
        &Fault::SwitchFenceAcqRel,
    );
}

// ---------------------------------------------------------------------------------------
// 6. The IPI completion handshake.

/// The CPUs that run `mm` in the handshake scenario. One target keeps the check to
/// milliseconds; with two, loom had not finished after five minutes even at preemption
/// bound 1 (two spinning targets and a spinning sender multiply the schedules).
const HANDSHAKE_TARGETS: &[usize] = &[1];

/// The CPUs of `HANDSHAKE_TARGETS` run `mm` and touch its page before and after their
/// interrupt window. CPU 0 unmaps the page, flushes (IPIs to them) and, once the flush
/// returns, frees the page.
fn handshake(setup: Setup) {
    let w = World::boot();
    for &cpu in HANDSHAKE_TARGETS {
        w.sys.switch_mm(&w.setup(cpu, setup.cfg), &w.mm);
    }
    w.setup_flush(0, setup.cfg);
    arm(w, setup);

    let users: Vec<_> = HANDSHAKE_TARGETS
        .iter()
        .copied()
        .map(|cpu| {
            loom::thread::spawn(move || {
                let hw = w.cpu(cpu, setup.cfg);
                hw.begin();
                hw.touch_page();
                hw.serve_until_finished();
                hw.touch_page();
            })
        })
        .collect();
    let hw = w.cpu(0, setup.cfg);
    let version = w.unmap_page();
    w.sys.flush_tlb_mm_range(&hw, &w.mm, FlushRange::All, false);
    w.flush_returned(version);
    w.free_page();
    w.finish();
    for u in users {
        u.join().unwrap();
    }
    w.check();
}

fn handshake_setup(handshake: Handshake) -> Setup {
    Setup {
        faults: &[],
        cfg: Cfg {
            handshake,
            ..Cfg::IPI
        },
    }
}

const RACE: &str = "Causality violation";

#[test]
fn handshake_is_safe() {
    explore(
        "IPI completion handshake",
        3,
        handshake,
        handshake_setup(Handshake::ReleaseAcquire),
    );
}

#[test]
fn handshake_rejects_relaxed_ack() {
    let s = handshake_setup(Handshake::RelaxedAck);
    rejected("IPI handshake / relaxed ack", 2, handshake, s, RACE);
}

#[test]
fn handshake_rejects_relaxed_wait() {
    let s = handshake_setup(Handshake::RelaxedWait);
    rejected("IPI handshake / relaxed wait", 2, handshake, s, RACE);
}

#[test]
fn handshake_rejects_no_wait() {
    let s = handshake_setup(Handshake::NoWait);
    rejected("IPI handshake / no wait", 2, handshake, s, RACE);
}

// ---------------------------------------------------------------------------------------
// 7. The waiting caller's halt (`hal::ipi::wait_for_answers`).

/// A cross-call's caller, its brief spin over, halts until the last answer wakes it: it
/// stores its "halted" flag, fences, and halts only if an answer is still owed; the last
/// target counts its answer, fences, and wakes the caller if it saw the flag (the kernel's
/// `halt_until_answered` and `wake_if_halted`). Here the wake-up IPI is a `woken` flag, and
/// a halted caller waits for nothing else (no timer tick ends its halt), so an answer that
/// it sleeps through leaves it waiting for ever, which loom reports when the caller is the
/// only thread left and makes no progress. Each fence is one side of a Dekker pair: without
/// either, both sides may read the other's old value.
fn halt_vs_last_answer(setup: Setup) {
    use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
    let caller_fence = setup.cfg.handshake != Handshake::HaltWithoutCallerFence;
    let target_fence = setup.cfg.handshake != Handshake::HaltWithoutTargetFence;
    let owed = Arc::new(AtomicUsize::new(1));
    let halted = Arc::new(AtomicBool::new(false));
    let woken = Arc::new(AtomicBool::new(false));
    let target = {
        let (owed, halted, woken) = (owed.clone(), halted.clone(), woken.clone());
        loom::thread::spawn(move || {
            // The handler has run; counting the answer is the last access to the call.
            if owed.fetch_sub(1, Ordering::Release) == 1 {
                if target_fence {
                    fence(Ordering::SeqCst);
                }
                if halted.load(Ordering::Relaxed) {
                    woken.store(true, Ordering::Release);
                }
            }
        })
    };
    while owed.load(Ordering::Acquire) != 0 {
        halted.store(true, Ordering::Relaxed);
        if caller_fence {
            fence(Ordering::SeqCst);
        }
        if owed.load(Ordering::Acquire) != 0 {
            while !woken.load(Ordering::Acquire) {
                loom::thread::yield_now();
            }
        }
        halted.store(false, Ordering::Relaxed);
    }
    target.join().unwrap();
}

fn halt_setup(handshake: Handshake) -> Setup {
    Setup {
        faults: &[],
        cfg: Cfg {
            handshake,
            ..Cfg::IPI
        },
    }
}

/// What loom says when the halted caller waits for ever.
const HALTED_FOR_EVER: &str = "maximum number of branches";

#[test]
fn halt_vs_last_answer_is_safe() {
    explore(
        "halting caller / last answer",
        3,
        halt_vs_last_answer,
        halt_setup(Handshake::ReleaseAcquire),
    );
}

#[test]
fn halt_vs_last_answer_rejects_no_caller_fence() {
    let s = halt_setup(Handshake::HaltWithoutCallerFence);
    rejected(
        "halting caller / no caller fence",
        3,
        halt_vs_last_answer,
        s,
        HALTED_FOR_EVER,
    );
}

#[test]
fn halt_vs_last_answer_rejects_no_target_fence() {
    let s = halt_setup(Handshake::HaltWithoutTargetFence);
    rejected(
        "halting caller / no target fence",
        3,
        halt_vs_last_answer,
        s,
        HALTED_FOR_EVER,
    );
}
