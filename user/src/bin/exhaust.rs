//! Resource exhaustion: the kernel must answer with errors (or kill only the
//! process that needs what is gone), never panic, and everyone else must
//! keep running.
//!
//! `exhaust <case>`, where the case is:
//!
//! - `frames` (boot with `--memory 64M`): a hog takes every free frame by
//!   making system calls that need a page (`tlb_stats` into untouched
//!   memory) until one fails with `ENOMEM`; `spawn` and `fork` (which
//!   needs page tables for the child, and would share every page the hog
//!   holds) must fail with `ENOMEM` too, leaving nothing behind; then it
//!   touches one more page and the kernel kills it ("out of memory").
//! - `heap` (boot with `--memory 64M`): hogs start threads until the kernel
//!   refuses one with `ENOMEM`: each thread's kernel stack comes out of the
//!   heap budget for programs, which keeps a reserve for the kernel itself.
//! - `swap`: a hog pages out more pages than swap holds: `ENOSPC`, and every
//!   page still reads back intact.
//! - `limits`: threads up to `MAX_THREADS` and processes up to
//!   `MAX_PROCESSES` (zombies included), then `EAGAIN`; once waited for (or
//!   orphaned: a parent that exits without waiting), the places come back.
//!
//! In `frames`, `heap` and `swap` a *guard* process runs throughout. It
//! keeps private data and checks it every few milliseconds, and it probes
//! the same resource itself: it must see the error while the hog holds
//! everything, and success once the hog is gone.
//!
//! Each case prints what it saw and ends with `exhaust <case>: ok` (exit 0),
//! or with `exhaust <case>: FAIL ...` (exit 1). The helper modes the cases
//! start are `guard <resource>`, `frame-hog`, `thread-hog`, `swap-hog`,
//! `exit` and `orphans <n>`.

#![no_std]
#![no_main]

use core::sync::atomic::{AtomicBool, Ordering};

use user::{
    Errno,
    abi::{MAX_PROCESSES, MAX_THREADS, PAGE_SIZE, Prot, SWAP_SLOTS, advice},
    println, sys, thread,
};

user::entry!(main);

const MS: u64 = 1_000_000;
/// How long a hog keeps the resource exhausted before letting go: long
/// enough that the guard, probing every few milliseconds, sees the refusal
/// even when the host does not run its CPU for a while (half a second was
/// not always, beside other work).
const HOLD_NS: u64 = 3_000 * MS;
/// A hog that never gets there stops after this long.
const GIVE_UP_NS: u64 = 10_000 * MS;
/// How often the guard checks its data and probes.
const GUARD_PERIOD_NS: u64 = 2 * MS;
/// The guard gives up after this many rounds (tens of seconds).
const GUARD_ROUNDS: u32 = 10_000;
const GUARD_DATA_PAGES: usize = 16;
/// Hog processes the `heap` case starts.
const THREAD_HOGS: usize = 4;

fn main(args: &str) -> i32 {
    let mut words = args.split_whitespace();
    let case = words.next().unwrap_or("");
    let argument = words.next().unwrap_or("");
    let outcome = match case {
        "frames" => supervise("frames", "frame-hog", 1),
        "heap" => supervise("heap", "thread-hog", THREAD_HOGS),
        "swap" => supervise("swap", "swap-hog", 1),
        "limits" => limits(),
        "guard" => return guard(argument),
        "frame-hog" => return frame_hog(),
        "thread-hog" => return thread_hog(),
        "swap-hog" => return swap_hog(),
        "exit" => return 0,
        "orphans" => return orphans(argument.parse().unwrap_or(0)),
        _ => {
            println!("usage: exhaust frames|heap|swap|limits, got '{args}'");
            return 2;
        }
    };
    match outcome {
        Ok(()) => {
            println!("exhaust {case}: ok");
            0
        }
        Err(why) => {
            println!("exhaust {case}: FAIL {why}");
            1
        }
    }
}

/// Touches 64 KiB of stack now, so that nothing below needs a new stack
/// page (a frame) while memory is exhausted.
#[inline(never)]
fn prefault_stack() {
    let mut buffer = [0u8; 64 * 1024];
    for byte in buffer.iter_mut().step_by(PAGE_SIZE as usize) {
        *byte = 1;
    }
    core::hint::black_box(&mut buffer);
}

fn sleep(ns: u64) {
    let _ = sys::sleep(ns);
}

