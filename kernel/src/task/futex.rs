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
//! A requeue (`FUTEX_REQUEUE`, `FUTEX_CMP_REQUEUE`) moves sleepers from one
//! word to another without waking them: a condition variable's broadcast
//! hands its waiters to the mutex's word one at a time, so they do not all
//! wake to fight for the mutex (musl's condition variables depend on it).
//! A waiter therefore does not know for sure which word it sleeps on; it
//! reads that from its queue entry, which a requeue changes under the
//! locks of both queues.
//!
//! Every futex is keyed by the process and the address, `FUTEX_PRIVATE` or
//! not: a word in a `MAP_SHARED` region that two processes wait on through
//! their own addresses is not one futex here (Linux keys those by the page).

use alloc::{sync::Arc, vec::Vec};
use core::sync::atomic::{AtomicU64, Ordering, fence};

use abi::Errno;
use spin::Mutex;

use super::{process::Process, sched, thread::Thread, thread::ThreadState};
use hal::{cpu::without_interrupts, time};

/// Queues, by a hash of the key: few enough to cost nothing idle, enough
/// that unrelated futexes rarely share a lock.
const BUCKETS: usize = 64;

struct Waiter {
    pid: u64,
    /// The word this waiter sleeps on, shared with the sleeping thread: a
    /// requeue changes it, holding the locks of the old and the new queue.
    address: Arc<AtomicU64>,
    /// A `WAKE_BITSET` wakes this waiter only if its bitset shares a bit.
    bitset: u32,
    thread: Arc<Thread>,
}

static QUEUES: [Mutex<Vec<Waiter>>; BUCKETS] = [const { Mutex::new(Vec::new()) }; BUCKETS];

fn queue(pid: u64, address: u64) -> &'static Mutex<Vec<Waiter>> {
    let hash = (pid ^ (address >> 2)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    &QUEUES[(hash >> 58) as usize % BUCKETS]
}

/// Refuses a futex word that is not a 4-byte aligned `u32` of user space
/// (as Linux does even for a wake, which reads no memory).
pub fn check_word(address: u64) -> Result<(), Errno> {
    if !address.is_multiple_of(4) {
        return Err(Errno::Inval);
    }
    if address >= abi::USER_END {
        return Err(Errno::Fault);
    }
    Ok(())
}

/// Reads the futex word, which must be a 4-byte aligned `u32` of the
/// process's memory.
fn read_word(process: &Process, address: u64) -> Result<u32, Errno> {
    check_word(address)?;
    let bytes = process.space.copy_in(address, 4)?;
    let bytes: [u8; 4] = bytes[..].try_into().map_err(|_| Errno::Fault)?;
    Ok(u32::from_le_bytes(bytes))
}

/// Runs `f` on the queue of the word in `address` (a waiter's own entry)
/// with its lock held and interrupts off. The word is read again under the
/// lock: a requeue changes it only under this lock too, so if it still
/// names this queue's word, this is the queue the waiter is in (or was
/// taken off).
fn with_queue_of<R>(pid: u64, address: &AtomicU64, f: impl FnOnce(&mut Vec<Waiter>) -> R) -> R {
    without_interrupts(|| {
        let mut queue = loop {
            let word = address.load(Ordering::Relaxed);
            let queue = queue(pid, word).lock();
            if address.load(Ordering::Relaxed) == word {
                break queue;
            }
        };
        f(&mut queue)
    })
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
    let word = Arc::new(AtomicU64::new(address));
    without_interrupts(|| {
        queue(process.pid, address).lock().push(Waiter {
            pid: process.pid,
            address: Arc::clone(&word),
            bitset,
            thread: Arc::clone(me),
        });
    });
    let pid = process.pid;
    // The queueing above must be visible before the word is read (see the
    // module docs): a store followed by a load needs a full fence.
    fence(Ordering::SeqCst);
    let value = read_word(process, address);
    if value != Ok(expected) {
        with_queue_of(pid, &word, |queue| dequeue(queue, me));
        return Err(value.err().unwrap_or(Errno::Again));
    }
    loop {
        let still_queued = with_queue_of(pid, &word, |queue| {
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
            if !with_queue_of(pid, &word, |queue| dequeue(queue, me)) {
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
                && waiter.address.load(Ordering::Relaxed) == address
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

/// `FUTEX_REQUEUE` and `FUTEX_CMP_REQUEUE`: wakes at most `wake_count`
/// sleepers on the word at `from`, oldest first, and moves at most
/// `move_count` of the others to sleep on the word at `to` (behind the
/// sleepers already there), where a wake of `to` finds them. Returns how
/// many were woken or moved, as Linux does.
///
/// With `expected` (the `CMP_` form) the word at `from` must hold it, or
/// nothing happens and the answer is `Again`. Linux compares under its
/// queue locks; here the word is read before they are taken (reading user
/// memory may block), so a thread that changes the word at that moment
/// may see its waiters moved where Linux would have refused. They still
/// wake with the next wake of `to`.
pub fn requeue(
    process: &Process,
    from: u64,
    to: u64,
    wake_count: u64,
    move_count: u64,
    expected: Option<u32>,
) -> Result<u64, Errno> {
    check_word(from)?;
    check_word(to)?;
    if let Some(expected) = expected
        && read_word(process, from)? != expected
    {
        return Err(Errno::Again);
    }
    let pid = process.pid;
    let (source, target) = (queue(pid, from), queue(pid, to));
    let (woken, moved) = without_interrupts(|| {
        if core::ptr::eq(source, target) {
            return take_sleepers(
                &mut source.lock(),
                None,
                pid,
                from,
                to,
                wake_count,
                move_count,
            );
        }
        // Two queues are always locked in the order of their place in
        // QUEUES: two requeues in opposite directions cannot deadlock.
        let (mut source, mut target) = if core::ptr::from_ref(source) < core::ptr::from_ref(target)
        {
            let source = source.lock();
            (source, target.lock())
        } else {
            let target = target.lock();
            (source.lock(), target)
        };
        take_sleepers(
            &mut source,
            Some(&mut target),
            pid,
            from,
            to,
            wake_count,
            move_count,
        )
    });
    for thread in &woken {
        sched::wake(thread);
    }
    Ok(woken.len() as u64 + moved)
}

/// The locked half of [`requeue`]: takes the woken sleepers of `from` off
/// `source` and hands back their threads, and moves the next ones to
/// `to`, into `target`, or, where both words share one queue (`None`),
/// leaves them where they are under their new word. Returns the woken
/// threads and how many moved.
fn take_sleepers(
    source: &mut Vec<Waiter>,
    mut target: Option<&mut Vec<Waiter>>,
    pid: u64,
    from: u64,
    to: u64,
    wake_count: u64,
    move_count: u64,
) -> (Vec<Arc<Thread>>, u64) {
    let mut woken = Vec::new();
    let mut moved = 0;
    let mut index = 0;
    while let Some(waiter) = source.get(index) {
        if waiter.pid != pid || waiter.address.load(Ordering::Relaxed) != from {
            index += 1;
        } else if (woken.len() as u64) < wake_count {
            woken.push(source.remove(index).thread);
        } else if moved < move_count {
            waiter.address.store(to, Ordering::Relaxed);
            moved += 1;
            match target.as_deref_mut() {
                Some(target) => target.push(source.remove(index)),
                None => index += 1,
            }
        } else {
            break;
        }
    }
    (woken, moved)
}
