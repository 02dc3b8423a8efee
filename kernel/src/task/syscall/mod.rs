//! System calls: decode, validate, run, return.
//!
//! The entry stub ([`hal::syscall`]) hands over the caller's
//! registers as a [`TrapFrame`]. Every argument is untrusted: numbers are
//! checked against [`abi::Syscall`], flags against the bits the kernel
//! knows, pointers and lengths by the address space itself (which refuses
//! anything outside the caller's regions). A bad argument is an error code
//! in `rax`, never a kernel panic.

use alloc::{string::String, sync::Arc};
use core::{
    fmt::Write as _,
    sync::atomic::{AtomicU64, Ordering},
};

use abi::{Errno, MapFlags, Prot, Syscall, Timespec};
use mm::MAX_CPUS;

use super::{
    loader,
    process::Process,
    sched,
    thread::Thread,
    vm::{AddressSpace, Sharing},
};
use crate::smp;
use hal::{context::ThreadStart, percpu, time, trap::TrapFrame};

/// The longest single `write`.
const MAX_WRITE: u64 = 64 * 1024;
/// The longest program name and argument string `spawn` accepts.
const MAX_NAME: u64 = 64;
const MAX_ARGS: u64 = 4096;

type SyscallResult = Result<u64, Errno>;

/// The last system call each CPU started (one per CPU, in [`LAST_CALLS`]),
/// for crash reports: when hostile input brings the kernel down, the report
/// names the call. Written with relaxed stores on every call; read only on
/// the fatal path, where a torn record is still better than none.
struct LastCall {
    /// Process id (0: no call yet), thread id, number, first four arguments.
    words: [AtomicU64; 7],
}

/// Each CPU's last call, by CPU index.
static LAST_CALLS: [LastCall; MAX_CPUS] = [const {
    LastCall {
        words: [const { AtomicU64::new(0) }; 7],
    }
}; MAX_CPUS];

impl LastCall {
    fn record(&self, pid: u64, tid: u64, number: u64, args: &[u64; 6]) {
        let values = [pid, tid, number, args[0], args[1], args[2], args[3]];
        for (word, value) in self.words.iter().zip(values) {
            word.store(value, Ordering::Relaxed);
        }
    }
}

/// Shows bytes as UTF-8, each invalid sequence as U+FFFD, without the
/// allocation `String::from_utf8_lossy` makes for invalid input (up to three
/// times the input: a cost a program could choose).
struct Lossy<'a>(&'a [u8]);

impl core::fmt::Display for Lossy<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for chunk in self.0.utf8_chunks() {
            f.write_str(chunk.valid())?;
            if !chunk.invalid().is_empty() {
                f.write_char(char::REPLACEMENT_CHARACTER)?;
            }
        }
        Ok(())
    }
}

/// Prints each CPU's `LastCall`, if any CPU made one. Never blocks.
pub fn print_last_calls() {
    let mut header = false;
    for index in &smp::online() {
        let [pid, tid, number, a0, a1, a2, a3] = LAST_CALLS[index]
            .words
            .each_ref()
            .map(|word| word.load(Ordering::Relaxed));
        if pid == 0 {
            continue;
        }
        if !header {
            hal::serial::write_emergency(format_args!("last system call started on each CPU:\n"));
            header = true;
        }
        let args = format_args!("({a0:#x}, {a1:#x}, {a2:#x}, {a3:#x})");
        match Syscall::from_number(number) {
            Some(call) => hal::serial::write_emergency(format_args!(
                "  cpu {index}: pid {pid} thread {tid}: {call:?}{args}\n"
            )),
            None => hal::serial::write_emergency(format_args!(
                "  cpu {index}: pid {pid} thread {tid}: unknown system call {number}{args}\n"
            )),
        }
    }
}

