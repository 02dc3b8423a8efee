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
//! - `tlbtest lazy`: a thread on CPU 1 touches a page and sleeps, so CPU 1
//!   idles in lazy TLB mode with this address space still loaded. Ordinary
//!   flushes must not interrupt it; a `munmap` that frees page tables must;
//!   and when the thread wakes it must see the page's new contents.
//! - `tlbtest pair`: two child processes (forked) at once, each with
//!   threads on two CPUs (`promote 2 200` on CPUs 0-1 and 2-3), which start
//!   flushing together and exit together. With `tlb.promote=2 tlb.asids=1`
//!   both want the only global ASID: one falls back to IPIs.
//! - `tlbtest many <n>`: `n` child processes at once, more than a CPU's six
//!   dynamic ASID slots.
//!
//! Each prints one `tlbtest <scenario>: key=value ...` line.

#![no_std]
#![no_main]

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use user::{
    abi::{PAGE_SIZE, Prot, advice},
    helpers::{Activity, Helpers},
    println, sys, thread,
    tlb_stats::TlbCounters,
};

user::entry!(main);

const MAX_CPUS: usize = 32;
const MAX_CHILDREN: usize = 16;
/// Discards before measuring, so the promotion check (at most once per
/// 32 ms per address space) has run several times.
const WARM_UP_FLUSHES: u64 = 300;

fn main(args: &str) -> i32 {
    let mut words = args.split_whitespace();
    let scenario = words.next().unwrap_or("");
    let first: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
    let second: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
    let third: usize = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
    let result = match scenario {
        "promote" => promote(first as usize, second, third),
        "pageout" => pageout(first, second as usize),
        "lazy" => lazy(),
        "pair" => pair(),
        "many" => {
            children(&["promote 1 50 0"; MAX_CHILDREN][..(first as usize).clamp(1, MAX_CHILDREN)])
        }
        _ => Err(
            "usage: tlbtest promote <cpus> <flushes> [first-cpu] | pageout <pages> <busy-cpus> | lazy | pair | many <n>",
        ),
    };
    match result {
        Ok(()) => 0,
        Err(why) => {
            println!("tlbtest: {why}");
            1
        }
    }
}

/// Starts a helper spinning on each CPU of `cpus`, reading `memory`.
fn start_busy(cpus: core::ops::Range<usize>, memory: u64) -> Result<Helpers, &'static str> {
    Helpers::start(
        cpus,
        Activity::Spin {
            reading: Some(memory),
        },
    )
    .map_err(|_| "cannot start a busy thread")
}

fn map(pages: u64) -> Result<*mut u8, &'static str> {
    sys::mmap_anonymous((pages * PAGE_SIZE) as usize, Prot::READ | Prot::WRITE)
        .map_err(|_| "mmap failed")
}

fn discard(page: *mut u8) -> Result<(), &'static str> {
    // SAFETY: the page is this program's scratch page; zeroing it is fine.
    unsafe { page.write_volatile(1) };
    // SAFETY: as above.
    unsafe { sys::madvise(page, PAGE_SIZE as usize, advice::DONTNEED) }
        .map_err(|_| "madvise failed")
}

fn promote(cpus: usize, flushes: u64, first_cpu: usize) -> Result<(), &'static str> {
    promote_meeting(cpus, flushes, first_cpu, None)
}

/// [`promote`], meeting the other processes of `meeting` once its threads
/// run and again once its flushes are done, before it lets them go.
fn promote_meeting(
    cpus: usize,
    flushes: u64,
    first_cpu: usize,
    meeting: Option<&Meeting>,
) -> Result<(), &'static str> {
    if !(1..=MAX_CPUS).contains(&cpus) || first_cpu + cpus > MAX_CPUS {
        return Err("promote: cpus must be 1..=32 and fit after first-cpu");
    }
    sys::set_affinity(first_cpu as u64).map_err(|_| "cannot pin to the first CPU")?;
    let shared = map(1)?;
    let scratch = map(1)?;
    let busy = start_busy(first_cpu + 1..first_cpu + cpus, shared as u64)?;
    if let Some(meeting) = meeting {
        meeting.meet(Meeting::RUNNING)?;
    }
    let start = TlbCounters::read().map_err(|_| "tlb_stats failed")?;
    for _ in 0..WARM_UP_FLUSHES {
        discard(scratch)?;
    }
    let warm = TlbCounters::read().map_err(|_| "tlb_stats failed")?;
    for _ in 0..flushes {
        discard(scratch)?;
    }
    let end = TlbCounters::read().map_err(|_| "tlb_stats failed")?;
    if let Some(meeting) = meeting {
        meeting.meet(Meeting::FLUSHED)?;
    }
    busy.stop();
    if let Some(meeting) = meeting {
        meeting.meet(Meeting::STOPPED)?;
    }
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
    // The busy threads read a page of their own, outside the range: one
    // that faulted on a page in transit would block until the PAGEOUT is
    // done, and its idle CPU, lazy, would be skipped by the flushes whose
    // count is measured here.
    let busy_page = map(1)?;
    let busy = start_busy(1..busy_cpus + 1, busy_page as u64)?;
    let before = TlbCounters::read().map_err(|_| "tlb_stats failed")?;
    let started = sys::clock().unwrap_or(0);
    // SAFETY: PAGEOUT keeps the contents.
    unsafe { sys::madvise(region, (pages * PAGE_SIZE) as usize, advice::PAGEOUT) }
        .map_err(|_| "madvise failed")?;
    let took = sys::clock().unwrap_or(0) - started;
    let cost = TlbCounters::read()
        .map_err(|_| "tlb_stats failed")?
        .since(&before);
    busy.stop();
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

