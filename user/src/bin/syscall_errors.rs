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
//! - `Inval`: a malformed value: unknown flag, protection or advice bits
//!   (where Linux refuses them: `mmap` ignores unknown flags), an address
//!   that must be aligned and is not, a zero length where one is needed, a
//!   memory range that wraps around or leaves the user half, a string
//!   longer than the kernel accepts (`spawn`: 64-byte names, 4 KiB
//!   arguments), a `clone` flag combination Linux refuses or this kernel
//!   does not offer (`vfork`, shared memory between processes);
//! - `NoMem`: `mprotect`/`madvise` on a range with nothing mapped;
//! - `Srch`, `Inval`, `Child`, `NoEnt`: no such thread, CPU, child or
//!   program;
//! - `Inval` also for a duration or clock Linux refuses (`nanosleep`,
//!   `clock_gettime`);
//! - `BadF`: a file descriptor that is not the console's (1 and 2), or a
//!   mapping of a file (there are none);
//! - `NoSys`: a system-call number that does not exist here, a Linux call
//!   this kernel does not offer included, or a futex operation it does not
//!   know;
//! - and Linux's own for the rest: `Again` (a futex word that changed),
//!   `TimedOut`, `Perm` (an FS base or a limit that cannot be set), `NoTty`,
//!   `NoEnt` (every path: there is no file system), `OpNotSupp`, `Exist`.
//!
//! `exit`, `exit_group`, `sched_yield`, `getpid`, `gettid` and `fork` have
//! no argument that can be wrong, so they have no case here (`forks` checks
//! what `fork` does).

#![no_std]
#![no_main]

