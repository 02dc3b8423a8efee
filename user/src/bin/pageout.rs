//! The reclaim loop of the batched-flush seed (`001_…`, RISC-V
//! `BATCHED_UNMAP_TLB_FLUSH`): page a region out and back in, again and
//! again, while other threads of the process sit on other CPUs.
//!
//! `pageout <loops> <sleep|busy> [pages]`
//!
//! - maps `pages` (default 256: 1 MiB) of shared anonymous memory and fills
//!   it with `0x88`;
//! - keeps the address space on CPUs 0-3 with [`Helpers`]:
//!   - `sleep` (the seed's variant): four helpers pinned to CPUs 0-3 that
//!     only sleep, the main thread pinned to CPU 0. The helpers' CPUs idle
//!     in lazy TLB mode, which ordinary flushes skip, so batching has few
//!     IPIs to save here;
//!   - `busy`: three helpers spinning in user mode on CPUs 1-3, the main
//!     thread on CPU 0. Every flush must now reach three running CPUs, which
//!     is where a batched flush (one round per `madvise`) and per-page
//!     flushes (`tlb.batch=off`: one round per page) differ;
//! - loops: read one byte of every page (a swap-in each, checked against
//!   `0x88`), then `madvise(PAGEOUT)` the whole region. One loop runs
//!   before measuring (the first fill of swap); then `<loops>` are timed.
//!
//! It prints one line, for example:
//!
//! ```text
//! pageout: helpers=busy pages=256 loops=20 ns_per_loop=81234567 ipis_sent_per_loop=3.000 ...
//! ```
//!
//! Counters are totals over all CPUs during the measured loops, divided by
//! the loops; `batch_flushes_per_loop` is 1 with batching and 0 without
//! (`tlb.batch=off`). `ipis_sent` counts targeted flush IPIs;
//! `ipis_received` counts flush-handler runs by IPI on every CPU, which
//! also covers the software broadcast (it runs on every online CPU, the
//! initiator included). A page that comes back from swap changed is a failure
//! (exit status 1).

#![no_std]
#![no_main]

use user::{
    abi::{MapFlags, PAGE_SIZE, Prot, advice},
    helpers::{Activity, Helpers},
    println,
    ratio::Ratio,
    sys,
    tlb_stats::TlbCounters,
};

user::entry!(main);

/// The seed's region: 1 MiB.
const DEFAULT_PAGES: u64 = 256;
/// What the region is filled with, and must read back as.
const FILL: u8 = 0x88;
/// The address space runs on CPUs `0..CPUS`.
const CPUS: usize = 4;

const USAGE: &str = "usage: pageout <loops> <sleep|busy> [pages] (needs 4 CPUs)";

fn main(args: &str) -> i32 {
    match parse(args).and_then(|(loops, helpers, pages)| run(loops, helpers, pages)) {
        Ok(()) => 0,
        Err(why) => {
            println!("pageout: {why}");
            1
        }
    }
}

/// The helpers' activity and the CPUs they occupy, for each variant.
fn variant(name: &str) -> Option<(Activity, core::ops::Range<usize>)> {
    match name {
        "sleep" => Some((Activity::Sleep, 0..CPUS)),
        "busy" => Some((Activity::Spin { reading: None }, 1..CPUS)),
        _ => None,
    }
}

fn parse(args: &str) -> Result<(u64, &str, u64), &'static str> {
    let mut words = args.split_whitespace();
    let loops = words.next().and_then(|word| word.parse().ok());
    let helpers = words.next().filter(|name| variant(name).is_some());
    let pages = match words.next() {
        None => Some(DEFAULT_PAGES),
        Some(word) => word.parse().ok(),
    };
    match (loops, helpers, pages, words.next()) {
        (Some(loops), Some(helpers), Some(pages), None) if loops > 0 && pages > 0 => {
            Ok((loops, helpers, pages))
        }
        _ => Err(USAGE),
    }
}

/// Reads one byte of every page (swapping each back in); fails if one
/// came back changed.
fn touch(region: *mut u8, pages: u64) -> Result<(), &'static str> {
    for page in 0..pages {
        // SAFETY: inside the region, which stays mapped for the whole run.
        let byte = unsafe { region.add((page * PAGE_SIZE) as usize).read_volatile() };
        if byte != FILL {
            return Err("a page came back from swap changed");
        }
    }
    Ok(())
}

fn page_out(region: *mut u8, pages: u64) -> Result<(), &'static str> {
    // SAFETY: PAGEOUT keeps the contents; nothing else changes.
    unsafe { sys::madvise(region, (pages * PAGE_SIZE) as usize, advice::PAGEOUT) }
        .map_err(|_| "madvise(PAGEOUT) failed")
}

fn run(loops: u64, helpers: &str, pages: u64) -> Result<(), &'static str> {
    let (activity, helper_cpus) = variant(helpers).ok_or(USAGE)?;
    sys::set_affinity(0).map_err(|_| "cannot pin to CPU 0")?;
    let len = (pages * PAGE_SIZE) as usize;
    // SAFETY: no FIXED: a new mapping where nothing is.
    let region = unsafe {
        sys::mmap(
            0,
            len,
            Prot::READ | Prot::WRITE,
            MapFlags::SHARED | MapFlags::ANONYMOUS,
        )
    }
    .map_err(|_| "mmap failed (too many pages?)")?;
    // SAFETY: the fresh region is `len` bytes long and ours alone.
    unsafe { core::ptr::write_bytes(region, FILL, len) };
    let helpers_running = Helpers::start(helper_cpus, activity)
        .ok()
        .filter(Helpers::all_pinned)
        .ok_or("cannot start a helper on each of CPUs 0-3 (this needs 4 CPUs)")?;

    // The first loop fills swap; the measured ones find it warm.
    touch(region, pages)?;
    page_out(region, pages)?;

    let before = TlbCounters::read().map_err(|_| "tlb_stats failed")?;
    let started = sys::clock().map_err(|_| "clock failed")?;
    for _ in 0..loops {
        touch(region, pages)?;
        page_out(region, pages)?;
    }
    let took = sys::clock().map_err(|_| "clock failed")? - started;
    let cost = TlbCounters::read()
        .map_err(|_| "tlb_stats failed")?
        .since(&before);
    helpers_running.stop();
    touch(region, pages)?;

    let per_loop = |name: &str| Ratio::new(cost.get(name), loops);
    println!(
        "pageout: helpers={helpers} pages={pages} loops={loops} ns_per_loop={} ipis_sent_per_loop={} ipis_received_per_loop={} flush_handler_runs_per_loop={} batch_flushes_per_loop={} local_full_flushes_per_loop={} local_partial_flushes_per_loop={} broadcast_ops_per_loop={}",
        took / loops,
        per_loop("ipis_sent"),
        per_loop("ipis_received"),
        per_loop("flush_handler_runs"),
        per_loop("batch_flushes"),
        per_loop("local_full_flushes"),
        per_loop("local_partial_flushes"),
        per_loop("broadcast_ops"),
    );
    Ok(())
}