/// Where the children of [`pair`] wait for each other: a count per step, on
/// a page they share.
struct Meeting {
    arrived: [AtomicU64; 3],
}

impl Meeting {
    /// Every child's threads run.
    const RUNNING: usize = 0;
    /// Every child has done its flushes (and still runs: its address space,
    /// and a global ASID it holds, live on).
    const FLUSHED: usize = 1;
    /// Every child has joined its helpers (unmapping their stacks is a
    /// flush too): until then neither ends, so the global ASID's holder
    /// keeps it while the other still flushes.
    const STOPPED: usize = 2;
    const CHILDREN: u64 = 2;

    /// Counts this child in at `step` and waits for the other: five minutes
    /// of the kernel's clock at most, far more than a busy host delays a
    /// child that is alive (so past it, the other failed).
    fn meet(&self, step: usize) -> Result<(), &'static str> {
        self.arrived[step].fetch_add(1, Ordering::AcqRel);
        let give_up = sys::clock().unwrap_or(0) + 300_000_000_000;
        while self.arrived[step].load(Ordering::Acquire) < Self::CHILDREN {
            if sys::clock().unwrap_or(0) > give_up {
                return Err("pair: the other child never came");
            }
            let _ = sys::sleep(1_000_000);
        }
        Ok(())
    }
}

/// Two processes at once, each with threads on two CPUs (`promote 2 200`
/// on CPUs 0-1 and 2-3), that start flushing together and stay until both
/// are done: with `tlb.promote=2 tlb.asids=1` one holds the only global
/// ASID while the other asks for it, however the host schedules them.
fn pair() -> Result<(), &'static str> {
    let page = sys::mmap_shared(PAGE_SIZE as usize, Prot::READ | Prot::WRITE)
        .map_err(|_| "pair: mmap failed")?;
    // SAFETY: a fresh, zeroed, page-aligned shared page, as big as a
    // `Meeting` needs, used as nothing else.
    let meeting: &Meeting = unsafe { &*page.cast::<Meeting>() };
    let mut pids = [0; 2];
    for (pid, first_cpu) in pids.iter_mut().zip([0, 2]) {
        // SAFETY: this process has one thread, the caller.
        match unsafe { sys::fork() } {
            Ok(0) => {
                let outcome = promote_meeting(2, 200, first_cpu, Some(meeting));
                if let Err(why) = outcome {
                    println!("tlbtest: {why}");
                }
                sys::exit(i32::from(outcome.is_err()));
            }
            Ok(child) => *pid = child,
            Err(_) => return Err("pair: fork failed"),
        }
    }
    wait_for(&pids)
}

/// Waits for the children `pids`; fails if any failed.
fn wait_for(pids: &[u64]) -> Result<(), &'static str> {
    let mut failed = 0;
    for pid in pids {
        if sys::wait(*pid) != Ok(0) {
            failed += 1;
        }
    }
    println!("tlbtest children: started={} failed={failed}", pids.len());
    if failed == 0 {
        Ok(())
    } else {
        Err("a child failed")
    }
}

/// Runs `tlbtest` with each of `args` as a child process, all at once, and
/// waits for them; fails if any child fails.
fn children(args: &[&str]) -> Result<(), &'static str> {
    let mut pids = [0u64; MAX_CHILDREN];
    for (pid, args) in pids.iter_mut().zip(args) {
        *pid = sys::spawn("tlbtest", args).map_err(|_| "cannot spawn a child")?;
    }
    wait_for(&pids[..args.len()])
}

