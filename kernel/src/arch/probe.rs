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
//! - [`call`]: a call to the address. The faulting instruction is then the
//!   *target* (RIP is the address itself), so the handler recognises the
//!   probe by the return address the call left on top of the stack.

use core::arch::global_asm;

use super::{stack_walk, trap::TrapFrame};

/// Set in the result's fault word when the probed access faulted.
const FAULTED: u64 = 1 << 63;
const INSTRUCTION_FETCH: u64 = 1 << 4;

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
    pub error_code: u64,
}

fn result(outcome: Outcome) -> Result<u64, ProbeFault> {
    if outcome.fault & FAULTED != 0 {
        Err(ProbeFault {
            error_code: outcome.fault & !FAULTED,
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

/// Calls the code at `address` (which must return at once, e.g. a lone
/// `ret`), or reports the page fault its instruction fetch raised.
///
/// # Safety
/// If the fetch does not fault, the code at `address` runs in ring 0: the
/// caller must know it is harmless and returns (with the C ABI's
/// caller-saved registers as the only clobbers).
pub unsafe fn call(address: u64) -> Result<(), ProbeFault> {
    // The caller vouches for the code at `address` (see # Safety); a
    // faulting fetch is recovered at `probe_call_return`.
    // SAFETY: forwarded from the caller's contract.
    result(unsafe { probe_call(address) }).map(|_| ())
}

/// Called for every kernel page fault before it is declared fatal: if the
/// fault belongs to a probe, points `frame` at the probe's recovery point
/// with the error code as its result, and returns true.
pub fn recover(frame: &mut TrapFrame) -> bool {
    if frame.rip == probe_read_byte_access as *const () as u64 {
        frame.rip = probe_read_byte_resume as *const () as u64;
    } else if frame.error_code & INSTRUCTION_FETCH != 0
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
