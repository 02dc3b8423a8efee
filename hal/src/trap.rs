//! Trap entry: how every interrupt and exception gets from the CPU to Rust.
//!
//! Each of the 256 vectors has a 16-byte entry stub. Exceptions that push an
//! error code already have it on the stack; every other stub pushes a 0 in its
//! place, so all traps share one frame layout. The stub then pushes its vector
//! number and jumps to a common routine that saves the general-purpose
//! registers and calls `trap_dispatch` with a pointer to the resulting
//! [`TrapFrame`]. A full frame (rather than the `x86-interrupt` ABI's partial
//! one) lets crash reports print every register.

use core::arch::global_asm;

use spin::Once;
use x86_64::{VirtAddr, structures::idt::PageFaultErrorCode};

use crate::{qemu_exit, serial::write_emergency, vectors};

/// Size of one entry stub. The assembly below checks that no stub outgrows it.
const STUB_SIZE: u64 = 16;

/// The registers of an interrupted context, as laid out on the stack by the
/// entry stubs (lowest address first) and the CPU.
#[repr(C)]
#[derive(Clone, Debug, Default)]
pub struct TrapFrame {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub rbp: u64,
    pub rdi: u64,
    pub rsi: u64,
    pub rdx: u64,
    pub rcx: u64,
    pub rbx: u64,
    pub rax: u64,
    /// Pushed by the stub.
    pub vector: u64,
    /// Pushed by the CPU for exceptions that have one, else 0 from the stub.
    pub error_code: u64,
    /// Pushed by the CPU: the interrupt stack frame.
    pub rip: u64,
    pub cs: u64,
    pub rflags: u64,
    pub rsp: u64,
    pub ss: u64,
}

// The stubs, generated with `.rept`. Vectors 8, 10-14, 17, 21, 29 and 30 are
// the exceptions for which the CPU pushes an error code.
global_asm!(
    ".pushsection .text.trap_stubs, \"ax\"",
    ".balign 16",
    ".global trap_stubs",
    "trap_stubs:",
    ".set trap_vector, 0",
    ".rept 256",
    ".if (trap_vector == 8) + (trap_vector == 10) + (trap_vector == 11) + (trap_vector == 12) + (trap_vector == 13) + (trap_vector == 14) + (trap_vector == 17) + (trap_vector == 21) + (trap_vector == 29) + (trap_vector == 30)",
    ".else",
    "pushq $0",
    ".endif",
    "pushq $trap_vector",
    "jmp trap_common",
    // Pad with int3 up to the next stub; `.org` refuses to move backwards,
    // so a stub longer than 16 bytes fails the build instead of shifting
    // every later stub.
    ".org trap_stubs + (trap_vector + 1) * 16, 0xcc",
    ".set trap_vector, trap_vector + 1",
    ".endr",
    "",
    "trap_common:",
    // With SMAP on, RFLAGS.AC would lift it for the kernel, and ring 3 can
    // set AC; the CPU does not clear it on interrupts (see `protection`).
    "cmpb $0, {smap_on}(%rip)",
    "je 3f",
    "clac",
    "3:",
    // From ring 3 (CS's low bits, 24 bytes up: vector, error code, RIP, CS),
    // GS still holds the user's base: swap in the kernel's per-CPU base.
    "testb $3, 24(%rsp)",
    "jz 1f",
    "swapgs",
    "1:",
    // The syscall entry stub joins here, with its frame built and GS swapped.
    ".global trap_save_registers",
    "trap_save_registers:",
    "pushq %rax",
    "pushq %rbx",
    "pushq %rcx",
    "pushq %rdx",
    "pushq %rsi",
    "pushq %rdi",
    "pushq %rbp",
    "pushq %r8",
    "pushq %r9",
    "pushq %r10",
    "pushq %r11",
    "pushq %r12",
    "pushq %r13",
    "pushq %r14",
    "pushq %r15",
    // The CPU aligned the stack to 16 bytes before pushing its 5-word frame;
    // with error code, vector and 15 registers the total is 22 words, so the
    // stack is 16-byte aligned here, as the System V ABI wants at a call.
    "movq %rsp, %rdi",
    "cld",
    "call {dispatch}",
    // Every return to an interrupted context, and every first entry of a
    // thread into ring 3, comes through here with RSP at a `TrapFrame`.
    ".global trap_exit",
    "trap_exit:",
    "popq %r15",
    "popq %r14",
    "popq %r13",
    "popq %r12",
    "popq %r11",
    "popq %r10",
    "popq %r9",
    "popq %r8",
    "popq %rbp",
    "popq %rdi",
    "popq %rsi",
    "popq %rdx",
    "popq %rcx",
    "popq %rbx",
    "popq %rax",
    // Drop the vector and the error code.
    "addq $16, %rsp",
    // Back to ring 3 (CS is 8 bytes up, above RIP): restore the user's GS.
    "testb $3, 8(%rsp)",
    "jz 2f",
    "swapgs",
    "2:",
    "iretq",
    ".popsection",
    dispatch = sym trap_dispatch,
    smap_on = sym crate::protection::SMAP_ON,
    options(att_syntax)
);