/// Starts the guard for `resource` and `hogs` hog processes, then checks
/// how everyone ended and that a new process starts afterwards.
fn supervise(resource: &str, hog: &str, hogs: usize) -> Result<(), &'static str> {
    prefault_stack();
    let mut guard_args = [0u8; 32];
    let guard_args = join(&mut guard_args, "guard ", resource);
    let guard = sys::spawn("exhaust", guard_args).map_err(|_| "cannot start the guard")?;
    let mut pids = [0u64; THREAD_HOGS];
    let mut refused_spawns = 0;
    for pid in pids.iter_mut().take(hogs) {
        match sys::spawn("exhaust", hog) {
            Ok(child) => *pid = child,
            Err(error) => {
                println!("exhaust {resource}: spawning a hog: {error:?}");
                refused_spawns += 1;
            }
        }
    }
    // A hog ends with 0 when it saw the resource run out (or 139 when the
    // kernel killed it for a page it could not have: `frames`).
    let mut exhausted_hogs = refused_spawns;
    for &pid in pids.iter().take(hogs).filter(|&&pid| pid != 0) {
        match sys::wait(pid) {
            Ok(0 | 139) => exhausted_hogs += 1,
            other => println!("exhaust {resource}: hog {pid} ended with {other:?}"),
        }
    }
    let guard_code = sys::wait(guard);
    println!("exhaust {resource}: guard ended with {guard_code:?}");
    if exhausted_hogs == 0 {
        return Err("no hog saw the resource run out");
    }
    if guard_code != Ok(0) {
        return Err("the guard did not finish intact");
    }
    // Everything the hogs held is back: a new process starts and runs.
    let after = sys::spawn("exhaust", "exit").map_err(|_| "cannot spawn after the hogs")?;
    match sys::wait(after) {
        Ok(0) => Ok(()),
        _ => Err("the process started after the hogs failed"),
    }
}

/// `prefix` followed by `rest` in `buffer`.
fn join<'a>(buffer: &'a mut [u8], prefix: &str, rest: &str) -> &'a str {
    let len = prefix.len() + rest.len();
    buffer[..prefix.len()].copy_from_slice(prefix.as_bytes());
    buffer[prefix.len()..len].copy_from_slice(rest.as_bytes());
    core::str::from_utf8(&buffer[..len]).unwrap_or("")
}

/// One attempt at using a little of the resource and giving it back.
trait Probe {
    fn try_once(&mut self) -> Result<(), Errno>;
}

/// A page that gets a frame through a system call, then gives it back.
struct FrameProbe(*mut u8);

impl Probe for FrameProbe {
    fn try_once(&mut self) -> Result<(), Errno> {
        // SAFETY: the page is this probe's own mapping, PAGE_SIZE long.
        let page = unsafe { core::slice::from_raw_parts_mut(self.0, PAGE_SIZE as usize) };
        sys::tlb_stats(&mut page[..8])?;
        // SAFETY: nothing relies on the page's contents.
        unsafe { sys::madvise(self.0, PAGE_SIZE as usize, advice::DONTNEED) }
    }
}

/// A thread started and joined: a kernel stack from the heap budget.
struct ThreadProbe;

impl Probe for ThreadProbe {
    fn try_once(&mut self) -> Result<(), Errno> {
        thread::spawn(|| 0)?.join().map(drop)
    }
}

/// A page sent to swap and brought back.
struct SwapProbe(*mut u8);

impl Probe for SwapProbe {
    fn try_once(&mut self) -> Result<(), Errno> {
        // SAFETY: the page is this probe's own mapping; its contents stay.
        unsafe { self.0.write_volatile(7) };
        // SAFETY: PAGEOUT keeps the contents.
        unsafe { sys::madvise(self.0, PAGE_SIZE as usize, advice::PAGEOUT) }?;
        // SAFETY: as above; reading brings the page back and frees the slot.
        match unsafe { self.0.read_volatile() } {
            7 => Ok(()),
            _ => Err(Errno::Fault),
        }
    }
}

fn map(pages: usize) -> Result<*mut u8, Errno> {
    sys::mmap_anonymous(pages * PAGE_SIZE as usize, Prot::READ | Prot::WRITE)
}

/// Keeps private data and probes `resource` until it has seen the
/// resource refused and then granted again.
fn guard(resource: &str) -> i32 {
    prefault_stack();
    let pattern = (sys::getpid().unwrap_or(0) as u8) | 0x80;
    let Ok(data) = map(GUARD_DATA_PAGES) else {
        println!("guard {resource}: cannot map its data");
        return 1;
    };
    let len = GUARD_DATA_PAGES * PAGE_SIZE as usize;
    // SAFETY: `data` is a fresh mapping of `len` bytes, ours alone.
    let data = unsafe { core::slice::from_raw_parts_mut(data, len) };
    data.fill(pattern);
    let Ok(probe_page) = map(1) else {
        println!("guard {resource}: cannot map its probe page");
        return 1;
    };
    // Touched once, so its page table exists before memory runs out.
    // SAFETY: a fresh page of ours.
    unsafe { probe_page.write_volatile(1) };
    let mut frames = FrameProbe(probe_page);
    let mut threads = ThreadProbe;
    let mut swap = SwapProbe(probe_page);
    let probe: &mut dyn Probe = match resource {
        "frames" => &mut frames,
        "heap" => &mut threads,
        "swap" => &mut swap,
        _ => {
            println!("guard: unknown resource '{resource}'");
            return 2;
        }
    };
    let mut refused = 0;
    let mut refusal = None;
    for _ in 0..GUARD_ROUNDS {
        sleep(GUARD_PERIOD_NS);
        if data.iter().any(|&byte| byte != pattern) {
            println!("guard {resource}: its private data changed");
            return 1;
        }
        match probe.try_once() {
            Err(error) => {
                refused += 1;
                refusal = Some(error);
            }
            Ok(()) if refused > 0 => {
                println!(
                    "guard {resource}: refused {refused} times ({refusal:?}) while exhausted, \
                     then granted; private data intact"
                );
                return 0;
            }
            Ok(()) => {}
        }
    }
    println!("guard {resource}: never saw the resource refused and then granted again");
    1
}

