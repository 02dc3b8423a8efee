//! One typed wrapper per system call (see [`abi::Syscall`] for what each
//! does), returning `Result<_, Errno>`.
//!
//! Most wrappers are safe: the kernel validates every pointer and length,
//! and the ones passed here come from Rust references. A few are `unsafe`
//! because their *success* could break Rust's rules: unmapping or
//! re-protecting memory that references still point to, or starting a
//! thread at an arbitrary address.

use core::sync::atomic::AtomicU32;

use abi::{Errno, MapFlags, Prot, Syscall, Timespec};

use crate::raw::{syscall0, syscall1, syscall2, syscall3, syscall4, syscall6};

/// Turns a raw result into `Ok(value)` or the error it encodes.
///
/// # Panics
///
/// On a negative value that is no known [`Errno`]: a kernel bug.
fn result(raw: i64) -> Result<u64, Errno> {
    match u64::try_from(raw) {
        Ok(value) => Ok(value),
        Err(_) => Err(Errno::from_return(raw)
            .unwrap_or_else(|| panic!("the kernel returned {raw}, which is no errno"))),
    }
}

/// Standard output, the console.
pub const STDOUT: u64 = 1;

/// Prints `bytes` on the console (standard output) and returns how many
/// were written.
pub fn write(bytes: &[u8]) -> Result<usize, Errno> {
    // SAFETY: the kernel only reads the buffer, which the slice owns.
    let raw = unsafe {
        syscall3(
            Syscall::Write as u64,
            STDOUT,
            bytes.as_ptr() as u64,
            bytes.len() as u64,
        )
    };
    result(raw).map(|written| written as usize)
}

/// Ends the whole process (every thread) with exit status `code`.
pub fn exit(code: i32) -> ! {
    // Passed zero-extended (`-1` is `0xffff_ffff`), so that `wait`'s result
    // is never negative and cannot be mistaken for an error.
    // SAFETY: ending the process cannot break anything in it.
    unsafe { syscall1(Syscall::ExitGroup as u64, u64::from(code as u32)) };
    // The kernel never returns from `exit`; if it did, die by a fault rather
    // than run on.
    // SAFETY: `ud2` raises an invalid-opcode exception and never continues.
    unsafe { core::arch::asm!("ud2", options(noreturn)) }
}

/// `futex(FUTEX_WAIT)` on `word`: sleeps while it holds `expected`, until
/// a wake. `Err(Again)` if it held another value already (the caller
/// re-checks in either case).
pub fn futex_wait(word: &AtomicU32, expected: u32) -> Result<(), Errno> {
    // SAFETY: the kernel only reads the word, which the reference keeps
    // alive for the call.
    let raw = unsafe {
        syscall4(
            Syscall::Futex as u64,
            word.as_ptr() as u64,
            abi::futex::WAIT | abi::futex::PRIVATE,
            u64::from(expected),
            0,
        )
    };
    result(raw).map(drop)
}

/// `futex(FUTEX_WAKE)`: wakes at most `count` threads sleeping on `word`;
/// returns how many woke.
pub fn futex_wake(word: &AtomicU32, count: u32) -> Result<u64, Errno> {
    // SAFETY: waking touches no memory of this process.
    result(unsafe {
        syscall3(
            Syscall::Futex as u64,
            word.as_ptr() as u64,
            abi::futex::WAKE | abi::futex::PRIVATE,
            u64::from(count),
        )
    })
}

/// `futex(FUTEX_CMP_REQUEUE)`: if `word` still holds `expected`, wakes at
/// most `wakes` threads sleeping on it and moves at most `moves` of the
/// others to sleep on `to`; returns how many were woken or moved.
pub fn futex_cmp_requeue(
    word: &AtomicU32,
    wakes: u32,
    moves: u32,
    to: &AtomicU32,
    expected: u32,
) -> Result<u64, Errno> {
    // SAFETY: the kernel only reads `word`, which the reference keeps alive
    // for the call; `to` is only a key.
    result(unsafe {
        syscall6(
            Syscall::Futex as u64,
            word.as_ptr() as u64,
            abi::futex::CMP_REQUEUE | abi::futex::PRIVATE,
            u64::from(wakes),
            u64::from(moves),
            to.as_ptr() as u64,
            u64::from(expected),
        )
    })
}

/// Ends the calling thread (`exit`); the last thread's `value` is the
/// process's exit code.
pub fn thread_exit(value: u64) -> ! {
    // SAFETY: ending this thread cannot break the others.
    unsafe { syscall1(Syscall::Exit as u64, value) };
    // SAFETY: as in `exit`.
    unsafe { core::arch::asm!("ud2", options(noreturn)) }
}