/// Handles the system call in `frame` (entered with interrupts off) and
/// stores its result in `frame.rax`.
pub fn dispatch(frame: &mut TrapFrame) {
    hal::cpu::enable_interrupts();
    let me = sched::current();
    let process = Arc::clone(
        me.process
            .as_ref()
            .expect("only user threads make system calls"),
    );
    let args = [
        frame.rdi, frame.rsi, frame.rdx, frame.r10, frame.r8, frame.r9,
    ];
    LAST_CALLS[percpu::current().index].record(process.pid, me.tid, frame.rax, &args);
    let result = match Syscall::from_number(frame.rax) {
        // `exit_current` never returns, so this frame's references to the
        // thread and the process must go first: kept, they would keep both
        // (and the thread's kernel stack) alive forever.
        Some(Syscall::ExitGroup) => {
            let code = args[0] as i32;
            process.kill(code);
            drop((me, process));
            sched::exit_current(i64::from(code))
        }
        Some(Syscall::Exit) => {
            drop((me, process));
            sched::exit_current(args[0] as i64)
        }
        // The child resumes from a copy of this frame, so `fork` needs it.
        Some(Syscall::Fork) => process.fork(frame).map(|child| child.pid),
        Some(call) => handle(call, args, &me, &process),
        None => Err(Errno::NoSys),
    };
    frame.rax = match result {
        Ok(value) => value,
        Err(errno) => (-(errno as i64)) as u64,
    };
    drop((me, process));
    hal::cpu::disable_interrupts();
    super::before_return_to_user();
}

/// Runs every call but the three `dispatch` handles itself, one function
/// each (the simplest inline).
fn handle(
    call: Syscall,
    [a0, a1, a2, a3, _, a5]: [u64; 6],
    me: &Arc<Thread>,
    process: &Arc<Process>,
) -> SyscallResult {
    let space = &process.space;
    match call {
        Syscall::Write => write(space, a0, a1, a2),
        Syscall::Mmap => mmap(space, a0, a1, a2, a3, a5),
        Syscall::Mprotect => {
            let protection = Prot::from_bits(a2).ok_or(Errno::Inval)?;
            space.protect(a0, a1, protection).map(|()| 0)
        }
        Syscall::Munmap => space.unmap(a0, a1).map(|()| 0),
        Syscall::SchedYield => {
            sched::yield_now();
            Ok(0)
        }
        Syscall::Madvise => match a2 {
            abi::advice::DONTNEED => space.discard(a0, a1).map(|()| 0),
            abi::advice::PAGEOUT => space.page_out(a0, a1).map(|()| 0),
            _ => Err(Errno::Inval),
        },
        Syscall::Nanosleep => nanosleep(space, a0),
        Syscall::GetPid => Ok(process.pid),
        Syscall::Wait4 => wait4(process, a0, a1, a2, a3),
        Syscall::GetTid => Ok(me.tid),
        Syscall::SchedSetaffinity => sched_setaffinity(me, space, a0, a1, a2),
        Syscall::ClockGettime => clock_gettime(space, a0, a1),
        Syscall::GetCpu => getcpu(space, a0, a1),
        Syscall::ThreadSpawn => thread_spawn(process, a0, a1, a2),
        Syscall::ThreadJoin => thread_join(me, process, a0),
        Syscall::Spawn => spawn(process, a0, a1, a2, a3),
        Syscall::TlbStats => tlb_stats(space, a0, a1),
        Syscall::Exit | Syscall::ExitGroup | Syscall::Fork => {
            unreachable!("`dispatch` handles these itself")
        }
    }
}

/// `write(fd, buffer, len)` to the console, the only file there is (as
/// standard output and standard error). Like Linux, a long write is a
/// short write.
fn write(space: &AddressSpace, fd: u64, buffer: u64, len: u64) -> SyscallResult {
    if !abi::CONSOLE_FDS.contains(&fd) {
        return Err(Errno::BadF);
    }
    let len = len.min(MAX_WRITE);
    let bytes = space.copy_in(buffer, len as usize)?;
    hal::print!("{}", Lossy(&bytes));
    Ok(len)
}

/// `nanosleep(request, remaining)`: sleeps for the duration at `request`.
/// Nothing interrupts a sleep here, so `remaining` is never written.
fn nanosleep(space: &AddressSpace, request: u64) -> SyscallResult {
    let ns = read_timespec(space, request)?.to_ns().ok_or(Errno::Inval)?;
    sched::sleep(ns);
    Ok(0)
}

