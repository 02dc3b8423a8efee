//! Switching between kernel stacks: the heart of the scheduler.
//!
//! Every thread has a [`ThreadContext`]: its kernel stack and, while it is
//! not running, the stack pointer it stopped at. A thread that stops running
//! is always inside [`switch_to`], called from the scheduler: the assembly
//! routine `switch_stacks` pushes the callee-saved registers (the System V
//! ABI says the caller saved the rest), stores its stack pointer, loads the
//! next thread's, pops that thread's callee-saved registers and returns, on
//! the next thread's stack, into wherever *that* thread called it.
//!
//! A new thread has never called `switch_stacks`, so [`ThreadContext::new`]
//! builds what the call would have left: six zeroed registers and a return
//! address, `thread_trampoline`, which finishes the switch and then leaves
//! through the trap exit path with a [`TrapFrame`] prepared at the top of the
//! stack: into ring 3 at the program's entry point, or into a kernel function
//! for kernel threads.
//!
//! What makes this safe to offer to a kernel without `unsafe`:
//! - a saved stack pointer is only ever written by `ThreadContext::new` or by
//!   a switch away, so it always points at a valid switch frame;
//! - the context owns its stack, and this module holds a reference to the
//!   running context of each CPU (and to the one just switched away from,
//!   until the switch has finished), so no stack is freed while it is in use;
//! - a context runs on at most one CPU: [`switch_to`] claims it with an
//!   atomic flag that only the end of the switch away from it clears.

use alloc::{boxed::Box, sync::Arc};
use core::{
    arch::global_asm,
    sync::atomic::{AtomicBool, AtomicU64, Ordering},
};

use x86_64::VirtAddr;

use crate::{
    gdt::{KERNEL_CODE, KERNEL_DATA, USER_CODE, USER_DATA},
    kernel_stack::{self, KernelStack},
    percpu,
    trap::TrapFrame,
    user_state::UserState,
};

/// RFLAGS with only IF (interrupts enabled) and the always-one bit 1.
const RFLAGS_INTERRUPTS_ON: u64 = 0x202;

global_asm!(
    ".global switch_stacks",
    "switch_stacks:",
    "pushq %rbp",
    "pushq %rbx",
    "pushq %r12",
    "pushq %r13",
    "pushq %r14",
    "pushq %r15",
    "movq %rsp, (%rdi)",
    "movq %rsi, %rsp",
    "popq %r15",
    "popq %r14",
    "popq %r13",
    "popq %r12",
    "popq %rbx",
    "popq %rbp",
    "retq",
    "",
    ".global thread_trampoline",
    "thread_trampoline:",
    // RSP is at the TrapFrame (16-byte aligned), so the call is ABI-aligned.
    "callq {finish}",
    "jmp trap_exit",
    finish = sym finish_switch,
    options(att_syntax)
);

unsafe extern "C" {
    fn switch_stacks(save_rsp: *mut u64, load_rsp: u64);
    fn thread_trampoline();
}

/// RFLAGS bits ring 3 may keep in a frame it resumes with
/// ([`ThreadStart::Resume`]): the arithmetic flags, TF, DF, AC and ID.
/// IOPL, NT, VM and RF never come from ring 3 (IF is forced on).
const RFLAGS_USER_SETTABLE: u64 = 0x0024_0dd5;

/// Where a new thread starts.
#[derive(Clone, Debug)]
pub enum ThreadStart {
    /// Ring 3 at `entry`, with `rsp` and first argument `rdi`, `rsi`.
    User {
        entry: u64,
        stack: u64,
        rdi: u64,
        rsi: u64,
    },
    /// Ring 3 with every register of `frame`: the child of a `fork` leaves
    /// the system call its parent made, with the parent's registers. The
    /// frame is ring 3's own, so it is made safe to return with: user code
    /// and stack segments, interrupts on, and only the RFLAGS bits ring 3
    /// may set.
    Resume(TrapFrame),
    /// A kernel function on the thread's own kernel stack.
    Kernel {
        entry: extern "C" fn(u64) -> !,
        argument: u64,
    },
}