unsafe extern "C" {
    /// The first entry stub; stub `v` starts `v * STUB_SIZE` bytes later.
    /// Never called from Rust: only its address is used.
    fn trap_stubs();
}

/// The address of the entry stub for `vector`, for the IDT.
pub fn stub_address(vector: u8) -> VirtAddr {
    VirtAddr::new(trap_stubs as *const () as u64 + u64::from(vector) * STUB_SIZE)
}

impl TrapFrame {
    pub fn zeroed() -> Self {
        Self::default()
    }

    /// Writes the frame into `words` (at least 22), lowest address first, as
    /// the entry stubs would have pushed it.
    pub fn write_words(&self, words: &mut [u64]) {
        let values = [
            self.r15,
            self.r14,
            self.r13,
            self.r12,
            self.r11,
            self.r10,
            self.r9,
            self.r8,
            self.rbp,
            self.rdi,
            self.rsi,
            self.rdx,
            self.rcx,
            self.rbx,
            self.rax,
            self.vector,
            self.error_code,
            self.rip,
            self.cs,
            self.rflags,
            self.rsp,
            self.ss,
        ];
        words[..values.len()].copy_from_slice(&values);
    }

    /// The error code of a page fault, as its architectural bits.
    pub fn page_fault_error(&self) -> PageFaultErrorCode {
        PageFaultErrorCode::from_bits_truncate(self.error_code)
    }

    /// Whether the trap interrupted ring 3.
    pub fn interrupted_user(&self) -> bool {
        self.cs & 3 == 3
    }
}

/// What the kernel does with each kind of trap. This layer only delivers
/// them: what an exception means, what a system call does and who handles
/// an interrupt is the kernel's to say, registered once at boot with
/// [`set_handlers`] before interrupts are enabled.
#[derive(Clone, Copy)]
pub struct TrapHandlers {
    /// Vectors 0-31.
    pub exception: fn(&mut TrapFrame),
    /// The `syscall` instruction ([`vectors::SYSCALL`]).
    pub system_call: fn(&mut TrapFrame),
    /// Vectors 32-255.
    pub interrupt: fn(&mut TrapFrame),
}

static HANDLERS: Once<TrapHandlers> = Once::new();

/// Registers the kernel's trap handlers; the first registration stays.
pub fn set_handlers(handlers: TrapHandlers) {
    HANDLERS.call_once(|| handlers);
}

/// Called by the common entry routine for every trap and system call, with
/// interrupts disabled (all IDT entries are interrupt gates; `syscall`
/// clears IF through SFMASK).
extern "C" fn trap_dispatch(frame: &mut TrapFrame) {
    let Some(handlers) = HANDLERS.get() else {
        // A trap before the kernel registered its handlers: nothing above
        // this layer can explain it yet, so say what it was and stop.
        write_emergency(format_args!(
            "\nFATAL: trap vector {:#x} at rip {:#x} before any trap handler was registered\n",
            frame.vector, frame.rip
        ));
        qemu_exit::exit_qemu(qemu_exit::QemuExitCode::Failure);
    };
    match frame.vector {
        vector if vector < vectors::FIRST_INTERRUPT => (handlers.exception)(frame),
        vectors::SYSCALL => (handlers.system_call)(frame),
        _ => (handlers.interrupt)(frame),
    }
}
