//! The local TLB instructions `mm`'s decisions turn into.
//!
//! Without PCIDs (QEMU's TCG has none), every CR3 load flushes all non-global
//! entries; global entries (kernel mappings, with CR4.PGE) survive it and go
//! only by INVLPG or by toggling CR4.PGE.

use x86_64::{
    PhysAddr, VirtAddr,
    registers::control::{Cr3, Cr3Flags, Cr4, Cr4Flags},
    structures::paging::PhysFrame,
};

/// INVLPG: drops the translation of the page containing `va` (global or not)
/// and the paging-structure caches for it.
pub fn invlpg(va: u64) {
    x86_64::instructions::tlb::flush(VirtAddr::new_truncate(va));
}

/// Loads CR3 with `root`, flushing every non-global entry.
pub fn load_root(root: PhysAddr) {
    // Callers pass the root of a page table whose upper half is the
    // kernel's (every user table copies it), so the kernel code and stack
    // running now stay mapped at the same addresses.
    // SAFETY: the kernel half stays mapped across the load.
    unsafe { Cr3::write(PhysFrame::containing_address(root), Cr3Flags::empty()) };
}

/// Flushes every entry, global ones included: toggling CR4.PGE does that by
/// definition; without PGE a CR3 reload already does.
pub fn flush_everything() {
    let flags = Cr4::read();
    if flags.contains(Cr4Flags::PAGE_GLOBAL) {
        // Clearing and restoring PGE changes no mapping, it only
        // makes the CPU drop global entries.
        // SAFETY: toggling PGE only drops global TLB entries.
        unsafe {
            Cr4::write(flags - Cr4Flags::PAGE_GLOBAL);
            Cr4::write(flags);
        }
    } else {
        load_root(Cr3::read().0.start_address());
    }
}