/// `clock_gettime(clock, time)`: every clock Linux lets a program read
/// counts from boot here.
fn clock_gettime(space: &AddressSpace, clock: u64, time: u64) -> SyscallResult {
    if !abi::clock::ALL.contains(&clock) {
        return Err(Errno::Inval);
    }
    space.copy_out(time, &Timespec::from_ns(time::now_ns()).to_bytes())?;
    Ok(0)
}

/// `getcpu(cpu, node, _)`: the caller's CPU and NUMA node (always 0), each
/// stored as a `u32` where the pointer is not null.
fn getcpu(space: &AddressSpace, cpu: u64, node: u64) -> SyscallResult {
    let here = percpu::current().index as u32;
    for (pointer, value) in [(cpu, here), (node, 0)] {
        if pointer != 0 {
            space.copy_out(pointer, &value.to_le_bytes())?;
        }
    }
    Ok(0)
}

fn read_timespec(space: &AddressSpace, at: u64) -> Result<Timespec, Errno> {
    let bytes = space.copy_in(at, Timespec::SIZE)?;
    let bytes: [u8; Timespec::SIZE] = bytes[..].try_into().map_err(|_| Errno::Fault)?;
    Ok(Timespec::from_bytes(bytes))
}

/// `thread_spawn(entry, stack_top, arg)`: a new thread of `process` that
/// starts at `entry` as if called with `arg`, on the stack below
/// `stack_top` (16-byte aligned). Returns its id.
fn thread_spawn(process: &Arc<Process>, entry: u64, stack_top: u64, arg: u64) -> SyscallResult {
    if entry >= abi::USER_END || !(abi::PAGE_SIZE..=abi::USER_END).contains(&stack_top) {
        return Err(Errno::Fault);
    }
    if !stack_top.is_multiple_of(16) {
        return Err(Errno::Inval);
    }
    // As if `entry` had been called: the return-address slot below a
    // 16-byte aligned top.
    let start = ThreadStart::User {
        entry,
        stack: stack_top - 8,
        rdi: arg,
        rsi: 0,
    };
    let thread = process.start_thread(start, abi::ANY_CPU)?;
    Ok(thread.tid)
}

/// `thread_join(tid)`: waits for another thread of the process to exit and
/// returns its value.
fn thread_join(me: &Thread, process: &Process, tid: u64) -> SyscallResult {
    if tid == me.tid {
        return Err(Errno::Inval);
    }
    let thread = process.thread(tid).ok_or(Errno::Srch)?;
    let value = sched::join(&thread).ok_or(Errno::Srch)?;
    process.forget_thread(tid);
    Ok(value as u64)
}

// A mask can name every CPU the kernel can have.
const _: () = assert!(abi::AFFINITY_CPUS == MAX_CPUS);

/// `sched_setaffinity(pid, len, mask)` for the calling thread (`pid` 0 or
/// its own id): a mask of every online CPU lets it run anywhere, any other
/// pins it to one CPU of the mask, the one it runs on if the mask has it
/// (this scheduler knows no other sets; running on fewer CPUs than allowed
/// is within the call's promise). The thread is there when the call returns.
fn sched_setaffinity(
    me: &Thread,
    space: &AddressSpace,
    pid: u64,
    len: u64,
    mask: u64,
) -> SyscallResult {
    if pid != 0 && pid != me.tid {
        return Err(Errno::Srch);
    }
    let bytes = (len as usize).min(abi::AFFINITY_CPUS / 8);
    let mask = space.copy_in(mask, bytes)?;
    let allowed = |cpu: usize| {
        mask.get(cpu / 8)
            .is_some_and(|byte| byte & (1 << (cpu % 8)) != 0)
    };
    let online = smp::online();
    let here = percpu::current().index;
    let cpu = if online.iter().all(allowed) {
        abi::ANY_CPU
    } else if allowed(here) {
        here as u64
    } else {
        online
            .iter()
            .find(|&cpu| allowed(cpu))
            .ok_or(Errno::Inval)? as u64
    };
    me.set_affinity(cpu);
    if cpu != abi::ANY_CPU && cpu != here as u64 {
        // The scheduler queues us on the new CPU; we continue there.
        sched::yield_now();
    }
    Ok(0)
}

