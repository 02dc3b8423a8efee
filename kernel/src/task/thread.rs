//! Threads: an execution context (kernel stack and saved stack pointer,
//! [`hal::context::ThreadContext`]), a state, and what the scheduler needs.
//!
//! Every thread, user or kernel, has its own kernel stack. A user thread's
//! registers in ring 3 live in a `TrapFrame` at the top of that stack while
//! the kernel runs on its behalf; its kernel-side state is whatever is on the
//! stack below, down to the saved stack pointer when it is switched out.
//!
//! Kernel threads' stacks live in their own kernel window with guard pages
//! ([`hal::kernel_stack`]); freed ones are flushed from every CPU in
//! batches, before their memory is reused, by whoever creates threads. The
//! kernel stacks of user threads are heap allocations charged to the
//! programs' heap budget ([`crate::memory::heap`]), so that a program that
//! creates threads runs into that budget, not into the frames every other
//! process needs.

use alloc::{sync::Arc, vec::Vec};

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use spin::Mutex;

use abi::Errno;

use super::process::Process;
use crate::{memory::heap, tlb};
use hal::{
    context::{ContextStack, Runnable, ThreadContext, ThreadStart},
    kernel_stack::{self, KernelStack, StackError},
    user_state::UserState,
};

/// The kernel stack of a user thread, in words (as large as a guarded one).
const USER_THREAD_STACK_WORDS: usize = (kernel_stack::STACK_SIZE / 8) as usize;

/// Freed stacks wait until there are this many, then one kernel-range flush
/// lets them all be reused (fewer interruptions of every CPU).
const STACK_PURGE_BATCH: usize = 16;

static NEXT_TID: AtomicU64 = AtomicU64::new(1);

/// Where a thread is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadState {
    /// In a run queue, or about to be.
    Runnable,
    /// On a CPU.
    Running,
    /// Waiting for a wake-up (join, wait, sleep).
    Blocked,
    /// Finished with this value; never runs again.
    Exited(i64),
}

pub struct Thread {
    pub tid: u64,
    /// `None` for kernel threads (idle, the boot thread).
    pub process: Option<Arc<Process>>,
    /// The kernel stack and, while the thread is not running, where its
    /// stack pointer was left. Its `is_on_cpu` is true from the moment a CPU
    /// switches to the thread until the CPU that switched away from it has
    /// saved its stack pointer: no other CPU may switch to it before then.
    pub(crate) context: ThreadContext,
    pub(crate) state: Mutex<ThreadState>,
    /// The CPU it must run on, or `abi::ANY_CPU`.
    pub(crate) affinity: AtomicU64,
    /// The CPU it last ran on.
    pub(crate) last_cpu: AtomicUsize,
    /// When a sleeping thread wakes (ns since boot).
    pub(crate) wake_at: AtomicU64,
    /// The exit value and who waits for it; its lock is the condition lock
    /// of `join` (always taken before any thread's `state`).
    pub(crate) exit: Mutex<ExitStatus>,
    /// Where to write 0 and wake a futex when the thread ends (0: nowhere):
    /// `set_tid_address`, `CLONE_CHILD_CLEARTID`.
    pub(crate) clear_child_tid: AtomicU64,
}

impl Runnable for Thread {
    fn context(&self) -> &ThreadContext {
        &self.context
    }
}

/// A thread's exit value, once it has one, and the threads joining it.
#[derive(Default)]
pub struct ExitStatus {
    pub value: Option<i64>,
    pub joiners: Vec<Arc<Thread>>,
}

impl Thread {
    fn with_context(process: Option<Arc<Process>>, context: ThreadContext) -> Arc<Self> {
        Arc::new(Self {
            tid: NEXT_TID.fetch_add(1, Ordering::Relaxed),
            process,
            context,
            state: Mutex::new(ThreadState::Runnable),
            affinity: AtomicU64::new(abi::ANY_CPU),
            last_cpu: AtomicUsize::new(0),
            wake_at: AtomicU64::new(0),
            exit: Mutex::new(ExitStatus::default()),
            clear_child_tid: AtomicU64::new(0),
        })
    }

    /// A new kernel thread that starts as `start` says once scheduled.
    /// Only the kernel makes these (idle threads, tests), early or rarely:
    /// no stack for one means the machine is unusable.
    pub fn new_kernel(start: ThreadStart) -> Arc<Self> {
        let stack = allocate_stack()
            .unwrap_or_else(|error| panic!("no stack for a kernel thread: {error}"));
        Self::with_context(
            None,
            ThreadContext::new(ContextStack::Guarded(stack), start, None),
        )
    }

    /// A new thread of `process` that starts as `start` says once
    /// scheduled, with the SSE registers and FS base in `user`. Its kernel
    /// stack is an allocation the program caused, so it comes out of the
    /// programs' heap budget: `NoMem` when that is spent.
    pub fn new_user(
        process: Arc<Process>,
        start: ThreadStart,
        user: UserState,
    ) -> Result<Arc<Self>, Errno> {
        let stack = heap::try_zeroed_vec::<u64>(USER_THREAD_STACK_WORDS)?.into_boxed_slice();
        Ok(Self::with_context(
            Some(process),
            ThreadContext::new(ContextStack::Heap(stack), start, Some(user)),
        ))
    }

    /// The SSE registers and FS base of a user thread.
    pub fn user_state(&self) -> Option<&UserState> {
        self.context.user_state()
    }

    /// The thread object for the context already running on this CPU.
    pub fn adopt_current() -> Arc<Self> {
        let thread = Self::with_context(None, ThreadContext::running_now());
        *thread.state.lock() = ThreadState::Running;
        thread
    }

    /// Pins the thread to `cpu` (or lets it run anywhere with
    /// `abi::ANY_CPU`) from its next placement on.
    pub fn set_affinity(&self, cpu: u64) {
        self.affinity.store(cpu, Ordering::Relaxed);
    }

    /// The top of the kernel stack (RSP0 and the syscall stack), if owned.
    pub fn kernel_stack_top(&self) -> Option<u64> {
        self.context.stack_top()
    }
}

/// A kernel stack, purging the freed ones first when enough have piled up
/// or when there is no room without them.
fn allocate_stack() -> Result<KernelStack, StackError> {
    if kernel_stack::dirty_count() >= STACK_PURGE_BATCH {
        kernel_stack::purge(tlb::flush_kernel_range);
    }
    KernelStack::allocate().or_else(|error| {
        if kernel_stack::purge(tlb::flush_kernel_range) > 0 {
            KernelStack::allocate()
        } else {
            Err(error)
        }
    })
}
