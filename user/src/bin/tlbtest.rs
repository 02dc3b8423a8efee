//! Workloads that make the TLB machinery show itself in the counters.
//!
//! - `tlbtest promote <cpus> <flushes>`: threads busy on CPUs 1..cpus-1
//!   while the main thread on CPU 0 discards a page again and again. After
//!   a warm-up (long enough for the rate-limited promotion check to run),
//!   it counts what `<flushes>` more discards cost. With `tlb=broadcast-sw`
//!   and at least `tlb.promote` CPUs busy, the process is promoted to a
//!   global ASID and its flushes become broadcasts: no targeted IPIs.
//! - `tlbtest pageout <pages> <busy-cpus>`: a region of `<pages>` touched
//!   pages, threads busy on CPUs 1..=busy-cpus, then one
//!   `madvise(PAGEOUT)` of the region: with batching it costs one flush
//!   round, without (`tlb.batch=off`) one per page.
//!
//! Each prints one `tlbtest <scenario>: key=value ...` line.

#![no_std]
#![no_main]

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use user::{
    abi::{PAGE_SIZE, advice, prot},
    println, sys, thread,
    thread::JoinHandle,
    tlb_stats::TlbCounters,
};

user::entry!(main);

const MAX_CPUS: usize = 32;
/// Discards before measuring, so the promotion check (at most once per
/// 32 ms per address space) has run several times.
const WARM_UP_FLUSHES: u64 = 300;

static STOP: AtomicBool = AtomicBool::new(false);
static SPINS: AtomicU64 = AtomicU64::new(0);

fn main(args: &str) -> i32 {
    let mut words = args.split_whitespace();
    let scenario = words.next().unwrap_or("");
    let first: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
    let second: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
    let result = match scenario {
        "promote" => promote(first as usize, second),
        "pageout" => pageout(first, second as usize),
        _ => Err("usage: tlbtest promote <cpus> <flushes> | pageout <pages> <busy-cpus>"),
    };
    match result {
        Ok(()) => 0,
        Err(why) => {
            println!("tlbtest: {why}");
            1
        }
    }
}

/// Starts a thread on each CPU in `cpus` that spins in this address space
/// (reading `memory`) until [`STOP`].
fn start_busy(
    cpus: core::ops::Range<usize>,
    memory: u64,
) -> Result<[Option<JoinHandle>; MAX_CPUS], &'static str> {
    let mut handles = [const { None }; MAX_CPUS];
    let any = !cpus.is_empty();
    for cpu in cpus {
        let handle = thread::spawn(move || {
            let _ = sys::set_affinity(cpu as u64);
            while !STOP.load(Ordering::Relaxed) {
                // SAFETY: `memory` stays mapped (and readable) until STOP.
                let value = unsafe { (memory as *const u64).read_volatile() };
                SPINS.fetch_add(value | 1, Ordering::Relaxed);
            }
            0
        })
        .map_err(|_| "cannot start a busy thread")?;
        handles[cpu] = Some(handle);
    }
    // Let every busy thread reach its CPU before measuring.
    while any && SPINS.load(Ordering::Relaxed) == 0 {
        let _ = sys::yield_now();
    }
    let _ = sys::sleep(20_000_000);
    Ok(handles)
}

fn stop_busy(handles: [Option<JoinHandle>; MAX_CPUS]) {
    STOP.store(true, Ordering::Relaxed);
    for handle in handles.into_iter().flatten() {
        let _ = handle.join();
    }
}

fn map(pages: u64) -> Result<*mut u8, &'static str> {
    sys::mmap_anonymous((pages * PAGE_SIZE) as usize, prot::READ | prot::WRITE)
        .map_err(|_| "mmap failed")
}

fn discard(page: *mut u8) -> Result<(), &'static str> {
    // SAFETY: the page is this program's scratch page; zeroing it is fine.
    unsafe { page.write_volatile(1) };
    // SAFETY: as above.
    unsafe { sys::madvise(page, PAGE_SIZE as usize, advice::DONTNEED) }
        .map_err(|_| "madvise failed")
}

fn promote(cpus: usize, flushes: u64) -> Result<(), &'static str> {
    if !(1..=MAX_CPUS).contains(&cpus) {
        return Err("promote: cpus must be 1..=32");
    }
    sys::set_affinity(0).map_err(|_| "cannot pin to CPU 0")?;
    let shared = map(1)?;
    let scratch = map(1)?;
    let busy = start_busy(1..cpus, shared as u64)?;
    let start = TlbCounters::read().map_err(|_| "tlb_stats failed")?;
    for _ in 0..WARM_UP_FLUSHES {
        discard(scratch)?;
    }
    let warm = TlbCounters::read().map_err(|_| "tlb_stats failed")?;
    for _ in 0..flushes {
        discard(scratch)?;
    }
    let end = TlbCounters::read().map_err(|_| "tlb_stats failed")?;
    stop_busy(busy);
    let promoted = end.since(&start).get("promotions") > 0;
    let measured = end.since(&warm);
    println!(
        "tlbtest promote: cpus={cpus} promoted={} transitions_finished={} flushes={flushes} ipis_sent={} broadcast_ops={}",
        if promoted { "yes" } else { "no" },
        end.since(&start).get("transitions_finished"),
        measured.get("ipis_sent"),
        measured.get("broadcast_ops"),
    );
    Ok(())
}

fn pageout(pages: u64, busy_cpus: usize) -> Result<(), &'static str> {
    if pages == 0 || busy_cpus >= MAX_CPUS {
        return Err("pageout: need pages > 0 and busy-cpus < 32");
    }
    sys::set_affinity(0).map_err(|_| "cannot pin to CPU 0")?;
    let region = map(pages)?;
    for page in 0..pages {
        // SAFETY: inside the fresh region.
        unsafe {
            region
                .add((page * PAGE_SIZE) as usize)
                .write_volatile(page as u8)
        };
    }
    let busy = start_busy(1..busy_cpus + 1, region as u64)?;
    let before = TlbCounters::read().map_err(|_| "tlb_stats failed")?;
    let started = sys::clock().unwrap_or(0);
    // SAFETY: PAGEOUT keeps the contents.
    unsafe { sys::madvise(region, (pages * PAGE_SIZE) as usize, advice::PAGEOUT) }
        .map_err(|_| "madvise failed")?;
    let took = sys::clock().unwrap_or(0) - started;
    let cost = TlbCounters::read()
        .map_err(|_| "tlb_stats failed")?
        .since(&before);
    stop_busy(busy);
    for page in 0..pages {
        // SAFETY: inside the region, which is still mapped.
        if unsafe { region.add((page * PAGE_SIZE) as usize).read_volatile() } != page as u8 {
            return Err("pageout: a page came back from swap changed");
        }
    }
    println!(
        "tlbtest pageout: pages={pages} busy_cpus={busy_cpus} ns={took} ipis_sent={} batch_flushes={} flush_handler_runs={}",
        cost.get("ipis_sent"),
        cost.get("batch_flushes"),
        cost.get("flush_handler_runs"),
    );
    Ok(())
}
