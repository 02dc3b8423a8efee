//! The local TLB instructions `mm`'s decisions turn into, and the control
//! bits that change what they mean.
//!
//! Without PCIDs (QEMU's TCG has none), every CR3 load flushes all non-global
//! entries; global entries (kernel mappings, with CR4.PGE) survive it and go
//! only by INVLPG or by toggling CR4.PGE.
//!
//! With CR4.PCIDE, CR3's low 12 bits tag every entry the CPU caches, and a
//! CR3 load flushes only the new tag's entries, or nothing when bit 63 is
//! set: switching between address spaces no longer throws their
//! translations away. The price is that INVLPG reaches only the *current*
//! PCID (and global entries), so a flush of another PCID needs INVPCID or a
//! flush of everything.
//!
//! Which of these instructions carries out an operation on a given CPU is
//! not decided here: `mm::instructions::select` decides, and [`execute`]
//! runs its answer (a `tlb_types::Instruction`), one for one. INVLPGB and
//! TLBSYNC (AMD, Zen 3 and later) are here as raw instructions; which
//! operands to give them is `mm::invlpgb`'s business. The assembler gets
//! their bytes, so no assembler feature flag is needed.

use core::{
    arch::asm,
    sync::atomic::{AtomicU32, Ordering},
};

use tlb_types::{Instruction, InvlpgbOperands, Pcid, invlpgb::FLAG_PCID};
use x86_64::{
    PhysAddr, VirtAddr,
    instructions::tlb::{InvPcidCommand, Pcid as X86Pcid},
    registers::{
        control::{Cr3, Cr4, Cr4Flags},
        model_specific::{Efer, EferFlags},
    },
};

/// Executes the local flush `instruction` that `mm::instructions::select`
/// chose for this CPU's state, one for one.
pub fn execute(instruction: Instruction) {
    match instruction {
        Instruction::Invlpg { va } => invlpg(va),
        Instruction::InvpcidAddress { pcid, va } => invpcid_address(pcid, va),
        Instruction::InvpcidSingle { pcid } => invpcid_single(pcid),
        Instruction::InvpcidAll => invpcid_everything(),
        Instruction::InvpcidAllNonGlobal => invpcid_all_nonglobal(),
        Instruction::LoadCr3 { root, pcid, keep } => {
            load_root(PhysAddr::new(root.address()), pcid, keep)
        }
        Instruction::ReloadCr3 => reload_root(),
        Instruction::TogglePge => toggle_global_pages(),
    }
}

/// CR3 bit 63 on a load with CR4.PCIDE: keep the new PCID's entries.
const CR3_KEEP_ENTRIES: u64 = 1 << 63;

/// INVLPG: drops the translation of the page containing `va` in the current
/// PCID, any global translation of it, and the paging-structure caches for it.
pub fn invlpg(va: u64) {
    x86_64::instructions::tlb::flush(VirtAddr::new_truncate(va));
}

/// Loads CR3 with `root` tagged `pcid`. With PCIDs off `pcid` must be 0,
/// `keep_entries` false, and every non-global entry is flushed; with PCIDs
/// on, `keep_entries` decides whether the entries already tagged `pcid`
/// survive the load. (Runs at every address-space switch: the caller knows
/// whether PCIDs are on, so CR4 is only read to check it in debug builds.)
pub fn load_root(root: PhysAddr, pcid: Pcid, keep_entries: bool) {
    debug_assert!(
        (pcid == Pcid::ZERO && !keep_entries) || pcids_enabled(),
        "PCID {pcid} or the keep bit while CR4.PCIDE is clear"
    );
    let mut value = root.as_u64() | u64::from(pcid.get());
    if keep_entries {
        value |= CR3_KEEP_ENTRIES;
    }
    // Callers pass the root of a page table whose upper half is the
    // kernel's (every user table copies it), so the code and stack running
    // now stay mapped at the same addresses. A non-zero PCID and bit 63 are
    // only passed once CR4.PCIDE is set (checked above in debug builds), where
    // they are defined.
    // SAFETY: the kernel half stays mapped across the load; the value is valid for CR3.
    unsafe { asm!("mov cr3, {}", in(reg) value, options(nostack, preserves_flags)) };
}

