//! Threads: [`spawn`] a closure on a fresh stack, [`JoinHandle::join`] it.
//!
//! There is no heap, so the closure travels on the new thread's own stack:
//! `spawn` maps [`STACK_SIZE`] bytes, moves the closure to the top of that
//! memory and asks the kernel to start `trampoline` just below it. The
//! trampoline moves the closure out, runs it and passes its result to
//! `thread_exit`, because a thread entry has nowhere to return to.
//!
//! ```text
//!  stack + STACK_SIZE  ->  +----------------+
//!                          |  closure (F)   |   moved here by spawn
//!  stack_top (16-aligned)->+----------------+
//!                          |  (ret slot)    |   rsp = stack_top - 8 at entry
//!                          |  ...grows down |
//!  stack               ->  +----------------+
//! ```

use abi::{Errno, Prot};

use crate::sys;

/// The size of each thread's stack (no guard page: an overflow runs into
/// whatever is mapped below).
pub const STACK_SIZE: usize = 64 * 1024;

/// A running thread; join it to get its result and free its stack.
/// Dropping the handle detaches the thread and leaks its stack.
#[derive(Debug)]
pub struct JoinHandle {
    tid: u64,
    stack: *mut u8,
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
        size_of::<F>() <= STACK_SIZE / 4 && align_of::<F>() <= 4096,
        "the thread's closure is too large for its stack"
    );
    let stack = sys::mmap_anonymous(STACK_SIZE, Prot::READ | Prot::WRITE)?;
    let end = stack as usize + STACK_SIZE;
    // The closure's slot, aligned for `F` and for the stack pointer below it.
    let slot = (end - size_of::<F>()) & !(align_of::<F>().max(16) - 1);
    let closure = slot as *mut F;
    // `slot` lies inside the fresh mapping (the assert above bounds its
    // size), is aligned for `F`, and nothing else knows the mapping yet.
    // SAFETY: a valid, exclusive, aligned place for an `F`.
    unsafe { closure.write(f) };

    // `trampoline::<F>` never returns and expects exactly the argument
    // passed: a pointer to an `F` it now owns. The stack below `slot` is
    // the new thread's alone until it is joined.
    // SAFETY: a never-returning entry and an exclusive, 16-aligned stack.
    let spawned = unsafe {
        sys::thread_spawn(
            trampoline::<F> as *const () as u64,
            slot as u64,
            slot as u64,
        )
    };
    match spawned {
        Ok(tid) => Ok(JoinHandle { tid, stack }),
        Err(error) => {
            // No thread took the closure: drop it here and free the stack.
            // SAFETY: the `F` written above was never moved out.
            drop(unsafe { closure.read() });
            // SAFETY: nothing refers to the stack any more.
            let _ = unsafe { sys::munmap(stack, STACK_SIZE) };
            Err(error)
        }
    }
}

/// Where every spawned thread starts: `rdi` holds the closure's address.
extern "C" fn trampoline<F: FnOnce() -> u64>(closure: *mut F) -> ! {
    // `spawn` moved an `F` to this address and gave up ownership of it.
    // SAFETY: a valid `F` that only this thread reads, exactly once.
    let f = unsafe { closure.read() };
    sys::thread_exit(f())
}

impl JoinHandle {
    /// The kernel's id of the thread.
    pub fn tid(&self) -> u64 {
        self.tid
    }

    /// Waits for the thread to finish, frees its stack and returns the
    /// closure's result.
    pub fn join(self) -> Result<u64, Errno> {
        let value = sys::thread_join(self.tid)?;
        // The thread has ended, so nothing runs on its stack any more.
        // SAFETY: no one uses the memory being unmapped.
        unsafe { sys::munmap(self.stack, STACK_SIZE) }?;
        Ok(value)
    }
}
