//! The application-processor start-up trampoline.
//!
//! A CPU woken by a STARTUP IPI begins in 16-bit real mode at physical
//! address `vector << 12`, with no stack and paging off. The trampoline,
//! copied to [`TRAMPOLINE_BASE`] (below 1 MiB, where the bootloader never
//! hands out memory), takes it to 64-bit mode in three steps:
//!
//! 1. real mode: load a tiny GDT, set CR0.PE, far-jump to 32-bit code;
//! 2. protected mode: set CR4.PAE, load CR3 with a *trampoline* page table,
//!    set EFER.LME and EFER.NXE (the kernel's page tables use the NX bit),
//!    set CR0.PG and CR0.WP, far-jump to 64-bit code;
//! 3. long mode: load the stack pointer, argument and entry point the boot
//!    CPU left in the parameter block and call the kernel's AP entry.
//!
//! CR3 is loaded while the CPU is still in 32-bit mode, so the first page
//! table must sit below 4 GiB. The kernel's own level-4 table may not, and it
//! does not map the trampoline's low addresses anyway. So the trampoline gets
//! its own three page-table pages below 1 MiB: they identity-map the first
//! 2 MiB (where the trampoline runs when paging turns on) and share the
//! kernel's upper-half entries (where the AP entry runs). The AP entry then
//! switches to the kernel's page table.
//!
//! The boot CPU starts one AP at a time and rewrites the parameter block
//! (stack, entry, argument) before each STARTUP IPI.

use core::arch::global_asm;

use x86_64::{
    PhysAddr,
    registers::control::{Cr3, Cr3Flags},
    structures::paging::PhysFrame,
};

use crate::phys::{read_bytes, to_virt};

/// Where the trampoline code runs; the STARTUP vector is this page's number.
pub const TRAMPOLINE_BASE: u64 = 0x8000;
/// The trampoline's level-4, level-3 and level-2 tables.
const LOW_PML4: u64 = 0x9000;
const LOW_PDPT: u64 = 0xA000;
const LOW_PD: u64 = 0xB000;
/// Physical memory the trampoline occupies: code page plus three tables.
pub const LOW_MEMORY_USED: core::ops::Range<u64> = TRAMPOLINE_BASE..LOW_PD + 0x1000;

const PRESENT_WRITABLE: u64 = 0b11;
const HUGE_PAGE: u64 = 1 << 7;

global_asm!(
    ".pushsection .rodata.ap_trampoline, \"a\"",
    ".balign 16",
    "ap_trampoline_start:",
    ".code16",
    "cli",
    "cld",
    "xorw %ax, %ax",
    "movw %ax, %ds",
    "lgdtl ({base} + ap_gdt_pointer - ap_trampoline_start)",
    "movl %cr0, %eax",
    "orl $1, %eax",
    "movl %eax, %cr0",
    "ljmpl $0x08, ${base} + ap_protected - ap_trampoline_start",
    ".code32",
    "ap_protected:",
    "movw $0x10, %ax",
    "movw %ax, %ds",
    "movw %ax, %es",
    "movw %ax, %ss",
    "movl %cr4, %eax",
    "orl $0x20, %eax",
    "movl %eax, %cr4",
    "movl ({base} + ap_param_page_table - ap_trampoline_start), %eax",
    "movl %eax, %cr3",
    "movl $0xC0000080, %ecx",
    "rdmsr",
    "orl $0x900, %eax",
    "wrmsr",
    "movl %cr0, %eax",
    "orl $0x80010000, %eax",
    "movl %eax, %cr0",
    "ljmpl $0x18, ${base} + ap_long_mode - ap_trampoline_start",
    ".code64",
    "ap_long_mode:",
    "xorl %eax, %eax",
    "movw %ax, %ds",
    "movw %ax, %es",
    "movw %ax, %ss",
    "movq ap_param_stack(%rip), %rsp",
    "movq ap_param_argument(%rip), %rdi",
    "movq ap_param_entry(%rip), %rax",
    "callq *%rax",
    "ud2",
    ".balign 8",
    "ap_gdt:",
    ".quad 0",
    ".quad 0x00CF9A000000FFFF", // 0x08: 32-bit code, base 0, limit 4 GiB
    ".quad 0x00CF92000000FFFF", // 0x10: data, base 0, limit 4 GiB
    ".quad 0x00AF9A000000FFFF", // 0x18: 64-bit code (L=1)
    "ap_gdt_pointer:",
    ".word ap_gdt_pointer - ap_gdt - 1",
    ".long {base} + ap_gdt - ap_trampoline_start",
    ".balign 8",
    "ap_param_page_table: .quad 0",
    "ap_param_stack: .quad 0",
    "ap_param_entry: .quad 0",
    "ap_param_argument: .quad 0",
    "ap_trampoline_end:",
    ".popsection",
    base = const TRAMPOLINE_BASE,
    options(att_syntax)
);

