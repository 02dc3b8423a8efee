//! Calls every system call that takes arguments with bad ones and checks
//! the kernel answers with the right error instead of crashing, hanging or
//! touching memory it must not.
//!
//! Prints one line per case, `PASS <case>` or
//! `FAIL <case>: got <result> expected <errno>`, and exits with the number
//! of failures (0: all passed). Case names are `<syscall>/<what is wrong>`.
//!
//! The expected errors, as the kernel promises them:
//!
//! - `Fault`: a pointer the kernel would read or write, or an address it
//!   would jump to, is outside the caller's memory (kernel half,
//!   non-canonical, unmapped, without the needed permission, or a range
//!   whose end wraps around);
//! - `Inval`: a malformed value: unknown flag, protection or advice bits,
//!   an address that must be page-aligned (or a stack top that must be
//!   16-byte aligned) and is not, a zero length where one is needed, or a
//!   memory range that wraps around or leaves the user half, or a string
//!   longer than the kernel accepts (`spawn`: 64-byte names, 4 KiB arguments);
//! - `NoMem`: `mprotect`/`madvise` on a range with nothing mapped;
//! - `Srch`, `Inval`, `Child`, `NoEnt`: no such thread, CPU, child or
//!   program;
//! - `Inval` also for a duration or clock Linux refuses (`nanosleep`,
//!   `clock_gettime`);
//! - `BadF`: a file descriptor that is not the console's (1 and 2), or a
//!   mapping of a file (there are none);
//! - `NoSys`: a system-call number that does not exist here, a Linux call
//!   this kernel does not offer included.
//!
//! `exit`, `exit_group`, `sched_yield`, `getpid`, `gettid` and `fork` have
//! no argument that can be wrong, so they have no case here (`forks` checks
//! what `fork` does).

#![no_std]
#![no_main]

use user::{
    Errno,
    abi::{self, MapFlags, PAGE_SIZE, Prot, Syscall, Timespec, USER_END, advice},
    println,
    raw::{syscall1, syscall2, syscall3, syscall4, syscall6},
    sys,
};

user::entry!(main);

/// The first address of the kernel half.
const KERNEL: u64 = 0xffff_8000_0000_0000;

/// The first non-canonical address, just past the user half.
const NON_CANONICAL: u64 = USER_END;

/// A thread, CPU or process number nothing has.
const NOBODY: u64 = 1_000_000;

/// Pages in every protection the cases need, made once.
struct Fixture {
    /// Mapped read-write, touched.
    read_write: u64,
    /// Mapped read-only.
    read_only: u64,
    /// Mapped with no access at all.
    no_access: u64,
    /// The page right after `read_write`, mapped and unmapped again, with
    /// no mapping made after it: certainly not ours.
    unmapped: u64,
}

impl Fixture {
    fn new() -> Self {
        let map = |pages: u64, protection| {
            sys::mmap_anonymous((pages * PAGE_SIZE) as usize, protection)
                .expect("mmap for the fixture")
        };
        // Two read-write pages, the second unmapped again at the very end,
        // so that `read_write` is directly followed by a hole that no later
        // mapping can fill (the kernel reuses freed addresses).
        let read_write = map(2, Prot::READ | Prot::WRITE);
        // SAFETY: a fresh page of ours, nothing else uses it.
        unsafe { read_write.write_volatile(1) };
        let read_only = map(1, Prot::READ) as u64;
        let no_access = map(1, Prot::NONE) as u64;
        let unmapped = read_write.wrapping_add(PAGE_SIZE as usize);
        // SAFETY: nothing refers to the page being unmapped.
        unsafe { sys::munmap(unmapped, PAGE_SIZE as usize) }.expect("munmap for the fixture");
        Self {
            read_write: read_write as u64,
            read_only,
            no_access,
            unmapped: unmapped as u64,
        }
    }
}

/// One bad call and the error it must get.
struct Case {
    name: &'static str,
    expected: Errno,
    call: fn(&Fixture) -> i64,
}

const fn case(name: &'static str, expected: Errno, call: fn(&Fixture) -> i64) -> Case {
    Case {
        name,
        expected,
        call,
    }
}

