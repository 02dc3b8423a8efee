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
//! - [`invlpgb`], [`tlbsync`], [`invpcid`]: one TLB instruction with the
//!   given operands, which may raise #GP or #UD. They check what an emulator
//!   (or a CPU) does with operands the manuals forbid, without the checks
//!   `crate::tlb` makes before it executes the same instructions.
//! - [`snp_instruction`]: PSMASH or RMPUPDATE, which share TLBSYNC's and
//!   INVLPGB's opcodes behind a prefix, on a CPU without SEV-SNP (#UD).
//! - [`pcide_rules`]: the #GP conditions of CR4.PCIDE, tried with PCIDs
//!   turned off for a moment on this CPU; [`pcide_without_cpuid_pcid`]:
//!   setting it where CPUID reports no PCID.

use core::arch::global_asm;

use x86_64::{VirtAddr, structures::idt::PageFaultErrorCode};

use crate::{cpu::without_interrupts, paging::translate, phys, stack_walk, trap::TrapFrame};

mod instructions;

pub use instructions::{
    InstructionFault, PcideRules, SnpInstruction, invlpgb, invpcid, pcide_rules,
    pcide_without_cpuid_pcid, snp_instruction, tlbsync,
};

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
    "",
    // Each instruction probe: the instruction at `_insn`, a success that
    // clears RDX, and `_resume`, where a #GP or #UD resumes with RDX set.
    ".global probe_invlpgb",
    "probe_invlpgb:",
    "push rbp",
    "mov rbp, rsp",
    "mov rax, rdi",
    "mov ecx, esi",
    ".global probe_invlpgb_insn",
    "probe_invlpgb_insn:",
    ".byte 0x0f, 0x01, 0xfe",
    "xor edx, edx",
    ".global probe_invlpgb_resume",
    "probe_invlpgb_resume:",
    "pop rbp",
    "ret",
    "",
    ".global probe_tlbsync",
    "probe_tlbsync:",
    "push rbp",
    "mov rbp, rsp",
    ".global probe_tlbsync_insn",
    "probe_tlbsync_insn:",
    ".byte 0x0f, 0x01, 0xff",
    "xor edx, edx",
    ".global probe_tlbsync_resume",
    "probe_tlbsync_resume:",
    "pop rbp",
    "ret",
    "",
    ".global probe_invpcid",
    "probe_invpcid:",
    "push rbp",
    "mov rbp, rsp",
    ".global probe_invpcid_insn",
    "probe_invpcid_insn:",
    // INVPCID rdi, [rsi]: 66 0F 38 82 /r with ModRM 00 111 110.
    ".byte 0x66, 0x0f, 0x38, 0x82, 0x3e",
    "xor edx, edx",
    ".global probe_invpcid_resume",
    "probe_invpcid_resume:",
    "pop rbp",
    "ret",
    "",
    // The SEV-SNP instructions that share TLBSYNC's and INVLPGB's
    // opcodes behind a prefix. Should a CPU ignore the prefix, each runs
    // as the plain instruction with legal operands (TLBSYNC; INVLPGB of
    // every non-global entry of ASID 0), and the probe returns success.
    ".global probe_psmash",
    "probe_psmash:",
    "push rbp",
    "mov rbp, rsp",
    ".global probe_psmash_insn",
    "probe_psmash_insn:",
    ".byte 0xf3, 0x0f, 0x01, 0xff",
    "xor edx, edx",
    ".global probe_psmash_resume",
    "probe_psmash_resume:",
    "pop rbp",
    "ret",
    "",
    ".global probe_rmpupdate",
    "probe_rmpupdate:",
    "push rbp",
    "mov rbp, rsp",
    "mov eax, 4",
    "xor ecx, ecx",
    "xor edx, edx",
    ".global probe_rmpupdate_insn",
    "probe_rmpupdate_insn:",
    ".byte 0xf2, 0x0f, 0x01, 0xfe",
    "xor edx, edx",
    ".global probe_rmpupdate_resume",
    "probe_rmpupdate_resume:",
    "pop rbp",
    "ret",
    "",
    ".global probe_write_cr4",
    "probe_write_cr4:",
    "push rbp",
    "mov rbp, rsp",
    ".global probe_write_cr4_insn",
    "probe_write_cr4_insn:",
    "mov cr4, rdi",
    "xor edx, edx",
    ".global probe_write_cr4_resume",
    "probe_write_cr4_resume:",
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
    fn probe_invlpgb(rax: u64, ecx: u32, edx: u32) -> Outcome;
    fn probe_invlpgb_insn();
    fn probe_invlpgb_resume();
    fn probe_tlbsync() -> Outcome;
    fn probe_tlbsync_insn();
    fn probe_tlbsync_resume();
    fn probe_invpcid(kind: u64, descriptor: *const [u64; 2]) -> Outcome;
    fn probe_invpcid_insn();
    fn probe_invpcid_resume();
    fn probe_psmash() -> Outcome;
    fn probe_psmash_insn();
    fn probe_psmash_resume();
    fn probe_rmpupdate() -> Outcome;
    fn probe_rmpupdate_insn();
    fn probe_rmpupdate_resume();
    fn probe_write_cr4(value: u64) -> Outcome;
    fn probe_write_cr4_insn();
    fn probe_write_cr4_resume();
}

/// The exceptions an instruction probe recovers from.
const GENERAL_PROTECTION: u64 = 13;
const INVALID_OPCODE: u64 = 6;
const PAGE_FAULT: u64 = 14;

/// Each instruction probe's instruction and where it resumes after a fault.
fn instruction_probes() -> [(u64, u64); 6] {
    [
        (
            probe_invlpgb_insn as *const () as u64,
            probe_invlpgb_resume as *const () as u64,
        ),
        (
            probe_tlbsync_insn as *const () as u64,
            probe_tlbsync_resume as *const () as u64,
        ),
        (
            probe_invpcid_insn as *const () as u64,
            probe_invpcid_resume as *const () as u64,
        ),
        (
            probe_psmash_insn as *const () as u64,
            probe_psmash_resume as *const () as u64,
        ),
        (
            probe_rmpupdate_insn as *const () as u64,
            probe_rmpupdate_resume as *const () as u64,
        ),
        (
            probe_write_cr4_insn as *const () as u64,
            probe_write_cr4_resume as *const () as u64,
        ),
    ]
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

/// Called for every kernel page fault, #GP and #UD before it is declared
/// fatal: if the fault belongs to a probe, points `frame` at the probe's
/// recovery point with the fault as its result, and returns true.
pub fn recover(frame: &mut TrapFrame) -> bool {
    if frame.vector == GENERAL_PROTECTION || frame.vector == INVALID_OPCODE {
        let Some(&(_, resume)) = instruction_probes()
            .iter()
            .find(|(instruction, _)| *instruction == frame.rip)
        else {
            return false;
        };
        frame.rip = resume;
        frame.rdx = FAULTED | (frame.vector << 32) | (frame.error_code & 0xffff_ffff);
        return true;
    }
    if frame.vector != PAGE_FAULT {
        return false;
    }
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
