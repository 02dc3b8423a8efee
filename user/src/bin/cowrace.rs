//! Stephen Dolan's reproducer of Linux's two 2025 shootdown bugs
//! (CVE-2025-37964 and CVE-2025-40174), in ring 3:
//! `cowrace <iterations> [switch | stay]`.
//!
//! Two threads of one process and two counters: `A` on a private page,
//! `B` on a `MAP_SHARED` page.
//!
//! - The **writer** (on CPU 0) repeats: `fork` a child that exits at once,
//!   then `A += 1`, then `B += 1` (release), then `wait` for the child.
//!   While the child lives, the private page is shared copy-on-write, so
//!   the write to `A` makes the kernel copy it to a new frame and *flush*
//!   the old translation from every CPU where this address space may be
//!   cached.
//! - The **reader** (on CPU 1) repeats: read `B` (acquire), then `A`, then
//!   (with `switch`, the default) `yield` to a helper process pinned to the
//!   same CPU, so that the CPU switches address spaces after every read and
//!   is often in the middle of switching back when a flush is sent. With
//!   `stay` it keeps reading, on the same address space.
//!
//! `A` is written before `B`, so a reader that sees `B = n` must see
//! `A >= n`. Seeing `A < B` means the reader's CPU still used the old
//! frame of `A` after the copy-on-write flush returned: the flush skipped
//! it. That is what the two CVEs did to a CPU caught in `switch_mm`
//! (`tlb.bug=skip-switching` and `tlb.bug=generation-before-cpuset` put the
//! same bugs into this kernel).
//!
//! Those two bugs leave a stale entry only in a TLB that keeps each PCID's
//! entries across a switch to another address space and back. A TLB that
//! drops everything at every switch (every emulator here) hides them: the
//! reader's next switch wipes the stale entry before it could be read.
//! `stay` is for such machines: without switches, a flush that misses the
//! reader's CPU for any reason (`tlb.bug=no-flush-ipis`) shows at once.
//!
//! Prints `cowrace: iterations=N reads=R violations=V` (and the first
//! violation, if any) and exits with 0 when `V = 0` and every fork
//! worked, 1 otherwise, 2 on bad arguments.

#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering};

use user::{
    abi::{PAGE_SIZE, Prot},
    println, sys, thread,
};

user::entry!(main);

/// Iterations between progress lines: a long run shows it is alive (the
/// runner takes a silent emulator for a hung one).
const PROGRESS_EVERY: u64 = 1000;

/// What the processes share, on the `MAP_SHARED` page.
#[repr(C)]
struct Shared {
    /// The second counter.
    b: AtomicU64,
    /// Set when the reader and the helper must stop.
    stop: AtomicU64,
    reads: AtomicU64,
    violations: AtomicU64,
    /// The first violation: `B` and `A` as the reader saw them.
    first_b: AtomicU64,
    first_a: AtomicU64,
}

