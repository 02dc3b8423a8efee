//! The scheduler: per-CPU run queues, round-robin, preemption of ring 3 by
//! the tick, and the one place where threads and address spaces change.
//!
//! Rules that keep it simple and correct:
//! - [`schedule`] runs with interrupts off, on the CPU whose thread changes.
//! - The kernel is not preemptible: a timer tick switches threads only if it
//!   interrupted ring 3 (see [`crate::interrupts`]). Kernel code runs until it
//!   blocks or yields, so it may hold a spinlock with interrupts on.
//! - A thread is queued on exactly one CPU's run queue at a time. Wake-ups
//!   and new threads go to the least loaded allowed CPU, which gets a
//!   reschedule IPI if it is not this one; a preempted thread stays where it
//!   is; an idle CPU takes a waiting thread that may run anywhere.
//! - A thread switched out on CPU A may already sit in CPU B's queue; B does
//!   not run it until A has saved its stack pointer (the context's
//!   `is_on_cpu`, cleared when the switch away from it has finished, see
//!   [`hal::context`]), and meanwhile runs something else.
//! - Every address-space change goes through `mm`: a user thread's process
//!   is switched to with `switch_mm`, a kernel thread (idle included) runs in
//!   lazy TLB mode on whatever user address space was loaded.

use alloc::{collections::VecDeque, sync::Arc, vec::Vec};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use mm::{CpuId, MAX_CPUS};
use spin::{Mutex, Once};

use super::thread::{Thread, ThreadState};
use crate::{smp, tlb};
use hal::{
    apic::{IpiKind, LocalApic},
    context::ThreadStart,
    cpu::without_interrupts,
    percpu, time, vectors,
};

/// One CPU's scheduler state.
pub struct CpuScheduler {
    run_queue: Mutex<VecDeque<Arc<Thread>>>,
    /// The thread running on this CPU.
    current: Mutex<Option<Arc<Thread>>>,
    idle: Once<Arc<Thread>>,
    /// Threads sleeping until their `wake_at`, checked every tick.
    sleepers: Mutex<Vec<Arc<Thread>>>,
    /// Whether a non-idle thread runs here (for placement).
    busy: AtomicBool,
    pub context_switches: AtomicU64,
}

/// Each CPU's scheduler, by CPU index.
static SCHEDULERS: [CpuScheduler; MAX_CPUS] = [const { CpuScheduler::new() }; MAX_CPUS];

/// This CPU's scheduler.
fn this_cpu() -> &'static CpuScheduler {
    &SCHEDULERS[percpu::current().index]
}

/// CPU `cpu`'s scheduler.
pub fn of_cpu(cpu: CpuId) -> &'static CpuScheduler {
    &SCHEDULERS[cpu]
}

impl CpuScheduler {
    const fn new() -> Self {
        Self {
            run_queue: Mutex::new(VecDeque::new()),
            current: Mutex::new(None),
            idle: Once::new(),
            sleepers: Mutex::new(Vec::new()),
            busy: AtomicBool::new(false),
            context_switches: AtomicU64::new(0),
        }
    }

    fn load(&self) -> usize {
        // Interrupt handlers queue threads too (wake-ups from the tick), so
        // every holder of a run-queue lock keeps interrupts off.
        without_interrupts(|| self.run_queue.lock().len())
            + usize::from(self.busy.load(Ordering::Relaxed))
    }
}

/// The thread running on this CPU.
pub fn current() -> Arc<Thread> {
    without_interrupts(|| this_cpu().current.lock().clone())
        .expect("every CPU runs a thread after sched::init")
}

/// Whether this CPU runs its idle thread (for the profiler, in an interrupt
/// handler: one relaxed load, no lock).
pub fn idles_here() -> bool {
    !this_cpu().busy.load(Ordering::Relaxed)
}

