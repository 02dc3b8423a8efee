//! System-call fuzzer: hostile arguments from several threads at once.
//!
//! `fuzz <seed> <calls> <threads>`: each thread (pinned to CPU `t %
//! threads`) makes `calls / threads` system calls drawn from a seeded
//! generator: random numbers (unknown ones included), and arguments from a
//! pool of hostile values (kernel and non-canonical addresses, unaligned
//! pointers, huge and wrapping lengths, unknown flags) mixed with addresses
//! in a shared 64 MiB *playground* that the threads map, unmap, protect,
//! discard and page out under each other's feet.
//!
//! What must not happen: a kernel panic or hang (the run would end without
//! this program's summary; the kernel's crash report names the last system
//! call on each CPU), or a result the kernel must never give: an unknown
//! number not refused with `ENOSYS`, a negative result that is no errno, a
//! write from or a thread at a kernel address accepted. Then the thread
//! prints `fuzz: FAIL` with the seed and its last calls, and the program
//! exits 1. What may happen: any error code. Calls that would end the
//! program (exit, running garbage as a thread) are only made with
//! arguments the kernel must refuse. A progress line every 10 000 calls
//! per thread names the seed and the last call. A failure replays with
//! `cargo run -- fuzz --seed <seed> --calls <calls> --threads <threads>`.

#![no_std]
#![no_main]

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use user::{
    Errno,
    abi::{MapFlags, OWN_CALLS, PAGE_SIZE, Prot, Syscall, USER_END},
    println,
    random::Rng,
    raw::syscall6,
    sys, thread,
};

user::entry!(main);

const PLAYGROUND: u64 = 0x4000_0000_0000;
const PLAYGROUND_SIZE: u64 = 64 << 20;
const MAX_THREADS: usize = 8;

static ERRORS: AtomicU64 = AtomicU64::new(0);
static SUCCESSES: AtomicU64 = AtomicU64::new(0);
/// Set by the first thread that sees a result the kernel must never give;
/// the others stop.
static FAILED: AtomicBool = AtomicBool::new(false);

/// How many of its last calls a thread shows when it finds a failure.
const HISTORY: usize = 8;

/// One call made: its number, arguments and raw result.
#[derive(Clone, Copy, Default)]
struct Call {
    index: u64,
    number: u64,
    args: [u64; 4],
    result: i64,
}

/// An address: hostile most of the time, in the playground otherwise.
fn address(rng: &mut Rng) -> u64 {
    match rng.below(10) {
        0 => 0xffff_8000_0000_0000 + rng.below(1 << 30),
        1 => USER_END + rng.below(1 << 20),
        2 => rng.below(PAGE_SIZE),
        3 => rng.next_u64(),
        4 => (PLAYGROUND + rng.below(PLAYGROUND_SIZE)) | 1,
        _ => PLAYGROUND + rng.below(PLAYGROUND_SIZE / PAGE_SIZE) * PAGE_SIZE,
    }
}

/// A length: small, page-sized, huge or wrapping.
fn length(rng: &mut Rng) -> u64 {
    match rng.below(6) {
        0 => 0,
        1 => rng.below(64),
        2 => (1 + rng.below(16)) * PAGE_SIZE,
        3 => u64::MAX - rng.below(PAGE_SIZE),
        4 => 1 << (20 + rng.below(30)),
        _ => rng.below(3 * PAGE_SIZE),
    }
}

/// Flags and protections: valid ones, and unknown bits.
fn flags(rng: &mut Rng) -> u64 {
    match rng.below(4) {
        0 => rng.next_u64(),
        1 => rng.below(8),
        2 => {
            (MapFlags::PRIVATE | MapFlags::ANONYMOUS).bits()
                | (rng.below(2) * MapFlags::FIXED.bits())
        }
        _ => (Prot::READ | Prot::WRITE).bits(),
    }
}

/// A kernel address that no call may accept as a user buffer or entry.
const KERNEL_ADDRESS: u64 = 0xffff_8000_0000_0000;

