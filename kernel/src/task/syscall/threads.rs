//! Threads: `clone`, futexes, the FS base, and where a thread may run.
//!
//! How a C library starts a thread: it maps a stack, puts its thread
//! descriptor at the top, and calls `clone` with the thread flags,
//! `CLONE_SETTLS` (the descriptor becomes the child's FS base),
//! `CLONE_PARENT_SETTID` (the child's id is in the descriptor before
//! `clone` returns) and `CLONE_CHILD_CLEARTID` (at the child's end the
//! kernel zeroes that id and wakes a futex there, which is what
//! `pthread_join` sleeps on).

use alloc::sync::Arc;
use core::sync::atomic::Ordering;

use abi::{CloneFlags, Errno, arch_prctl as code, futex as op};
use mm::MAX_CPUS;

use super::{SyscallResult, time::read_timespec};
use crate::{
    smp,
    task::{futex, process::Process, thread::Thread, vm::AddressSpace},
};
use hal::{context::ThreadStart, percpu, time, trap::TrapFrame, user_state::UserState};

/// `clone(flags, stack, parent_tid, child_tid, tls)`: a thread of this
/// process, or a child process (see [`abi::Syscall::Clone`]).
pub(super) fn clone(
    frame: &TrapFrame,
    process: &Arc<Process>,
    [flags, stack, parent_tid, child_tid, tls, _]: [u64; 6],
) -> SyscallResult {
    let flags = CloneFlags::from_bits(flags).ok_or(Errno::Inval)?;
    let signal = (flags & CloneFlags::EXIT_SIGNAL).bits();
    // The caller's SSE registers and FS base are in this CPU now.
    let mut user = UserState::copy_of_current();
    if flags.contains(CloneFlags::SETTLS) {
        user = user.with_fs_base(tls).ok_or(Errno::Inval)?;
    }
    if flags.contains(CloneFlags::VFORK) {
        return Err(Errno::Inval);
    }
    // The id stores `clone` promises, in the memory each one names.
    let store_ids = |child_space: &AddressSpace, thread: &Thread| {
        let tid = (thread.tid as u32).to_le_bytes();
        if flags.contains(CloneFlags::PARENT_SETTID) {
            process.space.copy_out(parent_tid, &tid)?;
        }
        if flags.contains(CloneFlags::CHILD_SETTID) {
            child_space.copy_out(child_tid, &tid)?;
        }
        if flags.contains(CloneFlags::CHILD_CLEARTID) {
            thread.clear_child_tid.store(child_tid, Ordering::Relaxed);
        }
        Ok(())
    };
    let thread = CloneFlags::VM | CloneFlags::SIGHAND | CloneFlags::THREAD;
    if flags.contains(thread) {
        if signal != 0 {
            return Err(Errno::Inval);
        }
        let start = ThreadStart::Resume(TrapFrame {
            rax: 0,
            rsp: if stack == 0 { frame.rsp } else { stack },
            ..frame.clone()
        });
        let child = process.start_thread(start, user, abi::ANY_CPU, |child| {
            store_ids(&process.space, child)
        })?;
        return Ok(child.tid);
    }
    // A process shares no address space, and only threads share a process
    // (Linux's own rules: THREAD needs SIGHAND, SIGHAND needs VM).
    if flags.intersects(thread) || (signal != 0 && signal != CloneFlags::SIGCHLD) {
        return Err(Errno::Inval);
    }
    process
        .fork(frame, stack, user, |child, thread| {
            store_ids(&child.space, thread)
        })
        .map(|child| child.pid)
}