/// Makes the context running on the boot CPU a thread (the "boot thread",
/// which runs tests and the demo) and gives the CPU an idle thread.
pub fn init_boot_cpu() {
    let scheduler = this_cpu();
    let boot_thread = Thread::adopt_current();
    hal::context::adopt(boot_thread.clone());
    *scheduler.current.lock() = Some(boot_thread);
    scheduler.busy.store(true, Ordering::Relaxed);
    scheduler.idle.call_once(|| {
        Thread::new_kernel(ThreadStart::Kernel {
            entry: idle_entry,
            argument: 0,
        })
    });
}

/// Makes the context running on this AP its idle thread and idles.
pub fn run_idle_on_ap() -> ! {
    let scheduler = this_cpu();
    let idle = Thread::adopt_current();
    hal::context::adopt(idle.clone());
    scheduler.idle.call_once(|| Arc::clone(&idle));
    *scheduler.current.lock() = Some(idle);
    idle_loop()
}

extern "C" fn idle_entry(_: u64) -> ! {
    idle_loop()
}

/// Idle: run whatever is queued (or can be taken from a busier CPU), else
/// halt until an interrupt. Idle threads are kernel threads, so their CPU is
/// in lazy TLB mode.
fn idle_loop() -> ! {
    loop {
        hal::cpu::disable_interrupts();
        if this_cpu().run_queue.lock().is_empty() && !steal() {
            // `sti; hlt` is atomic with respect to interrupts: a wake-up IPI
            // that arrives after the check still ends the halt.
            hal::cpu::enable_interrupts_and_halt();
        } else {
            schedule();
            hal::cpu::enable_interrupts();
        }
    }
}

/// Moves one queued thread that may run anywhere from another CPU's run
/// queue to this one's. Interrupts off. Returns whether it found one.
fn steal() -> bool {
    let me = percpu::current();
    for cpu in smp::online().iter().filter(|&cpu| cpu != me.index) {
        let stolen = {
            let mut queue = of_cpu(cpu).run_queue.lock();
            let position = queue
                .iter()
                .position(|thread| thread.affinity.load(Ordering::Relaxed) == abi::ANY_CPU);
            position.and_then(|position| queue.remove(position))
        };
        if let Some(thread) = stolen {
            this_cpu().run_queue.lock().push_back(thread);
            return true;
        }
    }
    false
}

/// The CPU a runnable `thread` should be queued on.
fn choose_cpu(thread: &Thread) -> CpuId {
    let online = smp::online();
    let affinity = thread.affinity.load(Ordering::Relaxed);
    if smp::is_online(affinity) {
        return affinity as CpuId;
    }
    let last = thread.last_cpu.load(Ordering::Relaxed);
    let load = |cpu: CpuId| of_cpu(cpu).load();
    let mut best = if online.contains(last) {
        last
    } else {
        percpu::current().index
    };
    for cpu in &online {
        if load(cpu) < load(best) {
            best = cpu;
        }
    }
    best
}

/// Puts a runnable thread on the run queue of the CPU [`choose_cpu`]
/// picks (wake-ups and new threads: this is where load is balanced).
fn enqueue(thread: Arc<Thread>) {
    let target = choose_cpu(&thread);
    enqueue_on(thread, target);
}

/// Puts a runnable thread on CPU `target`'s run queue, poking that CPU if
/// it is not this one.
fn enqueue_on(thread: Arc<Thread>, target: CpuId) {
    let target_cpu = smp::cpu(target).expect("online CPUs are registered");
    without_interrupts(|| of_cpu(target).run_queue.lock().push_back(thread));
    let me = percpu::current();
    if target != me.index
        && let Ok(apic) = LocalApic::get()
    {
        apic.send(target_cpu.apic_id, IpiKind::Fixed(vectors::RESCHEDULE));
        me.count_ipi_sent();
    }
}

/// Makes a new thread runnable.
pub fn spawn(thread: Arc<Thread>) {
    enqueue(thread);
}