/// One random call; `None` if it was skipped (it would end or block the
/// program).
fn one_call(rng: &mut Rng, index: u64) -> Option<Call> {
    let count = Syscall::ALL.len() as u64;
    let number = match rng.below(count + 1) {
        // Any number up to a little past this kernel's own: mostly Linux
        // calls this kernel does not have, to be refused with ENOSYS.
        n if n == count => rng.below(OWN_CALLS + 64),
        n => Syscall::ALL[n as usize] as u64,
    };
    let args = [address(rng), length(rng), flags(rng), flags(rng)];
    let args = match Syscall::from_number(number) {
        // Would end the program, block it indefinitely or (fork) run a
        // second fuzzer: skip, or only with arguments the kernel refuses.
        // (`clone` would start a thread or process on random registers;
        // `set_tid_address` would have the kernel write at a random address
        // when the thread ends.)
        Some(
            Syscall::Exit
            | Syscall::ExitGroup
            | Syscall::Wait4
            | Syscall::Fork
            | Syscall::Clone
            | Syscall::SetTidAddress,
        ) => {
            return None;
        }
        // A wait could last for ever: only words the kernel must refuse.
        Some(Syscall::Futex) => [KERNEL_ADDRESS | args[0], args[1], args[2], 0],
        Some(Syscall::ClockNanosleep) => [args[1], args[2], KERNEL_ADDRESS | args[0], 0],
        Some(Syscall::Writev) => [rng.below(4), KERNEL_ADDRESS | args[0], args[1], 0],
        // Random bytes in the playground could ask for years of sleep: only
        // requests the kernel must refuse.
        Some(Syscall::Nanosleep) => [KERNEL_ADDRESS | args[0], args[0], 0, 0],
        // Only buffers the kernel must refuse: a successful write of random
        // memory would flood the console.
        Some(Syscall::Write) => [rng.below(4), KERNEL_ADDRESS | args[0], args[1], 0],
        Some(Syscall::SchedSetaffinity) => [rng.below(2) * args[1], rng.below(64), args[0], 0],
        Some(Syscall::ClockGettime) => [rng.below(12), args[0], 0, 0],
        // Keep spawns to names that do not exist (a real program would
        // outlive the fuzzer as a zombie nobody waits for).
        Some(Syscall::Spawn) => [args[0], args[1].min(64), args[2], args[3]],
        _ => args,
    };
    // SAFETY: every address the call may write lies in the playground or
    // is refused by the kernel; the playground holds nothing this program
    // relies on.
    // The fifth and sixth arguments are `mmap`'s file descriptor and offset,
    // as for an anonymous mapping.
    let result = unsafe { syscall6(number, args[0], args[1], args[2], args[3], u64::MAX, 0) };
    if result < 0 {
        ERRORS.fetch_add(1, Ordering::Relaxed);
    } else {
        SUCCESSES.fetch_add(1, Ordering::Relaxed);
    }
    Some(Call {
        index,
        number,
        args,
        result,
    })
}

/// Why `call`'s result is one the kernel must never give, if it is.
fn violation(call: &Call) -> Option<&'static str> {
    if call.result < 0 && Errno::from_return(call.result).is_none() {
        return Some("a negative result that is no errno");
    }
    match Syscall::from_number(call.number) {
        None if call.result != -(Errno::NoSys as i64) => {
            Some("an unknown system call not refused with ENOSYS")
        }
        Some(Syscall::Write | Syscall::Writev) if call.result >= 0 => {
            Some("a write from kernel memory accepted")
        }
        Some(Syscall::Futex | Syscall::Nanosleep | Syscall::ClockNanosleep) if call.result >= 0 => {
            Some("a wait on kernel memory accepted")
        }
        _ => None,
    }
}

fn print_call(call: &Call) {
    println!(
        "fuzz:   call {}: {} {:x?} -> {}",
        call.index, call.number, call.args, call.result
    );
}

/// Makes `calls` calls; returns 1 if one broke a rule (after printing the
/// seed and the last calls), else 0.
fn run(seed: u64, thread: usize, calls: u64) -> u64 {
    let mut rng = Rng(seed ^ (thread as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut history = [Call::default(); HISTORY];
    let mut made = 0;
    for index in 1..=calls {
        if FAILED.load(Ordering::Relaxed) {
            return 0;
        }
        let Some(call) = one_call(&mut rng, index) else {
            continue;
        };
        history[made % HISTORY] = call;
        made += 1;
        if let Some(why) = violation(&call) {
            FAILED.store(true, Ordering::Relaxed);
            println!("fuzz: FAIL seed {seed} thread {thread} call {index}: {why}");
            println!("fuzz: the last calls of thread {thread} (number, arguments -> result):");
            for back in (1..=made.min(HISTORY)).rev() {
                print_call(&history[(made - back) % HISTORY]);
            }
            return 1;
        }
        if index % 10_000 == 0 {
            println!(
                "fuzz: seed {seed} thread {thread} call {index}: last {} {:x?}",
                call.number, call.args
            );
        }
    }
    0
}

fn main(args: &str) -> i32 {
    let mut words = args.split_whitespace();
    let seed: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(1);
    let calls: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(100_000);
    let threads: usize = words
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or(4)
        .clamp(1, MAX_THREADS);
    println!("fuzz: seed {seed}, {calls} calls over {threads} threads");
    let mut handles = [const { None }; MAX_THREADS];
    for (index, handle) in handles.iter_mut().enumerate().take(threads) {
        let per_thread = calls / threads as u64;
        *handle = thread::spawn(move || {
            let _ = sys::set_affinity(index as u64 % threads as u64);
            run(seed, index, per_thread)
        })
        .ok();
    }
    let mut failures = 0;
    for (index, handle) in handles.into_iter().enumerate() {
        let Some(handle) = handle else {
            continue;
        };
        match handle.join() {
            Ok(0) => {}
            Ok(_) => failures += 1,
            Err(error) => {
                println!("fuzz: FAIL seed {seed}: joining thread {index}: {error:?}");
                failures += 1;
            }
        }
    }
    if failures > 0 {
        println!("fuzz: FAIL seed {seed}: {failures} threads failed");
        return 1;
    }
    println!(
        "fuzz: done, seed {seed}: {} calls returned a value, {} an error",
        SUCCESSES.load(Ordering::Relaxed),
        ERRORS.load(Ordering::Relaxed)
    );
    0
}