/// Returns once CPU 1 is lazy: the sleeper has blocked waiting for the gate
/// (one system call after it set `BLOCKING`), and CPU 1 idles with the address
/// space loaded. The kernel's own evidence says so: a discard of `scratch`
/// then sends no IPI. (A fixed wait is not enough: a host that does not run
/// CPU 1's virtual CPU for a while outlasts any.) Each probe that still
/// sent one is followed by a millisecond's sleep; after ten thousand, the
/// test fails.
fn wait_until_lazy(scratch: *mut u8) -> Result<(), &'static str> {
    for _ in 0..10_000 {
        let before = TlbCounters::read().map_err(|_| "tlb_stats failed")?;
        discard(scratch)?;
        let after = TlbCounters::read().map_err(|_| "tlb_stats failed")?;
        if after.since(&before).get("ipis_sent") == 0 {
            return Ok(());
        }
        let _ = sys::sleep(1_000_000);
    }
    Err("lazy: CPU 1 never went lazy (every probe discard sent it an IPI)")
}

/// Lazy TLB: a thread blocked on CPU 1 leaves that CPU lazy in this address
/// space. Ordinary flushes must skip it, the flush that frees page tables
/// must reach it, and when the thread returns it must see the page's new
/// contents.
fn lazy() -> Result<(), &'static str> {
    const OLD: u8 = 0x11;
    const NEW: u8 = 0x22;
    static SAW: AtomicU64 = AtomicU64::new(0);
    static BLOCKING: AtomicBool = AtomicBool::new(false);
    static RELEASE: AtomicBool = AtomicBool::new(false);
    sys::set_affinity(0).map_err(|_| "cannot pin to CPU 0")?;
    let page = map(1)? as u64;
    let scratch = map(1)?;
    // A region of its own 2 MiB-aligned page table, so unmapping it frees
    // that table.
    let tables =
        sys::mmap_anonymous(4 << 20, Prot::READ | Prot::WRITE).map_err(|_| "mmap failed")?;
    let table_region = ((tables as u64) + (2 << 20) - 1) & !((2 << 20) - 1);
    // SAFETY: inside the fresh 4 MiB region.
    unsafe { (table_region as *mut u8).write_volatile(1) };
    // SAFETY: `page` is a fresh read-write page.
    unsafe { (page as *mut u8).write_volatile(OLD) };

    // The sleeper must stay blocked in the kernel, its CPU lazy, until the
    // page has changed, however slow the emulator: it waits for `gate` (on
    // CPU 0), which finishes only when released.
    let gate = thread::spawn(|| {
        let _ = sys::set_affinity(0);
        while !RELEASE.load(Ordering::Acquire) {
            let _ = sys::sleep(2_000_000);
        }
        0
    })
    .map_err(|_| "cannot start the gate")?;
    let gate_end = gate.end_watch();
    let sleeper = thread::spawn(move || {
        let _ = sys::set_affinity(1);
        // SAFETY: `page` stays mapped for the whole test.
        let before = unsafe { (page as *const u8).read_volatile() };
        BLOCKING.store(true, Ordering::Release);
        // SAFETY: the main thread joins the gate only after this thread.
        unsafe { gate_end.wait() };
        // SAFETY: as above.
        let after = unsafe { (page as *const u8).read_volatile() };
        SAW.store(u64::from(before) << 8 | u64::from(after), Ordering::Relaxed);
        0
    })
    .map_err(|_| "cannot start the sleeper")?;
    while !BLOCKING.load(Ordering::Acquire) {
        let _ = sys::sleep(1_000_000);
    }
    wait_until_lazy(scratch)?;

    let start = TlbCounters::read().map_err(|_| "tlb_stats failed")?;
    for _ in 0..50 {
        discard(scratch)?;
    }
    // The sleeper's page changes while it sleeps: discarded (zero), then
    // written anew.
    // SAFETY: the page is ours; the sleeper only reads it.
    unsafe { sys::madvise(page as *mut u8, PAGE_SIZE as usize, advice::DONTNEED) }
        .map_err(|_| "madvise failed")?;
    // SAFETY: as above.
    unsafe { (page as *mut u8).write_volatile(NEW) };
    let ordinary = TlbCounters::read().map_err(|_| "tlb_stats failed")?;
    // SAFETY: nothing uses the region after this.
    unsafe { sys::munmap(table_region as *mut u8, 2 << 20) }.map_err(|_| "munmap failed")?;
    let freed = TlbCounters::read().map_err(|_| "tlb_stats failed")?;
    RELEASE.store(true, Ordering::Release);
    sleeper.join().map_err(|_| "join failed")?;
    gate.join().map_err(|_| "join failed")?;

    let saw = SAW.load(Ordering::Relaxed);
    let (before, after) = ((saw >> 8) as u8, saw as u8);
    println!(
        "tlbtest lazy: ipis_ordinary={} ipis_freed_tables={} sleeper_saw_before={before:#x} sleeper_saw_after={after:#x} stale={}",
        ordinary.since(&start).get("ipis_sent"),
        freed.since(&ordinary).get("ipis_sent"),
        if after == OLD { "yes" } else { "no" },
    );
    if before == OLD && after == NEW {
        Ok(())
    } else {
        Err("lazy: the sleeper saw the wrong contents")
    }
}