fn main(args: &str) -> i32 {
    let mut words = args.split_whitespace();
    let (iterations, switch) = match (
        words.next().map(str::parse::<u64>),
        words.next(),
        words.next(),
    ) {
        (Some(Ok(n)), None | Some("switch"), None) => (n, true),
        (Some(Ok(n)), Some("stay"), None) => (n, false),
        _ => {
            println!("usage: cowrace <iterations> [switch | stay], got '{args}'");
            return 2;
        }
    };
    let (writer_cpu, reader_cpu) = (0, 1);
    for cpu in [writer_cpu, reader_cpu] {
        if sys::set_affinity(cpu).is_err() {
            println!("cowrace: CPU {cpu} is not online (the race needs two CPUs)");
            return 2;
        }
    }
    let Ok(shared_page) = sys::mmap_shared(PAGE_SIZE as usize, Prot::READ | Prot::WRITE) else {
        println!("cowrace: mmap of the shared page failed");
        return 2;
    };
    let Ok(private_page) = sys::mmap_anonymous(PAGE_SIZE as usize, Prot::READ | Prot::WRITE) else {
        println!("cowrace: mmap of the private page failed");
        return 2;
    };
    // Both pages are fresh, page-aligned, zero-filled and stay mapped for
    // the life of the process; zero is a valid value of each atomic.
    // SAFETY: valid, aligned, initialised memory that lives for good.
    let shared: &'static Shared = unsafe { &*shared_page.cast::<Shared>() };
    // SAFETY: as above.
    let a: &'static AtomicU64 = unsafe { &*private_page.cast::<AtomicU64>() };
    // Touch `A` so that it is a present private page when the first fork
    // shares it.
    a.store(0, Ordering::Relaxed);

    // The helper process: every `yield` of the reader switches to it.
    let helper = if switch {
        // SAFETY: no other thread exists yet.
        match unsafe { sys::fork() } {
            Ok(0) => {
                let _ = sys::set_affinity(reader_cpu);
                while shared.stop.load(Ordering::Acquire) == 0 {
                    let _ = sys::yield_now();
                }
                sys::exit(0);
            }
            Ok(pid) => Some(pid),
            Err(error) => {
                println!("cowrace: fork of the helper failed: {error:?}");
                return 2;
            }
        }
    } else {
        None
    };
    let stop_helper = || {
        shared.stop.store(1, Ordering::Release);
        if let Some(helper) = helper {
            let _ = sys::wait(helper);
        }
    };

    let reader = thread::spawn(move || {
        let _ = sys::set_affinity(reader_cpu);
        while shared.stop.load(Ordering::Acquire) == 0 {
            let b = shared.b.load(Ordering::Acquire);
            let seen_a = a.load(Ordering::Acquire);
            if seen_a < b && shared.violations.fetch_add(1, Ordering::Relaxed) == 0 {
                shared.first_b.store(b, Ordering::Relaxed);
                shared.first_a.store(seen_a, Ordering::Relaxed);
            }
            shared.reads.fetch_add(1, Ordering::Relaxed);
            if switch {
                let _ = sys::yield_now();
            }
        }
        0
    });
    let reader = match reader {
        Ok(reader) => reader,
        Err(error) => {
            println!("cowrace: spawning the reader failed: {error:?}");
            stop_helper();
            return 2;
        }
    };

    let _ = sys::set_affinity(writer_cpu);
    let started = sys::clock().unwrap_or(0);
    let mut failed_forks = 0u64;
    for iteration in 1..=iterations {
        if iteration % PROGRESS_EVERY == 0 && iteration < iterations {
            println!(
                "cowrace: {iteration}/{iterations} iterations, {} violations so far",
                shared.violations.load(Ordering::Relaxed)
            );
        }
        // SAFETY: the child only exits; it touches nothing the reader
        // thread (absent in the child) was in the middle of.
        match unsafe { sys::fork() } {
            Ok(0) => sys::exit(0),
            Ok(child) => {
                a.store(iteration, Ordering::Relaxed);
                shared.b.store(iteration, Ordering::Release);
                let _ = sys::wait(child);
            }
            Err(_) => {
                failed_forks += 1;
                a.store(iteration, Ordering::Relaxed);
                shared.b.store(iteration, Ordering::Release);
            }
        }
    }
    let elapsed_ms = (sys::clock().unwrap_or(0) - started) / 1_000_000;
    stop_helper();
    let _ = reader.join();

    let violations = shared.violations.load(Ordering::Relaxed);
    println!(
        "cowrace: iterations={iterations} reader={} reads={} violations={violations} failed_forks={failed_forks} elapsed_ms={elapsed_ms}",
        if switch { "switch" } else { "stay" },
        shared.reads.load(Ordering::Relaxed)
    );
    if violations > 0 {
        println!(
            "cowrace: first violation: read B={} then A={} (A is written first: the reader used a stale translation of A's old frame)",
            shared.first_b.load(Ordering::Relaxed),
            shared.first_a.load(Ordering::Relaxed)
        );
    }
    i32::from(violations > 0 || failed_forks > 0)
}
