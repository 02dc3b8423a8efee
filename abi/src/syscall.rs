//! The system-call numbers: Linux's, and this kernel's own above them.

/// System-call numbers: Linux x86-64's for every call Linux has
/// (`arch/x86/entry/syscalls/syscall_64.tbl`), with Linux's arguments and
/// results; the calls Linux has no counterpart for are this kernel's own,
/// numbered from [`OWN_CALLS`] on, above Linux's table (a program for this
/// kernel that makes one on Linux gets `-ENOSYS`).
#[repr(u64)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syscall {
    /// `write(fd, buf, count) -> count`: file descriptors 1 and 2 (standard
    /// output and error) are the console; there are no others.
    Write = 1,
    /// `fstat(fd, buf) -> 0`: the console is a character device
    /// ([`console::stat`](crate::console::stat)).
    Fstat = 5,
    /// `mmap(addr, len, prot, flags, fd, offset) -> addr`: anonymous
    /// memory only (`fd` is ignored, `offset` must be page-aligned). As on
    /// Linux, flags the kernel does not know are ignored.
    Mmap = 9,
    /// `mprotect(addr, len, prot) -> 0`.
    Mprotect = 10,
    /// `munmap(addr, len) -> 0`.
    Munmap = 11,
    /// `brk(end) -> end`: moves the end of the heap that starts after the
    /// program's image; returns the end there is (the old one if the move
    /// failed, and the current one for `brk(0)`).
    Brk = 12,
    /// `rt_sigaction(signal, act, oldact, sigsetsize) -> 0`: there are no
    /// signals to deliver here, so the call checks its arguments, reports
    /// the default action, and records nothing.
    RtSigaction = 13,
    /// `rt_sigprocmask(how, set, oldset, sigsetsize) -> 0`: checks its
    /// arguments and reports an empty mask (no signal is ever pending).
    RtSigprocmask = 14,
    /// `ioctl(fd, request, arg) -> 0`: the console answers `TCGETS` and
    /// `TIOCGWINSZ` as a terminal does ([`console`](crate::console)), and
    /// `ENOTTY` to every other request.
    Ioctl = 16,
    /// `writev(fd, iov, iovcnt) -> count`: [`Write`](Self::Write) of each
    /// `struct iovec` in turn.
    Writev = 20,
    /// `sched_yield() -> 0`: let another thread run.
    SchedYield = 24,
    /// `madvise(addr, len, advice) -> 0`: [`advice::DONTNEED`](crate::advice::DONTNEED) and
    /// [`advice::PAGEOUT`](crate::advice::PAGEOUT).
    Madvise = 28,
    /// `nanosleep(req, rem) -> 0`: sleeps for the [`Timespec`](crate::Timespec) at `req`
    /// (nothing interrupts a sleep here, so `rem` is never written).
    Nanosleep = 35,
    /// `getpid() -> pid`.
    GetPid = 39,
    /// `clone(flags, stack, parent_tid, child_tid, tls) -> tid`: a thread
    /// of this process (the flags pthreads pass, [`CloneFlags::THREAD_FLAGS`](crate::CloneFlags::THREAD_FLAGS))
    /// or, with `SIGCHLD` alone as the exit signal, a child process like
    /// [`Fork`](Self::Fork). The child continues from the call with 0
    /// returned, on `stack` if it is not 0.
    Clone = 56,
    /// `fork() -> pid`: a child process with a copy of the caller's memory
    /// (private pages copy-on-write, `MAP_SHARED` regions shared) and one
    /// thread, the caller's, which sees 0 returned; the parent sees the
    /// child's pid, and may `wait4` for it.
    Fork = 57,
    /// `exit(value) -> !`: ends the calling thread (Linux's `exit` ends one
    /// thread; [`ExitGroup`](Self::ExitGroup) ends the process). The last
    /// thread's value is the process's exit code.
    Exit = 60,
    /// `wait4(pid, wstatus, options, rusage) -> pid`: waits for the child
    /// `pid` to end (any child for -1 or 0), or with `WNOHANG` returns 0 if
    /// none has, and stores its status at `wstatus` (if not null) as Linux
    /// encodes it ([`wait_status`](crate::wait_status)); `rusage`, if not
    /// null, is zeroed (nothing is accounted).
    Wait4 = 61,
    /// `uname(buf) -> 0`: the `struct utsname` of [`identity`](crate::identity).
    Uname = 63,
    /// `readlink(path, buf, size)`: `ENOENT` (there is no file system; a
    /// C library asking for `/proc/self/exe` does without).
    Readlink = 89,
    /// `arch_prctl(code, addr) -> 0`: `ARCH_SET_FS` and `ARCH_GET_FS`, the
    /// thread's FS base (its thread-local storage).
    ArchPrctl = 158,
    /// `gettid() -> tid`.
    GetTid = 186,
    /// `futex(addr, op, value, timeout, addr2, value3) -> n`: `FUTEX_WAIT`,
    /// `FUTEX_WAKE` and their bitset forms ([`futex`](crate::futex)), private
    /// or not, on this process's memory.
    Futex = 202,
    /// `sched_setaffinity(pid, len, mask) -> 0`: the calling thread (`pid`
    /// 0) may run on the CPUs whose bits are set in the `len` bytes at
    /// `mask`. This kernel's scheduler pins a thread to one CPU or lets it
    /// run anywhere: a mask with every online CPU means anywhere, any other
    /// pins the thread to one CPU of the mask (the one it is on, if the
    /// mask has it), where it is when the call returns.
    SchedSetaffinity = 203,
    /// `sched_getaffinity(pid, len, mask) -> bytes`: the CPUs the calling
    /// thread may run on, as a mask of `len` bytes (a multiple of 8, large
    /// enough for every CPU the kernel can have).
    SchedGetaffinity = 204,
    /// `set_tid_address(addr) -> tid`: when the calling thread ends, the
    /// kernel writes 0 to the `u32` at `addr` and wakes one futex waiter
    /// there (how `pthread_join` learns that a thread is gone).
    SetTidAddress = 218,
    /// `clock_gettime(clock, tp) -> 0`: stores the time at `tp` as a
    /// [`Timespec`](crate::Timespec). Every clock Linux offers for reading counts from boot
    /// here (there is no real-time clock).
    ClockGettime = 228,
    /// `clock_nanosleep(clock, flags, req, rem) -> 0`: sleeps for `req`,
    /// or until it with `TIMER_ABSTIME`.
    ClockNanosleep = 230,
    /// `exit_group(code) -> !`: ends the whole process.
    ExitGroup = 231,
    /// `openat(dirfd, path, flags, mode) -> fd`: there is no file system,
    /// so every path is `ENOENT` (a libc that probes `/proc` or `/sys`
    /// falls back).
    Openat = 257,
    /// `newfstatat(dirfd, path, buf, flags) -> 0`: with `AT_EMPTY_PATH` and
    /// an empty path, [`Fstat`](Self::Fstat) of `dirfd`; any path is
    /// `ENOENT`.
    Newfstatat = 262,
    /// `readlinkat(dirfd, path, buf, size)`: `ENOENT`, as
    /// [`Readlink`](Self::Readlink).
    Readlinkat = 267,
    /// `set_robust_list(head, len)`: `ENOSYS`, as on a Linux built without
    /// robust futexes (a libc then does without them).
    SetRobustList = 273,
    /// `prlimit64(pid, resource, new, old) -> 0`: reads the calling
    /// process's limits ([`identity::rlimit`](crate::identity::rlimit)); they cannot be changed.
    Prlimit64 = 302,
    /// `getcpu(cpu, node, _) -> 0`: stores the caller's CPU (a `u32`) at
    /// `cpu` and node 0 at `node`, each if not null.
    GetCpu = 309,
    /// `getrandom(buf, len, flags) -> len`: bytes from the kernel's
    /// generator (not a cryptographic one: see the kernel's `entropy`).
    GetRandom = 318,
    /// `rseq(...)`: `ENOSYS`, as on a Linux without restartable sequences.
    Rseq = 334,
    /// `clone3(args, size)`: `ENOSYS`, as on a Linux older than 5.3; a libc
    /// falls back to [`Clone`](Self::Clone).
    Clone3 = 435,
    /// `spawn(name, name_len, args, args_len) -> pid`: start a program of
    /// the ramdisk. This kernel's own (there is no file system for
    /// `execve`).
    Spawn = OWN_CALLS,
    /// `tlb_stats(buf, len) -> bytes`: copy the TLB counters
    /// ([`TLB_COUNTER_NAMES`](crate::TLB_COUNTER_NAMES)). This kernel's own.
    TlbStats = OWN_CALLS + 1,
}