/// Takes frames through system calls until `ENOMEM`, holds them, checks
/// that `spawn` fails too, then touches one more page: the kernel must kill
/// this process.
fn frame_hog() -> i32 {
    prefault_stack();
    // Far more than the machine has: the region is only reserved.
    const REGION_PAGES: usize = 1 << 20;
    let Ok(region) = map(REGION_PAGES) else {
        println!("frame-hog: cannot map its region");
        return 1;
    };
    let page = |index: usize| region.wrapping_add(index * PAGE_SIZE as usize);
    // A system call that needs the page to be resident: ENOMEM, not a kill.
    let take = |index: usize| {
        // SAFETY: the page lies inside the hog's own mapping.
        let bytes = unsafe { core::slice::from_raw_parts_mut(page(index), 8) };
        sys::tlb_stats(bytes)
    };
    let mut taken = 0;
    let refusal = loop {
        if taken == REGION_PAGES {
            println!("frame-hog: {REGION_PAGES} pages and still memory left");
            return 1;
        }
        match take(taken) {
            Ok(_) => taken += 1,
            Err(error) => break error,
        }
    };
    println!("frame-hog: {taken} pages, then {refusal:?} from a system call");
    // Hold: whatever another process gives back, take at once.
    let start = sys::clock().unwrap_or(0);
    while sys::clock().unwrap_or(u64::MAX) - start < HOLD_NS && taken < REGION_PAGES {
        match take(taken) {
            Ok(_) => taken += 1,
            Err(_) => sleep(MS),
        }
    }
    let spawned = sys::spawn("exhaust", "exit");
    println!("frame-hog: spawn while memory is exhausted: {spawned:?}");
    if spawned != Err(Errno::NoMem) {
        return 1;
    }
    // SAFETY: a child, if there were one, would only exit.
    let forked = unsafe { sys::fork() };
    if forked == Ok(0) {
        sys::exit(0);
    }
    println!("frame-hog: fork while memory is exhausted: {forked:?}");
    if forked != Err(Errno::NoMem) {
        return 1;
    }
    println!("frame-hog: touching more pages directly");
    for index in taken..REGION_PAGES {
        // SAFETY: a page of the hog's own mapping, which nothing else uses.
        unsafe { page(index).write_volatile(1) };
    }
    println!("frame-hog: survived touching every page");
    1
}

static RELEASE: AtomicBool = AtomicBool::new(false);

/// Starts threads that wait for [`RELEASE`] until the kernel refuses one;
/// exits 0 if the refusal was `ENOMEM` (the heap budget).
fn thread_hog() -> i32 {
    let mut handles = [const { None }; MAX_THREADS];
    let mut started = 0;
    let mut refusal = None;
    let now = || sys::clock().unwrap_or(u64::MAX);
    let give_up = now().saturating_add(GIVE_UP_NS);
    // Start threads until the heap budget refuses one, then hold what it
    // has for HOLD_NS, still retrying, so that whatever others give back is
    // taken at once.
    let mut hold_until = None;
    while now() < hold_until.unwrap_or(give_up) {
        let attempt = if started < MAX_THREADS - 1 {
            thread::spawn(|| {
                while !RELEASE.load(Ordering::Acquire) {
                    let _ = sys::sleep(50 * MS);
                }
                0
            })
            .map(|handle| {
                handles[started] = Some(handle);
                started += 1;
            })
        } else {
            // At the thread limit: look for the heap running out through
            // a short-lived child instead (its first thread needs a stack).
            sys::spawn("exhaust", "exit").map(|pid| {
                let _ = sys::wait(pid);
            })
        };
        if let Err(error) = attempt {
            if error == Errno::NoMem {
                hold_until.get_or_insert(now() + HOLD_NS);
            }
            refusal.get_or_insert(error);
            sleep(MS);
        }
    }
    RELEASE.store(true, Ordering::Release);
    for handle in handles.into_iter().flatten() {
        let _ = handle.join();
    }
    println!("thread-hog: held {started} threads; refused with {refusal:?}");
    if refusal == Some(Errno::NoMem) { 0 } else { 2 }
}

