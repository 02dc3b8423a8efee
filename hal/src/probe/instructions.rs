//! The instruction probes: one TLB or control-register instruction with
//! the given operands, whose #GP or #UD becomes an `Err` (the routines are
//! in the parent module's assembly).

use core::arch::asm;

use tlb_types::Pcid;
use x86_64::PhysAddr;

use super::{
    FAULTED, INVALID_OPCODE, Outcome, probe_invlpgb, probe_invpcid, probe_psmash, probe_rmpupdate,
    probe_tlbsync, probe_write_cr4,
};
use crate::cpu::without_interrupts;

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
