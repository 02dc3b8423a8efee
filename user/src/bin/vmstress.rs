//! Concurrency stress of one address space: threads on every CPU fault,
//! discard, remap, page out, protect, map and unmap pages of one process at
//! the same time, while its main thread forks, and every value any of them
//! reads is checked.
//!
//! `vmstress <ops> <threads> [seed]`: `threads` threads (2 to 16), thread
//! `t` pinned to CPU `t % cpus`, share an *arena* of private pages that
//! straddles a 2 MiB boundary (so two last-level tables). Word `t` of each
//! arena page belongs to thread `t`, which writes values tagged with the
//! page and its own number; the others only read it. Each thread runs
//! `ops / threads` operations drawn from a seeded generator:
//!
//! - write its word of a page and read it back; read another thread's word;
//! - `madvise(DONTNEED)` or `madvise(PAGEOUT)` of a few pages, or
//!   `mmap(MAP_FIXED)` over one (fresh zero page);
//! - map its own *scratch* page, write it, `mprotect` it read-only, read
//!   it, make it writable, `munmap` it (the scratch pages share a table of
//!   their own, which goes when the last of them is unmapped);
//! - every [`MEET_EVERY`] operations all threads meet: each maps its scratch
//!   page afresh, then all write theirs at once (the first touches, into a
//!   table that does not exist yet, so several CPUs create it together),
//!   and each reads its neighbour's, then all unmap theirs;
//! - at every [`FORK_EVERY`]th meeting the main thread forks: the child
//!   checks every arena word it can see, writes its own tag into the arena
//!   (copy-on-write breaks in the child) and exits, while every parent
//!   thread writes its word of each arena page in the same order
//!   (copy-on-write breaks in the parent, several at once on one page).
//!
//! The checks: a value read is 0 or carries the tag of the page it was read
//! from and of a thread of this process (a frame reached through a stale
//! translation after it went to another page or process carries another
//! tag); a thread's own word holds what it last wrote unless a discard or a
//! remap of that page ran since, or was still running (a lost write); a
//! neighbour's scratch page holds what the neighbour wrote. Prints
//! `vmstress: ops=N threads=T forks=F meets=M violations=V` (and the first
//! violations) and exits with 0 when `V = 0`, 1 otherwise, 2 on bad
//! arguments.

#![no_std]
#![no_main]

use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};

use user::{
    abi::{Errno, MapFlags, PAGE_SIZE, Prot, advice},
    helpers::online_cpus,
    println,
    random::Rng,
    sys, thread,
};

user::entry!(main);

/// The arena: `ARENA_PAGES` pages, half below and half above a 2 MiB line.
const ARENA: u64 = 0x3100_0000_0000 - (ARENA_PAGES as u64 / 2) * PAGE_SIZE;
const ARENA_PAGES: usize = 48;
/// The scratch pages, one per thread, alone in their 2 MiB.
const SCRATCH: u64 = 0x3200_0000_0000;
const MAX_THREADS: usize = 16;
/// The word a fork child writes in arena pages (no thread owns it).
const CHILD_WORD: usize = 63;
/// Operations between two meetings of all threads.
const MEET_EVERY: u64 = 200;
/// Meetings between two forks.
const FORK_EVERY: u64 = 5;
/// How many violations are printed in full.
const PRINTED: u64 = 8;
/// Nanoseconds between two progress lines of the main thread (the first
/// meeting after that long prints one): a long run shows it is alive, since the runner
/// takes a silent emulator for a hung one. By the clock, not by a count of
/// operations: under `vm.lock=coarse` on a busy host, 5000 operations took
/// two minutes, and the test's stall limit was reached by a run that was
/// only slow.
const PROGRESS_NS: u64 = 5_000_000_000;