/// Every case, grouped by system call.
const CASES: &[Case] = &[
    // write(fd, buf, len)
    case("write/no-such-fd", Errno::BadF, |f| {
        call3(Syscall::Write, 3, f.read_write, 16)
    }),
    case("write/stdin", Errno::BadF, |f| {
        call3(Syscall::Write, 0, f.read_write, 16)
    }),
    case("write/kernel-buffer", Errno::Fault, |_| {
        call3(Syscall::Write, 1, KERNEL, 16)
    }),
    case("write/non-canonical-buffer", Errno::Fault, |_| {
        call3(Syscall::Write, 1, NON_CANONICAL, 16)
    }),
    case("write/unmapped-buffer", Errno::Fault, |f| {
        call3(Syscall::Write, 1, f.unmapped, 16)
    }),
    case("write/no-access-buffer", Errno::Fault, |f| {
        call3(Syscall::Write, 1, f.no_access, 16)
    }),
    case("write/buffer-past-mapping", Errno::Fault, |f| {
        call3(Syscall::Write, 1, f.read_write, 2 * PAGE_SIZE)
    }),
    case("write/length-wraps", Errno::Fault, |f| {
        call3(Syscall::Write, 1, f.read_write, u64::MAX)
    }),
    // thread_spawn(entry, stack_top, arg)
    case("thread_spawn/kernel-entry", Errno::Fault, |f| {
        call3(Syscall::ThreadSpawn, KERNEL, f.read_write + PAGE_SIZE, 0)
    }),
    case("thread_spawn/non-canonical-entry", Errno::Fault, |f| {
        call3(
            Syscall::ThreadSpawn,
            NON_CANONICAL,
            f.read_write + PAGE_SIZE,
            0,
        )
    }),
    case("thread_spawn/kernel-stack", Errno::Fault, |_| {
        call3(Syscall::ThreadSpawn, user_code(), KERNEL + PAGE_SIZE, 0)
    }),
    case("thread_spawn/misaligned-stack", Errno::Inval, |f| {
        call3(
            Syscall::ThreadSpawn,
            user_code(),
            f.read_write + PAGE_SIZE - 8,
            0,
        )
    }),
    // thread_join(tid)
    case("thread_join/no-such-thread", Errno::Srch, |_| {
        call1(Syscall::ThreadJoin, NOBODY)
    }),
    // sched_setaffinity(pid, len, mask)
    case("sched_setaffinity/no-such-cpu", Errno::Inval, |_| {
        call3(
            Syscall::SchedSetaffinity,
            0,
            LAST_CPU_ONLY.len() as u64,
            LAST_CPU_ONLY.as_ptr() as u64,
        )
    }),
    case("sched_setaffinity/empty-mask", Errno::Inval, |_| {
        call3(
            Syscall::SchedSetaffinity,
            0,
            0,
            LAST_CPU_ONLY.as_ptr() as u64,
        )
    }),
    case("sched_setaffinity/no-such-thread", Errno::Srch, |_| {
        call3(
            Syscall::SchedSetaffinity,
            NOBODY,
            LAST_CPU_ONLY.len() as u64,
            LAST_CPU_ONLY.as_ptr() as u64,
        )
    }),
    case("sched_setaffinity/kernel-mask", Errno::Fault, |_| {
        call3(Syscall::SchedSetaffinity, 0, 8, KERNEL)
    }),
    // nanosleep(req, rem)
    case("nanosleep/kernel-request", Errno::Fault, |_| {
        call2(Syscall::Nanosleep, KERNEL, 0)
    }),
    case("nanosleep/negative", Errno::Inval, |_| {
        call2(Syscall::Nanosleep, NEGATIVE_SECOND.as_ptr() as u64, 0)
    }),
    case("nanosleep/a-second-of-nanoseconds", Errno::Inval, |_| {
        call2(Syscall::Nanosleep, BILLION_NANOSECONDS.as_ptr() as u64, 0)
    }),
    // clock_gettime(clock, tp)
    case("clock_gettime/no-such-clock", Errno::Inval, |f| {
        call2(Syscall::ClockGettime, 99, f.read_write)
    }),
    case("clock_gettime/kernel-buffer", Errno::Fault, |_| {
        call2(Syscall::ClockGettime, abi::clock::MONOTONIC, KERNEL)
    }),
    case("clock_gettime/read-only-buffer", Errno::Fault, |f| {
        call2(Syscall::ClockGettime, abi::clock::MONOTONIC, f.read_only)
    }),
    // getcpu(cpu, node, _)
    case("getcpu/kernel-cpu", Errno::Fault, |_| {
        call3(Syscall::GetCpu, KERNEL, 0, 0)
    }),
    case("getcpu/read-only-node", Errno::Fault, |f| {
        call3(Syscall::GetCpu, 0, f.read_only, 0)
    }),
    // mmap(addr, len, prot, flags)
    case("mmap/zero-length", Errno::Inval, |_| {
        call_mmap(0, 0, READ, PRIVATE_ANONYMOUS)
    }),
    case("mmap/length-wraps", Errno::Inval, |_| {
        call_mmap(0, u64::MAX, READ, PRIVATE_ANONYMOUS)
    }),
    case("mmap/unknown-prot", Errno::Inval, |_| {
        call_mmap(0, PAGE_SIZE, 0x8, PRIVATE_ANONYMOUS)
    }),
    case("mmap/unknown-flag", Errno::Inval, |_| {
        call_mmap(0, PAGE_SIZE, READ, PRIVATE_ANONYMOUS | 0x1000)
    }),
    case("mmap/not-anonymous", Errno::BadF, |_| {
        call_mmap(0, PAGE_SIZE, READ, MapFlags::PRIVATE.bits())
    }),
    case("mmap/misaligned-offset", Errno::Inval, |_| {
        // SAFETY: a new mapping anywhere, were it wrongly accepted.
        unsafe {
            syscall6(
                Syscall::Mmap as u64,
                0,
                PAGE_SIZE,
                READ,
                PRIVATE_ANONYMOUS,
                u64::MAX,
                1,
            )
        }
    }),
    case("mmap/fixed-misaligned", Errno::Inval, |f| {
        call_mmap(f.unmapped + 1, PAGE_SIZE, READ, FIXED_ANONYMOUS)
    }),
    case("mmap/fixed-kernel", Errno::Inval, |_| {
        call_mmap(KERNEL, PAGE_SIZE, READ, FIXED_ANONYMOUS)
    }),
    case("mmap/fixed-across-user-end", Errno::Inval, |_| {
        call_mmap(USER_END - PAGE_SIZE, 2 * PAGE_SIZE, READ, FIXED_ANONYMOUS)
    }),
    // munmap(addr, len)
    case("munmap/misaligned", Errno::Inval, |f| {
        call2(Syscall::Munmap, f.read_write + 1, PAGE_SIZE)
    }),
    case("munmap/zero-length", Errno::Inval, |f| {
        call2(Syscall::Munmap, f.read_write, 0)
    }),
    case("munmap/kernel", Errno::Inval, |_| {
        call2(Syscall::Munmap, KERNEL, PAGE_SIZE)
    }),
    case("munmap/length-wraps", Errno::Inval, |f| {
        call2(Syscall::Munmap, f.read_write, u64::MAX)
    }),
    // mprotect(addr, len, prot)
    case("mprotect/misaligned", Errno::Inval, |f| {
        call3(Syscall::Mprotect, f.read_write + 1, PAGE_SIZE, READ)
    }),
    case("mprotect/unknown-prot", Errno::Inval, |f| {
        call3(Syscall::Mprotect, f.read_write, PAGE_SIZE, 0x8)
    }),
    case("mprotect/kernel", Errno::Inval, |_| {
        call3(Syscall::Mprotect, KERNEL, PAGE_SIZE, READ)
    }),
    case("mprotect/unmapped", Errno::NoMem, |f| {
        call3(Syscall::Mprotect, f.unmapped, PAGE_SIZE, READ)
    }),
    // madvise(addr, len, advice)
    case("madvise/unknown-advice", Errno::Inval, |f| {
        call3(Syscall::Madvise, f.read_write, PAGE_SIZE, 999)
    }),
    case("madvise/misaligned", Errno::Inval, |f| {
        call3(
            Syscall::Madvise,
            f.read_write + 1,
            PAGE_SIZE,
            advice::DONTNEED,
        )
    }),
    case("madvise/kernel", Errno::Inval, |_| {
        call3(Syscall::Madvise, KERNEL, PAGE_SIZE, advice::PAGEOUT)
    }),
    case("madvise/unmapped", Errno::NoMem, |f| {
        call3(Syscall::Madvise, f.unmapped, PAGE_SIZE, advice::PAGEOUT)
    }),
    // spawn(name, name_len, args, args_len)
    case("spawn/kernel-name", Errno::Fault, |_| {
        call4(Syscall::Spawn, KERNEL, 5, 0, 0)
    }),
    case("spawn/unmapped-name", Errno::Fault, |f| {
        call4(Syscall::Spawn, f.unmapped, 5, 0, 0)
    }),
    case("spawn/args-too-long", Errno::Inval, |_| {
        call4(
            Syscall::Spawn,
            HELLO.as_ptr() as u64,
            HELLO.len() as u64,
            HELLO.as_ptr() as u64,
            u64::MAX,
        )
    }),
    case("spawn/no-such-program", Errno::NoEnt, |_| {
        let name = "no_such_program";
        call4(
            Syscall::Spawn,
            name.as_ptr() as u64,
            name.len() as u64,
            0,
            0,
        )
    }),
    // wait4(pid, wstatus, options, rusage)
    case("wait4/not-a-child", Errno::Child, |_| {
        call4(Syscall::Wait4, NOBODY, 0, 0, 0)
    }),
    // tlb_stats(buf, len)
    case("tlb_stats/kernel-buffer", Errno::Fault, |_| {
        call2(Syscall::TlbStats, KERNEL, 64)
    }),
    case("tlb_stats/unmapped-buffer", Errno::Fault, |f| {
        call2(Syscall::TlbStats, f.unmapped, 64)
    }),
    case("tlb_stats/read-only-buffer", Errno::Fault, |f| {
        call2(Syscall::TlbStats, f.read_only, 64)
    }),
    // numbers that name no system call
    case("unknown/999", Errno::NoSys, |_| unknown(999)),
    case("unknown/linux-open", Errno::NoSys, |_| unknown(2)),
    case("unknown/max", Errno::NoSys, |_| unknown(u64::MAX)),
];

