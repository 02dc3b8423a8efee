//! Every system call used the way it is meant to be, with its result
//! checked: the success-path counterpart of `syscall_errors`.
//!
//! Prints `PASS <case>` or `FAIL <case>: <what>` per case and exits with the
//! number of failures.

#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU32, Ordering};

use user::{
    abi::{self, PAGE_SIZE, Prot, Syscall, Timespec, advice, arch_prctl, identity},
    println,
    raw::{syscall1, syscall2, syscall3, syscall4},
    sys, thread,
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
    ("fs_base_per_thread", fs_base_per_thread),
    ("sse_registers_per_thread", sse_registers_per_thread),
    ("futex_wait_wake", futex_wait_wake),
    ("futex_requeue", futex_requeue),
    ("brk", brk),
    ("uname", uname),
    ("getrandom", getrandom),
    ("writev", writev),
    ("sched_getaffinity", sched_getaffinity),
    ("clock_nanosleep_absolute", clock_nanosleep_absolute),
    ("console_is_a_terminal", console_is_a_terminal),
    ("wait_for_any_child", wait_for_any_child),
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

/// `arch_prctl(ARCH_SET_FS)`: `fs:0` reads where the base points, each
/// thread keeps its own base across switches (both run on CPU 0 and yield
/// to each other), and a thread inherits its creator's (Linux's `clone`
/// without `CLONE_SETTLS`).
fn fs_base_per_thread() -> Outcome {
    static MINE: [u64; 1] = [0x1111];
    static THEIRS: [u64; 1] = [0x2222];
    static ARRIVED: AtomicU32 = AtomicU32::new(0);
    set_fs(MINE.as_ptr() as u64)?;
    sys::set_affinity(0).map_err(|_| "set_affinity(0) failed")?;
    let handle = thread::spawn(|| {
        let inherited = read_fs_word();
        if set_fs(THEIRS.as_ptr() as u64).is_err() || sys::set_affinity(0).is_err() {
            return 0;
        }
        meet_on_one_cpu(&ARRIVED);
        u64::from(inherited == 0x1111) << 1 | u64::from(read_fs_word() == 0x2222)
    })
    .map_err(|_| "thread spawn failed")?;
    meet_on_one_cpu(&ARRIVED);
    let theirs = handle.join().map_err(|_| "join failed")?;
    sys::set_affinity(abi::ANY_CPU).map_err(|_| "set_affinity(ANY_CPU) failed")?;
    check(read_fs_word() == 0x1111, "the main thread lost its FS base")?;
    check(theirs & 2 != 0, "a new thread did not inherit the FS base")?;
    check(theirs & 1 != 0, "the thread lost its own FS base")?;
    let mut base = 0u64;
    // SAFETY: the kernel writes the 8-byte base into `base`.
    let got = unsafe {
        syscall2(
            Syscall::ArchPrctl as u64,
            arch_prctl::GET_FS,
            (&raw mut base) as u64,
        )
    };
    check(
        got == 0 && base == MINE.as_ptr() as u64,
        "ARCH_GET_FS does not say the base",
    )
}

/// Two threads pinned to one CPU wait for each other here, then yield to
/// each other fifty times: each yield is a switch between them.
fn meet_on_one_cpu(arrived: &AtomicU32) {
    arrived.fetch_add(1, Ordering::AcqRel);
    while arrived.load(Ordering::Acquire) < 2 {
        let _ = sys::yield_now();
    }
    for _ in 0..50 {
        let _ = sys::yield_now();
    }
}

fn set_fs(base: u64) -> Outcome {
    // SAFETY: nothing in this program uses FS but `read_fs_word`.
    let got = unsafe { syscall2(Syscall::ArchPrctl as u64, arch_prctl::SET_FS, base) };
    check(got == 0, "ARCH_SET_FS failed")
}

fn read_fs_word() -> u64 {
    let word: u64;
    // SAFETY: every caller has set FS to a static word first.
    unsafe {
        core::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) word, options(nostack, readonly));
    }
    word
}