/// Pages out more pages than swap holds: `ENOSPC`, and every page must read
/// back intact.
fn swap_hog() -> i32 {
    const PAGES: usize = SWAP_SLOTS + 64;
    let Ok(region) = map(PAGES) else {
        println!("swap-hog: cannot map its region");
        return 1;
    };
    let word = |index: usize| {
        region
            .wrapping_add(index * PAGE_SIZE as usize)
            .cast::<u64>()
    };
    let value = |index: usize| 0x5ee0_0000_0000_0000 | index as u64;
    for index in 0..PAGES {
        // SAFETY: the first word of page `index` of our own mapping.
        unsafe { word(index).write_volatile(value(index)) };
    }
    // SAFETY: PAGEOUT keeps the contents.
    let paged_out = unsafe { sys::madvise(region, PAGES * PAGE_SIZE as usize, advice::PAGEOUT) };
    println!("swap-hog: PAGEOUT of {PAGES} pages: {paged_out:?}");
    sleep(HOLD_NS);
    let intact = (0..PAGES)
        // SAFETY: as above; reading brings a swapped page back.
        .filter(|&index| unsafe { word(index).read_volatile() } == value(index))
        .count();
    println!("swap-hog: {intact} of {PAGES} pages intact afterwards");
    // SAFETY: nothing refers to the region any more.
    let _ = unsafe { sys::munmap(region, PAGES * PAGE_SIZE as usize) };
    if paged_out == Err(Errno::NoSpc) && intact == PAGES {
        0
    } else {
        1
    }
}

/// The thread and process limits, and places coming back.
fn limits() -> Result<(), &'static str> {
    // Threads: this one plus MAX_THREADS - 1 more.
    let mut handles = [const { None }; MAX_THREADS];
    let mut started = 0;
    let refusal = loop {
        let spawned = thread::spawn(|| {
            while !RELEASE.load(Ordering::Acquire) {
                let _ = sys::sleep(50 * MS);
            }
            0
        });
        match spawned {
            Ok(handle) if started < MAX_THREADS => {
                handles[started] = Some(handle);
                started += 1;
            }
            Ok(_) => break None,
            Err(error) => break Some(error),
        }
    };
    RELEASE.store(true, Ordering::Release);
    for handle in handles.into_iter().flatten() {
        let _ = handle.join();
    }
    println!("limits: threads: {started} started besides the first, then {refusal:?}");
    if started != MAX_THREADS - 1 || refusal != Some(Errno::Again) {
        return Err("the thread limit");
    }
    let again = thread::spawn(|| 0).and_then(|handle| handle.join());
    println!("limits: a thread after joining them all: {again:?}");
    if again != Ok(0) {
        return Err("threads after joining");
    }

    // Processes: this one plus MAX_PROCESSES - 1 children, zombies until
    // waited for.
    let (count, refusal) = fill_process_table();
    println!("limits: processes: {count} started besides this one, then {refusal:?}");
    if count != MAX_PROCESSES - 1 || refusal != Some(Errno::Again) {
        return Err("the process limit");
    }
    // A parent that exits without waiting: its children must not keep
    // their places.
    let parent = sys::spawn("exhaust", "orphans 20").map_err(|_| "cannot spawn orphans")?;
    if sys::wait(parent) != Ok(0) {
        return Err("the orphaning parent failed");
    }
    // The orphans may still be ending: give them a moment, a few times.
    for _ in 0..20 {
        sleep(100 * MS);
        let (count, _) = fill_process_table();
        if count == MAX_PROCESSES - 1 {
            println!("limits: processes: {count} again after orphans were left behind");
            return Ok(());
        }
    }
    Err("orphans kept their places in the process table")
}

/// Starts `exhaust exit` children until refused, then waits for them all;
/// returns how many started and the refusal.
fn fill_process_table() -> (usize, Option<Errno>) {
    let mut pids = [0u64; MAX_PROCESSES];
    let mut count = 0;
    let refusal = loop {
        if count == MAX_PROCESSES {
            break None;
        }
        match sys::spawn("exhaust", "exit") {
            Ok(pid) => {
                pids[count] = pid;
                count += 1;
            }
            Err(error) => break Some(error),
        }
    };
    for &pid in &pids[..count] {
        let _ = sys::wait(pid);
    }
    (count, refusal)
}

/// Starts `count` children and exits without waiting for them.
fn orphans(count: usize) -> i32 {
    for _ in 0..count {
        if sys::spawn("exhaust", "exit").is_err() {
            return 1;
        }
    }
    0
}
