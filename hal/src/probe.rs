//! Probes: kernel instructions that are allowed to fault.
//!
//! Any other page fault in the kernel is a bug and stops the machine. The
//! tests of SMEP and SMAP need the opposite: make the forbidden access on
//! purpose and see it fault. A probe is a tiny assembly routine whose one
//! risky instruction is known by address. The page-fault handler asks
//! [`recover`] before it reports a kernel fault; for a probe it resumes the
//! routine at its recovery point with the fault's error code as the result,
//! and the probe returns `Err` instead of crashing the kernel. (Linux's
//! exception tables do the same for every user-memory access, so that a bad
//! pointer in `copy_from_user` becomes `EFAULT`.)
//!
//! - [`read_byte`]: one load from the address.
//! - [`call_ret`]: a call to the address, which must hold a lone `ret`. The
//!   faulting instruction is then the *target* (RIP is the address itself),
//!   so the handler recognises the probe by the return address the call
//!   left on top of the stack.

use core::arch::global_asm;

use x86_64::{VirtAddr, structures::idt::PageFaultErrorCode};

use crate::{cpu::without_interrupts, paging::translate, phys, stack_walk, trap::TrapFrame};

/// The `ret` instruction: the only code [`call_ret`] will run.
const RET: u8 = 0xC3;

/// Set in the result's fault word when the probed access faulted.
const FAULTED: u64 = 1 << 63;

global_asm!(
    ".pushsection .text.probes, \"ax\"",
    ".global probe_read_byte",
    "probe_read_byte:",
    "push rbp",
    "mov rbp, rsp",
    "xor edx, edx",
    ".global probe_read_byte_access",
    "probe_read_byte_access:",
    "movzx eax, byte ptr [rdi]",
    ".global probe_read_byte_resume",
    "probe_read_byte_resume:",
    "pop rbp",
    "ret",
    "",
    ".global probe_call",
    "probe_call:",
    "push rbp",
    "mov rbp, rsp",
    "xor edx, edx",
    "call rdi",
    ".global probe_call_return",
    "probe_call_return:",
    "pop rbp",
    "ret",
    ".popsection",
);

/// What a probe routine returns, in RAX:RDX.
#[repr(C)]
struct Outcome {
    value: u64,
    /// 0, or [`FAULTED`] | the page-fault error code.
    fault: u64,
}

unsafe extern "C" {
    fn probe_read_byte(address: u64) -> Outcome;
    fn probe_read_byte_access();
    fn probe_read_byte_resume();
    fn probe_call(address: u64) -> Outcome;
    fn probe_call_return();
}

/// A probed access faulted with this page-fault error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeFault {
    pub error_code: PageFaultErrorCode,
}

fn result(outcome: Outcome) -> Result<u64, ProbeFault> {
    if outcome.fault & FAULTED != 0 {
        Err(ProbeFault {
            error_code: PageFaultErrorCode::from_bits_truncate(outcome.fault & !FAULTED),
        })
    } else {
        Ok(outcome.value)
    }
}

/// Reads the byte at `address`, or reports the page fault the read raised.
pub fn read_byte(address: u64) -> Result<u8, ProbeFault> {
    // The routine loads one byte from `address` and returns; if the load
    // faults, `recover` resumes it right after the load with the fault
    // recorded. It writes no memory; Rust holds no reference to `address`.
    // SAFETY: a single load whose fault is recovered.
    result(unsafe { probe_read_byte(address) }).map(|value| value as u8)
}

/// Why [`call_ret`] did not call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    /// The fetch was allowed and the `ret` ran.
    Returned,
    /// The fetch faulted with this page-fault error code.
    Faulted(ProbeFault),
    /// `address` is not mapped, or does not hold a `ret`: not called.
    NotARet,
}

/// Calls `address` if it holds a lone `ret` (read through the page tables
/// and the physical-memory window, not through the address itself, which
/// SMAP may forbid), and reports whether the instruction fetch faulted.
///
/// The check and the call happen with interrupts off on this CPU, a few
/// instructions apart. What runs, if the fetch is allowed, is the byte that
/// was checked: the rest of the kernel writes such a page only through
/// system calls of the address space that maps it, and the caller (a test)
/// uses an address space that no CPU but this one has loaded.
pub fn call_ret(address: u64) -> CallOutcome {
    without_interrupts(|| {
        let Some(physical) = VirtAddr::try_new(address).ok().and_then(translate) else {
            return CallOutcome::NotARet;
        };
        let mut byte = [0u8];
        phys::read_bytes(physical, &mut byte);
        if byte[0] != RET {
            return CallOutcome::NotARet;
        }
        // The target was just found to be a `ret` in this CPU's address
        // space, so if the fetch is allowed the call returns at once,
        // clobbering only what the C ABI lets a callee clobber; a faulting
        // fetch is recovered at `probe_call_return`.
        // SAFETY: the code at `address` is a lone `ret` (checked above).
        match result(unsafe { probe_call(address) }) {
            Ok(_) => CallOutcome::Returned,
            Err(fault) => CallOutcome::Faulted(fault),
        }
    })
}

/// Called for every kernel page fault before it is declared fatal: if the
/// fault belongs to a probe, points `frame` at the probe's recovery point
/// with the error code as its result, and returns true.
pub fn recover(frame: &mut TrapFrame) -> bool {
    if frame.rip == probe_read_byte_access as *const () as u64 {
        frame.rip = probe_read_byte_resume as *const () as u64;
    } else if frame
        .page_fault_error()
        .contains(PageFaultErrorCode::INSTRUCTION_FETCH)
        && stack_walk::read_word(frame.rsp) == Some(probe_call_return as *const () as u64)
    {
        // Return to the probe as the target's `ret` would have.
        frame.rip = probe_call_return as *const () as u64;
        frame.rsp += 8;
    } else {
        return false;
    }
    frame.rdx = FAULTED | frame.error_code;
    true
}
