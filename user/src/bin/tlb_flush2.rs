//! will-it-scale's `tlb_flush2`, the benchmark of the broadcast-ASID seed
//! (`000_…`): tasks that each write, discard and re-read their own pages as
//! fast as they can.
//!
//! `tlb_flush2 <threads|processes> <tasks> <warm-up-ms> <measure-ms>`
//!
//! Each task is pinned to a CPU, round-robin (task `i` on CPU `i % cpus`),
//! and loops: map 1 MiB of anonymous private memory; for each of its 256
//! pages write a byte (a write fault maps a fresh page),
//! `madvise(DONTNEED)` that page (one single-page flush), read the byte
//! back (a read fault) and check it is zero, and count one *iteration*;
//! unmap the 1 MiB; again.
//!
//! - `threads`: the tasks are threads of this process, one address space
//!   running on `tasks` CPUs, so every discard must reach the other CPUs:
//!   by targeted IPIs, or, once the process is promoted to a global ASID
//!   (4 CPUs by default with `tlb=broadcast-sw`), by broadcast;
//! - `processes`: the other tasks are child processes, forked as
//!   will-it-scale's processes mode forks them, one address space each on
//!   one CPU: their flushes stay local. The scaling baseline.
//!
//! The tasks are started first and wait (asleep) for a common *go* time,
//! so that starting them is not slowed down by the flushes of those
//! already running. After the warm-up (the promotion check runs during
//! it) they count iterations during the measured interval; the program
//! then prints one line:
//!
//! ```text
//! tlb_flush2: kind=threads tasks=4 cpus=4 measured_ms=2000 iterations=9120 iterations_per_s=4560 failed_tasks=0 promotions=1 ipis_sent_per_iter=0.000 ...
//! ```
//!
//! `iterations_per_s` is the total over all tasks. The `*_per_iter`
//! counters are the kernel's totals over all CPUs during the measured
//! interval divided by `iterations`; `promotions` counts promotions to a
//! global ASID since the program started (they happen during the warm-up).
//! A task that reads a nonzero byte back prints why and counts in
//! `failed_tasks`; the program then exits with status 1.
//!
//! # How the interval is measured
//!
//! The program chooses absolute go, start and end times on the kernel clock
//! (the same on every CPU) and hands them to every task. A task counts the
//! iterations between its first clock reading at or after the start and
//! its first at or after the end. It reads the clock about every
//! [`CLOCK_INTERVAL_NS`], after as many iterations as took that long
//! lately (at least one, at most twice as many as last time), so each end
//! of its window is late by about that much, or one iteration if
//! iterations are slower; a clock reading per iteration would add a system
//! call to each.
//!
//! The kernel's counters are totals over all CPUs, so one task reads them:
//! whichever first sees the window open, and whichever first sees it
//! close (in processes mode, task 0, which is this program's main thread;
//! the forked tasks have copies of the window, not the window). Neither a sleeping parent nor
//! one fixed task would do: this kernel only preempts threads in user
//! mode, and these tasks live in the kernel, so a woken parent may not run
//! until after the interval; and threads queue on their address space's
//! lock, which is not fair, so one of them may wait for a long time.
//!
//! Each task ends with a *report*: its iterations plus one, or 0 if it
//! failed. A thread returns it to the `join`; a process writes it into a
//! page it shares with its parent (mapped `MAP_SHARED` before the forks),
//! since an exit status carries only 8 bits to `wait4`, as on Linux.

#![no_std]
#![no_main]

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use user::{
    abi::{PAGE_SIZE, Prot, TLB_COUNTER_NAMES, advice},
    helpers::online_cpus,
    println,
    ratio::Ratio,
    sys,
    thread::{self, JoinHandle},
    tlb_stats::TlbCounters,
};

user::entry!(main);

/// Pages per mapping: 1 MiB.
const PAGES: u64 = 256;
/// How often a task reads the clock.
const CLOCK_INTERVAL_NS: u64 = 1_000_000;
/// Time allowed for starting each task before the go time. A task that
/// starts later begins at once, in the warm-up; only one that is not
/// started when counting begins is an error.
const START_ALLOWANCE_NS: u64 = 250_000_000;
/// The most tasks one run starts.
const MAX_TASKS: usize = 64;
/// A task's report: its iterations plus one, or [`FAILED_TASK`].
type Report = u64;
/// The report of a task that failed (its reason is printed).
const FAILED_TASK: Report = 0;
/// The status of a task that failed (its reason is printed).
const FAILED: i32 = 1;