/// Two threads on one CPU each keep a value in `xmm0` while they switch
/// back and forth: the kernel saves and restores the SSE registers (the
/// Rust programs are built without SSE, so only this assembly uses them).
/// Both pin themselves to CPU 0 and meet before they start, so that their
/// yields switch between them.
fn sse_registers_per_thread() -> Outcome {
    static ARRIVED: AtomicU32 = AtomicU32::new(0);
    sys::set_affinity(0).map_err(|_| "set_affinity(0) failed")?;
    let handle = thread::spawn(|| {
        if sys::set_affinity(0).is_err() {
            return 0;
        }
        meet_on_one_cpu(&ARRIVED);
        u64::from(keeps_xmm0(0x0bad_cafe_f00d_0002))
    })
    .map_err(|_| "thread spawn failed")?;
    meet_on_one_cpu(&ARRIVED);
    let mine = keeps_xmm0(0x0bad_cafe_f00d_0001);
    let theirs = handle.join().map_err(|_| "join failed")? == 1;
    sys::set_affinity(abi::ANY_CPU).map_err(|_| "set_affinity(ANY_CPU) failed")?;
    check(mine && theirs, "an SSE register changed across a switch")
}

/// Puts `value` in `xmm0`, yields a hundred times, and says whether it is
/// still there.
fn keeps_xmm0(value: u64) -> bool {
    let back: u64;
    // SAFETY: the program is soft-float, so no compiled code uses `xmm0`;
    // `sched_yield` clobbers only `rax`, `rcx` and `r11`, declared.
    unsafe {
        core::arch::asm!(
            "movq xmm0, {value}",
            "mov {count:e}, 100",
            "2:",
            "mov eax, {yield_number}",
            "syscall",
            "dec {count:e}",
            "jnz 2b",
            "movq {back}, xmm0",
            value = in(reg) value,
            back = lateout(reg) back,
            count = out(reg) _,
            yield_number = const Syscall::SchedYield as u64,
            out("rax") _, out("rcx") _, out("r11") _,
        );
    }
    back == value
}

/// One thread sleeps on a futex word until another changes it and wakes
/// it.
fn futex_wait_wake() -> Outcome {
    static WORD: AtomicU32 = AtomicU32::new(0);
    let handle = thread::spawn(|| {
        while WORD.load(Ordering::Acquire) == 0 {
            let _ = sys::futex_wait(&WORD, 0);
        }
        u64::from(WORD.load(Ordering::Acquire))
    })
    .map_err(|_| "thread spawn failed")?;
    sys::sleep(10_000_000).map_err(|_| "sleep failed")?;
    WORD.store(7, Ordering::Release);
    let woken = sys::futex_wake(&WORD, u32::MAX).map_err(|_| "futex wake failed")?;
    check(woken <= 1, "a wake woke more threads than wait")?;
    check(
        handle.join() == Ok(7),
        "the sleeper did not see the new value",
    )
}

/// Two threads sleep on one word; `CMP_REQUEUE` moves them to another
/// without waking them, so that a wake of the first word finds nobody and
/// wakes of the second find both.
fn futex_requeue() -> Outcome {
    static GATE: AtomicU32 = AtomicU32::new(0);
    static OTHER: AtomicU32 = AtomicU32::new(0);
    const SLEEPERS: u64 = 2;
    let sleeper = || {
        while GATE.load(Ordering::Acquire) == 0 {
            let _ = sys::futex_wait(&GATE, 0);
        }
        1
    };
    let spawn = || thread::spawn(sleeper).map_err(|_| "thread spawn failed");
    let handles = [spawn()?, spawn()?];
    // A sleeper is moved only once it sleeps; a moved one stays on OTHER
    // until woken there. So moving until both have moved cannot count
    // one twice, however late a sleeper falls asleep.
    let mut moved = 0;
    for _ in 0..5_000 {
        moved += sys::futex_cmp_requeue(&GATE, 0, 2, &OTHER, 0)
            .map_err(|_| "a requeue of a word that holds its value failed")?;
        if moved >= SLEEPERS {
            break;
        }
        sys::sleep(1_000_000).map_err(|_| "sleep failed")?;
    }
    check(moved == SLEEPERS, "the requeues did not move both sleepers")?;
    let left = sys::futex_wake(&GATE, u32::MAX).map_err(|_| "futex wake failed")?;
    check(left == 0, "a moved sleeper still woke from the first word")?;
    GATE.store(1, Ordering::Release);
    let first = sys::futex_wake(&OTHER, 1).map_err(|_| "futex wake failed")?;
    let second = sys::futex_wake(&OTHER, i32::MAX as u32).map_err(|_| "futex wake failed")?;
    check(
        first == 1 && second == 1,
        "the second word did not wake each sleeper once",
    )?;
    let mut joined = 0;
    for handle in handles {
        joined += u64::from(handle.join() == Ok(1));
    }
    check(joined == SLEEPERS, "a moved sleeper did not finish")
}