/// Reloads the current page table and PCID, flushing that PCID's non-global
/// entries (all non-global entries without PCIDs).
pub fn reload_root() {
    let (frame, pcid) = Cr3::read_raw();
    load_root(frame.start_address(), Pcid::new(pcid), false);
}

/// The PCID in CR3 (0 without PCIDs).
pub fn current_pcid() -> Pcid {
    Pcid::new(Cr3::read_raw().1)
}

/// Flips CR4.PGE and flips it back: any write to CR4 that changes PGE drops
/// every entry of every PCID, global ones included. Call only on a CPU that
/// supports PGE (the kernel checked CPUID when it chose its instructions).
pub fn toggle_global_pages() {
    let flags = Cr4::read();
    // Changing PGE and changing it back changes no mapping; the CPU only
    // drops its cached translations. Every other CR4 bit is written back as
    // it was. The caller vouches for PGE support (else the write faults,
    // which the fault path reports; it cannot corrupt memory).
    // SAFETY: flipping PGE twice only drops TLB entries.
    unsafe {
        Cr4::write(flags ^ Cr4Flags::PAGE_GLOBAL);
        Cr4::write(flags);
    }
}

/// Turns on global pages (CR4.PGE) on this CPU: the kernel's global
/// mappings (thread stacks) then survive CR3 loads, and INVLPG drops them
/// whatever PCID is loaded. Call only when CPUID reports PGE, before PCIDs
/// are turned on.
pub fn enable_global_pages() {
    // PGE exists on this CPU (the caller checked CPUID 1:EDX[13]); setting
    // it only lets entries of pages mapped global outlive CR3 loads.
    // SAFETY: a supported bit that changes no mapping.
    unsafe { Cr4::update(|flags| flags.insert(Cr4Flags::PAGE_GLOBAL)) };
}

/// Whether CR4.PGE is set on this CPU.
pub fn global_pages_enabled() -> bool {
    Cr4::read().contains(Cr4Flags::PAGE_GLOBAL)
}

/// Whether CR4.PCIDE is set on this CPU.
pub fn pcids_enabled() -> bool {
    Cr4::read().contains(Cr4Flags::PCID)
}

/// Turns on PCIDs on this CPU. Call only when CPUID reports PCID, with
/// interrupts off, after [`enable_global_pages`] (INVLPG reaches a kernel
/// page cached under another PCID only if the page is global), before any
/// non-zero PCID is used.
pub fn enable_pcids() {
    assert!(
        global_pages_enabled(),
        "PCIDs need CR4.PGE: without it a kernel page flushed by INVLPG stays cached under other PCIDs"
    );
    // PCIDE may only be set while CR3's PCID field is 0: reload the current
    // root with PCID 0 first (a flush of the non-global entries, harmless).
    load_root(Cr3::read().0.start_address(), Pcid::ZERO, false);
    // The caller checked CPUID for PCID, we are in long mode, and CR3[11:0]
    // is 0: the three conditions under which setting PCIDE is defined.
    // SAFETY: PCID is supported and CR3's PCID is 0.
    unsafe { Cr4::update(|flags| flags.insert(Cr4Flags::PCID)) };
}

/// Turns on AMD's translation cache extension: INVLPG, INVPCID and INVLPGB
/// then drop only the page-walk cache entries on the path to the page they
/// invalidate, instead of all of them. Safe for this kernel because every
/// flush that frees page tables covers the whole range those tables mapped.
/// Call only when CPUID reports TCE.
pub fn enable_translation_cache_extension() {
    // TCE only narrows which paging-structure cache entries invalidations
    // drop; the caller checked CPUID 0x8000_0001 ECX[17].
    // SAFETY: the bit exists on this CPU and changes no mapping.
    unsafe { Efer::update(|flags| flags.insert(EferFlags::TRANSLATION_CACHE_EXTENSION)) };
}

fn invpcid(command: InvPcidCommand) {
    // Callers use this only after CPUID reported INVPCID, so the
    // instruction exists; an invalidation never changes a mapping.
    // SAFETY: INVPCID is supported; invalidating is always memory-safe.
    unsafe { x86_64::instructions::tlb::flush_pcid(command) };
}

/// INVPCID type 0: the non-global entry of the page containing `va` tagged
/// `pcid`. Needs INVPCID.
pub fn invpcid_address(pcid: Pcid, va: u64) {
    invpcid(InvPcidCommand::Address(
        VirtAddr::new_truncate(va),
        x86_pcid(pcid),
    ));
}

