//! TLB coherence stress: can any CPU use a translation after the system
//! call that revoked it has returned?
//!
//! `coherence <rounds> <cpus> [pages]`: one writer thread on CPU 0 and one
//! reader thread on each other CPU share a test region of `pages` pages (1
//! by default, at most 32). Each round the writer fills every page's data
//! half with a value unique to the round, then changes the mapping of the
//! whole region in one of four ways, cycling:
//!
//! | op       | system call                   | the data afterwards        |
//! |----------|-------------------------------|----------------------------|
//! | discard  | `madvise(DONTNEED)`           | zero                       |
//! | remap    | `mmap(MAP_FIXED)` over it     | zero (a new page)          |
//! | pageout  | `madvise(PAGEOUT)`            | unchanged (swapped)        |
//! | protect  | `mprotect` read-only, then RW | unchanged                  |
//!
//! and only then publishes the round number (`epoch`). Readers keep reading
//! the data, and writing and re-reading a private slot in the page. Two
//! checks catch a stale TLB entry:
//! - **stale read**: a reader that saw `epoch == k` both before and after its
//!   read may only find zero, round `k+1`'s value (the writer is filling the
//!   next round) or, after an op that kept the data, round `k`'s. Round
//!   `k`'s value after a zeroing op, any older round's, or anything that is
//!   no round's value at all lives only in an old frame: freed, maybe
//!   handed to someone else. (A stale entry can outlive many rounds when no
//!   flush reaches its CPU, so older rounds' values count too: with only
//!   round `k`'s counted, a kernel that never flushed the reader was caught
//!   only if the old frame happened to be reused as the new page.)
//! - **lost write**: a reader's slot must always hold what it last wrote,
//!   unless a zeroing op ran since the write (or was running during it). A
//!   write that went through a stale entry to a frame already copied to swap
//!   would be lost.
//!
//! Readers read every page of the region in turn, so a flush that misses
//! any page of a range (one page short, or the wrong stride) leaves a stale
//! read behind. Readers stop writing (and say so) before each `protect` op,
//! so no correct kernel ever kills them. Prints the counts and exits with the
//! number of violations (0: coherent).

#![no_std]
#![no_main]

use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use user::{
    abi::{MapFlags, PAGE_SIZE, Prot, advice},
    println, sys, thread,
};

user::entry!(main);

/// Where the test region lives (mapped with MAP_FIXED, so remap can reuse
/// it).
const TEST_PAGE: u64 = 0x3000_0000_0000;
const DATA_WORDS: usize = 256;
const MAX_PAGES: usize = 32;
/// Pages in the test region (set once, before the readers start).
static PAGES: AtomicUsize = AtomicUsize::new(1);
/// Rounds between progress lines.
const PROGRESS_EVERY: u64 = 250;
const SLOT_OFFSET: usize = 2048;
const MAX_READERS: usize = 31;

/// Shared state outside the test page.
struct Control {
    /// The last round whose op has completed.
    epoch: AtomicU64,
    /// Twice the zeroing ops finished, plus one while one is in progress.
    zeroings: AtomicU64,
    /// Readers may write their slots.
    writes_allowed: AtomicBool,
    /// Numbers each request for quiet (writes disallowed).
    quiet_request: AtomicU64,
    /// Readers that acknowledged the current quiet request.
    quiet_readers: AtomicUsize,
    stop: AtomicBool,
    reads: AtomicU64,
    stale_reads: AtomicU64,
    lost_writes: AtomicU64,
}

static CONTROL: Control = Control {
    epoch: AtomicU64::new(0),
    zeroings: AtomicU64::new(0),
    writes_allowed: AtomicBool::new(true),
    quiet_request: AtomicU64::new(0),
    quiet_readers: AtomicUsize::new(0),
    stop: AtomicBool::new(false),
    reads: AtomicU64::new(0),
    stale_reads: AtomicU64::new(0),
    lost_writes: AtomicU64::new(0),
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Discard,
    Remap,
    PageOut,
    Protect,
}

const OPS: [Op; 4] = [Op::Discard, Op::Remap, Op::PageOut, Op::Protect];

