//! Switching between kernel stacks: the heart of the scheduler.
//!
//! Every thread has its own kernel stack. A thread that stops running is
//! always inside [`switch_stacks`], called from the scheduler: it pushes the
//! callee-saved registers (the System V ABI says the caller saved the rest),
//! stores its stack pointer, loads the next thread's, pops that thread's
//! callee-saved registers and returns, on the next thread's stack, into
//! wherever *that* thread called `switch_stacks`.
//!
//! A new thread has never called `switch_stacks`, so [`prepare_stack`] builds
//! what the call would have left: six zeroed registers and a return address,
//! [`thread_trampoline`], which runs the scheduler's post-switch bookkeeping
//! and then leaves through the trap exit path with a [`TrapFrame`] prepared at
//! the top of the stack: into ring 3 at the program's entry point, or into a
//! kernel function for kernel threads.

use alloc::sync::Arc;
use core::arch::global_asm;

use spin::Mutex;
use x86_64::VirtAddr;

use super::{
    gdt::{KERNEL_CODE, KERNEL_DATA, USER_CODE, USER_DATA},
    trap::TrapFrame,
};
use crate::task::thread::Thread;

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
    "callq {started}",
    "jmp trap_exit",
    started = sym crate::task::sched::thread_started,
    options(att_syntax)
);

unsafe extern "C" {
    fn switch_stacks(save_rsp: *mut u64, load_rsp: u64);
    fn thread_trampoline();
}

/// Where a new thread starts.
#[derive(Clone, Copy, Debug)]
pub enum ThreadStart {
    /// Ring 3 at `entry`, with `rsp` and first argument `rdi`, `rsi`.
    User {
        entry: u64,
        stack: u64,
        rdi: u64,
        rsi: u64,
    },
    /// A kernel function on the thread's own kernel stack.
    Kernel {
        entry: extern "C" fn(u64) -> !,
        argument: u64,
    },
}

/// The callee-saved registers and return address `switch_stacks` pops.
const SWITCH_FRAME_WORDS: usize = 7;

/// The usable top of a kernel stack: its end rounded down to 16 bytes, as
/// the ABI wants at a call and as the syscall stub loads it.
pub fn stack_top(stack: &[u64]) -> u64 {
    (stack.as_ptr() as u64 + (stack.len() * 8) as u64) & !15
}

/// Lays out a new thread's kernel stack `stack` so that switching to it
/// starts the thread as `start` says. Returns the stack pointer to switch
/// to.
pub fn prepare_stack(stack: &mut [u64], start: ThreadStart) -> u64 {
    let frame_words = size_of::<TrapFrame>() / 8;
    let top = stack_top(stack);
    let usable = ((top - stack.as_ptr() as u64) / 8) as usize;
    let stack = &mut stack[..usable];
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
    let frame_index = stack.len() - frame_words;
    frame.write_words(&mut stack[frame_index..]);
    let switch_index = frame_index - SWITCH_FRAME_WORDS;
    stack[switch_index..frame_index - 1].fill(0);
    stack[frame_index - 1] = thread_trampoline as *const () as u64;
    VirtAddr::from_ptr(&stack[switch_index]).as_u64()
}

/// Switches from the running thread `previous` to the thread whose saved
/// stack pointer is `next_rsp`, parking `previous` in `previous_slot` (the
/// next thread's first act is to take it from there, see
/// `sched::finish_switch`). Returns when some CPU switches back to
/// `previous`.
pub fn switch_threads(
    previous_slot: &Mutex<Option<Arc<Thread>>>,
    previous: Arc<Thread>,
    next_rsp: u64,
) {
    let save_rsp = previous.saved_rsp.as_ptr();
    *previous_slot.lock() = Some(previous);
    // `save_rsp` points into the thread object that `previous_slot` keeps
    // alive until the next thread runs `finish_switch`, which happens after
    // `switch_stacks` has stored through it. `next_rsp` was made by
    // `prepare_stack` or saved by an earlier switch away from a thread that
    // runs nowhere now (the scheduler waits for its `on_cpu` flag), so it
    // points at a valid switch frame.
    // SAFETY: both stack pointers are valid for the switch, as argued above.
    unsafe { switch_stacks(save_rsp, next_rsp) }
}
