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

use core::arch::{asm, global_asm};

use tlb_types::Pcid;
use x86_64::{PhysAddr, VirtAddr, structures::idt::PageFaultErrorCode};

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

/// How a probed instruction faulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstructionFault {
    /// #GP, with its error code.
    GeneralProtection(u32),
    /// #UD: the CPU does not have the instruction (or not in this form).
    InvalidOpcode,
}

impl core::fmt::Display for InstructionFault {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::GeneralProtection(code) => write!(f, "#GP({code:#x})"),
            Self::InvalidOpcode => f.write_str("#UD"),
        }
    }
}

fn instruction_result(outcome: Outcome) -> Result<(), InstructionFault> {
    if outcome.fault & FAULTED == 0 {
        Ok(())
    } else if (outcome.fault >> 32) & 0xff == INVALID_OPCODE {
        Err(InstructionFault::InvalidOpcode)
    } else {
        Err(InstructionFault::GeneralProtection(outcome.fault as u32))
    }
}

/// Executes INVLPGB with these operands and reports whether it faulted.
/// Unlike [`crate::tlb::invlpgb`] it checks nothing first: it is how a test
/// asks the CPU which operands it refuses.
pub fn invlpgb(rax: u64, ecx: u32, edx: u32) -> Result<(), InstructionFault> {
    // INVLPGB only drops translations, whatever its operands; a #GP or #UD
    // is recovered at the probe's resume point.
    // SAFETY: an invalidation changes no memory; faults are recovered.
    instruction_result(unsafe { probe_invlpgb(rax, ecx, edx) })
}

/// Executes TLBSYNC and reports whether it faulted.
pub fn tlbsync() -> Result<(), InstructionFault> {
    // TLBSYNC only waits; a #GP or #UD is recovered.
    // SAFETY: no memory is changed; faults are recovered.
    instruction_result(unsafe { probe_tlbsync() })
}

/// Executes INVPCID of type `kind` with `descriptor` (PCID, linear address)
/// and reports whether it faulted.
pub fn invpcid(kind: u64, descriptor: &[u64; 2]) -> Result<(), InstructionFault> {
    // INVPCID reads the 16-byte descriptor, which the reference keeps alive,
    // and only drops translations; a #GP or #UD is recovered.
    // SAFETY: a valid descriptor pointer; faults are recovered.
    instruction_result(unsafe { probe_invpcid(kind, descriptor) })
}

/// The SEV-SNP instructions that share INVLPGB's and TLBSYNC's opcodes,
/// told apart from them by a prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnpInstruction {
    /// PSMASH, F3 0F 01 FF: TLBSYNC's opcode behind REP.
    Psmash,
    /// RMPUPDATE, F2 0F 01 FE: INVLPGB's opcode behind REPNE.
    Rmpupdate,
}

/// Whether CPUID reports SEV-SNP (Fn8000_001F_EAX bit 4).
fn has_sev_snp() -> bool {
    const SEV_SNP: u32 = 1 << 4;
    crate::cpuid::cpuid(0x8000_0000, 0).eax >= 0x8000_001f
        && crate::cpuid::cpuid(0x8000_001f, 0).eax & SEV_SNP != 0
}

/// Executes `instruction` and reports whether it faulted, on a CPU whose
/// CPUID reports no SEV-SNP, where it must raise #UD: an emulator that
/// decodes INVLPGB or TLBSYNC without looking at the prefix runs it as
/// one of them instead. `None` on a CPU with SEV-SNP, where it would act on
/// the reverse map table, so it is not executed.
pub fn snp_instruction(instruction: SnpInstruction) -> Option<Result<(), InstructionFault>> {
    if has_sev_snp() {
        return None;
    }
    // SAFETY: without SEV-SNP the instruction raises #UD (recovered), or,
    // where the prefix is ignored, runs as TLBSYNC or as an INVLPGB of
    // ASID 0's non-global entries, which only drop translations.
    let outcome = unsafe {
        match instruction {
            SnpInstruction::Psmash => probe_psmash(),
            SnpInstruction::Rmpupdate => probe_rmpupdate(),
        }
    };
    Some(instruction_result(outcome))
}

