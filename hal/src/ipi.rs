//! Cross-CPU calls: run a function on a set of CPUs and wait until each has
//! finished.
//!
//! This is the mechanism every IPI-based TLB shootdown is built on. The
//! caller queues one shared request in each target's inbox, sends each
//! target an IPI on [`vectors::CROSS_CALL`], runs the function itself if it is a
//! target, and waits until every target has answered (the request's
//! `owed` count is 0; `pending` says which targets have not, for retraction
//! and reports).
//!
//! Four properties matter:
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
//!   instead of being waited for forever. Each such CPU is also sent a
//!   non-maskable interrupt, which it takes even with interrupts off, and
//!   prints where it is stuck: its instruction pointer and backtrace (the
//!   kernel's NMI handler asks [`answer_where_stuck`]).
//!
//! - **Waiting does not take the CPU it waits for.** A caller spins for
//!   [`SPIN_BEFORE_HALT`] at most (on hardware an answer takes a few
//!   microseconds, less than a halt and a wake-up would cost); then, if
//!   interrupts are on, it halts, and the target that answers last sends it
//!   an IPI on [`vectors::CALL_ANSWERED`]. On hardware that saves power and
//!   gives a hyperthread sibling the core; under an emulator with more
//!   vCPUs than host CPUs it is what lets the targets run at all, since a
//!   spinning vCPU is a host thread that keeps its host CPU busy while the
//!   target's thread waits for one. The caller's flag and the last answer
//!   are a Dekker pair (each side stores, fences, then loads the other's),
//!   so either the caller sees the answer and does not halt or the target
//!   sees the flag and wakes it. `ipi.wait=spin` keeps the caller spinning,
//!   for comparison ([`set_halting`]).
//!
//! The work runs with interrupts off on every CPU, the caller's included (as
//! in an interrupt handler, which is where targets usually run it): it must
//! be short and must not block.
//!
//! A call allocates nothing: the request lives on the caller's stack and each
//! target's inbox holds a reference to it. That is why this module is part of
//! the hardware layer, where `unsafe` may live: the reference outlives the borrow checker's view
//! of it, and [`call_on`] upholds the rule that makes it sound: it does not
//! return while any CPU can still reach the request. Each target's last access
//! is its decrement of `owed`; a target that does not answer in time
//! is retracted from its inbox (under the inbox lock) before it could start.

use core::{
    fmt,
    sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence},
    time::Duration,
};

use tlb_types::CpuSet;

use crate::{
    apic::{IpiKind, LocalApic},
    atomic_cpus::AtomicCpus,
    cpu::{self, without_interrupts},
    percpu::{self, PerCpu},
    smp,
    time::{self, Deadline},
    vectors,
};

/// How long a caller waits for its targets before reporting them. Generous:
/// under TCG with more vCPUs than host cores an IPI can wait milliseconds
/// for its target to be scheduled.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a caller waits for the CPUs it asked (by NMI) where they are
/// stuck to print their answer: only a stopping kernel waits, and an
/// emulated CPU may not run for a while on a busy host.
const STUCK_REPORT_WAIT: Duration = Duration::from_secs(5);

/// How long a caller spins for its answers before it halts: several IPI
/// round trips on hardware, so that there a call rarely halts.
pub const SPIN_BEFORE_HALT: Duration = Duration::from_micros(20);

/// CPUs asked by NMI to report where they are stuck, until they have.
static STUCK_REPORTS: AtomicCpus = AtomicCpus::new();

/// Whether a waiting caller halts after [`SPIN_BEFORE_HALT`] (the default)
/// or spins until answered.
static HALT_WHILE_WAITING: AtomicBool = AtomicBool::new(true);

/// [`vectors::CALL_ANSWERED`] interrupts taken, on all CPUs.
static ANSWER_WAKEUPS: AtomicU64 = AtomicU64::new(0);

/// Makes waiting callers halt (`true`, the default) or spin until answered
/// (`false`, the kernel's `ipi.wait=spin`), from now on.
pub fn set_halting(halt: bool) {
    HALT_WHILE_WAITING.store(halt, Ordering::Relaxed);
}

