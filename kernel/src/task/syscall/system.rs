//! What a program may ask about the machine (`uname`, `getcpu`,
//! `prlimit64`, `getrandom`, the TLB counters), and the signal calls a C
//! library makes at start-up, answered for a kernel that never delivers a
//! signal.

use alloc::vec::Vec;

use abi::{Errno, identity};

use super::SyscallResult;
use crate::{
    entropy,
    task::{loader, process::Process, vm::AddressSpace},
};
use hal::percpu;

/// The most bytes one `getrandom` returns (a longer request is a short
/// read, which Linux allows too).
const MAX_RANDOM: u64 = 64 * 1024;
/// `sizeof(sigset_t)` as the kernel sees it: 64 signals.
const SIGSET_SIZE: u64 = 8;
/// `sizeof(struct sigaction)` as the kernel sees it: handler, flags,
/// restorer, mask.
const SIGACTION_SIZE: usize = 32;
/// The highest signal number.
const LAST_SIGNAL: u64 = 64;
/// The two signals whose action cannot be changed.
const SIGKILL: u64 = 9;
const SIGSTOP: u64 = 19;

/// `getcpu(cpu, node, _)`: the caller's CPU and NUMA node (always 0), each
/// stored as a `u32` where the pointer is not null.
pub(super) fn getcpu(space: &AddressSpace, cpu: u64, node: u64) -> SyscallResult {
    let here = percpu::current().index as u32;
    for (pointer, value) in [(cpu, here), (node, 0)] {
        if pointer != 0 {
            space.copy_out(pointer, &value.to_le_bytes())?;
        }
    }
    Ok(0)
}

/// `uname(buffer)`: [`identity::UTSNAME`], each field NUL-padded.
pub(super) fn uname(space: &AddressSpace, buffer: u64) -> SyscallResult {
    let mut bytes = [0u8; identity::UTSNAME_SIZE];
    for (field, text) in bytes
        .as_chunks_mut::<{ identity::UTSNAME_FIELD }>()
        .0
        .iter_mut()
        .zip(identity::UTSNAME)
    {
        field[..text.len()].copy_from_slice(text.as_bytes());
    }
    space.copy_out(buffer, &bytes)?;
    Ok(0)
}

/// `prlimit64(pid, resource, new, old)`: the caller's process only; the
/// stack limit is the main thread's stack, every other limit is none. The
/// limits are fixed: setting one is `EPERM`.
pub(super) fn prlimit64(
    process: &Process,
    pid: u64,
    resource: u64,
    new: u64,
    old: u64,
) -> SyscallResult {
    use identity::rlimit;
    if pid != 0 && pid != process.pid {
        return Err(Errno::Srch);
    }
    if resource >= rlimit::COUNT {
        return Err(Errno::Inval);
    }
    if new != 0 {
        return Err(Errno::Perm);
    }
    if old != 0 {
        let limit = if resource == rlimit::STACK {
            loader::STACK_SIZE
        } else {
            rlimit::INFINITY
        };
        let bytes: Vec<u8> = [limit, limit]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        process.space.copy_out(old, &bytes)?;
    }
    Ok(0)
}

/// `getrandom(buffer, len, flags)`: bytes from [`entropy`].
pub(super) fn getrandom(space: &AddressSpace, buffer: u64, len: u64, flags: u64) -> SyscallResult {
    if flags & !identity::GETRANDOM_FLAGS != 0 {
        return Err(Errno::Inval);
    }
    let mut bytes = alloc::vec![0u8; len.min(MAX_RANDOM) as usize];
    entropy::fill(&mut bytes);
    space.copy_out(buffer, &bytes)?;
    Ok(bytes.len() as u64)
}

/// `rt_sigaction(signal, action, old_action, set_size)`: checks what Linux
/// checks, reports the default action, and keeps nothing, since no signal
/// is ever delivered here (a fault kills the thread's process).
pub(super) fn rt_sigaction(
    space: &AddressSpace,
    signal: u64,
    action: u64,
    old_action: u64,
    set_size: u64,
) -> SyscallResult {
    if set_size != SIGSET_SIZE || !(1..=LAST_SIGNAL).contains(&signal) {
        return Err(Errno::Inval);
    }
    if action != 0 {
        if signal == SIGKILL || signal == SIGSTOP {
            return Err(Errno::Inval);
        }
        space.copy_in(action, SIGACTION_SIZE)?;
    }
    if old_action != 0 {
        space.copy_out(old_action, &[0; SIGACTION_SIZE])?;
    }
    Ok(0)
}

/// `rt_sigprocmask(how, set, old_set, set_size)`: checks what Linux checks
/// and reports an empty mask.
pub(super) fn rt_sigprocmask(
    space: &AddressSpace,
    how: u64,
    set: u64,
    old_set: u64,
    set_size: u64,
) -> SyscallResult {
    /// `SIG_BLOCK`, `SIG_UNBLOCK`, `SIG_SETMASK`.
    const LAST_HOW: u64 = 2;
    if set_size != SIGSET_SIZE {
        return Err(Errno::Inval);
    }
    if set != 0 {
        if how > LAST_HOW {
            return Err(Errno::Inval);
        }
        space.copy_in(set, SIGSET_SIZE as usize)?;
    }
    if old_set != 0 {
        space.copy_out(old_set, &[0; SIGSET_SIZE as usize])?;
    }
    Ok(0)
}

/// `tlb_stats(buffer, len)`: the machine's TLB counters, summed, as
/// little-endian `u64`s in `mm`'s field order (at most `len` bytes).
/// Returns how many bytes were written.
pub(super) fn tlb_stats(space: &AddressSpace, buffer: u64, len: u64) -> SyscallResult {
    let totals = crate::tlb::system().total_counters();
    let bytes: Vec<u8> = totals
        .fields()
        .flat_map(|(_, value)| value.to_le_bytes())
        .collect();
    let len = (len as usize).min(bytes.len());
    space.copy_out(buffer, &bytes[..len])?;
    Ok(len as u64)
}
