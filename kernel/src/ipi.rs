//! Cross-CPU calls: run a function on a set of CPUs and wait until each has
//! finished.
//!
//! This is the mechanism every IPI-based TLB shootdown is built on. The
//! caller queues one shared request in each target's inbox, sends each
//! target an IPI on [`CALL_VECTOR`], runs the function itself if it is a
//! target, and waits until every target has removed itself from the
//! request's `pending` set.
//!
//! Three properties matter:
//! - **No IPI without a remote target.** Calling only yourself (or running on
//!   the only online CPU) runs the function directly; the IPI counters stay
//!   at zero. A kernel that IPIs itself, or an empty set, is wasting the most
//!   expensive operation in the protocol.
//! - **No deadlock between callers.** Two CPUs may call each other at the
//!   same time, each with interrupts disabled. A waiting CPU therefore
//!   serves its own inbox while it spins, so each answers the other.
//!   Callers *may* have interrupts disabled, but must not hold a lock that
//!   the called function (or any function another CPU may be calling on
//!   them) takes.
//! - **No silent hang.** A target that has not answered after
//!   [`ANSWER_TIMEOUT`] is reported, with the CPUs that did not answer,
//!   instead of being waited for forever.
//!
//! Handlers run in interrupt context on the target: they must be short and
//! must not block. Each request is heap-allocated once per call (not per
//! target); the last reference may be dropped in the handler, which is why
//! the heap lock disables interrupts.

use alloc::{boxed::Box, sync::Arc};
use core::{fmt, sync::atomic::Ordering, time::Duration};

use mm::{AtomicCpuSet, CpuSet};

use crate::{
    arch::{
        apic::{IpiKind, LocalApic},
        cpu::without_interrupts,
        percpu,
    },
    smp,
    time::Deadline,
};

/// The interrupt vector of cross-call IPIs.
pub const CALL_VECTOR: u8 = 0xF0;

/// How long a caller waits for its targets before reporting them. Generous:
/// under TCG with more vCPUs than host cores an IPI can wait milliseconds
/// for its target to be scheduled.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// One cross-CPU call, shared by the caller and its targets.
pub struct CrossCall {
    work: Box<dyn Fn() + Send + Sync>,
    /// Targets that have not finished `work` yet.
    pending: AtomicCpuSet,
}

/// Targets that did not answer within [`ANSWER_TIMEOUT`].
#[derive(Debug)]
pub struct Unanswered {
    pub cpus: CpuSet,
}

impl fmt::Display for Unanswered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CPUs {:?} did not answer a cross-call IPI within {:?}",
            self.cpus, ANSWER_TIMEOUT
        )
    }
}

/// Runs `work` on every online CPU in `targets` (including this one, if it is
/// a target) and returns when all have finished it.
pub fn call_on<F>(targets: &CpuSet, work: F) -> Result<(), Unanswered>
where
    F: Fn() + Send + Sync + 'static,
{
    let me = percpu::current();
    let remote = targets.intersection(&smp::online()).without(me.index);
    let run_here = targets.contains(me.index);
    if remote.is_empty() {
        if run_here {
            work();
        }
        return Ok(());
    }

    let request = Arc::new(CrossCall {
        work: Box::new(work),
        pending: AtomicCpuSet::new(),
    });
    for cpu in &remote {
        request.pending.insert(cpu, Ordering::Relaxed);
    }
    let apic = LocalApic::get().expect("the local APIC is set up before cross-calls");
    for cpu in &remote {
        let target = smp::cpu(cpu).expect("online CPUs are registered");
        // The inbox push happens-before the IPI; the handler pops under the
        // same lock, so it sees the request.
        without_interrupts(|| target.inbox.lock().push_back(Arc::clone(&request)));
        apic.send(target.apic_id, IpiKind::Fixed(CALL_VECTOR));
        me.count_ipi_sent();
    }
    if run_here {
        (request.work)();
    }

    let deadline = Deadline::after(ANSWER_TIMEOUT);
    // Acquire pairs with the targets' Release removal: once a target is gone
    // from `pending`, everything its `work` wrote is visible here.
    while !request.pending.is_empty(Ordering::Acquire) {
        serve_inbox();
        if deadline.has_passed() {
            return Err(Unanswered {
                cpus: request.pending.snapshot(Ordering::Acquire),
            });
        }
        core::hint::spin_loop();
    }
    Ok(())
}

/// Runs every cross-call queued for this CPU. Called by the IPI handler, and
/// by waiting callers so that two CPUs calling each other both progress.
pub fn serve_inbox() {
    let me = percpu::current();
    while let Some(request) = without_interrupts(|| me.inbox.lock().pop_front()) {
        (request.work)();
        request.pending.remove(me.index, Ordering::Release);
    }
}

/// The handler of [`CALL_VECTOR`].
pub fn handle_call_ipi() {
    percpu::current()
        .ipis_received
        .fetch_add(1, Ordering::Relaxed);
    serve_inbox();
}
