//! Threads: [`spawn`] a closure on a fresh stack, [`JoinHandle::join`] it,
//! the way a C library's `pthread_create` and `pthread_join` do it on
//! Linux: `clone` and a futex.
//!
//! There is no heap, so everything a thread needs travels at the top of its
//! own stack: `spawn` maps [`STACK_SIZE`] bytes, puts an [`Ending`] (the
//! thread's id word and its result) at the very top and the closure below
//! it, and calls `clone` with the new stack. `CLONE_PARENT_SETTID` makes
//! the kernel store the new thread's id in the id word before `clone`
//! returns; `CLONE_CHILD_CLEARTID` makes it write 0 there and wake a futex
//! on it when the thread has ended. So `join` sleeps on the id word until it
//! is 0, and then may unmap the stack: nothing runs on it any more.
//!
//! ```text
//!  stack + STACK_SIZE  ->  +----------------+
//!                          |  Ending        |   id word, result
//!                          |  Launch (F)    |   the closure, moved here
//!  stack_top (16-aligned)->+----------------+
//!                          |  ...grows down |   the child starts here
//!  stack               ->  +----------------+
//! ```

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use abi::{CloneFlags, Errno, Prot, Syscall};

use crate::sys;

/// The size of each thread's stack (no guard page: an overflow runs into
/// whatever is mapped below).
pub const STACK_SIZE: usize = 64 * 1024;

/// What the kernel and the thread leave for `join`, at the top of the
/// thread's stack.
struct Ending {
    /// The thread's id while it runs; 0 once the kernel knows it ended.
    tid: AtomicU32,
    /// The closure's result, stored before the thread ends.
    value: AtomicU64,
}

/// What the new thread starts with: its closure, and where to leave the
/// result.
struct Launch<F> {
    f: F,
    ending: *const Ending,
}

/// A running thread; join it to get its result and free its stack.
/// Dropping the handle detaches the thread and leaks its stack.
#[derive(Debug)]
pub struct JoinHandle {
    tid: u64,
    stack: *mut u8,
    ending: *const Ending,
}

/// Starts a thread of this process running `f`; its return value is what
/// [`JoinHandle::join`] gives back.
///
/// # Panics
///
/// If `f` is too large to fit in a quarter of the stack.
pub fn spawn<F>(f: F) -> Result<JoinHandle, Errno>
where
    F: FnOnce() -> u64 + Send + 'static,
{
    assert!(
        size_of::<Launch<F>>() <= STACK_SIZE / 4 && align_of::<F>() <= 4096,
        "the thread's closure is too large for its stack"
    );
    let stack = sys::mmap_anonymous(STACK_SIZE, Prot::READ | Prot::WRITE)?;
    let end = stack as usize + STACK_SIZE;
    let ending = (end - size_of::<Ending>()) as *mut Ending;
    let align = align_of::<Launch<F>>().max(16);
    let slot = ((ending as usize - size_of::<Launch<F>>()) & !(align - 1)) as *mut Launch<F>;
    // Both places lie inside the fresh mapping (the assert bounds their
    // size), are aligned for their types, and nothing else knows the
    // mapping yet.
    // SAFETY: valid, exclusive, aligned places.
    unsafe {
        ending.write(Ending {
            tid: AtomicU32::new(0),
            value: AtomicU64::new(0),
        });
        slot.write(Launch { f, ending });
    }
    let flags = CloneFlags::THREAD_FLAGS | CloneFlags::PARENT_SETTID | CloneFlags::CHILD_CLEARTID;
    // SAFETY: `ending` was just written and stays mapped until `join`.
    let tid_word = unsafe { (*ending).tid.as_ptr() };
    // The new thread starts on the stack below `slot` (16-aligned), which is
    // its alone until it ends, in `trampoline::<F>`, which never returns
    // and takes ownership of the `Launch<F>` at `slot`.
    // SAFETY: a never-returning entry, an exclusive stack, and id words
    // that stay mapped until the thread has ended.
    let cloned = unsafe {
        clone_thread(
            flags.bits(),
            slot as u64,
            tid_word,
            trampoline::<F>,
            slot as u64,
        )
    };
    match cloned {
        Ok(tid) => Ok(JoinHandle { tid, stack, ending }),
        Err(error) => {
            // No thread took the closure: drop it here and free the stack.
            // SAFETY: the `Launch<F>` written above was never moved out.
            drop(unsafe { slot.read() });
            // SAFETY: nothing refers to the stack any more.
            let _ = unsafe { sys::munmap(stack, STACK_SIZE) };
            Err(error)
        }
    }
}

