//! What the CPU (or emulator) does with the TLB instructions' forbidden
//! operands: INVLPGB, TLBSYNC and INVPCID executed through `hal::probe`,
//! which recovers the #GP or #UD they raise, and the #GP conditions of
//! CR4.PCIDE.
//!
//! The kernel never issues these operands itself (`mm` encodes legal ones,
//! and `hal::tlb` checks what it can), so these tests are about the machine:
//! on a CPU without the instruction each must raise #UD, and on one with it
//! (the project's patched QEMU, or an EPYC) each rule of the manuals must
//! hold. Each case names the rule; a patched QEMU without one of its checks
//! fails the case that names it. The ring-3 cases (#GP at CPL 3) are in
//! `tests/invlpgb.rs`, which runs `fault:invlpgb` and friends.

use alloc::vec::Vec;

use hal::probe::{self, InstructionFault, SnpInstruction};
use tlb_types::invlpgb::{FLAG_ASID, FLAG_INCLUDE_NESTED, FLAG_PCID, FLAG_VA};

use crate::framework::TestResult;
use crate::{check, check_eq};

/// A user address no test maps: invalidating it drops nothing that matters.
const SOME_USER_ADDRESS: u64 = 0x4000_0000;
/// The first non-canonical address (48-bit paging).
const NON_CANONICAL: u64 = 0x0000_8000_0000_0000;
/// CPUID Fn8000_0008_EBX bit 21: INVLPGB may include nested translations.
const INVLPGB_NESTED: u32 = 1 << 21;

fn is_gp(outcome: Result<(), InstructionFault>) -> bool {
    matches!(outcome, Err(InstructionFault::GeneralProtection(_)))
}

/// INVLPGB and TLBSYNC: #UD without CPUID Fn8000_0008_EBX bit 3; with it, #GP
/// for every operand the APM forbids (and the emulator's documented
/// choices where it is silent), and success for legal ones.
pub fn invlpgb_and_tlbsync_follow_the_manual() -> TestResult {
    let cpu = kernel::boot::detect_cpu_features();
    let Some(count_max) = cpu.invlpgb else {
        check_eq!(
            probe::invlpgb(FLAG_ASID, 0, 0),
            Err(InstructionFault::InvalidOpcode),
            "INVLPGB on a CPU whose CPUID does not report it"
        );
        check_eq!(
            probe::tlbsync(),
            Err(InstructionFault::InvalidOpcode),
            "TLBSYNC on a CPU whose CPUID does not report it"
        );
        return Ok(());
    };
    let count_max = u32::from(count_max);
    let nested = hal::cpuid::cpuid(0x8000_0008, 0).ebx & INVLPGB_NESTED != 0;
    let pcids = hal::tlb::pcids_enabled();
    let va = FLAG_VA | FLAG_ASID;
    // (rule, rAX, ECX, EDX, must fault)
    let mut cases: Vec<(&str, u64, u32, u32, bool)> = alloc::vec![
        ("the largest count", SOME_USER_ADDRESS | va, count_max, 0, false),
        ("a count above the largest", SOME_USER_ADDRESS | va, count_max + 1, 0, true),
        ("every non-global entry", FLAG_ASID, 0, 0, false),
        ("a 2 MiB stride", SOME_USER_ADDRESS | va, 1 << 31, 0, false),
        ("a reserved rAX bit (6)", SOME_USER_ADDRESS | va | 1 << 6, 0, 0, true),
        ("a reserved ECX bit (16)", SOME_USER_ADDRESS | va, 1 << 16, 0, true),
        ("an ASID the CPU does not have", FLAG_ASID, 0, 0xffff, true),
        ("a non-canonical address", NON_CANONICAL | va, 0, 0, true),
        ("a range across the canonical hole", (NON_CANONICAL - 0x1000) | va, 1, 0, true),
        ("the last page below the hole", (NON_CANONICAL - 0x1000) | va, 0, 0, false),
        (
            "include-nested",
            FLAG_ASID | FLAG_INCLUDE_NESTED,
            0,
            0,
            !nested,
        ),
        ("a PCID wider than 12 bits", FLAG_PCID | FLAG_ASID, 0, 0x1000 << 16, true),
    ];
    if pcids {
        cases.push(("PCID 1 with PCIDs on", FLAG_PCID | va | SOME_USER_ADDRESS, 0, 1 << 16, false));
    }
    for (rule, rax, ecx, edx, must_fault) in cases {
        let outcome = probe::invlpgb(rax, ecx, edx);
        check!(
            is_gp(outcome) == must_fault,
            "INVLPGB with {rule} (rax={rax:#x} ecx={ecx:#x} edx={edx:#x}, count max {count_max}): \
             {outcome:?}, expected {}",
            if must_fault { "#GP" } else { "success" }
        );
    }
    check_eq!(probe::tlbsync(), Ok(()), "TLBSYNC after the legal INVLPGBs");
    Ok(())
}

