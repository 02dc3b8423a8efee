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
    /// `mmap(addr, len, prot, flags, fd, offset) -> addr`: anonymous
    /// memory only (`fd` is ignored, `offset` must be page-aligned).
    Mmap = 9,
    /// `mprotect(addr, len, prot) -> 0`.
    Mprotect = 10,
    /// `munmap(addr, len) -> 0`.
    Munmap = 11,
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
    /// `fork() -> pid`: a child process with a copy of the caller's memory
    /// (private pages copy-on-write, `MAP_SHARED` regions shared) and one
    /// thread, the caller's, which sees 0 returned; the parent sees the
    /// child's pid, and may `wait4` for it.
    Fork = 57,
    /// `exit(value) -> !`: ends the calling thread (Linux's `exit` ends one
    /// thread; [`ExitGroup`](Self::ExitGroup) ends the process). `value`
    /// goes to whoever joins the thread; the last thread's is the process's
    /// exit code.
    Exit = 60,
    /// `wait4(pid, wstatus, options, rusage) -> pid`: waits for the child
    /// `pid` to end (`pid > 0`, `options` 0) and stores its status at
    /// `wstatus` (if not null) as Linux encodes it ([`wait_status`](crate::wait_status));
    /// `rusage`, if not null, is zeroed (nothing is accounted).
    Wait4 = 61,
    /// `gettid() -> tid`.
    GetTid = 186,
    /// `sched_setaffinity(pid, len, mask) -> 0`: the calling thread (`pid`
    /// 0) may run on the CPUs whose bits are set in the `len` bytes at
    /// `mask`. This kernel's scheduler pins a thread to one CPU or lets it
    /// run anywhere: a mask with every online CPU means anywhere, any other
    /// pins the thread to one CPU of the mask (the one it is on, if the
    /// mask has it), where it is when the call returns.
    SchedSetaffinity = 203,
    /// `clock_gettime(clock, tp) -> 0`: stores the time at `tp` as a
    /// [`Timespec`](crate::Timespec). Every clock Linux offers for reading counts from boot
    /// here (there is no real-time clock).
    ClockGettime = 228,
    /// `exit_group(code) -> !`: ends the whole process.
    ExitGroup = 231,
    /// `getcpu(cpu, node, _) -> 0`: stores the caller's CPU (a `u32`) at
    /// `cpu` and node 0 at `node`, each if not null.
    GetCpu = 309,
    /// `thread_spawn(entry, stack_top, arg) -> tid`: start a thread in this
    /// process at `entry(arg)` on the given stack. This kernel's own (Linux
    /// starts threads with `clone`).
    ThreadSpawn = OWN_CALLS,
    /// `thread_join(tid) -> value`: wait for a thread of this process and
    /// return the value it passed to `exit`. This kernel's own (Linux
    /// programs wait on a futex).
    ThreadJoin = OWN_CALLS + 1,
    /// `spawn(name, name_len, args, args_len) -> pid`: start a program of
    /// the ramdisk. This kernel's own (there is no file system for
    /// `execve`).
    Spawn = OWN_CALLS + 2,
    /// `tlb_stats(buf, len) -> bytes`: copy the TLB counters
    /// ([`TLB_COUNTER_NAMES`](crate::TLB_COUNTER_NAMES)). This kernel's own.
    TlbStats = OWN_CALLS + 3,
}

/// The first number of this kernel's own system calls, far above Linux's
/// last (x86-64 Linux numbers its calls below 500).
pub const OWN_CALLS: u64 = 1024;

impl Syscall {
    /// Every system call, in number order.
    pub const ALL: [Syscall; 20] = [
        Self::Write,
        Self::Mmap,
        Self::Mprotect,
        Self::Munmap,
        Self::SchedYield,
        Self::Madvise,
        Self::Nanosleep,
        Self::GetPid,
        Self::Fork,
        Self::Exit,
        Self::Wait4,
        Self::GetTid,
        Self::SchedSetaffinity,
        Self::ClockGettime,
        Self::ExitGroup,
        Self::GetCpu,
        Self::ThreadSpawn,
        Self::ThreadJoin,
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
            (Syscall::Mmap, 9),
            (Syscall::Mprotect, 10),
            (Syscall::Munmap, 11),
            (Syscall::SchedYield, 24),
            (Syscall::Madvise, 28),
            (Syscall::Nanosleep, 35),
            (Syscall::GetPid, 39),
            (Syscall::Fork, 57),
            (Syscall::Exit, 60),
            (Syscall::Wait4, 61),
            (Syscall::GetTid, 186),
            (Syscall::SchedSetaffinity, 203),
            (Syscall::ClockGettime, 228),
            (Syscall::ExitGroup, 231),
            (Syscall::GetCpu, 309),
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
        for unknown in [0, 2, 56, 202, 500, OWN_CALLS - 1, OWN_CALLS + 100, u64::MAX] {
            assert_eq!(Syscall::from_number(unknown), None, "{unknown}");
        }
    }
}