static THREADS: AtomicUsize = AtomicUsize::new(0);
static VIOLATIONS: AtomicU64 = AtomicU64::new(0);
/// Per arena page: the zeroing operations (discards and remaps) started
/// and finished so far. A write was zeroed legitimately if an operation
/// that started before the check had not finished before the write:
/// `started` at the check exceeds `finished` at the write. (One counter
/// that is odd while an operation runs cannot say that: two that overlap
/// make it even again, and a write between them looked lost.)
static ZEROINGS_STARTED: [AtomicU64; ARENA_PAGES] = [const { AtomicU64::new(0) }; ARENA_PAGES];
static ZEROINGS_FINISHED: [AtomicU64; ARENA_PAGES] = [const { AtomicU64::new(0) }; ARENA_PAGES];
/// Threads that have arrived at each meeting point.
static ARRIVED: AtomicU64 = AtomicU64::new(0);
static FORKS: AtomicU64 = AtomicU64::new(0);
static STOP: AtomicBool = AtomicBool::new(false);

/// The value thread `owner` writes as its `seq`-th write to arena page
/// `page` (never 0).
fn tag(page: usize, owner: usize, seq: u64) -> u64 {
    (page as u64 + 1) << 48 | (owner as u64) << 40 | (seq & ((1 << 40) - 1))
}

fn tag_page(value: u64) -> usize {
    (value >> 48) as usize - 1
}

fn tag_owner(value: u64) -> usize {
    ((value >> 40) & 0xFF) as usize
}

fn arena_word(page: usize, word: usize) -> *mut u64 {
    (ARENA + page as u64 * PAGE_SIZE + word as u64 * 8) as *mut u64
}

fn scratch(thread: usize) -> *mut u8 {
    (SCRATCH + thread as u64 * PAGE_SIZE) as *mut u8
}

fn violation(args: core::fmt::Arguments) {
    if VIOLATIONS.fetch_add(1, Ordering::Relaxed) < PRINTED {
        println!("vmstress: violation: {args}");
    }
}

/// One thread's view: what it last wrote to its word of each page, and how
/// many zeroing operations of the page had finished just before that write.
struct Worker {
    me: usize,
    random: Rng,
    seq: u64,
    written: [(u64, u64); ARENA_PAGES],
}

/// A value read from `page`'s word `word` may be 0 or one this process
/// (or, for [`CHILD_WORD`], nobody in the parent) wrote there.
fn check_tag(page: usize, word: usize, value: u64, who: &str) {
    let owners = THREADS.load(Ordering::Relaxed);
    let valid =
        value == 0 || (tag_page(value) == page && tag_owner(value) == word && word < owners);
    if !valid {
        violation(format_args!(
            "{who} read {value:#x} from word {word} of arena page {page}"
        ));
    }
}

impl Worker {
    fn write_own(&mut self, page: usize) {
        self.seq += 1;
        let value = tag(page, self.me, self.seq);
        let finished = ZEROINGS_FINISHED[page].load(Ordering::Acquire);
        fence(Ordering::SeqCst);
        // SAFETY: the arena stays mapped read-write for the whole run (a
        // remap replaces a page in one step, never leaving a hole).
        unsafe { arena_word(page, self.me).write_volatile(value) };
        self.written[page] = (value, finished);
        self.check_own(page, "just now");
    }

    /// `when`: "just now" right after the write, else "earlier".
    fn check_own(&self, page: usize, when: &str) {
        let (expected, finished_before_write) = self.written[page];
        // SAFETY: as in `write_own`.
        let value = unsafe { arena_word(page, self.me).read_volatile() };
        if value == expected {
            return;
        }
        fence(Ordering::SeqCst);
        let zeroed_since = ZEROINGS_STARTED[page].load(Ordering::Acquire) > finished_before_write;
        if !(value == 0 && zeroed_since) {
            // What the rest of the page holds tells a lost write (the other
            // words are there) from a page that was replaced (all zero).
            let others = (0..THREADS.load(Ordering::Relaxed))
                .filter(|&word| word != self.me)
                // SAFETY: as in `write_own`.
                .filter(|&word| unsafe { arena_word(page, word).read_volatile() } != 0)
                .count();
            violation(format_args!(
                "thread {} wrote {expected:#x} to arena page {page} {when} and read back \
                 {value:#x} ({others} other words of the page are not zero)",
                self.me
            ));
        }
    }