/// `brk`: the heap after the image grows (zeroed, writable) and shrinks;
/// a request below its start changes nothing.
fn brk() -> Outcome {
    let brk = |end: u64| {
        // SAFETY: moving the break only maps or unmaps heap pages, which
        // this program does not otherwise use.
        unsafe { syscall1(Syscall::Brk as u64, end) as u64 }
    };
    let start = brk(0);
    check(start > abi::USER_IMAGE_BASE, "brk(0) gave no heap start")?;
    let end = start + 3 * PAGE_SIZE + 5;
    check(brk(end) == end, "brk did not grow the heap")?;
    // SAFETY: the heap now covers `start..end`.
    let heap = unsafe { core::slice::from_raw_parts_mut(start as *mut u8, (end - start) as usize) };
    check(
        heap.iter().all(|&byte| byte == 0),
        "the new heap is not zero",
    )?;
    heap.fill(0x77);
    check(brk(start) == start, "brk did not shrink the heap")?;
    check(brk(1) == start, "brk below the heap moved it")
}

/// `uname`: a Linux system call table on an x86-64 machine.
fn uname() -> Outcome {
    let mut buffer = [0u8; identity::UTSNAME_SIZE];
    // SAFETY: the kernel writes `UTSNAME_SIZE` bytes into the buffer.
    let got = unsafe { syscall1(Syscall::Uname as u64, buffer.as_mut_ptr() as u64) };
    let field = |index: usize| {
        let field = &buffer[index * identity::UTSNAME_FIELD..][..identity::UTSNAME_FIELD];
        let len = field
            .iter()
            .position(|&byte| byte == 0)
            .unwrap_or(field.len());
        &field[..len]
    };
    check(got == 0, "uname failed")?;
    check(
        field(0) == b"Linux" && field(4) == b"x86_64",
        "uname names another system",
    )
}

/// `getrandom`: two fills differ.
fn getrandom() -> Outcome {
    let (mut first, mut second) = ([0u8; 32], [0u8; 32]);
    for buffer in [&mut first, &mut second] {
        // SAFETY: the kernel writes 32 bytes into the buffer.
        let got = unsafe { syscall3(Syscall::GetRandom as u64, buffer.as_mut_ptr() as u64, 32, 0) };
        check(got == 32, "getrandom did not fill 32 bytes")?;
    }
    check(first != second, "two getrandom fills are the same")
}

/// `writev`: two buffers, one line.
fn writev() -> Outcome {
    let (head, tail) = (b"syscalls: writev ", b"works\n");
    let vectors = [
        head.as_ptr() as u64,
        head.len() as u64,
        tail.as_ptr() as u64,
        tail.len() as u64,
    ];
    // SAFETY: the kernel only reads the vectors and the buffers.
    let got = unsafe {
        syscall3(
            Syscall::Writev as u64,
            sys::STDOUT,
            vectors.as_ptr() as u64,
            2,
        )
    };
    check(got == 23, "writev did not report 23 bytes")
}

/// `sched_getaffinity`: one CPU when pinned, at least that one when not.
fn sched_getaffinity() -> Outcome {
    sys::set_affinity(0).map_err(|_| "set_affinity(0) failed")?;
    let pinned = sys::affinity_of(0).map_err(|_| "sched_getaffinity failed")?;
    sys::set_affinity(abi::ANY_CPU).map_err(|_| "set_affinity(ANY_CPU) failed")?;
    let free = sys::affinity_of(0).map_err(|_| "sched_getaffinity failed")?;
    check(
        pinned[0] == 1 && pinned[1..].iter().all(|&byte| byte == 0),
        "pinned to CPU 0, the mask says otherwise",
    )?;
    check(
        free[0] & 1 == 1,
        "a thread free to run anywhere may not run on CPU 0",
    )
}

