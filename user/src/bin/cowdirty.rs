//! A Dirty-COW-style race (CVE-2016-5195 raced a copy-on-write fault
//! against `madvise(DONTNEED)`):
//! `cowdirty <rounds> [<writer cpu> <discarder cpu> [kernel]]`.
//!
//! Each round, with a private page `P` holding the round's "before" value:
//!
//! 1. the main thread `fork`s; the child reads its copy of `P`, keeps
//!    reading it while the parent races (yielding in between), then writes
//!    its own value and reads it back, and exits with 0 only if every read
//!    saw exactly what it should: the "before" value, then its own;
//! 2. meanwhile, in the parent, the main thread (on one CPU) writes the
//!    round's "after" value to `P`, which takes a copy-on-write fault while
//!    the page is shared with the child, at the same moment as a second
//!    thread (on another CPU) discards `P` with `madvise(DONTNEED)`;
//! 3. the parent then reads `P`: it must hold "after" (the discard came
//!    first, the write faulted in a fresh page) or 0 (the write came first
//!    and was discarded), never "before" and never the child's value.
//!
//! A kernel that let the write land in the frame it shares with the child,
//! or the child's write in the parent's, fails one of those checks.
//!
//! With `kernel`, the parent's write in step 2 is the kernel's: a system
//! call (`tlb_stats`) fills the page's second word, which the child checks
//! too. That is the path Dirty COW itself went through (the kernel writing
//! a process's page for it), and the one `vm.bug=kernel-write-skips-cow`
//! breaks; the parent then checks only that its first word is still its
//! own (the "before" value, or 0 after the discard). Every other round of
//! such a run writes before the discarder starts, so that both orders
//! occur.
//!
//! Prints `cowdirty: rounds=N violations=V` and exits with 0 when `V = 0`,
//! 1 otherwise, 2 on bad arguments.

#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering};

use user::{
    abi::{PAGE_SIZE, Prot, advice},
    println, sys, thread,
};

user::entry!(main);

/// Rounds between progress lines: a long run shows it is alive (the runner
/// takes a silent emulator for a hung one).
const PROGRESS_EVERY: u64 = 1000;

/// How many times the child reads its copy while the parent races.
const CHILD_READS: u32 = 16;

/// The values of round `round`, distinct across rounds and roles.
fn before(round: u64) -> u64 {
    round << 2 | 1
}
fn after(round: u64) -> u64 {
    round << 2 | 2
}
fn childs(round: u64) -> u64 {
    round << 2 | 3
}

/// The parent's threads' rendezvous, on the `MAP_SHARED` page (the
/// children's copies of private memory must not be what they use).
#[repr(C)]
struct Control {
    /// The round the discarder must discard `P` in (0: none yet).
    discard_round: AtomicU64,
    /// The last round the discarder has discarded in.
    discarded_round: AtomicU64,
    stop: AtomicU64,
}

/// Who makes the parent's write of each round.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Writer {
    /// The parent's own store to the first word.
    Store,
    /// The kernel, filling the second word for a system call.
    Kernel,
}

/// `<rounds> [<writer cpu> <discarder cpu> [kernel]]`, or `None` if the
/// words are not that.
fn parse_arguments(args: &str) -> Option<(u64, u64, u64, Writer)> {
    let mut words = args.split_whitespace();
    let rounds = words.next()?.parse().ok()?;
    let (writer_cpu, discarder_cpu) = match (words.next(), words.next()) {
        (None, None) => return Some((rounds, 0, 1, Writer::Store)),
        (Some(writer), Some(discarder)) => (writer.parse().ok()?, discarder.parse().ok()?),
        _ => return None,
    };
    let writer = match words.next() {
        None => Writer::Store,
        Some("kernel") => Writer::Kernel,
        Some(_) => return None,
    };
    words
        .next()
        .is_none()
        .then_some((rounds, writer_cpu, discarder_cpu, writer))
}