/// The memory a thread's kernel stack lives in.
pub enum ContextStack {
    /// A stack in the guarded kernel window ([`kernel_stack`]).
    Guarded(KernelStack),
    /// A stack on the kernel heap.
    Heap(Box<[u64]>),
}

impl ContextStack {
    fn words_mut(&mut self) -> &mut [u64] {
        match self {
            Self::Guarded(stack) => stack.words_mut(),
            Self::Heap(words) => words,
        }
    }

    /// The usable top: the end rounded down to 16 bytes, as the ABI wants at
    /// a call and as the syscall stub loads it.
    fn top(&self) -> u64 {
        let end = match self {
            Self::Guarded(stack) => stack.base() + kernel_stack::STACK_SIZE,
            Self::Heap(words) => words.as_ptr() as u64 + (words.len() * 8) as u64,
        };
        end & !15
    }
}

/// A thread's kernel execution context: its stack and saved stack pointer.
pub struct ThreadContext {
    saved_rsp: AtomicU64,
    /// Set while some CPU runs on this context or is still switching away
    /// from it.
    on_cpu: AtomicBool,
    /// `None` for a context adopted from code already running on a stack
    /// that lives for good (the boot CPU's, an AP's start-up stack).
    stack: Option<ContextStack>,
    /// A user thread's SSE registers and FS base, saved and loaded by
    /// [`switch_to`]; `None` for kernel threads, which use neither.
    user: Option<UserState>,
}

/// What the scheduler switches between: anything that has a context. The
/// kernel's thread type implements it; this layer keeps such objects alive
/// while they run.
pub trait Runnable: Send + Sync {
    fn context(&self) -> &ThreadContext;
}

/// The callee-saved registers and return address `switch_stacks` pops.
const SWITCH_FRAME_WORDS: usize = 7;

impl ThreadContext {
    /// A context that, when switched to, starts as `start` says on `stack`,
    /// with the user registers `user` (a user thread's; `None` for a kernel
    /// thread).
    pub fn new(mut stack: ContextStack, start: ThreadStart, user: Option<UserState>) -> Self {
        let top = stack.top();
        let words = stack.words_mut();
        let usable = ((top - words.as_ptr() as u64) / 8) as usize;
        let words = &mut words[..usable];
        let frame = match start {
            ThreadStart::User {
                entry,
                stack,
                rdi,
                rsi,
            } => TrapFrame {
                rip: entry,
                cs: u64::from(USER_CODE.0),
                rflags: RFLAGS_INTERRUPTS_ON,
                rsp: stack,
                ss: u64::from(USER_DATA.0),
                rdi,
                rsi,
                ..TrapFrame::zeroed()
            },
            ThreadStart::Resume(frame) => TrapFrame {
                cs: u64::from(USER_CODE.0),
                ss: u64::from(USER_DATA.0),
                rflags: (frame.rflags & RFLAGS_USER_SETTABLE) | RFLAGS_INTERRUPTS_ON,
                ..frame
            },
            ThreadStart::Kernel { entry, argument } => TrapFrame {
                rip: entry as usize as u64,
                cs: u64::from(KERNEL_CODE.0),
                rflags: RFLAGS_INTERRUPTS_ON,
                // As if `entry` had been called from the stack top.
                rsp: top - 8,
                ss: u64::from(KERNEL_DATA.0),
                rdi: argument,
                ..TrapFrame::zeroed()
            },
        };
        let frame_index = words.len() - size_of::<TrapFrame>() / 8;
        frame.write_words(&mut words[frame_index..]);
        let switch_index = frame_index - SWITCH_FRAME_WORDS;
        words[switch_index..frame_index - 1].fill(0);
        words[frame_index - 1] = thread_trampoline as *const () as u64;
        let saved_rsp = VirtAddr::from_ptr(&words[switch_index]).as_u64();
        Self {
            saved_rsp: AtomicU64::new(saved_rsp),
            on_cpu: AtomicBool::new(false),
            stack: Some(stack),
            user,
        }
    }

