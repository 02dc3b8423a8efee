//! Futexes: sleeping on a word of user memory until another thread wakes
//! that word.
//!
//! A user-space lock or condition variable keeps its state in a `u32` it
//! changes with atomic instructions; only when it must wait does it ask the
//! kernel to sleep "if the word still holds `value`" (`FUTEX_WAIT`), and
//! whoever changes the word in a way a sleeper cares about asks the kernel
//! to wake sleepers there (`FUTEX_WAKE`). The whole trick is that the check
//! and the sleep are one step as far as wakers can tell: a wake that comes
//! after the waiter read the old value must find the waiter queued.
//!
//! Here that is done without reading user memory under a lock (reading it
//! may block on the address space's lock, or fault): the waiter queues
//! itself first, then reads the word. A waker changed the word *before* it
//! asked for the wake, and takes the queue's lock to wake; so either the
//! waker's lock came after the waiter queued itself (the waker finds and
//! removes it), or the waiter's read comes after the waker's change (the
//! waiter sees the new value and leaves). Being taken off the queue is what
//! "woken" means: a waiter that finds itself off its queue returns 0, and
//! one still on it after its sleep timed out, or was killed.
//!
//! Every futex is keyed by the process and the address, `FUTEX_PRIVATE` or
//! not: a word in a `MAP_SHARED` region that two processes wait on through
//! their own addresses is not one futex here (Linux keys those by the page).

use alloc::{sync::Arc, vec::Vec};
use core::sync::atomic::{Ordering, fence};

use abi::Errno;
use spin::Mutex;

use super::{process::Process, sched, thread::Thread, thread::ThreadState};
use hal::{cpu::without_interrupts, time};

/// Queues, by a hash of the key: few enough to cost nothing idle, enough
/// that unrelated futexes rarely share a lock.
const BUCKETS: usize = 64;

struct Waiter {
    pid: u64,
    address: u64,
    /// A `WAKE_BITSET` wakes this waiter only if its bitset shares a bit.
    bitset: u32,
    thread: Arc<Thread>,
}

static QUEUES: [Mutex<Vec<Waiter>>; BUCKETS] = [const { Mutex::new(Vec::new()) }; BUCKETS];

fn queue(pid: u64, address: u64) -> &'static Mutex<Vec<Waiter>> {
    let hash = (pid ^ (address >> 2)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    &QUEUES[(hash >> 58) as usize % BUCKETS]
}

/// Reads the futex word, which must be a 4-byte aligned `u32` of the
/// process's memory.
fn read_word(process: &Process, address: u64) -> Result<u32, Errno> {
    if !address.is_multiple_of(4) {
        return Err(Errno::Inval);
    }
    let bytes = process.space.copy_in(address, 4)?;
    let bytes: [u8; 4] = bytes[..].try_into().map_err(|_| Errno::Fault)?;
    Ok(u32::from_le_bytes(bytes))
}

/// Takes `me` off the queue if it is still on it; whether it was.
fn dequeue(queue: &mut Vec<Waiter>, me: &Thread) -> bool {
    let before = queue.len();
    queue.retain(|waiter| waiter.thread.tid != me.tid);
    queue.len() != before
}

/// `FUTEX_WAIT`: sleeps while the word at `address` holds `expected`,
/// until a wake whose bitset meets `bitset`, or until `deadline` (ns since
/// boot). `Again` if the word holds another value, `TimedOut` at the
/// deadline, `Intr` if the process is being killed.
pub fn wait(
    process: &Process,
    me: &Arc<Thread>,
    address: u64,
    expected: u32,
    bitset: u32,
    deadline: Option<u64>,
) -> Result<u64, Errno> {
    if bitset == 0 {
        return Err(Errno::Inval);
    }
    let queue = queue(process.pid, address);
    without_interrupts(|| {
        queue.lock().push(Waiter {
            pid: process.pid,
            address,
            bitset,
            thread: Arc::clone(me),
        });
    });
    // The queueing above must be visible before the word is read (see the
    // module docs): a store followed by a load needs a full fence.
    fence(Ordering::SeqCst);
    let value = read_word(process, address);
    if value != Ok(expected) {
        without_interrupts(|| dequeue(&mut queue.lock(), me));
        return Err(value.err().unwrap_or(Errno::Again));
    }
    loop {
        let still_queued = without_interrupts(|| {
            let queue = queue.lock();
            let queued = queue.iter().any(|waiter| waiter.thread.tid == me.tid);
            if queued {
                // Under the lock every waker takes: a wake cannot slip in
                // between this and the sleep.
                *me.state.lock() = ThreadState::Blocked;
            }
            queued
        });
        if !still_queued {
            return Ok(0);
        }
        let alive = sched::block_until(me, deadline);
        let timed_out = deadline.is_some_and(|deadline| time::now_ns() >= deadline);
        if !alive || timed_out {
            // A wake may have come meanwhile: it wins if it took us off.
            if !without_interrupts(|| dequeue(&mut queue.lock(), me)) {
                return Ok(0);
            }
            return Err(if alive { Errno::TimedOut } else { Errno::Intr });
        }
    }
}

/// `FUTEX_WAKE`: wakes at most `count` sleepers on the word at `address`
/// whose bitset meets `bitset`, oldest first; returns how many.
pub fn wake(pid: u64, address: u64, count: u64, bitset: u32) -> Result<u64, Errno> {
    if bitset == 0 {
        return Err(Errno::Inval);
    }
    let woken: Vec<Arc<Thread>> = without_interrupts(|| {
        let mut queue = queue(pid, address).lock();
        let mut woken = Vec::new();
        queue.retain(|waiter| {
            let wanted = waiter.pid == pid
                && waiter.address == address
                && waiter.bitset & bitset != 0
                && (woken.len() as u64) < count;
            if wanted {
                woken.push(Arc::clone(&waiter.thread));
            }
            !wanted
        });
        woken
    });
    for thread in &woken {
        sched::wake(thread);
    }
    Ok(woken.len() as u64)
}