/// `mmap(addr, len, prot, flags, fd, offset)`: anonymous memory, private
/// or shared, anywhere or at `addr` (`MAP_FIXED`). Returns where. There
/// are no files: a mapping without `MAP_ANONYMOUS` names no file there is.
fn mmap(
    space: &AddressSpace,
    addr: u64,
    len: u64,
    prot: u64,
    flags: u64,
    offset: u64,
) -> SyscallResult {
    let flags = MapFlags::from_bits(flags).ok_or(Errno::Inval)?;
    if !flags.contains(MapFlags::ANONYMOUS) {
        return Err(Errno::BadF);
    }
    let sharing = flags & (MapFlags::SHARED | MapFlags::PRIVATE);
    if (sharing != MapFlags::SHARED && sharing != MapFlags::PRIVATE)
        || !offset.is_multiple_of(abi::PAGE_SIZE)
    {
        return Err(Errno::Inval);
    }
    let protection = Prot::from_bits(prot).ok_or(Errno::Inval)?;
    let fixed = flags.contains(MapFlags::FIXED);
    let sharing = if sharing == MapFlags::SHARED {
        Sharing::Shared
    } else {
        Sharing::Private
    };
    space.map_anonymous(addr, len, protection, fixed, sharing)
}

/// `spawn(name, name_len, args, args_len)`: a new process running the
/// initrd's program `name` with the argument string `args`, a child of
/// `process`. Returns its id.
fn spawn(process: &Process, name: u64, name_len: u64, args: u64, args_len: u64) -> SyscallResult {
    if name_len > MAX_NAME || args_len > MAX_ARGS {
        return Err(Errno::Inval);
    }
    let space = &process.space;
    let name =
        String::from_utf8(space.copy_in(name, name_len as usize)?).map_err(|_| Errno::Inval)?;
    let args =
        String::from_utf8(space.copy_in(args, args_len as usize)?).map_err(|_| Errno::Inval)?;
    loader::spawn(&name, &args, Some(process.pid)).map(|child| child.pid)
}

/// `wait4(pid, status, options, usage)`: waits for the child `pid` to end,
/// stores how it ended at `status` and zeroes the `struct rusage` at `usage`
/// (each if not null), and returns `pid`.
fn wait4(process: &Process, pid: u64, status: u64, options: u64, usage: u64) -> SyscallResult {
    /// `sizeof(struct rusage)` on x86-64.
    const RUSAGE_SIZE: usize = 144;
    // Only a given child, and no options: what this kernel's programs need
    // (`-1`, any child, is Linux's too; it is not offered yet).
    if pid as i64 <= 0 || options != 0 {
        return Err(Errno::Inval);
    }
    let child = Process::find(pid)
        .filter(|child| child.parent == Some(process.pid))
        .ok_or(Errno::Child)?;
    child.wait().ok_or(Errno::Srch)?;
    if status != 0 {
        process
            .space
            .copy_out(status, &child.wait_status().to_le_bytes())?;
    }
    if usage != 0 {
        process.space.copy_out(usage, &[0; RUSAGE_SIZE])?;
    }
    Ok(pid)
}

/// `tlb_stats(buffer, len)`: the machine's TLB counters, summed, as
/// little-endian `u64`s in `mm`'s field order (at most `len` bytes).
/// Returns how many bytes were written.
fn tlb_stats(space: &AddressSpace, buffer: u64, len: u64) -> SyscallResult {
    let totals = crate::tlb::system().total_counters();
    let bytes: alloc::vec::Vec<u8> = totals
        .fields()
        .flat_map(|(_, value)| value.to_le_bytes())
        .collect();
    let len = (len as usize).min(bytes.len());
    space.copy_out(buffer, &bytes[..len])?;
    Ok(len as u64)
}