    fn read_other(&mut self) {
        let page = self.random.below(ARENA_PAGES as u64) as usize;
        let word = self.random.below(THREADS.load(Ordering::Relaxed) as u64) as usize;
        // SAFETY: as in `write_own`.
        let value = unsafe { arena_word(page, word).read_volatile() };
        check_tag(page, word, value, "a thread");
        self.check_own(page, "earlier");
    }

    /// A few arena pages from a random one on.
    fn some_pages(&mut self) -> (usize, usize) {
        let first = self.random.below(ARENA_PAGES as u64) as usize;
        let count = (1 + self.random.below(8) as usize).min(ARENA_PAGES - first);
        (first, count)
    }

    fn discard_or_remap(&mut self, remap: bool) {
        let (first, count) = if remap {
            (self.random.below(ARENA_PAGES as u64) as usize, 1)
        } else {
            self.some_pages()
        };
        let pages = first..first + count;
        for page in pages.clone() {
            ZEROINGS_STARTED[page].fetch_add(1, Ordering::AcqRel);
        }
        let start = arena_word(first, 0).cast::<u8>();
        let len = count * PAGE_SIZE as usize;
        let flags = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
        let result = if remap {
            // SAFETY: the arena's words are only read and written through
            // volatile accesses that accept a zero page at any time.
            unsafe { sys::mmap(start as u64, len, Prot::READ | Prot::WRITE, flags) }.map(drop)
        } else {
            // SAFETY: as above, a discarded page reads as zero.
            unsafe { sys::madvise(start, len, advice::DONTNEED) }
        };
        for page in pages {
            ZEROINGS_FINISHED[page].fetch_add(1, Ordering::AcqRel);
        }
        if let Err(error) = result {
            violation(format_args!("discard or remap failed: {error:?}"));
        }
    }

    fn page_out(&mut self) {
        let (first, count) = self.some_pages();
        let start = arena_word(first, 0).cast::<u8>();
        // SAFETY: PAGEOUT keeps every page's contents.
        match unsafe { sys::madvise(start, count * PAGE_SIZE as usize, advice::PAGEOUT) } {
            Ok(()) | Err(Errno::NoSpc) => {}
            Err(error) => violation(format_args!("pageout failed: {error:?}")),
        }
    }

    /// Maps, writes, protects, reads and unmaps this thread's scratch page.
    fn scratch_cycle(&mut self) {
        let page = scratch(self.me);
        let value = tag(0, self.me, self.seq);
        let result = map_scratch(self.me).and_then(|()| {
            // SAFETY: this thread's own scratch page, mapped read-write.
            unsafe { page.cast::<u64>().write_volatile(value) };
            // SAFETY: only this thread uses the page; it only reads it
            // while read-only.
            unsafe { sys::mprotect(page, PAGE_SIZE as usize, Prot::READ) }?;
            // SAFETY: mapped, readable.
            let read = unsafe { page.cast::<u64>().read_volatile() };
            if read != value {
                violation(format_args!(
                    "thread {} read {read:#x} from its protected scratch page, wrote {value:#x}",
                    self.me
                ));
            }
            // SAFETY: as above.
            unsafe { sys::mprotect(page, PAGE_SIZE as usize, Prot::READ | Prot::WRITE) }?;
            // SAFETY: nothing uses the page after this.
            unsafe { sys::munmap(page, PAGE_SIZE as usize) }
        });
        if let Err(error) = result {
            violation(format_args!("scratch cycle failed: {error:?}"));
        }
    }

    fn step(&mut self) {
        match self.random.below(100) {
            0..40 => {
                let page = self.random.below(ARENA_PAGES as u64) as usize;
                self.write_own(page);
            }
            40..70 => self.read_other(),
            70..80 => self.discard_or_remap(false),
            80..85 => self.discard_or_remap(true),
            85..92 => self.page_out(),
            _ => self.scratch_cycle(),
        }
    }
}

