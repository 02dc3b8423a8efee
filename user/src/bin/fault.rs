//! Does one thing the kernel must not allow, so the kernel kills it:
//!
//! - `kernel-read`, `kernel-write`, `kernel-exec`: reads, writes or calls
//!   the first page of the kernel image at `0xffff_ffff_8000_0000`, which is
//!   mapped in every address space, but without the USER bit;
//! - `write-ro`: maps a page, makes it read-only with `mprotect`, writes it;
//! - `exec-data`: writes a `ret` into a fresh read-write page and calls it
//!   (the page is not executable: NX);
//! - `null`: reads address 0 (nothing is mapped below the program image);
//! - `peek`: reads `0x2000_0000_0000`, where the `isolation` guards keep
//!   their data in their own address spaces: this one has nothing there;
//! - `invlpgb`, `tlbsync`, `invpcid`: executes a TLB instruction that only
//!   ring 0 may (#GP at CPL 3, or #UD where the CPU lacks it).
//!
//! The accesses are inline assembly so the compiler cannot reason about
//! them (in Rust, reading a null pointer is undefined behaviour, not a
//! fault). Surviving is a failure: exit code 1. A bad argument exits 2.

#![no_std]
#![no_main]

use core::arch::asm;

use user::{
    abi::{PAGE_SIZE, Prot},
    println, sys,
};

user::entry!(main);

/// The first page of the kernel image (`KERNEL_BASE` in the kernel).
const KERNEL_IMAGE: u64 = 0xffff_ffff_8000_0000;
/// Where the `isolation` guards map their private pages.
const OTHER_PROCESS_DATA: u64 = 0x2000_0000_0000;

fn main(args: &str) -> i32 {
    let mode = args.trim();
    match mode {
        "kernel-read" => read_byte(KERNEL_IMAGE),
        "kernel-write" => write_byte(KERNEL_IMAGE),
        "kernel-exec" => call(KERNEL_IMAGE),
        "null" => read_byte(0),
        "peek" => read_byte(OTHER_PROCESS_DATA),
        "write-ro" => write_read_only(),
        "exec-data" => execute_data(),
        "invlpgb" | "tlbsync" | "invpcid" => privileged_tlb_instruction(mode),
        _ => {
            println!(
                "usage: fault kernel-read|kernel-write|kernel-exec|write-ro|exec-data|null|peek\
                 |invlpgb|tlbsync|invpcid, got '{args}'"
            );
            return 2;
        }
    }
    println!("fault: survived {mode}: the kernel did not stop this access");
    1
}

fn read_byte(addr: u64) {
    println!("fault: reading {addr:#x}");
    // The load faults (that is the point); it writes only the output
    // register and touches no memory Rust knows about.
    // SAFETY: a load from an address no Rust object lives at.
    unsafe { asm!("mov {0}, byte ptr [{1}]", out(reg_byte) _, in(reg) addr, options(nostack)) };
}

fn write_byte(addr: u64) {
    println!("fault: writing {addr:#x}");
    // The store faults; no memory Rust knows about is at `addr`.
    // SAFETY: a store to an address no Rust object lives at.
    unsafe { asm!("mov byte ptr [{0}], 1", in(reg) addr, options(nostack)) };
}

fn call(addr: u64) {
    println!("fault: calling {addr:#x}");
    // The instruction fetch faults: that is what this program tests. If
    // the kernel let it run, the target (a `ret` in `exec-data`, kernel
    // code otherwise) would run in ring 3, unable to touch the kernel; the
    // call is declared to clobber everything the C ABI allows.
    // SAFETY: the fetch faults, or runs code that cannot harm the kernel.
    unsafe { asm!("call {0}", in(reg) addr, clobber_abi("C")) };
}

fn fresh_page() -> *mut u8 {
    sys::mmap_anonymous(PAGE_SIZE as usize, Prot::READ | Prot::WRITE).expect("mmap")
}

fn write_read_only() {
    let page = fresh_page();
    // Touch it first, so the page really exists when it becomes read-only.
    // SAFETY: `page` is a fresh, writable mapping of ours.
    unsafe { page.write_volatile(1) };
    // SAFETY: no reference into the page exists; only the asm below uses it.
    unsafe { sys::mprotect(page, PAGE_SIZE as usize, Prot::READ) }.expect("mprotect");
    println!("fault: writing read-only page {page:p}");
    // The store faults; Rust holds no reference to the page.
    // SAFETY: a store to memory only this function knows.
    unsafe { asm!("mov byte ptr [{0}], 2", in(reg) page, options(nostack)) };
}

fn execute_data() {
    const RET: u8 = 0xc3;
    let page = fresh_page();
    // SAFETY: `page` is a fresh, writable mapping of ours.
    unsafe { page.write_volatile(RET) };
    println!("fault: calling into data page {page:p}");
    // The instruction fetch faults (the page is not executable). Were it
    // executed, `ret` would come straight back.
    call(page as u64);
}

fn privileged_tlb_instruction(name: &str) {
    println!("fault: executing {name} in ring 3");
    let descriptor = [0u64; 2];
    // Each raises #GP at CPL 3 (or #UD); were one executed, it would only
    // drop TLB entries (INVLPGB of everything non-global, INVPCID type 3)
    // or wait (TLBSYNC). INVPCID reads the descriptor, which outlives it.
    // SAFETY: the instructions change no memory.
    unsafe {
        match name {
            "invlpgb" => {
                asm!(".byte 0x0f, 0x01, 0xfe", in("rax") 0u64, in("ecx") 0u32, in("edx") 0u32, options(nostack))
            }
            "tlbsync" => asm!(".byte 0x0f, 0x01, 0xff", options(nostack)),
            _ => asm!(
                // INVPCID rax, [rdi]: 66 0F 38 82 /r, ModRM 00 000 111.
                ".byte 0x66, 0x0f, 0x38, 0x82, 0x07",
                in("rax") 3u64,
                in("rdi") descriptor.as_ptr(),
                options(nostack, readonly)
            ),
        }
    }
}