/// The first number of this kernel's own system calls, far above Linux's
/// last (x86-64 Linux numbers its calls below 500).
pub const OWN_CALLS: u64 = 1024;

impl Syscall {
    /// Every system call, in number order.
    pub const ALL: [Syscall; 40] = [
        Self::Write,
        Self::Fstat,
        Self::Mmap,
        Self::Mprotect,
        Self::Munmap,
        Self::Brk,
        Self::RtSigaction,
        Self::RtSigprocmask,
        Self::Ioctl,
        Self::Writev,
        Self::SchedYield,
        Self::Madvise,
        Self::Nanosleep,
        Self::GetPid,
        Self::Clone,
        Self::Fork,
        Self::Exit,
        Self::Wait4,
        Self::Uname,
        Self::Readlink,
        Self::ArchPrctl,
        Self::GetTid,
        Self::Futex,
        Self::SchedSetaffinity,
        Self::SchedGetaffinity,
        Self::SetTidAddress,
        Self::ClockGettime,
        Self::ClockNanosleep,
        Self::ExitGroup,
        Self::Openat,
        Self::Newfstatat,
        Self::Readlinkat,
        Self::SetRobustList,
        Self::Prlimit64,
        Self::GetCpu,
        Self::GetRandom,
        Self::Rseq,
        Self::Clone3,
        Self::Spawn,
        Self::TlbStats,
    ];

