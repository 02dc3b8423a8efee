//! The architecture layer: the only place in the kernel that executes
//! privileged instructions, touches I/O ports or turns physical addresses into
//! references.
//!
//! Every `unsafe` block of the kernel lives below this module and carries a
//! `// SAFETY:` comment arguing why it holds. The rest of the kernel
//! (memory management policy, the test framework, command-line parsing) is
//! ordinary safe Rust built on the small, safe interfaces exported here.

pub mod apic;
pub mod context;
pub mod cpu;
pub mod cpuid;
pub mod fw_cfg;
pub mod gdt;
pub mod global_alloc;
pub mod idt;
pub mod ipi;
pub mod kernel_image;
pub mod kernel_stack;
pub mod paging;
pub mod percpu;
pub mod phys;
pub mod pic;
pub mod probe;
pub mod protection;
pub mod qemu_exit;
pub mod ramdisk;
pub mod serial;
pub mod stack_walk;
pub mod syscall;
pub mod tlb;
pub mod trampoline;
pub mod trap;
pub mod tsc;

/// Loads the boot CPU's descriptor tables: GDT and TSS (with the double-fault
/// stack) and the IDT. After this, every CPU exception reaches our handlers.
pub fn init_boot_cpu() {
    gdt::load_boot_cpu();
    idt::load();
}