/// INVPCID type 1: every non-global entry tagged `pcid`. Needs INVPCID.
pub fn invpcid_single(pcid: Pcid) {
    invpcid(InvPcidCommand::Single(x86_pcid(pcid)));
}

/// The `x86_64` crate's name for `pcid` (which it checks again: 12 bits).
fn x86_pcid(pcid: Pcid) -> X86Pcid {
    X86Pcid::new(pcid.get()).expect("a Pcid has 12 bits")
}

/// INVPCID type 3: every non-global entry of every PCID. Needs INVPCID.
pub fn invpcid_all_nonglobal() {
    invpcid(InvPcidCommand::AllExceptGlobal);
}

/// INVPCID type 2: every entry, global ones included. Needs INVPCID.
pub fn invpcid_everything() {
    invpcid(InvPcidCommand::All);
}

/// The INVLPGB page limit of this machine, once [`enable_invlpgb`] found
/// the instruction usable; 0 while it is not.
static INVLPGB_MAX_PAGES: AtomicU32 = AtomicU32::new(0);

/// Allows [`invlpgb`] and [`tlbsync`] from now on, with at most `max_pages`
/// pages per instruction. The caller (the kernel's mode choice) checked CPUID for a
/// usable INVLPGB (Zen 3 or later) and turned PCIDs on; this re-checks what
/// makes the instructions defined at all, and refuses otherwise.
pub fn enable_invlpgb(max_pages: u32) {
    let ext8 = crate::cpuid::cpuid(0x8000_0008, 0);
    assert!(
        ext8.ebx & (1 << 3) != 0 && max_pages >= 1 && max_pages <= (ext8.edx & 0xffff) + 1,
        "INVLPGB enabled on a CPU that does not report it (or beyond its page limit)"
    );
    INVLPGB_MAX_PAGES.store(max_pages, Ordering::Release);
}

fn invlpgb_allowed() {
    assert!(
        INVLPGB_MAX_PAGES.load(Ordering::Acquire) > 0,
        "INVLPGB used before enable_invlpgb"
    );
}

/// The INVLPGB page limit [`enable_invlpgb`] was given (0 before).
pub fn invlpgb_max_pages() -> u32 {
    INVLPGB_MAX_PAGES.load(Ordering::Acquire)
}

/// INVLPGB: starts an invalidation on every CPU in the system (this one
/// included) as `operands` describe. Which operands is a decision
/// (`mm::invlpgb` encodes them); this layer only checks what makes the
/// instruction fault. The invalidation completes only at the issuing CPU's
/// next [`tlbsync`], so callers pair the two on one CPU without migrating
/// in between (an unpaired or split INVLPGB is a coherence bug, not a memory
/// safety one: the instruction itself only drops translations).
///
/// A page count above the CPU's limit is left for the CPU to refuse: it
/// raises #GP, which the kernel's fault report explains (the count is not
/// checked here, so that an emulator's check of it can be tested through
/// the kernel's own flush path).
pub fn invlpgb(operands: InvlpgbOperands) {
    invlpgb_allowed();
    assert!(
        operands.rax & FLAG_PCID == 0 || pcids_enabled(),
        "INVLPGB names a PCID while CR4.PCIDE is clear"
    );
    // `enable_invlpgb` checked CPUID for the instruction and a PCID is
    // named only with PCIDE set; any other illegal operand raises #GP, which
    // stops the kernel with a report. Invalidating translations changes no
    // memory.
    // SAFETY: the instruction exists; at worst it faults, changing nothing.
    unsafe {
        asm!(
            ".byte 0x0f, 0x01, 0xfe",
            in("rax") operands.rax,
            in("ecx") operands.ecx,
            in("edx") operands.edx,
            options(nostack, preserves_flags),
        );
    }
}

/// TLBSYNC: waits until every INVLPGB this CPU issued has completed on every
/// CPU. Says nothing about other CPUs' INVLPGBs.
pub fn tlbsync() {
    invlpgb_allowed();
    // TLBSYNC comes with INVLPGB, which `enable_invlpgb` found; it only
    // waits.
    // SAFETY: the instruction exists (checked above).
    unsafe { asm!(".byte 0x0f, 0x01, 0xff", options(nostack, preserves_flags)) };
}