unsafe extern "C" {
    static ap_trampoline_start: u8;
    static ap_trampoline_end: u8;
    static ap_param_page_table: u8;
    static ap_param_stack: u8;
    static ap_param_entry: u8;
    static ap_param_argument: u8;
}

/// The trampoline's code and data as assembled into the kernel image.
fn image() -> &'static [u8] {
    let start = &raw const ap_trampoline_start;
    let end = &raw const ap_trampoline_end;
    // Both symbols delimit one contiguous block in the kernel's
    // read-only data (the `global_asm!` above), which is never written.
    // SAFETY: a valid, immutable, 'static byte range.
    unsafe { core::slice::from_raw_parts(start, end as usize - start as usize) }
}

/// Offset of a parameter slot from the start of the trampoline.
fn offset_of(slot: *const u8) -> u64 {
    slot as u64 - (&raw const ap_trampoline_start) as u64
}

fn write_low(addr: u64, bytes: &[u8]) {
    assert!(
        LOW_MEMORY_USED.contains(&addr)
            && LOW_MEMORY_USED.contains(&(addr + bytes.len() as u64 - 1))
    );
    let destination = to_virt(PhysAddr::new(addr)).as_mut_ptr::<u8>();
    // `addr..addr+len` lies in `LOW_MEMORY_USED`, below 1 MiB, which
    // the frame allocator never hands out (it reserves all of low memory) and
    // which the boot CPU checked is RAM before calling `install`. Nothing in
    // Rust references it; the offset mapping makes it writable.
    // SAFETY: the destination is unaliased, mapped, reserved low memory.
    unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), destination, bytes.len()) };
}

fn write_low_u64(addr: u64, value: u64) {
    write_low(addr, &value.to_le_bytes());
}

/// Copies the trampoline to low memory and builds its page table from the
/// kernel's level-4 table `kernel_pml4` (upper half shared).
pub fn install(kernel_pml4: PhysAddr) {
    let code = image();
    assert!(code.len() <= 4096, "AP trampoline larger than a page");
    write_low(TRAMPOLINE_BASE, code);

    let mut upper_half = [0u8; 256 * 8];
    read_bytes(kernel_pml4 + 256 * 8u64, &mut upper_half);
    for table in [LOW_PML4, LOW_PDPT, LOW_PD] {
        write_low(table, &[0; 4096]);
    }
    write_low_u64(LOW_PML4, LOW_PDPT | PRESENT_WRITABLE);
    write_low(LOW_PML4 + 256 * 8, &upper_half);
    write_low_u64(LOW_PDPT, LOW_PD | PRESENT_WRITABLE);
    write_low_u64(LOW_PD, HUGE_PAGE | PRESENT_WRITABLE);
    write_low_u64(
        TRAMPOLINE_BASE + offset_of(&raw const ap_param_page_table),
        LOW_PML4,
    );
}

/// Fills the parameter block for the next AP: it will call `entry(argument)`
/// on the stack ending at `stack_top`.
pub fn set_parameters(stack_top: u64, entry: extern "C" fn(u64) -> !, argument: u64) {
    write_low_u64(
        TRAMPOLINE_BASE + offset_of(&raw const ap_param_stack),
        stack_top,
    );
    write_low_u64(
        TRAMPOLINE_BASE + offset_of(&raw const ap_param_entry),
        entry as usize as u64,
    );
    write_low_u64(
        TRAMPOLINE_BASE + offset_of(&raw const ap_param_argument),
        argument,
    );
}

/// The STARTUP IPI vector that makes a CPU run the trampoline.
pub fn startup_vector() -> u8 {
    (TRAMPOLINE_BASE >> 12) as u8
}

/// Switches this CPU (an AP fresh from the trampoline) to the kernel's page
/// table `kernel_pml4`.
pub fn switch_to_kernel_page_table(kernel_pml4: PhysAddr) {
    // `kernel_pml4` is the page table the boot CPU runs on; its upper
    // half is the one the trampoline table shares, so the code and stack this
    // CPU is using stay mapped at the same addresses across the switch.
    // SAFETY: the current code and stack stay mapped across the switch.
    unsafe {
        Cr3::write(
            PhysFrame::containing_address(kernel_pml4),
            Cr3Flags::empty(),
        )
    };
}