/// `futex(address, op, value, timeout, address2, value3)`: the operations
/// of [`abi::futex`]. A `WAIT`'s timeout is relative, a `WAIT_BITSET`'s
/// absolute on the clock (which counts from boot); the requeues take their
/// second count where the others take a timeout.
pub(super) fn futex(
    me: &Arc<Thread>,
    process: &Process,
    [address, operation, value, timeout, address2, value3]: [u64; 6],
) -> SyscallResult {
    let command = operation & !(op::PRIVATE | op::CLOCK_REALTIME);
    let deadline = |absolute: bool| -> Result<Option<u64>, Errno> {
        if timeout == 0 {
            return Ok(None);
        }
        let ns = read_timespec(&process.space, timeout)?
            .to_ns()
            .ok_or(Errno::Inval)?;
        Ok(Some(if absolute {
            ns
        } else {
            time::now_ns().saturating_add(ns)
        }))
    };
    if operation & op::CLOCK_REALTIME != 0 && command != op::WAIT && command != op::WAIT_BITSET {
        return Err(Errno::NoSys);
    }
    let (expected, count) = (value as u32, value as u32 as i32);
    match command {
        op::WAIT => futex::wait(
            process,
            me,
            address,
            expected,
            op::BITSET_MATCH_ANY,
            deadline(false)?,
        ),
        op::WAIT_BITSET => futex::wait(
            process,
            me,
            address,
            expected,
            value3 as u32,
            deadline(true)?,
        ),
        op::WAKE | op::WAKE_BITSET => {
            futex::check_word(address)?;
            let bitset = if command == op::WAKE {
                op::BITSET_MATCH_ANY
            } else {
                value3 as u32
            };
            // Linux counts a sleeper before it compares with the count, so
            // a count of 0 or below still wakes one.
            futex::wake(process.pid, address, count.max(1) as u64, bitset)
        }
        op::REQUEUE | op::CMP_REQUEUE => {
            let moves = timeout as u32 as i32;
            if count < 0 || moves < 0 {
                return Err(Errno::Inval);
            }
            let expected = (command == op::CMP_REQUEUE).then_some(value3 as u32);
            futex::requeue(
                process,
                address,
                address2,
                count as u64,
                moves as u64,
                expected,
            )
        }
        _ => Err(Errno::NoSys),
    }
}

/// `arch_prctl(code, address)`: the calling thread's FS base.
pub(super) fn arch_prctl(
    me: &Thread,
    space: &AddressSpace,
    request: u64,
    address: u64,
) -> SyscallResult {
    let user = me.user_state().expect("a user thread has user registers");
    match request {
        code::SET_FS => {
            if address >= abi::USER_END {
                return Err(Errno::Perm);
            }
            user.set_fs_base_of_current(address).ok_or(Errno::Perm)?;
        }
        code::GET_FS => space.copy_out(address, &user.fs_base().to_le_bytes())?,
        _ => return Err(Errno::Inval),
    }
    Ok(0)
}

// A mask can name every CPU the kernel can have.
const _: () = assert!(abi::AFFINITY_CPUS == MAX_CPUS);

/// `sched_setaffinity(pid, len, mask)` for a thread of the caller's
/// process (`pid` 0 is the caller): a mask of every online CPU lets it run
/// anywhere, any other pins it to one CPU of the mask, the one it runs on if
/// the mask has it (this scheduler knows no other sets; running on fewer
/// CPUs than allowed is within the call's promise). The caller is there
/// when the call returns; another thread moves at its next placement.
pub(super) fn sched_setaffinity(
    me: &Arc<Thread>,
    process: &Process,
    pid: u64,
    len: u64,
    mask: u64,
) -> SyscallResult {
    let target = thread_named(me, process, pid)?;
    let space = &process.space;
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
    target.set_affinity(cpu);
    if Arc::ptr_eq(&target, me) && cpu != abi::ANY_CPU && cpu != here as u64 {
        // The scheduler queues us on the new CPU; we continue there.
        crate::task::sched::yield_now();
    }
    Ok(0)
}

/// `sched_getaffinity(pid, len, mask)`: every online CPU, or the one the
/// thread (of the caller's process; 0 is the caller) is pinned to, as a
/// mask of [`abi::AFFINITY_CPUS`] bits. `len` must hold them and be a
/// multiple of 8, as Linux requires.
pub(super) fn sched_getaffinity(
    me: &Arc<Thread>,
    process: &Process,
    pid: u64,
    len: u64,
    mask: u64,
) -> SyscallResult {
    const MASK_BYTES: usize = abi::AFFINITY_CPUS / 8;
    let target = thread_named(me, process, pid)?;
    if (len as usize) < MASK_BYTES || !len.is_multiple_of(8) {
        return Err(Errno::Inval);
    }
    let mut bytes = [0u8; MASK_BYTES];
    let mut allow = |cpu: usize| bytes[cpu / 8] |= 1 << (cpu % 8);
    match target.affinity.load(Ordering::Relaxed) {
        abi::ANY_CPU => smp::online().iter().for_each(&mut allow),
        cpu => allow(cpu as usize),
    }
    process.space.copy_out(mask, &bytes)?;
    Ok(MASK_BYTES as u64)
}

/// The thread an affinity call names: the caller for 0, else a live thread
/// of its process (Linux would also find other processes' threads; here
/// they are `ESRCH`).
fn thread_named(me: &Arc<Thread>, process: &Process, tid: u64) -> Result<Arc<Thread>, Errno> {
    if tid == 0 {
        Ok(Arc::clone(me))
    } else {
        process.thread(tid).ok_or(Errno::Srch)
    }
}