// The cases pass protections and flags as raw numbers, as the system call
// sees them, so that they can add bits that no flag names.
const READ: u64 = Prot::READ.bits();
const PRIVATE_ANONYMOUS: u64 = MapFlags::PRIVATE.union(MapFlags::ANONYMOUS).bits();
const FIXED_ANONYMOUS: u64 = MapFlags::FIXED
    .union(MapFlags::PRIVATE)
    .union(MapFlags::ANONYMOUS)
    .bits();

/// A `sched_setaffinity` mask naming only the last CPU the kernel could
/// have, which no test machine has.
static LAST_CPU_ONLY: [u8; abi::AFFINITY_CPUS / 8] = {
    let mut mask = [0; abi::AFFINITY_CPUS / 8];
    mask[abi::AFFINITY_CPUS / 8 - 1] = 0x80;
    mask
};

/// `nanosleep` requests Linux refuses with `EINVAL`.
static NEGATIVE_SECOND: [u8; Timespec::SIZE] = Timespec {
    seconds: -1,
    nanoseconds: 0,
}
.to_bytes();
static BILLION_NANOSECONDS: [u8; Timespec::SIZE] = Timespec {
    seconds: 0,
    nanoseconds: 1_000_000_000,
}
.to_bytes();

/// A program name that exists, for cases where something else is wrong.
const HELLO: &str = "hello";

