//! Threads: a kernel stack, a saved stack pointer, a state.
//!
//! Every thread, user or kernel, has its own kernel stack. A user thread's
//! registers in ring 3 live in a `TrapFrame` at the top of that stack while
//! the kernel runs on its behalf; its kernel-side state is whatever is on the
//! stack below, down to the saved stack pointer when it is switched out.
//!
//! Kernel threads' stacks live in their own kernel window with guard pages
//! ([`crate::arch::kernel_stack`]); freed ones are flushed from every CPU in
//! batches, before their memory is reused, by whoever creates threads. The
//! kernel stacks of user threads are heap allocations charged to the
//! programs' heap budget ([`crate::memory::heap`]), so that a program that
//! creates threads runs into that budget, not into the frames every other
//! process needs.

use alloc::{boxed::Box, sync::Arc, vec::Vec};

use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use spin::Mutex;

use abi::Errno;

use super::process::Process;
use crate::{
    arch::{
        context::{self, ThreadStart},
        kernel_stack::{self, KernelStack, StackError},
    },
    memory::heap,
    tlb,
};

/// The kernel stack of a user thread, in words (as large as a guarded one).
const USER_THREAD_STACK_WORDS: usize = (kernel_stack::STACK_SIZE / 8) as usize;

/// A thread's kernel stack.
enum Stack {
    /// In the kernel's stack window, above a guard page (kernel threads).
    Guarded(KernelStack),
    /// From the programs' heap budget (user threads).
    Heap(Box<[u64]>),
}

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
    /// `None` for a thread that adopted a stack it did not allocate (the
    /// boot CPU's and each AP's initial context).
    kernel_stack: Option<Stack>,
    /// Where `switch` left the stack pointer while the thread is not running.
    pub(crate) saved_rsp: AtomicU64,
    /// True from the moment a CPU switches to the thread until the CPU that
    /// switched away from it has saved its stack pointer. Another CPU must
    /// not switch to it before then.
    pub(crate) on_cpu: AtomicBool,
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
}

/// A thread's exit value, once it has one, and the threads joining it.
#[derive(Default)]
pub struct ExitStatus {
    pub value: Option<i64>,
    pub joiners: Vec<Arc<Thread>>,
}

impl Thread {
    fn with_stack(
        process: Option<Arc<Process>>,
        kernel_stack: Option<Stack>,
        saved_rsp: u64,
    ) -> Arc<Self> {
        Arc::new(Self {
            tid: NEXT_TID.fetch_add(1, Ordering::Relaxed),
            process,
            kernel_stack,
            saved_rsp: AtomicU64::new(saved_rsp),
            on_cpu: AtomicBool::new(false),
            state: Mutex::new(ThreadState::Runnable),
            affinity: AtomicU64::new(abi::ANY_CPU),
            last_cpu: AtomicUsize::new(0),
            wake_at: AtomicU64::new(0),
            exit: Mutex::new(ExitStatus::default()),
        })
    }

    /// A new kernel thread that starts as `start` says once scheduled.
    /// Only the kernel makes these (idle threads, tests), early or rarely:
    /// no stack for one means the machine is unusable.
    pub fn new_kernel(start: ThreadStart) -> Arc<Self> {
        let mut stack = allocate_stack()
            .unwrap_or_else(|error| panic!("no stack for a kernel thread: {error}"));
        let rsp = context::prepare_stack(stack.words_mut(), start);
        Self::with_stack(None, Some(Stack::Guarded(stack)), rsp)
    }

    /// A new thread of `process` that starts as `start` says once
    /// scheduled. Its kernel stack is an allocation the program caused, so
    /// it comes out of the programs' heap budget: `NoMem` when that is spent.
    pub fn new_user(process: Arc<Process>, start: ThreadStart) -> Result<Arc<Self>, Errno> {
        let mut stack = heap::try_zeroed_vec::<u64>(USER_THREAD_STACK_WORDS)?.into_boxed_slice();
        let rsp = context::prepare_stack(&mut stack, start);
        Ok(Self::with_stack(
            Some(process),
            Some(Stack::Heap(stack)),
            rsp,
        ))
    }

    /// The thread object for the context already running on this CPU.
    pub fn adopt_current() -> Arc<Self> {
        let thread = Self::with_stack(None, None, 0);
        *thread.state.lock() = ThreadState::Running;
        thread.on_cpu.store(true, Ordering::Relaxed);
        thread
    }

    /// The top of the kernel stack (RSP0 and the syscall stack), if owned.
    pub fn kernel_stack_top(&self) -> Option<u64> {
        self.kernel_stack.as_ref().map(|stack| match stack {
            Stack::Guarded(stack) => stack.base() + kernel_stack::STACK_SIZE,
            Stack::Heap(words) => context::stack_top(words),
        })
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
