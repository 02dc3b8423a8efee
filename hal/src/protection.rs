//! SMEP and SMAP: the hardware keeps the kernel out of user pages.
//!
//! Every address space maps the kernel and the running program together, so
//! a kernel bug that follows a user-supplied pointer would read, write or
//! even execute whatever the program put there. Two CR4 bits turn such a
//! bug into a page fault:
//!
//! - **SMEP** (supervisor-mode execution prevention): ring 0 may not fetch
//!   instructions from a user page. A program cannot make the kernel run its
//!   code by corrupting a kernel function pointer.
//! - **SMAP** (supervisor-mode access prevention): ring 0 may not read or
//!   write a user page unless RFLAGS.AC is set (`stac` ... `clac`). This
//!   kernel never needs that window: it copies user memory through the
//!   physical-memory window after checking the address against the
//!   process's regions (`task::vm`), never through the user's pointer.
//!
//! Both are enabled on every CPU that has them. RFLAGS.AC can be set by
//! ring 3 (`popf`), and an interrupt or exception does not clear it, so the
//! trap entry executes `clac` when SMAP is on (the `syscall` entry clears AC
//! through SFMASK, see [`crate::syscall`]); otherwise a program could
//! switch SMAP off for the kernel code that handles its interrupts.

use core::sync::atomic::{AtomicBool, Ordering};

use x86_64::registers::control::{Cr4, Cr4Flags};

/// Whether the CPUs have SMEP and SMAP (same answer on every CPU: the boot
/// CPU's CPUID decides).
static HAVE_SMEP: AtomicBool = AtomicBool::new(false);
/// Read by the trap entry stub (as a byte) to decide whether to `clac`.
pub static SMAP_ON: AtomicBool = AtomicBool::new(false);

/// Records which of the two the CPU has and enables them on this (the
/// boot) CPU.
pub fn init(smep: bool, smap: bool) {
    HAVE_SMEP.store(smep, Ordering::Relaxed);
    SMAP_ON.store(smap, Ordering::Relaxed);
    enable_this_cpu();
}

/// Enables what [`init`] found on this CPU (every AP calls it).
pub fn enable_this_cpu() {
    let mut flags = Cr4Flags::empty();
    if HAVE_SMEP.load(Ordering::Relaxed) {
        flags |= Cr4Flags::SUPERVISOR_MODE_EXECUTION_PROTECTION;
    }
    if SMAP_ON.load(Ordering::Relaxed) {
        flags |= Cr4Flags::SUPERVISOR_MODE_ACCESS_PREVENTION;
    }
    // The bits are set only when CPUID reports the features (setting an
    // unsupported CR4 bit would fault). They restrict the kernel's own
    // accesses to user pages, which it never makes: user memory is copied
    // through the physical-memory window, and the trap entry clears AC.
    // SAFETY: supported bits that only forbid accesses the kernel never makes.
    unsafe { Cr4::update(|cr4| cr4.insert(flags)) };
}

/// Whether SMEP is on on this CPU (CR4.SMEP).
pub fn smep_enabled() -> bool {
    Cr4::read().contains(Cr4Flags::SUPERVISOR_MODE_EXECUTION_PROTECTION)
}

/// Whether SMAP is on on this CPU (CR4.SMAP).
pub fn smap_enabled() -> bool {
    Cr4::read().contains(Cr4Flags::SUPERVISOR_MODE_ACCESS_PREVENTION)
}