/// One cross-CPU call, on the caller's stack, shared with its targets.
pub struct CrossCall<'a> {
    work: &'a (dyn Fn() + Sync),
    /// The calling CPU, which the last answer wakes if it halted.
    caller: &'static PerCpu,
    /// Targets that have not finished `work` yet.
    pending: AtomicCpus,
    /// How many of them: the caller waits until it is 0. Each target's
    /// decrement is its last access to the call.
    owed: AtomicUsize,
    /// The TSC when the last target began `work`, and when the last one
    /// finished it (each target raises them), for [`CallSteps`].
    last_started: AtomicU64,
    last_finished: AtomicU64,
    /// The longest any target took for `work`, in TSC ticks, measured on
    /// that target's own clock.
    longest_work: AtomicU64,
}

/// Where the time of one answered call went, in nanoseconds:
///
/// - `send`: queueing the request and writing the ICR, for every target;
/// - `delivery`: from the last ICR write until the last target entered its
///   handler;
/// - `handler`: the longest any target ran `work`, on its own clock;
/// - `acknowledge`: from the last target's end of `work` until the caller,
///   spinning or woken from its halt, saw its answer;
/// - `own_work`: the caller's own run of `work`, when it is a target
///   (during delivery and the handlers).
///
/// With one target, and nothing else in the way, the four steps follow each
/// other and add up to the call. They need not: under an emulator a vCPU's
/// thread can lose its host CPU in the middle of a step (an ICR write that
/// returns only after the target has run its handler was seen under QEMU
/// 10), and then steps overlap. Each one is still a part of the call's
/// time, never more than all of it. Timestamps of different CPUs are
/// compared: this assumes their TSCs run in step, as [`crate::time`] does;
/// a step that would come out negative is 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallSteps {
    pub send_ns: u64,
    pub delivery_ns: u64,
    pub handler_ns: u64,
    pub acknowledge_ns: u64,
    pub own_work_ns: u64,
    /// How many other CPUs were sent an IPI (0: no step but `own_work`).
    pub targets: u32,
}

/// How inboxes hold a request: see the module docs for why `'static` is
/// sound here.
pub type QueuedCall = &'static CrossCall<'static>;

/// Targets that did not answer within [`ANSWER_TIMEOUT`].
#[derive(Debug)]
pub struct Unanswered {
    pub cpus: CpuSet,
}

impl fmt::Display for Unanswered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = if self.cpus.count() == 1 { "" } else { "s" };
        write!(f, "cpu{plural} ")?;
        for (index, cpu) in self.cpus.iter().enumerate() {
            if index > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{cpu}")?;
        }
        write!(
            f,
            " did not answer a cross-call IPI within {:?}",
            ANSWER_TIMEOUT
        )
    }
}

/// Runs `work` on every online CPU in `targets` (including this one, if it is
/// a target) and returns when all have finished it, with where the time
/// went. On `Err`, the listed CPUs did not start it within
/// [`ANSWER_TIMEOUT`], never ran it and never will.
pub fn call_on(targets: &CpuSet, work: &(dyn Fn() + Sync)) -> Result<CallSteps, Unanswered> {
    call_on_within(targets, work, ANSWER_TIMEOUT)
}