const USAGE: &str = "usage: tlb_flush2 <threads|processes> <tasks 1-64> <warm-up-ms> <measure-ms>";

fn main(args: &str) -> i32 {
    let words: [Option<&str>; 5] = {
        let mut words = args.split_whitespace();
        core::array::from_fn(|_| words.next())
    };
    let number = |word: Option<&str>| word.and_then(|word| word.parse::<u64>().ok());
    match words {
        [
            Some(kind @ ("threads" | "processes")),
            tasks,
            warm_up,
            measure,
            None,
        ] => match (number(tasks), number(warm_up), number(measure)) {
            (Some(tasks), Some(warm_up_ms), Some(measure_ms))
                if (1..=MAX_TASKS as u64).contains(&tasks) && measure_ms > 0 =>
            {
                let setup = Setup {
                    processes: kind == "processes",
                    tasks: tasks as usize,
                    warm_up_ns: warm_up_ms * 1_000_000,
                    measure_ns: measure_ms * 1_000_000,
                };
                match run(&setup) {
                    Ok(()) => 0,
                    Err(why) => {
                        println!("tlb_flush2: {why}");
                        FAILED
                    }
                }
            }
            _ => {
                println!("{USAGE}");
                FAILED
            }
        },
        _ => {
            println!("{USAGE}");
            FAILED
        }
    }
}

fn read_counters() -> Result<TlbCounters, &'static str> {
    TlbCounters::read().map_err(|_| "tlb_stats failed")
}

/// The kernel's counters at one edge of the measured window, read by the
/// first task to get there.
struct Edge {
    claimed: AtomicBool,
    values: [AtomicU64; TLB_COUNTER_NAMES.len()],
}

impl Edge {
    const fn new() -> Self {
        Self {
            claimed: AtomicBool::new(false),
            values: [const { AtomicU64::new(0) }; TLB_COUNTER_NAMES.len()],
        }
    }

    /// Reads the counters, unless another task already did.
    fn reach(&self) -> Result<(), &'static str> {
        if self.claimed.swap(true, Ordering::Relaxed) {
            return Ok(());
        }
        let counters = read_counters()?;
        for (slot, value) in self.values.iter().zip(counters.values()) {
            slot.store(value, Ordering::Relaxed);
        }
        Ok(())
    }

    /// What was read, once every task has been joined (which orders their
    /// stores before this).
    fn counters(&self) -> Option<TlbCounters> {
        self.claimed.load(Ordering::Relaxed).then(|| {
            TlbCounters::from_values(
                self.values
                    .each_ref()
                    .map(|value| value.load(Ordering::Relaxed)),
            )
        })
    }
}

/// The counters when the measured window opened and closed.
struct Window {
    opened: Edge,
    closed: Edge,
}

static WINDOW: Window = Window {
    opened: Edge::new(),
    closed: Edge::new(),
};

/// When the tasks begin their loops, start counting and stop, in
/// nanoseconds of the kernel clock.
#[derive(Clone, Copy, Debug)]
struct Schedule {
    go_ns: u64,
    start_ns: u64,
    end_ns: u64,
}

/// One task other than task 0: pinned to `cpu`, loops from the go time
/// until the end and returns its report (see the module docs). A task
/// thread shares the `window` with task 0; a task process has none.
fn task(index: u64, cpu: u64, schedule: Schedule, window: Option<&Window>) -> Report {
    match count_iterations(cpu, schedule, window) {
        Ok(iterations) => iterations + 1,
        Err(why) => {
            println!("tlb_flush2: task {index} on CPU {cpu}: {why}");
            FAILED_TASK
        }
    }
}

/// Where task processes leave their reports: a page shared with the
/// children (`MAP_SHARED`, so their writes land in the parent's frames),
/// one word per task, 0 (failed) until the task reports.
struct Reports(&'static [AtomicU64; MAX_TASKS]);

impl Reports {
    fn map() -> Result<Self, &'static str> {
        let page = sys::mmap_shared(
            size_of::<[AtomicU64; MAX_TASKS]>(),
            Prot::READ | Prot::WRITE,
        )
        .map_err(|_| "cannot map the reports page")?;
        // SAFETY: a fresh, zero-filled, page-aligned mapping of at least that
        // size, never unmapped, so it lives as long as the process; zero
        // bytes are a valid `AtomicU64`, and only atomics touch it.
        Ok(Self(unsafe { &*page.cast::<[AtomicU64; MAX_TASKS]>() }))
    }
}