/// `clock_nanosleep(TIMER_ABSTIME)`: wakes no earlier than the time asked.
fn clock_nanosleep_absolute() -> Outcome {
    let wake_at = sys::clock().map_err(|_| "clock failed")? + 5_000_000;
    let request = Timespec::from_ns(wake_at).to_bytes();
    // SAFETY: the kernel only reads the request.
    let got = unsafe {
        syscall4(
            Syscall::ClockNanosleep as u64,
            abi::clock::MONOTONIC,
            1,
            request.as_ptr() as u64,
            0,
        )
    };
    check(got == 0, "clock_nanosleep failed")?;
    check(
        sys::clock().map_err(|_| "clock failed")? >= wake_at,
        "woke before the time asked",
    )
}

/// The console answers `TIOCGWINSZ` as a terminal of 24 rows, 80 columns,
/// and `fstat` (as glibc asks, `newfstatat` with an empty path) as a
/// character device.
fn console_is_a_terminal() -> Outcome {
    let mut stat = [0u8; abi::console::stat::SIZE];
    // SAFETY: the kernel writes `stat::SIZE` bytes into `stat`.
    let got = unsafe {
        syscall4(
            Syscall::Newfstatat as u64,
            sys::STDOUT,
            c"".as_ptr() as u64,
            stat.as_mut_ptr() as u64,
            abi::console::AT_EMPTY_PATH,
        )
    };
    let offset = abi::console::stat::MODE_OFFSET;
    let mode = u32::from_le_bytes([
        stat[offset],
        stat[offset + 1],
        stat[offset + 2],
        stat[offset + 3],
    ]);
    check(
        got == 0 && mode & 0o170_000 == 0o020_000,
        "fstat does not say character device",
    )?;
    let mut window = [0u16; 4];
    // SAFETY: the kernel writes 8 bytes into `window`.
    let got = unsafe {
        syscall3(
            Syscall::Ioctl as u64,
            sys::STDOUT,
            abi::console::TIOCGWINSZ,
            window.as_mut_ptr() as u64,
        )
    };
    check(
        got == 0 && window[..2] == [24, 80],
        "TIOCGWINSZ did not describe the console",
    )
}

/// `wait4(-1)` finds whichever child ended; with `WNOHANG` it says 0 while
/// the only child still runs.
fn wait_for_any_child() -> Outcome {
    /// `WNOHANG`.
    const NO_HANG: u64 = 1;
    let any = |options: u64, status: &mut i32| {
        // SAFETY: the kernel writes the status into `status`.
        unsafe {
            syscall4(
                Syscall::Wait4 as u64,
                -1i64 as u64,
                (&raw mut *status) as u64,
                options,
                0,
            )
        }
    };
    let page = sys::mmap_shared(PAGE_SIZE as usize, Prot::READ | Prot::WRITE)
        .map_err(|_| "mmap failed")?;
    // SAFETY: a fresh, zeroed, shared page, used as nothing else.
    let release: &AtomicU32 = unsafe { &*page.cast::<AtomicU32>() };
    // SAFETY: this thread is the only one; the child touches only the
    // shared page.
    let child = match unsafe { sys::fork() } {
        Ok(0) => {
            while release.load(Ordering::Acquire) == 0 {
                let _ = sys::sleep(1_000_000);
            }
            sys::exit(4)
        }
        Ok(pid) => pid,
        Err(_) => return Err("fork failed"),
    };
    let mut status = -1;
    let early = any(NO_HANG, &mut status);
    release.store(1, Ordering::Release);
    let ended = any(0, &mut status);
    check(early == 0, "WNOHANG did not say 0 while the child ran")?;
    check(ended == child as i64, "wait4(-1) did not return the child")?;
    check(status == 4 << 8, "wait4(-1) did not give the exit status")?;
    check(
        any(NO_HANG, &mut status) == -10,
        "with no child left, no ECHILD",
    )
}