/// Makes a blocked thread runnable again (no effect on any other state).
pub fn wake(thread: &Arc<Thread>) {
    {
        let mut state = thread.state.lock();
        if *state != ThreadState::Blocked {
            return;
        }
        *state = ThreadState::Runnable;
    }
    enqueue(Arc::clone(thread));
}

/// Gives up the CPU; the current thread stays runnable.
pub fn yield_now() {
    without_interrupts(schedule);
}

/// Blocks the current thread, whose state the caller has just set to
/// `Blocked` under the lock that its waker takes, until [`wake`].
pub fn block() {
    without_interrupts(schedule);
}

/// Blocks the current thread `me`, whose state the caller has just set to
/// `Blocked` under the lock its waker takes, until [`wake`], or until
/// `deadline` (ns since boot) if there is one. Returns false, without
/// blocking, if its process is being killed.
pub fn block_until(me: &Arc<Thread>, deadline: Option<u64>) -> bool {
    // Without a deadline, a stale entry in a sleeper list (from an earlier
    // sleep that something else ended) must not wake this block.
    me.wake_at
        .store(deadline.unwrap_or(u64::MAX), Ordering::Relaxed);
    if deadline.is_some() {
        without_interrupts(|| this_cpu().sleepers.lock().push(Arc::clone(me)));
    }
    block_unless_killed(me)
}

/// Sleeps for `nanoseconds`.
pub fn sleep(nanoseconds: u64) {
    let me = current();
    let deadline = time::now_ns().saturating_add(nanoseconds);
    me.wake_at.store(deadline, Ordering::Relaxed);
    // Loop: a wake-up may come early (a kill, or another waiter's wake-up).
    while time::now_ns() < deadline {
        without_interrupts(|| {
            *me.state.lock() = ThreadState::Blocked;
            this_cpu().sleepers.lock().push(Arc::clone(&me));
        });
        if !block_unless_killed(&me) {
            return;
        }
    }
}

/// Called on every tick: wakes the sleepers whose time has come, and forgets
/// those something else already woke (they would otherwise keep their
/// thread, and its process, alive until their deadline).
pub fn tick() {
    let now = time::now_ns();
    let due: Vec<Arc<Thread>> = {
        let mut sleepers = this_cpu().sleepers.lock();
        sleepers.retain(|thread| *thread.state.lock() == ThreadState::Blocked);
        let (due, waiting) = sleepers
            .drain(..)
            .partition(|thread| thread.wake_at.load(Ordering::Relaxed) <= now);
        *sleepers = waiting;
        due
    };
    for thread in &due {
        wake(thread);
    }
}

/// Switches to the next runnable thread (or idle). Interrupts must be off.
pub fn schedule() {
    let cpu = percpu::current();
    let scheduler = this_cpu();
    let previous = scheduler
        .current
        .lock()
        .take()
        .expect("every CPU runs a thread");
    let idle = scheduler.idle.get().expect("sched::init ran on this CPU");
    let is_idle = Arc::ptr_eq(&previous, idle);
    {
        let mut state = previous.state.lock();
        if *state == ThreadState::Running && !is_idle {
            *state = ThreadState::Runnable;
            drop(state);
            // A preempted or yielding thread stays on this CPU (cheap, and
            // its cache is warm here) unless it is pinned elsewhere.
            let affinity = previous.affinity.load(Ordering::Relaxed);
            let target = if smp::is_online(affinity) {
                affinity as CpuId
            } else {
                cpu.index
            };
            enqueue_on(Arc::clone(&previous), target);
        }
    }
    let next = pick_next(scheduler, &previous, idle);
    if Arc::ptr_eq(&next, &previous) {
        *next.state.lock() = ThreadState::Running;
        *scheduler.current.lock() = Some(next);
        return;
    }
    *next.state.lock() = ThreadState::Running;
    next.last_cpu.store(cpu.index, Ordering::Relaxed);
    scheduler
        .busy
        .store(!Arc::ptr_eq(&next, idle), Ordering::Relaxed);
    scheduler.context_switches.fetch_add(1, Ordering::Relaxed);

    match &next.process {
        Some(process) => tlb::switch_to(&process.space.tlb),
        None => tlb::enter_lazy(),
    }
    if let Some(top) = next.kernel_stack_top() {
        cpu.set_kernel_stack(top);
    }
    *scheduler.current.lock() = Some(Arc::clone(&next));
    // `previous` stays alive in the hardware layer until the switch away
    // from it has finished; this reference is not needed for that.
    drop(previous);
    hal::context::switch_to(next);
}