fn map_scratch(thread: usize) -> Result<(), Errno> {
    // SAFETY: the thread's own scratch page; nothing refers to it.
    unsafe {
        sys::mmap(
            scratch(thread) as u64,
            PAGE_SIZE as usize,
            Prot::READ | Prot::WRITE,
            MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED,
        )
    }
    .map(drop)
}

/// Waits until all threads have arrived at meeting point `point`.
fn meet(point: u64) {
    let threads = THREADS.load(Ordering::Relaxed) as u64;
    ARRIVED.fetch_add(1, Ordering::AcqRel);
    while ARRIVED.load(Ordering::Acquire) < point * threads && !STOP.load(Ordering::Relaxed) {
        let _ = sys::yield_now();
    }
}

/// All threads map their scratch pages, write them at once, each reads its
/// neighbour's, and all unmap theirs (the table goes with the last). At
/// every [`FORK_EVERY`]th meeting the main thread forks meanwhile, and then
/// every thread writes its word of every arena page in the same order, so
/// that several CPUs break copy-on-write of one page at the same moment.
fn meeting(worker: &mut Worker, meeting: u64) {
    let threads = THREADS.load(Ordering::Relaxed);
    let value = tag(1, worker.me, meeting);
    meet(4 * meeting - 3);
    let mapped = map_scratch(worker.me);
    if let Err(error) = mapped {
        violation(format_args!("meeting scratch mmap failed: {error:?}"));
    }
    // The mmaps take turns (each holds the address space exclusive); the
    // first touches, which create the table, should not: they start
    // together, after all threads have mapped.
    meet(4 * meeting - 2);
    if mapped.is_ok() {
        // SAFETY: this thread's scratch page, mapped read-write.
        unsafe { scratch(worker.me).cast::<u64>().write_volatile(value) };
    }
    meet(4 * meeting - 1);
    let neighbour = (worker.me + 1) % threads;
    // SAFETY: every thread mapped its page before the meeting point, and
    // none unmaps it before the next one.
    let read = unsafe { scratch(neighbour).cast::<u64>().read_volatile() };
    if mapped.is_ok() && read != tag(1, neighbour, meeting) {
        violation(format_args!(
            "thread {} read {read:#x} from thread {neighbour}'s scratch page at meeting {meeting}",
            worker.me
        ));
    }
    let forking = meeting.is_multiple_of(FORK_EVERY);
    let child = (forking && worker.me == 0).then(|| start_child(meeting));
    meet(4 * meeting);
    // SAFETY: no thread reads the scratch pages before the next meeting.
    let _ = unsafe { sys::munmap(scratch(worker.me), PAGE_SIZE as usize) };
    if forking {
        for page in 0..ARENA_PAGES {
            worker.write_own(page);
        }
    }
    if let Some(child) = child {
        check_child(child);
    }
}

/// The child of a fork: checks every arena word, writes its own tag into
/// some pages and reads it back. Returns its exit status.
fn child(seed: u64) -> i32 {
    let mut bad = 0;
    for page in 0..ARENA_PAGES {
        for word in 0..THREADS.load(Ordering::Relaxed) {
            // SAFETY: the child's copy of the arena is mapped read-write.
            let value = unsafe { arena_word(page, word).read_volatile() };
            let valid = value == 0 || (tag_page(value) == page && tag_owner(value) == word);
            bad += u32::from(!valid);
        }
    }
    let mut random = Rng(seed | 1);
    for _ in 0..8 {
        let page = random.below(ARENA_PAGES as u64) as usize;
        let value = tag(page, CHILD_WORD, seed);
        // SAFETY: as above; the write breaks copy-on-write in the child.
        unsafe { arena_word(page, CHILD_WORD).write_volatile(value) };
        // SAFETY: as above.
        bad += u32::from(unsafe { arena_word(page, CHILD_WORD).read_volatile() } != value);
    }
    i32::from(bad != 0)
}