/// The loop of the module docs, from the go time on; returns the
/// iterations counted between the start and the end, and reaches the
/// edges of `window` as it passes them.
fn count_iterations(
    cpu: u64,
    schedule: Schedule,
    window: Option<&Window>,
) -> Result<u64, &'static str> {
    sys::set_affinity(cpu).map_err(|_| "cannot pin to its CPU")?;
    release_lazy_cpus()?;
    let clock = || sys::clock().map_err(|_| "clock failed");
    let now = clock()?;
    if now < schedule.go_ns {
        sys::sleep(schedule.go_ns - now).map_err(|_| "sleep failed")?;
    }
    let mut done = 0u64;
    let (mut last_reading, mut last_done) = (clock()?, 0);
    let mut next_reading = 1;
    let mut counted_from = None;
    loop {
        let region = sys::mmap_anonymous((PAGES * PAGE_SIZE) as usize, Prot::READ | Prot::WRITE)
            .map_err(|_| "mmap failed")?;
        for page in 0..PAGES {
            // SAFETY: inside the fresh region, which only this task uses.
            let byte = unsafe { region.add((page * PAGE_SIZE) as usize) };
            // SAFETY: as above.
            unsafe { byte.write_volatile(1) };
            // SAFETY: the page's content is not needed any more.
            unsafe { sys::madvise(byte, PAGE_SIZE as usize, advice::DONTNEED) }
                .map_err(|_| "madvise(DONTNEED) failed")?;
            // SAFETY: still mapped (DONTNEED keeps the mapping).
            if unsafe { byte.read_volatile() } != 0 {
                return Err("read a nonzero byte back after madvise(DONTNEED)");
            }
            done += 1;
            if done >= next_reading {
                let now = clock()?;
                if counted_from.is_none() && now >= schedule.start_ns {
                    counted_from = Some(done);
                    if let Some(window) = window {
                        window.opened.reach()?;
                    }
                }
                if now >= schedule.end_ns {
                    if let Some(window) = window {
                        window.closed.reach()?;
                    }
                    // SAFETY: nothing refers to the region any more.
                    unsafe { sys::munmap(region, (PAGES * PAGE_SIZE) as usize) }
                        .map_err(|_| "munmap failed")?;
                    return Ok(done - counted_from.unwrap_or(done));
                }
                let step = done - last_done;
                let per_interval = step * CLOCK_INTERVAL_NS / (now - last_reading).max(1);
                next_reading = done + per_interval.clamp(1, 2 * step);
                (last_reading, last_done) = (now, done);
            }
        }
        // SAFETY: as above.
        unsafe { sys::munmap(region, (PAGES * PAGE_SIZE) as usize) }
            .map_err(|_| "munmap failed")?;
    }
}

/// Makes the CPUs this task's address space was left loaded on (lazily,
/// when the task moved to its own CPU, or when the program counted the
/// CPUs) let go of it. A flush that frees a page table reaches every CPU
/// in the address space's CPU set, lazy ones included; unmapping a region
/// with a page table of its own is such a flush. The first one makes a
/// lazy CPU switch away, the second finds it gone and takes it out of the
/// set. Without this, the workload's own unmaps would send those IPIs
/// during the measured interval, IPIs the workload itself never needs.
fn release_lazy_cpus() -> Result<(), &'static str> {
    /// What one page table maps.
    const TABLE_SPAN: usize = 2 << 20;
    for _ in 0..2 {
        let region = sys::mmap_anonymous(2 * TABLE_SPAN, Prot::READ | Prot::WRITE)
            .map_err(|_| "mmap failed")?;
        let aligned = (region as usize).next_multiple_of(TABLE_SPAN) as *mut u8;
        // SAFETY: `aligned` is inside the fresh 4 MiB region, which only
        // this task uses.
        unsafe { aligned.write_volatile(1) };
        // SAFETY: nothing refers to the region any more.
        unsafe { sys::munmap(region, 2 * TABLE_SPAN) }.map_err(|_| "munmap failed")?;
    }
    Ok(())
}

struct Setup {
    processes: bool,
    tasks: usize,
    warm_up_ns: u64,
    measure_ns: u64,
}

