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

use abi::{Errno, MapFlags, Prot, Syscall};
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
        Some(Syscall::Exit) => {
            let code = args[0] as i32;
            process.kill(code);
            drop((me, process));
            sched::exit_current(i64::from(code))
        }
        Some(Syscall::ThreadExit) => {
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
    [a0, a1, a2, a3, _, _]: [u64; 6],
    me: &Arc<Thread>,
    process: &Arc<Process>,
) -> SyscallResult {
    let space = &process.space;
    match call {
        Syscall::Write => write(space, a0, a1),
        Syscall::ThreadSpawn => thread_spawn(process, a0, a1, a2),
        Syscall::ThreadJoin => thread_join(me, process, a0),
        Syscall::Yield => {
            sched::yield_now();
            Ok(0)
        }
        Syscall::SetAffinity => set_affinity(me, a0),
        Syscall::CpuId => Ok(percpu::current().index as u64),
        Syscall::Sleep => {
            sched::sleep(a0);
            Ok(0)
        }
        Syscall::Clock => Ok(time::now_ns()),
        Syscall::Mmap => mmap(space, a0, a1, a2, a3),
        Syscall::Munmap => space.unmap(a0, a1).map(|()| 0),
        Syscall::Mprotect => {
            let protection = Prot::from_bits(a2).ok_or(Errno::Inval)?;
            space.protect(a0, a1, protection).map(|()| 0)
        }
        Syscall::Madvise => match a2 {
            abi::advice::DONTNEED => space.discard(a0, a1).map(|()| 0),
            abi::advice::PAGEOUT => space.page_out(a0, a1).map(|()| 0),
            _ => Err(Errno::Inval),
        },
        Syscall::Spawn => spawn(process, a0, a1, a2, a3),
        Syscall::Wait => wait(process, a0),
        Syscall::TlbStats => tlb_stats(space, a0, a1),
        Syscall::GetPid => Ok(process.pid),
        Syscall::Exit | Syscall::ThreadExit | Syscall::Fork => {
            unreachable!("`dispatch` handles these itself")
        }
    }
}

/// `write(buffer, len)` to the console. Like Linux, a long write is a short
/// write.
fn write(space: &AddressSpace, buffer: u64, len: u64) -> SyscallResult {
    let len = len.min(MAX_WRITE);
    let bytes = space.copy_in(buffer, len as usize)?;
    hal::print!("{}", Lossy(&bytes));
    Ok(len)
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

/// `set_affinity(cpu)`: pins the calling thread to `cpu` (or unpins it with
/// `ANY_CPU`), moving there at once.
fn set_affinity(me: &Thread, cpu: u64) -> SyscallResult {
    if cpu != abi::ANY_CPU && !smp::is_online(cpu) {
        return Err(Errno::Inval);
    }
    me.set_affinity(cpu);
    if cpu != abi::ANY_CPU && cpu != percpu::current().index as u64 {
        // The scheduler queues us on the new CPU; we continue there.
        sched::yield_now();
    }
    Ok(0)
}

/// `mmap(addr, len, prot, flags)`: anonymous memory, private or shared,
/// anywhere or at `addr` (`MAP_FIXED`). Returns where.
fn mmap(space: &AddressSpace, addr: u64, len: u64, prot: u64, flags: u64) -> SyscallResult {
    let flags = MapFlags::from_bits(flags).ok_or(Errno::Inval)?;
    let sharing = flags & (MapFlags::SHARED | MapFlags::PRIVATE);
    if !flags.contains(MapFlags::ANONYMOUS)
        || (sharing != MapFlags::SHARED && sharing != MapFlags::PRIVATE)
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

/// `wait(pid)`: waits for the child `pid` to exit and returns its status.
fn wait(process: &Process, pid: u64) -> SyscallResult {
    let child = Process::find(pid)
        .filter(|child| child.parent == Some(process.pid))
        .ok_or(Errno::Child)?;
    let code = child.wait().ok_or(Errno::Srch)?;
    Ok(code as u32 as u64)
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