/// [`call_on`] with a chosen answer timeout.
pub fn call_on_within(
    targets: &CpuSet,
    work: &(dyn Fn() + Sync),
    timeout: Duration,
) -> Result<CallSteps, Unanswered> {
    let me = percpu::current();
    let remote = targets.intersection(&smp::online()).without(me.index);
    let run_here = targets.contains(me.index);
    if remote.is_empty() {
        return Ok(run_only_here(work, run_here));
    }

    let send_started = time::ticks();
    let call = CrossCall {
        work,
        caller: me,
        pending: AtomicCpus::new(),
        owed: AtomicUsize::new(remote.count()),
        last_started: AtomicU64::new(0),
        last_finished: AtomicU64::new(0),
        longest_work: AtomicU64::new(0),
    };
    for cpu in &remote {
        call.pending.insert(cpu, Ordering::Relaxed);
    }
    // The extended reference is only stored in inboxes, and this function
    // does not return before `wait_for_answers` has seen every target
    // either finish the call or have it retracted from its inbox: then no
    // inbox holds it and no CPU runs it.
    // SAFETY: `call` outlives every use of the extended reference.
    let queued: QueuedCall = unsafe { core::mem::transmute::<&CrossCall<'_>, QueuedCall>(&call) };
    post(me, queued, &remote);
    let sent = time::ticks();
    if run_here {
        without_interrupts(work);
    }
    let own_work_done = time::ticks();

    let unanswered = wait_for_answers(&call, queued, timeout);
    if !unanswered.is_empty() {
        ask_where_stuck(&unanswered);
        return Err(Unanswered { cpus: unanswered });
    }
    let seen = time::ticks();
    let ns = |from: u64, to: u64| time::ticks_to_ns(to.saturating_sub(from));
    Ok(CallSteps {
        send_ns: ns(send_started, sent),
        delivery_ns: ns(sent, call.last_started.load(Ordering::Relaxed)),
        handler_ns: time::ticks_to_ns(call.longest_work.load(Ordering::Relaxed)),
        acknowledge_ns: ns(call.last_finished.load(Ordering::Relaxed), seen),
        own_work_ns: ns(sent, own_work_done),
        targets: remote.count() as u32,
    })
}

/// A call with no remote target: `work` runs here, if this CPU is a target,
/// and nothing is sent.
fn run_only_here(work: &(dyn Fn() + Sync), run_here: bool) -> CallSteps {
    let started = time::ticks();
    if run_here {
        without_interrupts(work);
    }
    CallSteps {
        own_work_ns: time::ticks_to_ns(time::ticks().saturating_sub(started)),
        ..CallSteps::default()
    }
}

/// Queues `queued` in the inbox of every CPU in `remote` and sends each an
/// IPI, counted as sent by `me`, the calling CPU. (Inlined: it is the hot
/// path of every shootdown, and the profiler should show it as the
/// caller's.)
#[inline(always)]
fn post(me: &PerCpu, queued: QueuedCall, remote: &CpuSet) {
    let apic = LocalApic::get().expect("the local APIC is set up before cross-calls");
    for cpu in remote {
        let target = smp::cpu(cpu).expect("online CPUs are registered");
        // The inbox push happens-before the IPI; the handler pops under the
        // same lock, so it sees the request.
        without_interrupts(|| target.inbox.lock().push_back(queued));
        apic.send(target.apic_id, IpiKind::Fixed(vectors::CROSS_CALL));
        me.count_ipi_sent();
    }
}

/// Waits until every target of `call` has finished it, serving this CPU's
/// own inbox meanwhile (two callers may be waiting for each other): spins,
/// then halts if it may (module docs). After `timeout`, the targets that
/// have not started are retracted: they are returned, and will never run
/// it. (Inlined, as [`post`].)
#[inline(always)]
fn wait_for_answers(call: &CrossCall<'_>, queued: QueuedCall, timeout: Duration) -> CpuSet {
    let deadline = Deadline::after(timeout);
    let halt_after = (HALT_WHILE_WAITING.load(Ordering::Relaxed) && cpu::interrupts_enabled())
        .then(|| Deadline::after(SPIN_BEFORE_HALT));
    let mut unanswered = CpuSet::new();
    // Acquire pairs with the targets' Release decrement: once `owed` is 0,
    // everything their `work` wrote is visible here.
    while call.owed.load(Ordering::Acquire) != 0 {
        serve_inbox();
        if deadline.has_passed() {
            retract(call, queued, &mut unanswered);
        }
        match &halt_after {
            // A tick ends the halt too, so the deadline is still checked.
            Some(spun) if spun.has_passed() => halt_until_answered(call),
            _ => core::hint::spin_loop(),
        }
    }
    unanswered
}

/// Halts this CPU, the caller of `call`, unless its answers are all in or
/// a call waits in its inbox; returns after any interrupt.
fn halt_until_answered(call: &CrossCall<'_>) {
    let me = call.caller;
    cpu::disable_interrupts();
    me.halted_for_answers.store(true, Ordering::Relaxed);
    // The caller's side of the Dekker pair (module docs).
    fence(Ordering::SeqCst);
    if call.owed.load(Ordering::Acquire) != 0 && me.inbox.lock().is_empty() {
        cpu::enable_interrupts_and_halt();
    } else {
        cpu::enable_interrupts();
    }
    me.halted_for_answers.store(false, Ordering::Relaxed);
}

/// The target's side: wakes `caller` if it halts waiting for answers. Only
/// the caller's per-CPU block is read, which outlives every call.
fn wake_if_halted(caller: &'static PerCpu) {
    fence(Ordering::SeqCst);
    if caller.halted_for_answers.load(Ordering::Relaxed)
        && let Ok(apic) = LocalApic::get()
    {
        apic.send(caller.apic_id, IpiKind::Fixed(vectors::CALL_ANSWERED));
        percpu::current().count_ipi_sent();
    }
}

/// Sends each CPU in `cpus` an NMI asking it to print where it is, and
/// waits a little for the answers.
fn ask_where_stuck(cpus: &CpuSet) {
    let Ok(apic) = LocalApic::get() else {
        return;
    };
    for cpu in cpus {
        if let Some(target) = smp::cpu(cpu) {
            STUCK_REPORTS.insert(cpu, Ordering::Release);
            apic.send(target.apic_id, IpiKind::Nmi);
        }
    }
    let deadline = Deadline::after(STUCK_REPORT_WAIT);
    while !deadline.has_passed()
        && !STUCK_REPORTS
            .snapshot(Ordering::Acquire)
            .intersection(cpus)
            .is_empty()
    {
        core::hint::spin_loop();
    }
}

/// For the NMI handler: whether this CPU was asked where it is stuck. If
/// so, `report` prints the answer and the request is cleared.
pub fn answer_where_stuck(report: impl FnOnce()) -> bool {
    let me = percpu::current().index;
    if !STUCK_REPORTS.contains(me, Ordering::Acquire) {
        return false;
    }
    report();
    STUCK_REPORTS.remove(me, Ordering::Release);
    true
}

/// Removes `queued` from the inbox of every CPU still pending that has not
/// started it; those CPUs go into `unanswered`. A CPU that already started it
/// is waited for.
fn retract(call: &CrossCall<'_>, queued: QueuedCall, unanswered: &mut CpuSet) {
    for cpu in &call.pending.snapshot(Ordering::Acquire) {
        let Some(target) = smp::cpu(cpu) else {
            continue;
        };
        let removed = without_interrupts(|| {
            let mut inbox = target.inbox.lock();
            let before = inbox.len();
            inbox.retain(|entry| !core::ptr::eq(*entry, queued));
            inbox.len() != before
        });
        if removed {
            unanswered.insert(cpu);
            call.pending.remove(cpu, Ordering::Release);
            call.owed.fetch_sub(1, Ordering::Release);
        }
    }
}

/// Runs every cross-call queued for this CPU. Called by the IPI handler, and
/// by waiting callers so that two CPUs calling each other both progress.
pub fn serve_inbox() {
    let me = percpu::current();
    while let Some(call) = without_interrupts(|| me.inbox.lock().pop_front()) {
        let started = time::ticks();
        call.last_started.fetch_max(started, Ordering::Relaxed);
        without_interrupts(call.work);
        let finished = time::ticks();
        call.last_finished.fetch_max(finished, Ordering::Relaxed);
        call.longest_work
            .fetch_max(finished.saturating_sub(started), Ordering::Relaxed);
        call.pending.remove(me.index, Ordering::Relaxed);
        let caller = call.caller;
        // The last access to `call`: after this the caller may return (the
        // Release also publishes the timestamps and what `work` wrote).
        if call.owed.fetch_sub(1, Ordering::Release) == 1 {
            wake_if_halted(caller);
        }
    }
}

/// The handler of [`vectors::CROSS_CALL`].
pub fn handle_call_ipi() {
    percpu::current().count_ipi_received();
    serve_inbox();
}

/// The handler of [`vectors::CALL_ANSWERED`]: the halt it ended was all it
/// was for.
pub fn handle_answered_ipi() {
    percpu::current().count_ipi_received();
    ANSWER_WAKEUPS.fetch_add(1, Ordering::Relaxed);
}

/// How many halted callers an answer has woken since boot (all CPUs).
pub fn answer_wakeups() -> u64 {
    ANSWER_WAKEUPS.load(Ordering::Relaxed)
}

/// Whether `cpu` halts at this moment, waiting for its cross-call's answers.
pub fn halted_for_answers(cpu: &PerCpu) -> bool {
    cpu.halted_for_answers.load(Ordering::Relaxed)
}