/// Forks; the child runs [`child`] and exits. Returns the child's pid.
fn start_child(seed: u64) -> Option<u64> {
    // SAFETY: the child runs only `child`, on its copy of the memory.
    match unsafe { sys::fork() } {
        Ok(0) => sys::exit(child(seed)),
        Ok(pid) => {
            FORKS.fetch_add(1, Ordering::Relaxed);
            Some(pid)
        }
        Err(error) => {
            violation(format_args!("fork failed: {error:?}"));
            None
        }
    }
}

/// Waits for the child `pid` and checks that it saw only its own and the
/// parent's data, and that the parent never sees the child's.
fn check_child(pid: Option<u64>) {
    if let Some(pid) = pid {
        match sys::wait(pid) {
            Ok(0) => {}
            status => violation(format_args!("a fork child saw wrong data: {status:?}")),
        }
    }
    for page in 0..ARENA_PAGES {
        // SAFETY: the arena is mapped read-write.
        let value = unsafe { arena_word(page, CHILD_WORD).read_volatile() };
        check_tag(page, CHILD_WORD, value, "the parent");
    }
}

fn run(me: usize, cpus: u64, ops: u64, seed: u64) -> u64 {
    let _ = sys::set_affinity(me as u64 % cpus);
    let mut worker = Worker {
        me,
        random: Rng(seed ^ (me as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
        seq: 0,
        written: [(0, 0); ARENA_PAGES],
    };
    let mut last_progress = sys::clock().unwrap_or(0);
    for op in 1..=ops {
        worker.step();
        if !op.is_multiple_of(MEET_EVERY) {
            continue;
        }
        meeting(&mut worker, op / MEET_EVERY);
        let now = sys::clock().unwrap_or(last_progress);
        if me == 0 && now - last_progress >= PROGRESS_NS && op < ops {
            last_progress = now;
            println!(
                "vmstress: {op}/{ops} operations of thread 0, {} violations so far",
                VIOLATIONS.load(Ordering::Relaxed)
            );
        }
    }
    0
}

fn main(args: &str) -> i32 {
    let mut words = args.split_whitespace();
    let (Some(Ok(ops)), Some(Ok(threads))) = (
        words.next().map(str::parse::<u64>),
        words.next().map(str::parse::<usize>),
    ) else {
        println!("usage: vmstress <ops> <threads 2-16> [seed]");
        return 2;
    };
    let seed = words.next().and_then(|word| word.parse().ok()).unwrap_or(1);
    if !(2..=MAX_THREADS).contains(&threads) {
        println!("usage: vmstress <ops> <threads 2-16> [seed]");
        return 2;
    }
    THREADS.store(threads, Ordering::Relaxed);
    // SAFETY: a fixed mapping in a range this program owns and nothing
    // refers to yet.
    let arena = unsafe {
        sys::mmap(
            ARENA,
            ARENA_PAGES * PAGE_SIZE as usize,
            Prot::READ | Prot::WRITE,
            MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED,
        )
    };
    if arena.is_err() {
        println!("vmstress: cannot map the arena");
        return 2;
    }
    let per_thread = ops / threads as u64;
    let cpus = online_cpus();
    let mut handles = [const { None }; MAX_THREADS];
    for (me, handle) in handles.iter_mut().enumerate().take(threads).skip(1) {
        *handle = thread::spawn(move || run(me, cpus, per_thread, seed)).ok();
        if handle.is_none() {
            println!("vmstress: cannot start thread {me}");
            STOP.store(true, Ordering::Relaxed);
            return 2;
        }
    }
    run(0, cpus, per_thread, seed);
    for handle in handles.into_iter().flatten() {
        let _ = handle.join();
    }
    let violations = VIOLATIONS.load(Ordering::Relaxed);
    println!(
        "vmstress: ops={} threads={threads} forks={} meets={} seed={seed} violations={violations}",
        per_thread * threads as u64,
        FORKS.load(Ordering::Relaxed),
        per_thread / MEET_EVERY,
    );
    i32::from(violations != 0)
}