/// The value the writer fills the data with in round `round` (never 0).
fn tag(round: u64) -> u64 {
    0xC0FF_EE00_0000_0000 | round
}

/// The round whose value `value` is, if it is one.
fn round_of(value: u64) -> Option<u64> {
    const MARK: u64 = 0xFFFF_FF00_0000_0000;
    (value & MARK == tag(0)).then_some(value & !MARK)
}

/// Whether `value`, read while the epoch stood at `epoch`, can only have
/// come through a stale translation (see the module docs).
fn is_stale(value: u64, epoch: u64) -> bool {
    if value == 0 {
        return false;
    }
    let Some(round) = round_of(value) else {
        return true;
    };
    let zeroed = matches!(op_of(epoch), Op::Discard | Op::Remap);
    round < epoch || (round == epoch && zeroed)
}

fn op_of(round: u64) -> Op {
    OPS[(round % OPS.len() as u64) as usize]
}

fn word(page: usize, index: usize) -> *mut u64 {
    (TEST_PAGE as usize + page * PAGE_SIZE as usize + index * 8) as *mut u64
}

fn region_len() -> usize {
    PAGES.load(Ordering::Relaxed) * PAGE_SIZE as usize
}

fn slot(reader: usize) -> *mut u64 {
    (TEST_PAGE as usize + SLOT_OFFSET + reader * 64) as *mut u64
}

fn main(args: &str) -> i32 {
    let mut words = args.split_whitespace();
    let rounds: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(1000);
    let cpus: usize = words
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or(2)
        .clamp(2, MAX_READERS + 1);
    let pages: usize = words
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or(1)
        .clamp(1, MAX_PAGES);
    PAGES.store(pages, Ordering::Relaxed);
    let readers = cpus - 1;

    if map_test_page().is_err() || sys::set_affinity(0).is_err() {
        println!("coherence: setup failed");
        return 100;
    }
    let mut handles = [const { None }; MAX_READERS];
    for (reader, handle) in handles.iter_mut().enumerate().take(readers) {
        let cpu = (reader + 1) as u64;
        *handle = thread::spawn(move || read_loop(reader, cpu)).ok();
        if handle.is_none() {
            println!("coherence: cannot start reader {reader}");
            return 100;
        }
    }

    for round in 1..=rounds {
        for page in 0..pages {
            for index in 0..DATA_WORDS {
                // SAFETY: the test region is mapped read-write at this
                // point of every round (the protect op restores write
                // access).
                unsafe { word(page, index).write_volatile(tag(round)) };
            }
        }
        if perform(op_of(round), readers).is_err() {
            println!("coherence: system call failed in round {round}");
            CONTROL.stop.store(true, Ordering::Relaxed);
            return 100;
        }
        CONTROL.epoch.store(round, Ordering::Release);
        if round % PROGRESS_EVERY == 0 && round < rounds {
            // Long runs show they are alive (a silent emulator looks hung).
            println!(
                "coherence: {round}/{rounds} rounds, {} stale reads so far",
                CONTROL.stale_reads.load(Ordering::Relaxed)
            );
        }
    }
    CONTROL.stop.store(true, Ordering::Relaxed);
    for handle in handles.into_iter().flatten() {
        let _ = handle.join();
    }

    let stale = CONTROL.stale_reads.load(Ordering::Relaxed);
    let lost = CONTROL.lost_writes.load(Ordering::Relaxed);
    let region = PagesNote(pages);
    println!(
        "coherence: {rounds} rounds, {readers} readers{region}, {} reads: {stale} stale reads, {lost} lost writes",
        CONTROL.reads.load(Ordering::Relaxed)
    );
    (stale + lost).min(99) as i32
}

fn map_test_page() -> Result<(), user::Errno> {
    // SAFETY: a fixed mapping in a range this program owns and no one else
    // refers to yet.
    unsafe {
        sys::mmap(
            TEST_PAGE,
            region_len(),
            Prot::READ | Prot::WRITE,
            MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED,
        )
    }
    .map(|_| ())
}

