//! Runs threads on several CPUs at once: `threads <n> [<ncpu>]`.
//!
//! Thread `i` pins itself to CPU `i % ncpu` (`ncpu` defaults to `n`: one
//! CPU per thread), then spins reading the clock for at least [`SPIN_NS`]
//! and until every thread has started (so a slow emulator does not make
//! them run one after the other), giving up after [`GIVE_UP_NS`]. Each
//! reports its CPU and the clock at start and end; the main thread joins
//! them all and prints a summary: how many joined, how many distinct CPUs
//! they ran on, and whether all of them were running at one moment (the
//! latest start came before the earliest end). Exit code 0 when every
//! thread was spawned and joined, 1 otherwise.

#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use user::{println, sys, thread};

user::entry!(main);

/// The most threads this program starts: the kernel's limit, less the
/// main thread.
const MAX_THREADS: usize = user::abi::MAX_THREADS - 1;

/// How long each thread keeps its CPU busy at least, in nanoseconds.
const SPIN_NS: u64 = 50_000_000;
/// How long a thread waits for the others to start before it stops anyway.
const GIVE_UP_NS: u64 = 10_000_000_000;

/// Threads that have started spinning.
static STARTED: AtomicUsize = AtomicUsize::new(0);

/// What one thread found, written by it, read by `main` after the join.
struct Report {
    cpu: AtomicU64,
    start: AtomicU64,
    end: AtomicU64,
}

static REPORTS: [Report; MAX_THREADS] = [const {
    Report {
        cpu: AtomicU64::new(0),
        start: AtomicU64::new(0),
        end: AtomicU64::new(0),
    }
}; MAX_THREADS];

fn main(args: &str) -> i32 {
    let mut words = args.split_whitespace().map(str::parse::<usize>);
    let (count, ncpu) = match (words.next(), words.next(), words.next()) {
        (Some(Ok(count)), None, None) => (count, count),
        (Some(Ok(count)), Some(Ok(ncpu)), None) => (count, ncpu),
        _ => (0, 0),
    };
    if count == 0 || count > MAX_THREADS || ncpu == 0 {
        println!("usage: threads <n: 1..={MAX_THREADS}> [<ncpu: 1..>], got '{args}'");
        return 2;
    }

    let mut handles = [const { None }; MAX_THREADS];
    for (index, handle) in handles.iter_mut().enumerate().take(count) {
        let cpu = (index % ncpu) as u64;
        match thread::spawn(move || run(index, cpu, count)) {
            Ok(spawned) => *handle = Some(spawned),
            Err(error) => println!("threads: spawning thread {index} failed: {error:?}"),
        }
    }

    let mut joined = 0;
    let mut cpus_seen = 0u64;
    let (mut latest_start, mut earliest_end) = (0, u64::MAX);
    for (index, handle) in handles.into_iter().enumerate() {
        let Some(handle) = handle else { continue };
        match handle.join() {
            Ok(_) => {
                joined += 1;
                let report = &REPORTS[index];
                cpus_seen |= 1u64 << (report.cpu.load(Ordering::Relaxed) % 64);
                latest_start = latest_start.max(report.start.load(Ordering::Relaxed));
                earliest_end = earliest_end.min(report.end.load(Ordering::Relaxed));
            }
            Err(error) => println!("threads: joining thread {index} failed: {error:?}"),
        }
    }
    println!(
        "threads: {joined}/{count} joined, {} distinct cpus, all running at once: {}",
        cpus_seen.count_ones(),
        if latest_start < earliest_end {
            "yes"
        } else {
            "no"
        }
    );
    if joined == count { 0 } else { 1 }
}

/// The body of thread `index` of `count`: pin to `cpu`, spin, report.
fn run(index: usize, cpu: u64, count: usize) -> u64 {
    if let Err(error) = sys::set_affinity(cpu) {
        println!("thread {index}: cannot pin to cpu {cpu}: {error:?}");
    }
    let start = sys::clock().expect("clock");
    STARTED.fetch_add(1, Ordering::AcqRel);
    let mut now = start;
    while (now - start < SPIN_NS || STARTED.load(Ordering::Acquire) < count)
        && now - start < GIVE_UP_NS
    {
        now = sys::clock().expect("clock");
    }
    // Read again: a thread preempted inside the loop saw an old `now`.
    let end = sys::clock().expect("clock");
    let on = sys::cpu_id().expect("cpu_id");
    let report = &REPORTS[index];
    report.cpu.store(on, Ordering::Relaxed);
    report.start.store(start, Ordering::Relaxed);
    report.end.store(end, Ordering::Relaxed);
    println!("thread {index}: cpu {on}, clock {start} .. {end} ns");
    index as u64
}