use user::{
    Errno,
    abi::{
        self, CloneFlags, MapFlags, PAGE_SIZE, Prot, Syscall, Timespec, USER_END, advice, futex,
    },
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
    // clone(flags, stack, parent_tid, child_tid, tls): each refused before
    // any thread or process starts.
    case("clone/vfork", Errno::Inval, |_| {
        call_clone(CloneFlags::VM.union(CloneFlags::VFORK).bits(), 0, 0)
    }),
    case("clone/shared-memory-process", Errno::Inval, |_| {
        call_clone(CloneFlags::VM.bits() | CloneFlags::SIGCHLD, 0, 0)
    }),
    case("clone/thread-with-exit-signal", Errno::Inval, |_| {
        call_clone(CloneFlags::THREAD_FLAGS.bits() | CloneFlags::SIGCHLD, 0, 0)
    }),
    case("clone/unknown-flag", Errno::Inval, |_| {
        // CLONE_NEWNS: a new mount namespace.
        call_clone(CloneFlags::THREAD_FLAGS.bits() | 0x2_0000, 0, 0)
    }),
    case("clone/kernel-parent-tid", Errno::Fault, |_| {
        let flags = CloneFlags::THREAD_FLAGS.union(CloneFlags::PARENT_SETTID);
        call_clone(flags.bits(), KERNEL, 0)
    }),
    case("clone/non-canonical-tls", Errno::Inval, |_| {
        let flags = CloneFlags::THREAD_FLAGS.union(CloneFlags::SETTLS);
        call_clone(flags.bits(), 0, NON_CANONICAL)
    }),
    // futex(addr, op, value, timeout, addr2, value3)
    case("futex/misaligned", Errno::Inval, |f| {
        call4(Syscall::Futex, f.read_write + 1, futex::WAKE, 1, 0)
    }),
    case("futex/kernel-word", Errno::Fault, |_| {
        call4(Syscall::Futex, KERNEL, futex::WAIT, 0, 0)
    }),
    case("futex/value-differs", Errno::Again, |f| {
        // The fixture's first word holds 1.
        call4(Syscall::Futex, f.read_write, futex::WAIT, 2, 0)
    }),
    case("futex/timeout-passes", Errno::TimedOut, |f| {
        call4(
            Syscall::Futex,
            f.read_write,
            futex::WAIT,
            1,
            MILLISECOND.as_ptr() as u64,
        )
    }),
    case("futex/negative-timeout", Errno::Inval, |f| {
        call4(
            Syscall::Futex,
            f.read_write,
            futex::WAIT,
            1,
            NEGATIVE_SECOND.as_ptr() as u64,
        )
    }),
    case("futex/empty-bitset", Errno::Inval, |f| {
        // SAFETY: refused without effect (see the bad calls below).
        unsafe {
            syscall6(
                Syscall::Futex as u64,
                f.read_write,
                futex::WAIT_BITSET,
                1,
                0,
                0,
                0,
            )
        }
    }),
    case("futex/requeue-negative-count", Errno::Inval, |f| {
        let moves = u64::from(u32::MAX);
        call_requeue(f.read_write, futex::REQUEUE, 1, moves, f.read_write, 0)
    }),
    case("futex/requeue-misaligned-target", Errno::Inval, |f| {
        call_requeue(f.read_write, futex::REQUEUE, 1, 1, f.read_write + 2, 0)
    }),
    case("futex/requeue-kernel-target", Errno::Fault, |f| {
        call_requeue(f.read_write, futex::REQUEUE, 1, 1, KERNEL, 0)
    }),
    case("futex/cmp-requeue-value-differs", Errno::Again, |f| {
        // The fixture's first word holds 1.
        call_requeue(f.read_write, futex::CMP_REQUEUE, 1, 1, f.read_only, 2)
    }),
    case("futex/unknown-op", Errno::NoSys, |f| {
        call4(Syscall::Futex, f.read_write, 99, 0, 0)
    }),
    // arch_prctl(code, addr)
    case("arch_prctl/set-gs", Errno::Inval, |f| {
        call2(Syscall::ArchPrctl, abi::arch_prctl::SET_GS, f.read_write)
    }),
    case("arch_prctl/kernel-fs", Errno::Perm, |_| {
        call2(Syscall::ArchPrctl, abi::arch_prctl::SET_FS, KERNEL)
    }),
    case("arch_prctl/get-fs-read-only", Errno::Fault, |f| {
        call2(Syscall::ArchPrctl, abi::arch_prctl::GET_FS, f.read_only)
    }),
    // sched_getaffinity(pid, len, mask)
    case("sched_getaffinity/short-mask", Errno::Inval, |f| {
        call3(Syscall::SchedGetaffinity, 0, 8, f.read_write)
    }),
    case("sched_getaffinity/kernel-mask", Errno::Fault, |_| {
        call3(Syscall::SchedGetaffinity, 0, 256, KERNEL)
    }),
    case("sched_getaffinity/no-such-thread", Errno::Srch, |f| {
        call3(Syscall::SchedGetaffinity, NOBODY, 256, f.read_write)
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
    // clock_nanosleep(clock, flags, req, rem)
    case("clock_nanosleep/no-such-clock", Errno::Inval, |_| {
        call4(
            Syscall::ClockNanosleep,
            99,
            0,
            MILLISECOND.as_ptr() as u64,
            0,
        )
    }),
    case("clock_nanosleep/kernel-request", Errno::Fault, |_| {
        call4(Syscall::ClockNanosleep, abi::clock::MONOTONIC, 0, KERNEL, 0)
    }),
    // writev(fd, iov, iovcnt)
    case("writev/no-such-fd", Errno::BadF, |_| {
        call3(Syscall::Writev, 3, KERNEL_IOVEC.as_ptr() as u64, 1)
    }),
    case("writev/too-many-vectors", Errno::Inval, |_| {
        call3(Syscall::Writev, 1, KERNEL_IOVEC.as_ptr() as u64, 1025)
    }),
    case("writev/kernel-vectors", Errno::Fault, |_| {
        call3(Syscall::Writev, 1, KERNEL, 1)
    }),
    case("writev/kernel-buffer", Errno::Fault, |_| {
        call3(Syscall::Writev, 1, KERNEL_IOVEC.as_ptr() as u64, 1)
    }),
    // ioctl(fd, request, arg)
    case("ioctl/no-such-fd", Errno::BadF, |f| {
        call3(Syscall::Ioctl, 5, abi::console::TCGETS, f.read_write)
    }),
    case("ioctl/not-a-terminal-request", Errno::NoTty, |f| {
        call3(Syscall::Ioctl, 1, 0x5422, f.read_write)
    }),
    case("ioctl/kernel-window", Errno::Fault, |_| {
        call3(Syscall::Ioctl, 1, abi::console::TIOCGWINSZ, KERNEL)
    }),
    // openat(dirfd, path, flags, mode)
    case("openat/no-file-system", Errno::NoEnt, |_| {
        call4(Syscall::Openat, AT_FDCWD, PROC_PATH.as_ptr() as u64, 0, 0)
    }),
    case("openat/kernel-path", Errno::Fault, |_| {
        call4(Syscall::Openat, AT_FDCWD, KERNEL, 0, 0)
    }),
    // fstat(fd, buf), newfstatat(dirfd, path, buf, flags), readlink(path,
    // buf, size)
    case("fstat/no-such-fd", Errno::BadF, |f| {
        call2(Syscall::Fstat, 7, f.read_write)
    }),
    case("fstat/read-only-buffer", Errno::Fault, |f| {
        call2(Syscall::Fstat, 1, f.read_only)
    }),
    case("newfstatat/no-file-system", Errno::NoEnt, |f| {
        call4(
            Syscall::Newfstatat,
            AT_FDCWD,
            PROC_PATH.as_ptr() as u64,
            f.read_write,
            0,
        )
    }),
    case("newfstatat/kernel-path", Errno::Fault, |f| {
        call4(Syscall::Newfstatat, 1, KERNEL, f.read_write, 0x1000)
    }),
    case("readlink/no-file-system", Errno::NoEnt, |f| {
        call3(
            Syscall::Readlink,
            PROC_PATH.as_ptr() as u64,
            f.read_write,
            64,
        )
    }),
    // uname(buf)
    case("uname/read-only-buffer", Errno::Fault, |f| {
        call1(Syscall::Uname, f.read_only)
    }),
    // getrandom(buf, len, flags)
    case("getrandom/unknown-flag", Errno::Inval, |f| {
        call3(Syscall::GetRandom, f.read_write, 16, 0x8)
    }),
    case("getrandom/kernel-buffer", Errno::Fault, |_| {
        call3(Syscall::GetRandom, KERNEL, 16, 0)
    }),
    // prlimit64(pid, resource, new, old)
    case("prlimit64/no-such-resource", Errno::Inval, |f| {
        call4(Syscall::Prlimit64, 0, 99, 0, f.read_write)
    }),
    case("prlimit64/set-a-limit", Errno::Perm, |f| {
        call4(Syscall::Prlimit64, 0, 3, f.read_write, 0)
    }),
    case("prlimit64/other-process", Errno::Srch, |f| {
        call4(Syscall::Prlimit64, NOBODY, 3, 0, f.read_write)
    }),
    case("prlimit64/kernel-old", Errno::Fault, |_| {
        call4(Syscall::Prlimit64, 0, 3, 0, KERNEL)
    }),
    // rt_sigaction(sig, act, oldact, sigsetsize), rt_sigprocmask(how, set,
    // oldset, sigsetsize)
    case("rt_sigaction/signal-0", Errno::Inval, |f| {
        call4(Syscall::RtSigaction, 0, 0, f.read_write, 8)
    }),
    case("rt_sigaction/sigkill", Errno::Inval, |f| {
        call4(Syscall::RtSigaction, 9, f.read_write, 0, 8)
    }),
    case("rt_sigaction/set-size", Errno::Inval, |f| {
        call4(Syscall::RtSigaction, 2, 0, f.read_write, 16)
    }),
    case("rt_sigaction/kernel-old", Errno::Fault, |_| {
        call4(Syscall::RtSigaction, 2, 0, KERNEL, 8)
    }),
    case("rt_sigprocmask/unknown-how", Errno::Inval, |f| {
        call4(Syscall::RtSigprocmask, 7, f.read_write, 0, 8)
    }),
    case("rt_sigprocmask/kernel-set", Errno::Fault, |_| {
        call4(Syscall::RtSigprocmask, 0, KERNEL, 0, 8)
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
    case("mmap/validate-unknown-flag", Errno::OpNotSupp, |_| {
        let flags = MapFlags::SHARED_VALIDATE.union(MapFlags::ANONYMOUS);
        call_mmap(0, PAGE_SIZE, READ, flags.bits() | 0x1000)
    }),
    case("mmap/no-sharing-type", Errno::Inval, |_| {
        call_mmap(0, PAGE_SIZE, READ, MapFlags::ANONYMOUS.bits())
    }),
    case("mmap/fixed-noreplace-over-mapping", Errno::Exist, |f| {
        let flags = MapFlags::FIXED_NOREPLACE
            .union(MapFlags::PRIVATE)
            .union(MapFlags::ANONYMOUS);
        call_mmap(f.read_only, PAGE_SIZE, READ, flags.bits())
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
    case("wait4/no-children", Errno::Child, |_| {
        call4(Syscall::Wait4, -1i64 as u64, 0, 1, 0)
    }),
    case("wait4/process-group", Errno::Child, |_| {
        call4(Syscall::Wait4, -5i64 as u64, 0, 0, 0)
    }),
    case("wait4/unknown-option", Errno::Inval, |_| {
        call4(Syscall::Wait4, -1i64 as u64, 0, 4, 0)
    }),
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

/// `openat`'s "relative to the working directory".
const AT_FDCWD: u64 = -100i64 as u64;

/// A path a C library probes.
static PROC_PATH: &[u8] = b"/proc/self/maps\0";

/// One `struct iovec` naming 16 bytes of kernel memory.
static KERNEL_IOVEC: [u64; 2] = [KERNEL, 16];

/// A millisecond, as a timeout.
static MILLISECOND: [u8; Timespec::SIZE] = Timespec {
    seconds: 0,
    nanoseconds: 1_000_000,
}
.to_bytes();

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
// a page, or start a child on this thread's stack (`call_clone`).

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

/// `clone` with a null stack and child id. Every case is refused before a
/// thread or process starts; were one wrongly accepted, the child would
/// run on this thread's stack, so the program would see it.
fn call_clone(flags: u64, parent_tid: u64, tls: u64) -> i64 {
    // SAFETY: see the comment above.
    unsafe { syscall6(Syscall::Clone as u64, flags, 0, parent_tid, 0, tls, 0) }
}

/// `futex(from, op, wakes, moves, to, value3)`, a requeue: nothing sleeps
/// on the fixture's words, so even an accepted call moves nobody.
fn call_requeue(from: u64, op: u64, wakes: u64, moves: u64, to: u64, value3: u64) -> i64 {
    // SAFETY: see the comment above.
    unsafe { syscall6(Syscall::Futex as u64, from, op, wakes, moves, to, value3) }
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