/// An address inside this program's code: a valid entry point for the
/// thread cases that must fail for another reason (and, were they wrongly
/// accepted, a thread that ends at once).
fn user_code() -> u64 {
    end_thread as *const () as u64
}

extern "C" fn end_thread() -> ! {
    sys::thread_exit(0)
}

fn main(_args: &str) -> i32 {
    let fixture = Fixture::new();
    let mut failures = 0;
    for case in CASES {
        let got = (case.call)(&fixture);
        if Errno::from_return(got) == Some(case.expected) {
            println!("PASS {}", case.name);
        } else {
            failures += 1;
            println!(
                "FAIL {}: got {} expected {:?}",
                case.name,
                Shown(got),
                case.expected
            );
        }
    }
    println!("syscall_errors: {} cases, {failures} failed", CASES.len());
    failures
}

/// A raw result as `Ok(value)`, an errno name, or the bare number.
struct Shown(i64);

impl core::fmt::Display for Shown {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match (self.0, Errno::from_return(self.0)) {
            (value @ 0.., _) => write!(f, "Ok({value})"),
            (_, Some(errno)) => write!(f, "{errno:?}"),
            (value, None) => write!(f, "unknown error {value}"),
        }
    }
}

// The bad calls. They must all fail without effect; were the kernel to
// wrongly accept one, the worst it could do is read from our memory, map
// a page or start a thread that ends at once, none of which breaks this
// program.

fn call1(syscall: Syscall, a0: u64) -> i64 {
    // SAFETY: see the comment above.
    unsafe { syscall1(syscall as u64, a0) }
}

fn call2(syscall: Syscall, a0: u64, a1: u64) -> i64 {
    // SAFETY: see the comment above.
    unsafe { syscall2(syscall as u64, a0, a1) }
}

fn call3(syscall: Syscall, a0: u64, a1: u64, a2: u64) -> i64 {
    // SAFETY: see the comment above.
    unsafe { syscall3(syscall as u64, a0, a1, a2) }
}

fn call4(syscall: Syscall, a0: u64, a1: u64, a2: u64, a3: u64) -> i64 {
    // SAFETY: see the comment above.
    unsafe { syscall4(syscall as u64, a0, a1, a2, a3) }
}

/// `mmap` as for an anonymous mapping: no file descriptor, offset 0.
fn call_mmap(addr: u64, len: u64, prot: u64, flags: u64) -> i64 {
    // SAFETY: see the comment above.
    unsafe { syscall6(Syscall::Mmap as u64, addr, len, prot, flags, u64::MAX, 0) }
}

fn unknown(number: u64) -> i64 {
    // SAFETY: no such system call exists, so it can do nothing.
    unsafe { user::raw::syscall0(number) }
}