    /// The system call with number `number`, if there is one.
    pub fn from_number(number: u64) -> Option<Self> {
        Self::ALL.into_iter().find(|&call| call as u64 == number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers are Linux x86-64's (`syscall_64.tbl`), and this kernel's
    /// own lie above its table; `ALL` is in number order, without gaps in
    /// what `from_number` finds.
    #[test]
    fn numbers_are_linux_numbers() {
        let linux = [
            (Syscall::Write, 1),
            (Syscall::Fstat, 5),
            (Syscall::Mmap, 9),
            (Syscall::Mprotect, 10),
            (Syscall::Munmap, 11),
            (Syscall::Brk, 12),
            (Syscall::RtSigaction, 13),
            (Syscall::RtSigprocmask, 14),
            (Syscall::Ioctl, 16),
            (Syscall::Writev, 20),
            (Syscall::SchedYield, 24),
            (Syscall::Madvise, 28),
            (Syscall::Nanosleep, 35),
            (Syscall::GetPid, 39),
            (Syscall::Clone, 56),
            (Syscall::Fork, 57),
            (Syscall::Exit, 60),
            (Syscall::Wait4, 61),
            (Syscall::Uname, 63),
            (Syscall::Readlink, 89),
            (Syscall::ArchPrctl, 158),
            (Syscall::GetTid, 186),
            (Syscall::Futex, 202),
            (Syscall::SchedSetaffinity, 203),
            (Syscall::SchedGetaffinity, 204),
            (Syscall::SetTidAddress, 218),
            (Syscall::ClockGettime, 228),
            (Syscall::ClockNanosleep, 230),
            (Syscall::ExitGroup, 231),
            (Syscall::Openat, 257),
            (Syscall::Newfstatat, 262),
            (Syscall::Readlinkat, 267),
            (Syscall::SetRobustList, 273),
            (Syscall::Prlimit64, 302),
            (Syscall::GetCpu, 309),
            (Syscall::GetRandom, 318),
            (Syscall::Rseq, 334),
            (Syscall::Clone3, 435),
        ];
        for (call, number) in linux {
            assert_eq!(call as u64, number, "{call:?}");
        }
        for call in Syscall::ALL {
            assert_eq!(Syscall::from_number(call as u64), Some(call));
            let own = !linux.iter().any(|&(known, _)| known == call);
            assert_eq!(own, call as u64 >= OWN_CALLS, "{call:?}");
        }
        assert!(Syscall::ALL.is_sorted_by_key(|&call| call as u64));
        for unknown in [
            0,
            2,
            3,
            55,
            201,
            436,
            500,
            OWN_CALLS - 1,
            OWN_CALLS + 100,
            u64::MAX,
        ] {
            assert_eq!(Syscall::from_number(unknown), None, "{unknown}");
        }
    }
}
