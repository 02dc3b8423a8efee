//! The clock calls: reading it, and sleeping by it. Every clock counts
//! from boot here (there is no real-time clock).

use abi::{Errno, Timespec};

use super::SyscallResult;
use crate::task::{sched, vm::AddressSpace};
use hal::time;

/// `clock_nanosleep`'s flag for an absolute wake-up time.
const TIMER_ABSTIME: u64 = 1;

/// `nanosleep(request, remaining)`: sleeps for the duration at `request`.
/// Nothing interrupts a sleep here, so `remaining` is never written.
pub(super) fn nanosleep(space: &AddressSpace, request: u64) -> SyscallResult {
    let ns = read_timespec(space, request)?.to_ns().ok_or(Errno::Inval)?;
    sched::sleep(ns);
    Ok(0)
}

/// `clock_nanosleep(clock, flags, request, remaining)`: a relative sleep,
/// or with `TIMER_ABSTIME` one until the clock reads `request`.
pub(super) fn clock_nanosleep(
    space: &AddressSpace,
    clock: u64,
    flags: u64,
    request: u64,
) -> SyscallResult {
    if !abi::clock::ALL.contains(&clock) {
        return Err(Errno::Inval);
    }
    let ns = read_timespec(space, request)?.to_ns().ok_or(Errno::Inval)?;
    let duration = if flags & TIMER_ABSTIME != 0 {
        ns.saturating_sub(time::now_ns())
    } else {
        ns
    };
    sched::sleep(duration);
    Ok(0)
}

/// `clock_gettime(clock, time)`.
pub(super) fn clock_gettime(space: &AddressSpace, clock: u64, at: u64) -> SyscallResult {
    if !abi::clock::ALL.contains(&clock) {
        return Err(Errno::Inval);
    }
    space.copy_out(at, &Timespec::from_ns(time::now_ns()).to_bytes())?;
    Ok(0)
}

/// The `struct timespec` at `at` in user memory.
pub(super) fn read_timespec(space: &AddressSpace, at: u64) -> Result<Timespec, Errno> {
    let bytes = space.copy_in(at, Timespec::SIZE)?;
    let bytes: [u8; Timespec::SIZE] = bytes[..].try_into().map_err(|_| Errno::Fault)?;
    Ok(Timespec::from_bytes(bytes))
}