/// Tries to set CR4.PCIDE on a CPU whose CPUID reports no PCID, where the
/// bit is reserved and the write must raise #GP; `None` on a CPU with PCID.
/// Should the write succeed, CR4 is put back at once: with CR3 bits 11:0 0
/// the CPU ran with PCID 0 of the same page table meanwhile.
pub fn pcide_without_cpuid_pcid() -> Option<Result<(), InstructionFault>> {
    use x86_64::registers::control::{Cr3, Cr4, Cr4Flags};
    const CPUID_PCID: u32 = 1 << 17;
    if crate::cpuid::cpuid(1, 0).ecx & CPUID_PCID != 0 {
        return None;
    }
    Some(without_interrupts(|| {
        let cr4 = Cr4::read_raw();
        let (root, low_bits) = Cr3::read_raw();
        // PCIDE may be set only with CR3 bits 11:0 zero: with any other
        // value the write faults for that reason, and proves nothing.
        if low_bits != 0 {
            crate::tlb::load_root(root.start_address(), Pcid::ZERO, false);
        }
        // SAFETY: the probed write either faults (recovered) or sets PCIDE
        // with PCID 0 of the page table in use, which maps the same.
        let outcome = instruction_result(unsafe { probe_write_cr4(cr4 | Cr4Flags::PCID.bits()) });
        if outcome.is_ok() {
            // SAFETY: CR4 as it was; clearing PCIDE is legal with any CR3.
            unsafe { Cr4::write_raw(cr4) };
        }
        if low_bits != 0 {
            // SAFETY: the CR3 this CPU ran with, bits 11:0 included.
            unsafe {
                asm!("mov cr3, {}", in(reg) root.start_address().as_u64() | u64::from(low_bits), options(nostack, preserves_flags))
            };
        }
        outcome
    }))
}

/// What setting CR4.PCIDE and using PCIDs without it did, on a CPU that
/// runs with PCIDs: see [`pcide_rules`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcideRules {
    /// Setting CR4.PCIDE while CR3 bits 11:0 is not 0 (SDM: #GP).
    pub set_with_cr3_low_bits: Result<(), InstructionFault>,
    /// INVPCID type 1 naming PCID 1 while CR4.PCIDE is clear (SDM: #GP).
    pub invpcid_without_pcide: Result<(), InstructionFault>,
    /// INVLPGB naming PCID 1 while CR4.PCIDE is clear (APM: #GP); `None`
    /// without INVLPGB.
    pub invlpgb_without_pcide: Option<Result<(), InstructionFault>>,
    /// Setting CR4.PCIDE with CR3 bits 11:0 0, to put things back (legal).
    pub set_back: Result<(), InstructionFault>,
}

/// Turns PCIDs off on this CPU for a moment, with interrupts off, to try
/// what the architecture forbids without them, then turns them back on and
/// reloads the page table it found (flushing this CPU's TLB). Needs
/// CR4.PCIDE set and INVPCID; `invlpgb` says whether to try INVLPGB too.
pub fn pcide_rules(invlpgb: bool) -> PcideRules {
    use x86_64::registers::control::{Cr3, Cr4, Cr4Flags};
    /// CR3 bit 3 (PWT) without PCIDs: a write-through PML4 access, harmless,
    /// and a non-zero CR3 bits 11:0.
    const CR3_PWT: u64 = 1 << 3;
    without_interrupts(|| {
        let cr4 = Cr4::read_raw();
        let pcide = Cr4Flags::PCID.bits();
        assert!(cr4 & pcide != 0, "pcide_rules needs PCIDs on");
        let (root, pcid) = Cr3::read_raw();
        let root = root.start_address().as_u64();
        let descriptor = [1u64, 0];
        // PCID 0 of the same root first: PCIDE may be cleared with any CR3,
        // but set again only with CR3 bits 11:0 zero.
        crate::tlb::load_root(PhysAddr::new(root), Pcid::ZERO, false);
        // Clearing PCIDE only changes how translations are tagged (and
        // flushes them); the page table stays the one in use, whose kernel
        // half maps this code, and the end of this function sets it again.
        // SAFETY: a supported CR4 bit cleared; the mappings stay the same.
        unsafe { Cr4::write_raw(cr4 & !pcide) };
        // Without PCIDs, CR3 bits 11:0 are the PML4's cache attributes: PWT
        // makes its accesses write-through, which changes no mapping.
        // SAFETY: the same root, with a legal cache attribute.
        unsafe { asm!("mov cr3, {}", in(reg) root | CR3_PWT, options(nostack, preserves_flags)) };
        // If setting PCIDE does not fault (the emulator under test is
        // wrong), CR3 then names PCID 8 of the same root until the restore.
        // SAFETY: the probed write either faults (recovered) or sets PCIDE.
        let set_with_cr3_low_bits = instruction_result(unsafe { probe_write_cr4(cr4) });
        let invpcid_without_pcide = invpcid(1, &descriptor);
        // rAX bits 1 and 2 (PCID and ASID valid), PCID 1 in EDX bits 31:16.
        let invlpgb_without_pcide = invlpgb.then(|| self::invlpgb(0b110, 0, 1 << 16));
        // PCID 0 again, so that setting PCIDE as it was is legal; then the
        // root and PCID this CPU ran with (a flushing load).
        crate::tlb::load_root(PhysAddr::new(root), Pcid::ZERO, false);
        // SAFETY: CR4 as it was, legal now that CR3 bits 11:0 are zero.
        let set_back = instruction_result(unsafe { probe_write_cr4(cr4) });
        crate::tlb::load_root(PhysAddr::new(root), Pcid::new(pcid), false);
        PcideRules {
            set_with_cr3_low_bits,
            invpcid_without_pcide,
            invlpgb_without_pcide,
            set_back,
        }
    })
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