/// `clone` for a thread: the child leaves the call on `stack_top` and calls
/// `entry(arg)`; the parent gets the child's id.
///
/// # Safety
///
/// `entry` must never return, `stack_top` must be the 16-byte aligned top
/// of memory only the new thread uses, and `tid_word` must stay valid
/// until the thread has ended (the kernel writes it then).
unsafe fn clone_thread(
    flags: u64,
    stack_top: u64,
    tid_word: *mut u32,
    entry: extern "C" fn(u64) -> !,
    arg: u64,
) -> Result<u64, Errno> {
    let result: i64;
    // The kernel copies every register into the child, so `r12` and `r13`
    // carry the entry and its argument across; the child's `call` leaves
    // its 16-aligned stack as a function entry expects it. The parent's
    // path changes no register but `rax`, `rcx` and `r11`.
    // SAFETY: the caller upholds the contract above.
    unsafe {
        core::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov rdi, r12",
            "call r13",
            "ud2",
            "2:",
            inlateout("rax") Syscall::Clone as u64 => result,
            in("rdi") flags,
            in("rsi") stack_top,
            in("rdx") tid_word,
            in("r10") tid_word,
            in("r8") 0u64,
            in("r12") arg,
            in("r13") entry,
            lateout("rcx") _,
            lateout("r11") _,
        );
    }
    u64::try_from(result).map_err(|_| {
        Errno::from_return(result)
            .unwrap_or_else(|| panic!("the kernel returned {result}, which is no errno"))
    })
}

/// Where every spawned thread starts: the argument is its `Launch<F>`.
extern "C" fn trampoline<F: FnOnce() -> u64>(launch: u64) -> ! {
    // `spawn` moved a `Launch<F>` to this address and gave up ownership.
    // SAFETY: a valid `Launch<F>` that only this thread reads, once.
    let Launch { f, ending } = unsafe { (launch as *mut Launch<F>).read() };
    let value = f();
    // SAFETY: `ending` stays mapped until `join` has seen this thread end.
    unsafe { (*ending).value.store(value, Ordering::Release) };
    sys::thread_exit(0)
}

impl JoinHandle {
    /// The kernel's id of the thread.
    pub fn tid(&self) -> u64 {
        self.tid
    }

    /// A way for another thread to wait for this one's end (see
    /// [`EndWatch::wait`]).
    pub fn end_watch(&self) -> EndWatch {
        EndWatch {
            ending: self.ending as usize,
        }
    }

    /// Waits for the thread to finish, frees its stack and returns the
    /// closure's result.
    pub fn join(self) -> Result<u64, Errno> {
        // SAFETY: the handle is not joined yet: this is the join.
        unsafe { self.end_watch().wait() };
        // SAFETY: the stack stays mapped until the unmap below; the thread
        // stored its result before it ended.
        let value = unsafe { (*self.ending).value.load(Ordering::Acquire) };
        // The thread has ended, so nothing runs on its stack any more.
        // SAFETY: no one uses the memory being unmapped.
        unsafe { sys::munmap(self.stack, STACK_SIZE) }?;
        Ok(value)
    }
}

/// The address of a thread's [`Ending`], which another thread may wait on
/// while the thread's handle is not joined.
#[derive(Clone, Copy, Debug)]
pub struct EndWatch {
    ending: usize,
}

impl EndWatch {
    /// Sleeps until the kernel has seen the thread end (its id word is 0).
    ///
    /// # Safety
    ///
    /// The thread's [`JoinHandle`] must not have been joined yet: joining
    /// unmaps the stack this watch points into.
    pub unsafe fn wait(self) {
        // SAFETY: the caller promises the stack, and the `Ending` on it,
        // are still mapped.
        let tid = unsafe { &(*(self.ending as *const Ending)).tid };
        loop {
            let now = tid.load(Ordering::Acquire);
            if now == 0 {
                return;
            }
            // A wake, a changed word or an error: look again either way.
            let _ = sys::futex_wait(tid, now);
        }
    }
}
