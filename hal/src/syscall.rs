//! The `syscall` instruction: how ring 3 enters the kernel.
//!
//! `syscall` jumps to the address in MSR LSTAR with CS/SS from MSR STAR,
//! saves the user RIP in RCX and RFLAGS in R11, clears the RFLAGS bits named
//! in MSR SFMASK (we clear IF, so entry runs with interrupts off), and does
//! **not** switch stacks. So the entry stub:
//!
//! 1. `swapgs` to reach this CPU's [`PerCpu`] block;
//! 2. parks the user RSP in the block and loads the current thread's kernel
//!    stack top from it;
//! 3. pushes the words an interrupt from ring 3 would have pushed (SS, RSP,
//!    RFLAGS, CS, RIP, an error code) and the vector [`vectors::SYSCALL`];
//! 4. joins the common trap path ([`crate::trap`]), which saves the other
//!    registers into a [`TrapFrame`](crate::trap::TrapFrame), dispatches on
//!    the vector to the kernel's system-call handler (registered with [`crate::trap::set_handlers`]), and leaves through
//!    `trap_exit` as every interrupt does.
//!
//! The return goes through `trap_exit` and `iretq` rather than `sysretq`:
//! slower, but immune to `sysretq`'s trap on a non-canonical RCX.

use core::{arch::global_asm, mem::offset_of};

use x86_64::{
    VirtAddr,
    registers::{
        model_specific::{Efer, EferFlags, LStar, SFMask, Star},
        rflags::RFlags,
    },
};

use crate::gdt::{KERNEL_CODE, KERNEL_DATA, USER_CODE, USER_DATA};
use crate::{percpu::PerCpu, vectors};

global_asm!(
    ".global syscall_entry",
    "syscall_entry:",
    "swapgs",
    "movq %rsp, %gs:{user_rsp}",
    "movq %gs:{kernel_rsp}, %rsp",
    "pushq ${user_ss}",
    "pushq %gs:{user_rsp}",
    "pushq %r11",
    "pushq ${user_cs}",
    "pushq %rcx",
    "pushq $0",
    "pushq ${vector}",
    // The rest is the interrupt path's: save the registers, dispatch (on
    // the vector), and leave through `trap_exit`.
    "jmp trap_save_registers",
    user_rsp = const offset_of!(PerCpu, user_rsp_scratch),
    kernel_rsp = const offset_of!(PerCpu, kernel_stack_top),
    user_ss = const USER_DATA.0 as u64,
    user_cs = const USER_CODE.0 as u64,
    vector = const vectors::SYSCALL,
    options(att_syntax)
);

unsafe extern "C" {
    fn syscall_entry();
}

/// Enables `syscall` on this CPU and points it at the entry stub.
pub fn init_this_cpu() {
    // STAR: kernel CS/SS for `syscall`; for `sysret`, the user selectors are
    // derived as base + 16 (CS) and base + 8 (SS), base = USER_DATA - 8.
    Star::write(USER_CODE, USER_DATA, KERNEL_CODE, KERNEL_DATA)
        .expect("GDT layout fits syscall/sysret");
    LStar::write(VirtAddr::new(syscall_entry as *const () as u64));
    // Cleared on entry: interrupts (the stub runs on the user stack until it
    // switches), direction (the ABI wants it clear), trap, alignment check,
    // I/O privilege, and nested task, which would make the kernel's own
    // `iretq` fault.
    SFMask::write(
        RFlags::INTERRUPT_FLAG
            | RFlags::DIRECTION_FLAG
            | RFlags::TRAP_FLAG
            | RFlags::ALIGNMENT_CHECK
            | RFlags::IOPL_HIGH
            | RFlags::IOPL_LOW
            | RFlags::NESTED_TASK,
    );
    // SAFETY: only adds System Call Extensions; the handler is installed.
    unsafe { Efer::update(|flags| flags.insert(EferFlags::SYSTEM_CALL_EXTENSIONS)) };
}