/// Runs a zeroing op with `zeroings` odd for its whole duration.
fn zeroing(op: impl FnOnce() -> Result<(), user::Errno>) -> Result<(), user::Errno> {
    CONTROL.zeroings.fetch_add(1, Ordering::SeqCst);
    let result = op();
    CONTROL.zeroings.fetch_add(1, Ordering::SeqCst);
    result
}

/// One round's mapping change.
fn perform(op: Op, readers: usize) -> Result<(), user::Errno> {
    let page = TEST_PAGE as *mut u8;
    let len = region_len();
    match op {
        // SAFETY: every user of the page tolerates it becoming zero.
        Op::Discard => zeroing(|| unsafe { sys::madvise(page, len, advice::DONTNEED) }),
        Op::Remap => zeroing(map_test_page),
        // SAFETY: PAGEOUT keeps the contents.
        Op::PageOut => unsafe { sys::madvise(page, len, advice::PAGEOUT) },
        Op::Protect => {
            CONTROL.quiet_readers.store(0, Ordering::SeqCst);
            CONTROL.quiet_request.fetch_add(1, Ordering::SeqCst);
            CONTROL.writes_allowed.store(false, Ordering::SeqCst);
            while CONTROL.quiet_readers.load(Ordering::SeqCst) < readers {
                core::hint::spin_loop();
            }
            // SAFETY: no thread writes the page while it is read-only.
            unsafe { sys::mprotect(page, len, Prot::READ) }?;
            // SAFETY: as above.
            unsafe { sys::mprotect(page, len, Prot::READ | Prot::WRITE) }?;
            CONTROL.writes_allowed.store(true, Ordering::SeqCst);
            Ok(())
        }
    }
}

fn read_loop(reader: usize, cpu: u64) -> u64 {
    let _ = sys::set_affinity(cpu);
    let mut last_written = 0u64;
    let mut zeroings_at_write = CONTROL.zeroings.load(Ordering::SeqCst);
    let mut acknowledged_request = 0u64;
    let mut iteration = 0usize;
    let pages = PAGES.load(Ordering::Relaxed);
    while !CONTROL.stop.load(Ordering::Relaxed) {
        iteration += 1;
        let before = CONTROL.epoch.load(Ordering::Acquire);
        let (page, index) = (iteration % pages, (iteration / pages) % DATA_WORDS);
        // SAFETY: the test region is always mapped and readable.
        let value = unsafe { word(page, index).read_volatile() };
        let after = CONTROL.epoch.load(Ordering::Acquire);
        CONTROL.reads.fetch_add(1, Ordering::Relaxed);
        if before == after && before > 0 && is_stale(value, before) {
            CONTROL.stale_reads.fetch_add(1, Ordering::Relaxed);
        }

        if !CONTROL.writes_allowed.load(Ordering::SeqCst) {
            let request = CONTROL.quiet_request.load(Ordering::SeqCst);
            if request != acknowledged_request {
                acknowledged_request = request;
                CONTROL.quiet_readers.fetch_add(1, Ordering::SeqCst);
            }
            continue;
        }
        // SAFETY: writes are allowed, so the page is read-write.
        let seen = unsafe { slot(reader).read_volatile() };
        let zeroings_now = CONTROL.zeroings.load(Ordering::SeqCst);
        let zeroed_since_write = zeroings_now != zeroings_at_write || zeroings_at_write % 2 == 1;
        let may_be_zero = zeroed_since_write && seen == 0;
        if seen != last_written
            && !may_be_zero
            && CONTROL.lost_writes.fetch_add(1, Ordering::Relaxed) < 3
        {
            println!(
                "coherence: reader {reader} on cpu {cpu}: slot holds {seen}, last wrote {last_written} \
                     (epoch {before}, zeroings {zeroings_at_write} -> {zeroings_now})"
            );
        }
        last_written = last_written.wrapping_add(1).max(1);
        zeroings_at_write = zeroings_now;
        // SAFETY: as above.
        unsafe { slot(reader).write_volatile(last_written) };
    }
    0
}

/// `, N pages` in the summary for a region of more than one page; one page
/// is the default and needs no mention (the book shows the line so).
struct PagesNote(usize);

impl core::fmt::Display for PagesNote {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.0 > 1 {
            write!(f, ", {} pages", self.0)
        } else {
            Ok(())
        }
    }
}
