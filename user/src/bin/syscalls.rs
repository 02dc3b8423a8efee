//! Every system call used the way it is meant to be, with its result
//! checked: the success-path counterpart of `syscall_errors`.
//!
//! Prints `PASS <case>` or `FAIL <case>: <what>` per case and exits with the
//! number of failures.

#![no_std]
#![no_main]

use user::{
    abi::{PAGE_SIZE, Prot, advice},
    println, sys, thread,
};

user::entry!(main);

type Outcome = Result<(), &'static str>;

/// A named case.
type Case = (&'static str, fn() -> Outcome);

fn check(condition: bool, failure: &'static str) -> Outcome {
    if condition { Ok(()) } else { Err(failure) }
}

const CASES: &[Case] = &[
    ("write", write),
    ("getpid", getpid),
    ("gettid", gettid),
    ("clock_and_sleep", clock_and_sleep),
    ("yield", yield_),
    ("affinity_and_cpu_id", affinity_and_cpu_id),
    ("mmap_munmap", mmap_munmap),
    ("mprotect", mprotect),
    ("madvise_dontneed", madvise_dontneed),
    ("madvise_pageout", madvise_pageout),
    ("threads", threads),
    ("spawn_wait", spawn_wait),
    ("wait_for_a_killed_child", wait_for_a_killed_child),
    ("tlb_stats", tlb_stats),
];

fn main(_args: &str) -> i32 {
    let mut failures = 0;
    for (name, case) in CASES {
        match case() {
            Ok(()) => println!("PASS {name}"),
            Err(what) => {
                println!("FAIL {name}: {what}");
                failures += 1;
            }
        }
    }
    println!("syscalls: {} cases, {failures} failed", CASES.len());
    failures
}

fn write() -> Outcome {
    check(
        sys::write(b"syscalls: write works\n") == Ok(22),
        "write did not report 22 bytes",
    )
}

fn getpid() -> Outcome {
    check(sys::getpid().is_ok_and(|pid| pid > 0), "no pid")
}

fn gettid() -> Outcome {
    let mine = sys::gettid().map_err(|_| "gettid failed")?;
    let handle = thread::spawn(|| sys::gettid().unwrap_or(0)).map_err(|_| "thread spawn failed")?;
    let theirs = handle.join().map_err(|_| "join failed")?;
    check(
        mine > 0 && theirs > 0 && mine != theirs,
        "two threads without distinct ids",
    )
}

fn clock_and_sleep() -> Outcome {
    let before = sys::clock().map_err(|_| "clock failed")?;
    sys::sleep(10_000_000).map_err(|_| "sleep failed")?;
    let after = sys::clock().map_err(|_| "clock failed")?;
    check(after >= before + 10_000_000, "slept less than 10 ms")
}

fn yield_() -> Outcome {
    check(sys::yield_now().is_ok(), "yield failed")
}

fn affinity_and_cpu_id() -> Outcome {
    sys::set_affinity(0).map_err(|_| "set_affinity(0) failed")?;
    check(sys::cpu_id() == Ok(0), "not on CPU 0 after set_affinity(0)")?;
    check(
        sys::set_affinity(user::abi::ANY_CPU).is_ok(),
        "set_affinity(ANY_CPU) failed",
    )
}

/// A fresh read-write mapping of `pages` pages, as a byte slice.
fn map(pages: usize) -> Result<&'static mut [u8], &'static str> {
    let len = pages * PAGE_SIZE as usize;
    let start = sys::mmap_anonymous(len, Prot::READ | Prot::WRITE).map_err(|_| "mmap failed")?;
    // SAFETY: a fresh mapping of `len` bytes that nothing else uses.
    Ok(unsafe { core::slice::from_raw_parts_mut(start, len) })
}

fn mmap_munmap() -> Outcome {
    let memory = map(4)?;
    check(
        memory.iter().all(|&byte| byte == 0),
        "fresh memory is not zero",
    )?;
    memory.fill(0x5A);
    check(
        memory.iter().all(|&byte| byte == 0x5A),
        "memory did not keep its contents",
    )?;
    // SAFETY: the mapping is not used after this.
    check(
        unsafe { sys::munmap(memory.as_mut_ptr(), memory.len()) }.is_ok(),
        "munmap failed",
    )
}

fn mprotect() -> Outcome {
    let memory = map(1)?;
    memory[0] = 7;
    // SAFETY: only the protection changes; the page is only read meanwhile.
    unsafe { sys::mprotect(memory.as_mut_ptr(), memory.len(), Prot::READ) }
        .map_err(|_| "mprotect(READ) failed")?;
    check(memory[0] == 7, "contents changed under mprotect")?;
    // SAFETY: as above.
    unsafe { sys::mprotect(memory.as_mut_ptr(), memory.len(), Prot::READ | Prot::WRITE) }
        .map_err(|_| "mprotect(RW) failed")?;
    memory[0] = 8;
    check(memory[0] == 8, "page not writable again")
}

fn madvise_dontneed() -> Outcome {
    let memory = map(2)?;
    memory.fill(0xEE);
    // SAFETY: the program accepts that the contents become zero.
    unsafe { sys::madvise(memory.as_mut_ptr(), memory.len(), advice::DONTNEED) }
        .map_err(|_| "madvise failed")?;
    check(
        memory.iter().all(|&byte| byte == 0),
        "DONTNEED left old contents",
    )
}

fn madvise_pageout() -> Outcome {
    let memory = map(8)?;
    for (index, byte) in memory.iter_mut().enumerate() {
        *byte = (index % 253) as u8;
    }
    // SAFETY: PAGEOUT keeps the contents; it only moves them to swap.
    unsafe { sys::madvise(memory.as_mut_ptr(), memory.len(), advice::PAGEOUT) }
        .map_err(|_| "madvise failed")?;
    check(
        memory
            .iter()
            .enumerate()
            .all(|(index, &byte)| byte == (index % 253) as u8),
        "contents lost in swap",
    )
}

fn threads() -> Outcome {
    let handle = thread::spawn(|| 40 + 2).map_err(|_| "thread spawn failed")?;
    check(
        handle.join() == Ok(42),
        "join did not return the thread's value",
    )
}

fn spawn_wait() -> Outcome {
    let child = sys::spawn("exit_code", "5").map_err(|_| "spawn failed")?;
    check(
        sys::wait(child) == Ok(5),
        "wait did not return the child's exit code",
    )
}

/// `wait4` reports a child killed for a bad access as killed by `SIGSEGV`,
/// which a shell shows as 139.
fn wait_for_a_killed_child() -> Outcome {
    let child = sys::spawn("fault", "null").map_err(|_| "spawn failed")?;
    check(
        sys::wait(child) == Ok(139),
        "wait did not report the child killed by SIGSEGV",
    )
}

fn tlb_stats() -> Outcome {
    let mut buffer = [0u8; 512];
    let bytes = sys::tlb_stats(&mut buffer).map_err(|_| "tlb_stats failed")?;
    check(
        bytes > 0 && bytes % 8 == 0,
        "tlb_stats returned no whole counters",
    )
}