/// Lets another thread run on this CPU.
pub fn yield_now() -> Result<(), Errno> {
    // SAFETY: touches no memory of this process.
    result(unsafe { syscall0(Syscall::SchedYield as u64) }).map(drop)
}

/// Pins the calling thread to `cpu`, or lets it run anywhere with
/// [`abi::ANY_CPU`] (`sched_setaffinity` with a mask of that one CPU, or of
/// all). The thread is on that CPU when this returns.
pub fn set_affinity(cpu: u64) -> Result<(), Errno> {
    let mut mask = [0u8; abi::AFFINITY_CPUS / 8];
    if cpu == abi::ANY_CPU {
        mask.fill(0xff);
    } else {
        let byte = mask.get_mut((cpu / 8) as usize).ok_or(Errno::Inval)?;
        *byte = 1 << (cpu % 8);
    }
    // SAFETY: the kernel only reads the mask, which we own.
    let raw = unsafe {
        syscall3(
            Syscall::SchedSetaffinity as u64,
            0,
            mask.len() as u64,
            mask.as_ptr() as u64,
        )
    };
    result(raw).map(drop)
}

/// The CPU the caller runs on (it may have moved by the time you look).
pub fn cpu_id() -> Result<u64, Errno> {
    let mut cpu = 0u32;
    // SAFETY: the kernel writes one `u32`, into `cpu`.
    let raw = unsafe { syscall3(Syscall::GetCpu as u64, &raw mut cpu as u64, 0, 0) };
    result(raw).map(|_| u64::from(cpu))
}

/// Sleeps for at least `ns` nanoseconds.
pub fn sleep(ns: u64) -> Result<(), Errno> {
    let request = Timespec::from_ns(ns).to_bytes();
    // SAFETY: the kernel only reads the request, which we own.
    result(unsafe { syscall2(Syscall::Nanosleep as u64, request.as_ptr() as u64, 0) }).map(drop)
}

/// Nanoseconds since boot, the same clock on every CPU
/// (`clock_gettime(CLOCK_MONOTONIC)`).
pub fn clock() -> Result<u64, Errno> {
    let mut time = [0u8; Timespec::SIZE];
    // SAFETY: the kernel writes a `Timespec`, into `time`.
    let raw = unsafe {
        syscall2(
            Syscall::ClockGettime as u64,
            abi::clock::MONOTONIC,
            time.as_mut_ptr() as u64,
        )
    };
    result(raw)?;
    Timespec::from_bytes(time).to_ns().ok_or(Errno::Inval)
}

/// Maps `len` bytes (rounded up to whole pages) of fresh, zero-filled
/// memory wherever the kernel likes, with protection `prot`.
pub fn mmap_anonymous(len: usize, prot: Prot) -> Result<*mut u8, Errno> {
    // Without `FIXED` the kernel picks unused addresses, so nothing that
    // exists can be affected.
    // SAFETY: a new mapping does not change existing memory.
    unsafe { mmap(0, len, prot, MapFlags::PRIVATE | MapFlags::ANONYMOUS) }
}

/// Maps `len` bytes (rounded up to whole pages) of fresh, zero-filled
/// memory wherever the kernel likes, with protection `prot`, shared with the
/// children [`fork`] makes from now on.
pub fn mmap_shared(len: usize, prot: Prot) -> Result<*mut u8, Errno> {
    // SAFETY: as for `mmap_anonymous`, a new mapping changes nothing that
    // exists.
    unsafe { mmap(0, len, prot, MapFlags::SHARED | MapFlags::ANONYMOUS) }
}

/// `mmap` with every argument: `addr` is a hint, or the exact address with
/// [`MapFlags::FIXED`].
///
/// # Safety
///
/// With `FIXED`, the new mapping replaces whatever was at `addr`; nothing
/// may still refer to that memory.
pub unsafe fn mmap(addr: u64, len: usize, prot: Prot, flags: MapFlags) -> Result<*mut u8, Errno> {
    // SAFETY: the caller upholds the contract above.
    let raw = unsafe {
        syscall6(
            Syscall::Mmap as u64,
            addr,
            len as u64,
            prot.bits(),
            flags.bits(),
            u64::MAX,
            0,
        )
    };
    result(raw).map(|addr| addr as *mut u8)
}