/// The next thread to run here: the first queued one that is runnable and
/// not still being switched out by another CPU, or idle.
///
/// Threads still on a CPU (being switched out there) go back to the queue rather than
/// being waited for: two CPUs handing each other their previous threads
/// would otherwise each wait for the other forever. Entries whose thread is
/// no longer runnable (a kill's wake-up that raced with the thread's own
/// return) are dropped.
fn pick_next(scheduler: &CpuScheduler, previous: &Arc<Thread>, idle: &Arc<Thread>) -> Arc<Thread> {
    let mut busy_elsewhere = Vec::new();
    let next = loop {
        let Some(candidate) = scheduler.run_queue.lock().pop_front() else {
            break Arc::clone(idle);
        };
        if Arc::ptr_eq(&candidate, previous) {
            break candidate;
        }
        if *candidate.state.lock() != ThreadState::Runnable {
            continue;
        }
        if candidate.context.is_on_cpu() {
            busy_elsewhere.push(candidate);
            continue;
        }
        break candidate;
    };
    scheduler.run_queue.lock().extend(busy_elsewhere);
    next
}

/// Ends the current thread with `value`. Never returns. May wait for other
/// CPUs (the last thread tears the address space down), so it turns
/// interrupts on first.
pub fn exit_current(value: i64) -> ! {
    hal::cpu::enable_interrupts();
    let me = current();
    let joiners = {
        let mut exit = me.exit.lock();
        exit.value = Some(value);
        core::mem::take(&mut exit.joiners)
    };
    for joiner in &joiners {
        wake(joiner);
    }
    if let Some(process) = &me.process {
        process.thread_exited(&me);
    }
    without_interrupts(|| {
        *me.state.lock() = ThreadState::Exited(value);
        drop(me);
        schedule();
    });
    unreachable!("an exited thread was scheduled again");
}

/// Waits for `thread` to exit and returns its value. `None` if the caller's
/// process is being killed while it waits.
///
/// Lock order: the target's `exit` lock, then the caller's `state`; the
/// exiting thread takes only its own `exit` lock, and `wake` only `state`,
/// so no two threads joining each other can deadlock the CPUs.
pub fn join(thread: &Arc<Thread>) -> Option<i64> {
    let me = current();
    loop {
        {
            let mut exit = thread.exit.lock();
            if let Some(value) = exit.value {
                return Some(value);
            }
            exit.joiners.push(Arc::clone(&me));
            *me.state.lock() = ThreadState::Blocked;
        }
        if !block_unless_killed(&me) {
            return None;
        }
    }
}

/// Blocks `me`, which the caller has just registered as a waiter and marked
/// Blocked under its condition lock, unless its process is being killed.
/// The check comes *after* marking Blocked: `kill` sets its flag before it
/// wakes the threads, so either this check sees the flag or the wake-up sees
/// Blocked. Returns `false`, with the thread Running again, when killed.
pub fn block_unless_killed(me: &Arc<Thread>) -> bool {
    if me
        .process
        .as_ref()
        .is_some_and(|process| process.is_exiting())
    {
        // If the kill's wake-up already queued us, that entry is now stale
        // and `pick_next` drops it.
        *me.state.lock() = ThreadState::Running;
        return false;
    }
    block();
    true
}
