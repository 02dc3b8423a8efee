//! Small wrappers around single CPU instructions and control registers.

use x86_64::instructions::interrupts;

/// The value of CR2: the linear address of the most recent page fault.
pub fn page_fault_address() -> u64 {
    x86_64::registers::control::Cr2::read_raw()
}

/// The raw value of CR3: the physical address of the top-level page table
/// plus, with CR4.PCIDE, the current PCID in bits 0-11.
pub fn cr3_raw() -> u64 {
    let (frame, low_bits) = x86_64::registers::control::Cr3::read_raw();
    frame.start_address().as_u64() | u64::from(low_bits)
}

/// The raw value of CR4.
pub fn cr4_raw() -> u64 {
    x86_64::registers::control::Cr4::read_raw()
}

/// Stops this CPU for good: interrupts off, then `hlt` forever. Used only
/// after a fatal error when there is no way to end the emulator run.
pub fn halt_forever() -> ! {
    interrupts::disable();
    loop {
        x86_64::instructions::hlt();
    }
}

/// Runs `f` with maskable interrupts disabled on this CPU, restoring the
/// previous state afterwards.
pub fn without_interrupts<R>(f: impl FnOnce() -> R) -> R {
    interrupts::without_interrupts(f)
}

/// Reads eight bytes at `address`, which the caller expects the kernel may
/// not read (unmapped, or a user page under SMAP), so that the read raises a
/// page fault. Exists to test the fault path.
///
/// The load is one instruction of inline assembly rather than a volatile
/// read: the read's debug alignment check gives the optimiser a branch to
/// move the frame set-up behind, and a fault before the frame is set up
/// would hide the caller from the crash report's backtrace.
#[inline(never)]
pub fn read_to_fault(address: u64) -> u64 {
    let value: u64;
    // Callers pass an address the kernel may not read, so the load faults
    // and the fatal path ends the run before any value is produced. Were it
    // readable after all, loading eight bytes from it yields some bit
    // pattern (every pattern is a valid `u64`) and writes nothing: no Rust
    // object lives at such an address.
    // SAFETY: the load faults, or reads a valid u64 and changes nothing.
    unsafe {
        core::arch::asm!(
            "mov {value}, qword ptr [{address}]",
            value = out(reg) value,
            address = in(reg) address,
            options(nostack, readonly, preserves_flags),
        );
    }
    value
}

/// Enables maskable interrupts on this CPU.
pub fn enable_interrupts() {
    interrupts::enable();
}

/// Whether maskable interrupts are enabled on this CPU (a CPU that may
/// block must be able to take the interrupt that wakes it).
pub fn interrupts_enabled() -> bool {
    interrupts::are_enabled()
}

/// Disables maskable interrupts on this CPU.
pub fn disable_interrupts() {
    interrupts::disable();
}

/// Enables interrupts and halts in one step (`sti; hlt`): an interrupt that
/// arrives after the caller's last check still ends the halt.
pub fn enable_interrupts_and_halt() {
    interrupts::enable_and_hlt();
}

/// The active top-level page table (what CR3 points at).
pub fn page_table_root() -> tlb_types::PageTableRoot {
    tlb_types::PageTableRoot::new(
        x86_64::registers::control::Cr3::read()
            .0
            .start_address()
            .as_u64(),
    )
}