/// Unmaps the pages of `addr..addr + len`.
///
/// # Safety
///
/// Nothing may use that memory afterwards.
pub unsafe fn munmap(addr: *mut u8, len: usize) -> Result<(), Errno> {
    // SAFETY: the caller upholds the contract above.
    result(unsafe { syscall2(Syscall::Munmap as u64, addr as u64, len as u64) }).map(drop)
}

/// Changes the protection of the pages of `addr..addr + len`.
///
/// # Safety
///
/// No reference into that memory may be used in a way the new protection
/// forbids (such an access kills the process).
pub unsafe fn mprotect(addr: *mut u8, len: usize, prot: Prot) -> Result<(), Errno> {
    // SAFETY: the caller upholds the contract above.
    let raw = unsafe {
        syscall3(
            Syscall::Mprotect as u64,
            addr as u64,
            len as u64,
            prot.bits(),
        )
    };
    result(raw).map(drop)
}

/// Gives the kernel advice about `addr..addr + len` (see [`abi::advice`]):
/// `DONTNEED` drops the pages (they read as zero afterwards), `PAGEOUT`
/// moves them to swap (their content comes back on the next touch).
///
/// # Safety
///
/// With `DONTNEED` the memory's content is lost; nothing may rely on it.
pub unsafe fn madvise(addr: *mut u8, len: usize, advice: u64) -> Result<(), Errno> {
    // SAFETY: the caller upholds the contract above.
    result(unsafe { syscall3(Syscall::Madvise as u64, addr as u64, len as u64, advice) }).map(drop)
}

/// Starts program `name` from the ramdisk with the argument string `args`;
/// returns its process id.
pub fn spawn(name: &str, args: &str) -> Result<u64, Errno> {
    // SAFETY: the kernel only reads the two strings.
    let raw = unsafe {
        syscall4(
            Syscall::Spawn as u64,
            name.as_ptr() as u64,
            name.len() as u64,
            args.as_ptr() as u64,
            args.len() as u64,
        )
    };
    result(raw)
}

/// Waits for child process `pid` to end and returns its exit code as a
/// shell shows it: the low 8 bits [`exit`] passed, or 128 plus the signal
/// that killed it (139 for a process killed for a bad access).
pub fn wait(pid: u64) -> Result<i32, Errno> {
    let mut status = 0i32;
    // SAFETY: the kernel writes one `i32`, into `status`.
    let raw = unsafe { syscall4(Syscall::Wait4 as u64, pid, &raw mut status as u64, 0, 0) };
    result(raw).map(|_| abi::wait_status::shell_code(status))
}

/// Copies the kernel's TLB counters into `buffer`; returns the number of
/// bytes written.
pub fn tlb_stats(buffer: &mut [u8]) -> Result<usize, Errno> {
    // Any bytes are valid `u8`s.
    // SAFETY: the kernel writes at most `buffer.len()` bytes, into our slice.
    let raw = unsafe {
        syscall2(
            Syscall::TlbStats as u64,
            buffer.as_mut_ptr() as u64,
            buffer.len() as u64,
        )
    };
    result(raw).map(|written| written as usize)
}

/// The calling thread's id.
pub fn gettid() -> Result<u64, Errno> {
    // SAFETY: touches no memory of this process.
    result(unsafe { syscall0(Syscall::GetTid as u64) })
}

/// The CPUs thread `tid` of this process (0: the caller) may run on, as
/// `sched_getaffinity`'s mask.
pub fn affinity_of(tid: u64) -> Result<[u8; abi::AFFINITY_CPUS / 8], Errno> {
    let mut mask = [0u8; abi::AFFINITY_CPUS / 8];
    // SAFETY: the kernel writes at most the mask's length, into the mask.
    let raw = unsafe {
        syscall3(
            Syscall::SchedGetaffinity as u64,
            tid,
            mask.len() as u64,
            mask.as_mut_ptr() as u64,
        )
    };
    result(raw).map(|_| mask)
}

/// This process's id.
pub fn getpid() -> Result<u64, Errno> {
    // SAFETY: touches no memory of this process.
    result(unsafe { syscall0(Syscall::GetPid as u64) })
}

/// Makes a child process with a copy of this one's memory (private pages
/// copy-on-write, `MAP_SHARED` mappings shared) and one thread, the
/// caller's. Returns the child's pid in the parent and 0 in the child.
///
/// # Safety
///
/// In the child only the calling thread exists. The caller must not rely,
/// in the child, on anything another thread was in the middle of: a lock it
/// held, a structure it was changing.
pub unsafe fn fork() -> Result<u64, Errno> {
    // SAFETY: the child's memory is a copy; the caller vouches for the rest.
    result(unsafe { syscall0(Syscall::Fork as u64) })
}
