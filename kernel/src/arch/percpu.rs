//! Finding this CPU's data: the GS segment base.
//!
//! Each CPU points its GS base (MSR IA32_GS_BASE) at its own
//! [`PerCpu`] block. The block's first field holds
//! its own address, so one `mov rax, gs:[0]` yields a pointer to the block
//! from any context, including interrupt handlers, in O(1).

use x86_64::{VirtAddr, registers::model_specific::GsBase};

use crate::smp::percpu::PerCpu;

/// Points this CPU's GS base at `cpu`.
pub fn install(cpu: &'static PerCpu) {
    assert_eq!(
        cpu.self_address(),
        cpu as *const PerCpu as u64,
        "PerCpu self pointer"
    );
    GsBase::write(VirtAddr::from_ptr(cpu));
}

/// This CPU's block. Before [`install`] ran on this CPU the GS base is 0 and
/// the read faults on the never-mapped page at address 0, which the fault
/// path reports; it never yields a bogus reference.
pub fn current() -> &'static PerCpu {
    let address: u64;
    // Reads 8 bytes at GS:0. After `install` that is the first field
    // of a 'static, repr(C) `PerCpu`: its own address. Before, GS:0 is linear
    // address 0, which is never mapped, so the instruction faults instead.
    // SAFETY: the read yields a valid PerCpu address or faults.
    unsafe {
        core::arch::asm!("mov {}, gs:[0]", out(reg) address, options(nostack, readonly, preserves_flags))
    };
    // `address` is the address of a 'static `PerCpu` (see above), and
    // the kernel only ever creates shared references to it.
    // SAFETY: a 'static PerCpu, only ever shared.
    unsafe { &*(address as *const PerCpu) }
}

/// This CPU's block, or `None` before [`install`]; slower (reads an MSR), for
/// code that may run early, such as crash reports.
pub fn current_if_installed() -> Option<&'static PerCpu> {
    (!GsBase::read().is_null()).then(current)
}