/// INVLPGB's and TLBSYNC's opcodes behind an F2 or F3 prefix are other
/// instructions (SEV-SNP's RMPUPDATE and PSMASH, among others): on a CPU
/// without SEV-SNP they raise #UD, with or without INVLPGB. An emulator
/// that decodes the opcode without its prefix runs them as INVLPGB or
/// TLBSYNC instead.
pub fn prefixed_forms_are_not_invlpgb_or_tlbsync() -> TestResult {
    for (instruction, encoding) in [
        (SnpInstruction::Psmash, "F3 0F 01 FF"),
        (SnpInstruction::Rmpupdate, "F2 0F 01 FE"),
    ] {
        let Some(outcome) = probe::snp_instruction(instruction) else {
            hal::println!("tlb_instructions: the CPU has SEV-SNP; {instruction:?} is not probed");
            continue;
        };
        check_eq!(
            outcome,
            Err(InstructionFault::InvalidOpcode),
            "{instruction:?} ({encoding}) on a CPU without SEV-SNP"
        );
    }
    Ok(())
}

/// INVPCID: #UD without CPUID.7.EBX bit 10; with it, types 0-3 succeed and the
/// SDM's #GP rules hold (a type above 3, reserved descriptor bits, a
/// non-canonical address for type 0, a PCID other than 0 without PCIDs).
pub fn invpcid_follows_the_manual() -> TestResult {
    let cpu = kernel::boot::detect_cpu_features();
    let page = [0, SOME_USER_ADDRESS];
    if !cpu.invpcid {
        check_eq!(
            probe::invpcid(3, &page),
            Err(InstructionFault::InvalidOpcode),
            "INVPCID on a CPU whose CPUID does not report it"
        );
        return Ok(());
    }
    let pcids = hal::tlb::pcids_enabled();
    // (rule, type, descriptor, must fault)
    let cases: [(&str, u64, [u64; 2], bool); 9] = [
        ("type 0", 0, page, false),
        ("type 1", 1, page, false),
        ("type 2", 2, page, false),
        ("type 3", 3, page, false),
        ("type 4", 4, page, true),
        ("reserved descriptor bits", 1, [1 << 12, 0], true),
        ("type 0 at a non-canonical address", 0, [0, NON_CANONICAL], true),
        ("type 0 with PCID 1", 0, [1, SOME_USER_ADDRESS], !pcids),
        ("type 1 with PCID 1", 1, [1, 0], !pcids),
    ];
    for (rule, kind, descriptor, must_fault) in cases {
        let outcome = probe::invpcid(kind, &descriptor);
        check!(
            is_gp(outcome) == must_fault,
            "INVPCID {rule} (PCIDs {}): {outcome:?}, expected {}",
            if pcids { "on" } else { "off" },
            if must_fault { "#GP" } else { "success" }
        );
    }
    Ok(())
}

/// CR4.PCIDE: setting it while CR3 bits 11:0 is not 0 raises #GP, and with it
/// clear, naming PCID 1 to INVPCID or INVLPGB raises #GP; setting it back
/// with CR3 bits 11:0 0 succeeds. Tried on this CPU with PCIDs off for a moment
/// (`hal::probe::pcide_rules`).
pub fn pcide_follows_the_manual() -> TestResult {
    let cpu = kernel::boot::detect_cpu_features();
    if !hal::tlb::pcids_enabled() || !cpu.invpcid {
        hal::println!("tlb_instructions: PCIDs off or no INVPCID here; nothing to check");
        return Ok(());
    }
    let rules = probe::pcide_rules(cpu.invlpgb.is_some());
    check!(
        is_gp(rules.set_with_cr3_low_bits),
        "setting CR4.PCIDE with CR3 bits 11:0 = 8: {:?}, expected #GP",
        rules.set_with_cr3_low_bits
    );
    check!(
        is_gp(rules.invpcid_without_pcide),
        "INVPCID type 1 of PCID 1 with CR4.PCIDE clear: {:?}, expected #GP",
        rules.invpcid_without_pcide
    );
    if let Some(outcome) = rules.invlpgb_without_pcide {
        check!(
            is_gp(outcome),
            "INVLPGB of PCID 1 with CR4.PCIDE clear: {outcome:?}, expected #GP"
        );
    }
    check_eq!(rules.set_back, Ok(()), "setting CR4.PCIDE with CR3 bits 11:0 = 0");
    check!(hal::tlb::pcids_enabled(), "CR4.PCIDE is set again afterwards");
    Ok(())
}

/// CR4.PCIDE is reserved on a CPU whose CPUID lacks PCID: setting it raises
/// #GP. Checked only on CPUs with INVLPGB (an EPYC, or the project's patched
/// QEMU): QEMU's stock TCG answers a reserved CR4 bit with an SVM exit that
/// wrecks the vCPU instead of #GP (patch 0001 of `emulator/qemu-invlpgb`
/// fixes it), and the suite runs on stock QEMU too.
pub fn pcide_is_reserved_without_cpuid_pcid() -> TestResult {
    if kernel::boot::detect_cpu_features().invlpgb.is_none() {
        hal::println!("tlb_instructions: no INVLPGB here (stock QEMU?); reserved PCIDE not tried");
        return Ok(());
    }
    let Some(outcome) = probe::pcide_without_cpuid_pcid() else {
        hal::println!("tlb_instructions: CPUID reports PCID; PCIDE is not reserved here");
        return Ok(());
    };
    check!(
        is_gp(outcome),
        "setting CR4.PCIDE while CPUID reports no PCID: {outcome:?}, expected #GP"
    );
    Ok(())
}