    /// The context of the code running now on this CPU, which has no
    /// [`Runnable`] yet: the boot CPU's first thread, an AP's idle thread.
    /// Make it this CPU's running context with [`adopt`].
    pub fn running_now() -> Self {
        Self {
            saved_rsp: AtomicU64::new(0),
            on_cpu: AtomicBool::new(true),
            stack: None,
            user: None,
        }
    }

    /// The top of the context's own stack, which interrupts from ring 3 and
    /// system calls must use while it runs (`None` for an adopted context).
    pub fn stack_top(&self) -> Option<u64> {
        self.stack.as_ref().map(ContextStack::top)
    }

    /// The user registers a switch carries, for a user thread.
    pub fn user_state(&self) -> Option<&UserState> {
        self.user.as_ref()
    }

    /// Whether a CPU runs this context, or is still switching away from it.
    pub fn is_on_cpu(&self) -> bool {
        self.on_cpu.load(Ordering::Acquire)
    }
}

/// Makes `thread`, whose context came from [`ThreadContext::running_now`] on
/// this CPU, the CPU's running context.
pub fn adopt(thread: Arc<dyn Runnable>) {
    assert!(
        thread.context().stack.is_none() && thread.context().is_on_cpu(),
        "only a context made by ThreadContext::running_now can be adopted"
    );
    let mut running = percpu::current().running.lock();
    assert!(running.is_none(), "this CPU already runs a context");
    *running = Some(thread);
}

/// Switches this CPU from its running context to `next`'s. Returns when
/// some CPU switches back to the context that called it. Interrupts must be
/// off.
///
/// # Panics
/// If `next` runs (or is being switched away from) on some CPU, or if this
/// CPU has no running context: both are scheduler bugs that would otherwise
/// run one stack on two CPUs.
pub fn switch_to(next: Arc<dyn Runnable>) {
    let cpu = percpu::current();
    assert!(
        next.context()
            .on_cpu
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok(),
        "switch to a context that is running or still being switched away from"
    );
    let next_rsp = next.context().saved_rsp.load(Ordering::Relaxed);
    let mut running = cpu.running.lock();
    // This CPU owns both contexts now (see `UserState`'s `Sync` argument):
    // the user registers in the CPU go to the thread that leaves, and the
    // next one's come in.
    if let Some(user) = running.as_ref().and_then(|now| now.context().user_state()) {
        user.save();
    }
    if let Some(user) = next.context().user_state() {
        user.restore();
    }
    let previous = running
        .replace(next)
        .expect("a CPU that switches has a running context");
    drop(running);
    let save_rsp = previous.context().saved_rsp.as_ptr();
    let parked = cpu.previous.lock().replace(previous);
    assert!(parked.is_none(), "a switch that never finished");
    // `save_rsp` points into the previous context, which `cpu.previous`
    // keeps alive until `finish_switch` runs on the next context, after
    // `switch_stacks` has stored through it. `next_rsp` was written by
    // `ThreadContext::new` or by the switch away from `next`, which finished
    // (its `on_cpu` was clear, and we claimed it above), so it points at a
    // valid switch frame on `next`'s stack, which `cpu.running` keeps alive.
    // SAFETY: both stack pointers are valid for the switch, as argued above.
    unsafe { switch_stacks(save_rsp, next_rsp) };
    finish_switch();
}

/// Runs on the context just switched to: releases the previous one (its
/// stack pointer is saved now), dropping it for good if nothing else holds
/// it.
extern "C" fn finish_switch() {
    let previous = percpu::current().previous.lock().take();
    if let Some(previous) = previous {
        previous.context().on_cpu.store(false, Ordering::Release);
    }
}