/// A started task.
enum Running {
    Thread(JoinHandle),
    Process { pid: u64, index: usize },
}

impl Running {
    /// Waits for the task and returns its report.
    fn report(self, reports: Option<&Reports>) -> Report {
        match (self, reports) {
            (Self::Thread(handle), _) => handle.join().unwrap_or(FAILED_TASK),
            (Self::Process { pid, index }, Some(reports)) if sys::wait(pid) == Ok(0) => {
                reports.0[index].load(Ordering::Acquire)
            }
            (Self::Process { .. }, _) => FAILED_TASK,
        }
    }
}

fn start_task(
    reports: Option<&Reports>,
    index: u64,
    cpu: u64,
    schedule: Schedule,
) -> Result<Running, &'static str> {
    let Some(reports) = reports else {
        return thread::spawn(move || task(index, cpu, schedule, Some(&WINDOW)))
            .map(Running::Thread)
            .map_err(|_| "cannot start a task thread");
    };
    // SAFETY: in processes mode this program has one thread, the caller,
    // and holds no lock: the child has everything it relies on.
    match unsafe { sys::fork() } {
        Ok(0) => {
            let report = task(index, cpu, schedule, None);
            reports.0[index as usize].store(report, Ordering::Release);
            sys::exit(0)
        }
        Ok(pid) => Ok(Running::Process {
            pid,
            index: index as usize,
        }),
        Err(_) => Err("cannot fork a task process"),
    }
}

fn run(setup: &Setup) -> Result<(), &'static str> {
    let cpus = online_cpus();
    let at_start = read_counters()?;
    let go_ns = sys::clock().map_err(|_| "clock failed")? + START_ALLOWANCE_NS * setup.tasks as u64;
    let start_ns = go_ns + setup.warm_up_ns;
    let schedule = Schedule {
        go_ns,
        start_ns,
        end_ns: start_ns + setup.measure_ns,
    };

    let reports = if setup.processes {
        Some(Reports::map()?)
    } else {
        None
    };
    let mut others = [const { None }; MAX_TASKS];
    for (index, slot) in others.iter_mut().enumerate().take(setup.tasks).skip(1) {
        let index = index as u64;
        *slot = Some(start_task(reports.as_ref(), index, index % cpus, schedule)?);
    }
    // Every task must be running before counting begins.
    let started_late = sys::clock().map_err(|_| "clock failed")? > start_ns;

    let mut failed_tasks = 0;
    let mut iterations = match count_iterations(0, schedule, Some(&WINDOW)) {
        Ok(iterations) => iterations,
        Err(why) => {
            println!("tlb_flush2: task 0 on CPU 0: {why}");
            failed_tasks += 1;
            0
        }
    };
    for task in others.into_iter().flatten() {
        match task.report(reports.as_ref()) {
            FAILED_TASK => failed_tasks += 1,
            report => iterations += report - 1,
        }
    }

    let (Some(opened), Some(closed)) = (WINDOW.opened.counters(), WINDOW.closed.counters()) else {
        return Err("no task measured the interval");
    };
    let measured = closed.since(&opened);
    let per_iteration = |name: &str| Ratio::new(measured.get(name), iterations);
    println!(
        "tlb_flush2: kind={} tasks={} cpus={cpus} measured_ms={} iterations={iterations} iterations_per_s={} failed_tasks={failed_tasks} promotions={} ipis_sent_per_iter={} ipis_received_per_iter={} flush_handler_runs_per_iter={} local_full_flushes_per_iter={} local_partial_flushes_per_iter={} broadcast_ops_per_iter={}",
        if setup.processes {
            "processes"
        } else {
            "threads"
        },
        setup.tasks,
        setup.measure_ns / 1_000_000,
        u128::from(iterations) * 1_000_000_000 / u128::from(setup.measure_ns),
        closed.since(&at_start).get("promotions"),
        per_iteration("ipis_sent"),
        per_iteration("ipis_received"),
        per_iteration("flush_handler_runs"),
        per_iteration("local_full_flushes"),
        per_iteration("local_partial_flushes"),
        per_iteration("broadcast_ops"),
    );
    if failed_tasks > 0 {
        return Err("a task failed");
    }
    if started_late {
        return Err("starting the tasks took longer than the warm-up; give a longer warm-up");
    }
    Ok(())
}
