//! System calls: decode, validate, run, return.
//!
//! The entry stub ([`hal::syscall`]) hands over the caller's
//! registers as a [`TrapFrame`]. Every argument is untrusted: numbers are
//! checked against [`abi::Syscall`], flags against the bits the kernel
//! knows, pointers and lengths by the address space itself (which refuses
//! anything outside the caller's regions). A bad argument is an error code
//! in `rax`, never a kernel panic.
//!
//! The calls are Linux's ([`abi::Syscall`]), grouped in files by what they
//! touch: `console` (the one file), `memory` (the address space), `threads`
//! (clone, futexes, the FS base, affinity), `time`, `processes` (fork,
//! waiting, the ramdisk's programs) and `system` (what a program may ask
//! about the machine, and the calls a C library probes).

mod console;
mod memory;
mod processes;
mod system;
mod threads;
mod time;

use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use abi::{Errno, Syscall};
use mm::MAX_CPUS;

use super::{process::Process, sched, thread::Thread};
use crate::smp;
use hal::{percpu, trap::TrapFrame};

type SyscallResult = Result<u64, Errno>;

/// Whether a call this kernel does not offer is named in the log
/// (`syscall.unknown=log`): how one finds what a C library or program
/// still needs.
static LOG_UNKNOWN: AtomicBool = AtomicBool::new(false);

/// Turns the log of unknown system calls on or off (the boot code, from
/// the command line).
pub fn log_unknown_calls(on: bool) {
    LOG_UNKNOWN.store(on, Ordering::Relaxed);
}

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
        // The child resumes from a copy of this frame, so these need it.
        Some(Syscall::Fork) => processes::fork(frame, &process),
        Some(Syscall::Clone) => threads::clone(frame, &process, args),
        Some(call) => handle(call, args, &me, &process),
        None => {
            if LOG_UNKNOWN.load(Ordering::Relaxed) {
                log::warn!(
                    "syscall: {} (pid {}, thread {}) made system call {}, which this kernel \
                     does not offer ({:#x}, {:#x}, {:#x}, ...): ENOSYS",
                    process.name,
                    process.pid,
                    me.tid,
                    frame.rax,
                    args[0],
                    args[1],
                    args[2]
                );
            }
            Err(Errno::NoSys)
        }
    };
    frame.rax = match result {
        Ok(value) => value,
        Err(errno) => (-(errno as i64)) as u64,
    };
    drop((me, process));
    hal::cpu::disable_interrupts();
    super::before_return_to_user();
}

/// Runs every call but the four `dispatch` handles itself.
fn handle(
    call: Syscall,
    [a0, a1, a2, a3, a4, a5]: [u64; 6],
    me: &Arc<Thread>,
    process: &Arc<Process>,
) -> SyscallResult {
    let space = &process.space;
    match call {
        Syscall::Write => console::write(space, a0, a1, a2),
        Syscall::Writev => console::writev(space, a0, a1, a2),
        Syscall::Ioctl => console::ioctl(space, a0, a1, a2),
        Syscall::Openat | Syscall::Readlinkat => console::no_such_path(space, a1),
        Syscall::Readlink => console::no_such_path(space, a0),
        Syscall::Fstat => console::fstat(space, a0, a1),
        Syscall::Newfstatat => console::newfstatat(space, a0, a1, a2, a3),
        Syscall::Mmap => memory::mmap(space, a0, a1, a2, a3, a5),
        Syscall::Mprotect => memory::mprotect(space, a0, a1, a2),
        Syscall::Munmap => space.unmap(a0, a1).map(|()| 0),
        Syscall::Madvise => memory::madvise(space, a0, a1, a2),
        Syscall::Brk => Ok(process.move_break(a0)),
        Syscall::SchedYield => {
            sched::yield_now();
            Ok(0)
        }
        Syscall::GetPid => Ok(process.pid),
        Syscall::GetTid => Ok(me.tid),
        Syscall::Futex => threads::futex(me, process, [a0, a1, a2, a3, a4, a5]),
        Syscall::SetTidAddress => {
            me.clear_child_tid.store(a0, Ordering::Relaxed);
            Ok(me.tid)
        }
        Syscall::ArchPrctl => threads::arch_prctl(me, space, a0, a1),
        Syscall::SchedSetaffinity => threads::sched_setaffinity(me, process, a0, a1, a2),
        Syscall::SchedGetaffinity => threads::sched_getaffinity(me, process, a0, a1, a2),
        Syscall::Nanosleep => time::nanosleep(space, a0),
        Syscall::ClockNanosleep => time::clock_nanosleep(space, a0, a1, a2),
        Syscall::ClockGettime => time::clock_gettime(space, a0, a1),
        Syscall::Wait4 => processes::wait4(process, a0, a1, a2, a3),
        Syscall::Spawn => processes::spawn(process, a0, a1, a2, a3),
        Syscall::GetCpu => system::getcpu(space, a0, a1),
        Syscall::Uname => system::uname(space, a0),
        Syscall::Prlimit64 => system::prlimit64(process, a0, a1, a2, a3),
        Syscall::GetRandom => system::getrandom(space, a0, a1, a2),
        Syscall::RtSigaction => system::rt_sigaction(space, a0, a1, a2, a3),
        Syscall::RtSigprocmask => system::rt_sigprocmask(space, a0, a1, a2, a3),
        Syscall::TlbStats => system::tlb_stats(space, a0, a1),
        // Probed by C libraries; answered as a Linux without the feature
        // answers, so that the library does without it.
        Syscall::SetRobustList | Syscall::Rseq | Syscall::Clone3 => Err(Errno::NoSys),
        Syscall::Exit | Syscall::ExitGroup | Syscall::Fork | Syscall::Clone => {
            unreachable!("`dispatch` handles these itself")
        }
    }
}