fn main(args: &str) -> i32 {
    let Some((rounds, writer_cpu, discarder_cpu, writer)) = parse_arguments(args) else {
        println!("usage: cowdirty <rounds> [<writer cpu> <discarder cpu> [kernel]], got '{args}'");
        return 2;
    };
    let (Ok(control_page), Ok(page)) = (
        sys::mmap_shared(PAGE_SIZE as usize, Prot::READ | Prot::WRITE),
        sys::mmap_anonymous(PAGE_SIZE as usize, Prot::READ | Prot::WRITE),
    ) else {
        println!("cowdirty: mmap failed");
        return 2;
    };
    // Fresh, page-aligned, zero-filled pages that stay mapped (`P` may be
    // discarded, which leaves it mapped and zero); zero is a valid value.
    // SAFETY: valid, aligned, initialised memory that lives for good.
    let control: &'static Control = unsafe { &*control_page.cast::<Control>() };
    // SAFETY: as above.
    let p: &'static AtomicU64 = unsafe { &*page.cast::<AtomicU64>() };
    // The second word is written by the kernel in `kernel` rounds; it is
    // read through a raw pointer, because the system call needs it as a
    // `&mut [u8]` while no reference to it is alive.
    // SAFETY: inside the page mapped above, aligned for a u64.
    let second_word: *mut u64 = unsafe { page.cast::<u64>().add(1) };
    let page_address = page as u64;

    let discarder = thread::spawn(move || {
        let _ = sys::set_affinity(discarder_cpu);
        let mut done = 0;
        while control.stop.load(Ordering::Acquire) == 0 {
            let round = control.discard_round.load(Ordering::Acquire);
            if round == done {
                let _ = sys::yield_now();
                continue;
            }
            // SAFETY: `P` holds only a counter; both threads expect it to
            // be zeroed at any time.
            let _ = unsafe {
                sys::madvise(
                    page_address as *mut u8,
                    PAGE_SIZE as usize,
                    advice::DONTNEED,
                )
            };
            done = round;
            control.discarded_round.store(round, Ordering::Release);
        }
        0
    });
    let Ok(discarder) = discarder else {
        println!("cowdirty: spawning the discarder failed");
        return 2;
    };
    let _ = sys::set_affinity(writer_cpu);

    let mut violations = 0u64;
    for round in 1..=rounds {
        if round % PROGRESS_EVERY == 0 && round < rounds {
            println!("cowdirty: {round}/{rounds} rounds, {violations} violations so far");
        }
        p.store(before(round), Ordering::Relaxed);
        // SAFETY: `second_word` points into `P`, which stays mapped; no
        // reference to it exists.
        unsafe { second_word.write_volatile(before(round)) };
        // SAFETY: the child touches only `P` and its own stack; the
        // discarder (absent in the child) uses no memory the child needs.
        let child = match unsafe { sys::fork() } {
            Ok(0) => sys::exit(child_checks(p, second_word, round)),
            Ok(child) => child,
            Err(error) => {
                report(&mut violations, round, "fork failed", error as u64);
                continue;
            }
        };
        // The discard usually wins the race against the kernel's write (a
        // system call takes longer than a store), so in `kernel` runs every
        // other round writes first and lets the discarder go after: then
        // the write always meets the frame the child still maps.
        let write_first = writer == Writer::Kernel && round % 2 == 0;
        if !write_first {
            control.discard_round.store(round, Ordering::Release);
        }
        let expected = match writer {
            Writer::Store => {
                p.store(after(round), Ordering::Relaxed);
                after(round)
            }
            Writer::Kernel => {
                // SAFETY: the second word, 8 bytes inside `P`, to which no
                // reference exists while the kernel fills it.
                let buffer =
                    unsafe { core::slice::from_raw_parts_mut(second_word.cast::<u8>(), 8) };
                if let Err(error) = sys::tlb_stats(buffer) {
                    report(&mut violations, round, "tlb_stats failed", error as u64);
                }
                // The kernel wrote the second word only: the first is
                // still this round's "before" value (or 0 if discarded).
                before(round)
            }
        };
        if write_first {
            control.discard_round.store(round, Ordering::Release);
        }
        while control.discarded_round.load(Ordering::Acquire) != round {
            let _ = sys::yield_now();
        }
        let seen = p.load(Ordering::Relaxed);
        if seen != expected && seen != 0 {
            report(
                &mut violations,
                round,
                "the parent's page holds neither its write nor zero",
                seen,
            );
        }
        match sys::wait(child) {
            Ok(0) => {}
            Ok(code) => report(
                &mut violations,
                round,
                "the child's copy changed (its exit code)",
                code as u64,
            ),
            Err(error) => report(&mut violations, round, "wait failed", error as u64),
        }
    }
    control.stop.store(1, Ordering::Release);
    let _ = discarder.join();
    println!("cowdirty: rounds={rounds} violations={violations}");
    i32::from(violations > 0)
}

/// Counts one violation in `violations`, printing the first few.
fn report(violations: &mut u64, round: u64, what: &str, value: u64) {
    if *violations < 5 {
        println!("cowdirty: round {round}: {what}: {value:#x}");
    }
    *violations += 1;
}

/// The child's side of round `round`: 0 if its copy of `P` (both words)
/// held the "before" value until it wrote its own, and then its own; 1
/// otherwise.
fn child_checks(p: &AtomicU64, second_word: *const u64, round: u64) -> i32 {
    for _ in 0..CHILD_READS {
        // SAFETY: the second word of `P`, mapped in the child too.
        let second = unsafe { second_word.read_volatile() };
        if p.load(Ordering::Relaxed) != before(round) || second != before(round) {
            return 1;
        }
        let _ = sys::yield_now();
    }
    p.store(childs(round), Ordering::Relaxed);
    i32::from(p.load(Ordering::Relaxed) != childs(round))
}
