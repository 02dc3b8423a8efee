//! Does one thing the kernel must not allow, so the kernel kills it:
//!
//! - `kernel-read`: reads the first kernel-half address, `0xffff_8000_0000_0000`
//!   (the page is supervisor-only, or not mapped at all);
//! - `write-ro`: maps a page, makes it read-only with `mprotect`, writes it;
//! - `exec-data`: writes a `ret` into a fresh read-write page and calls it
//!   (the page is not executable: NX);
//! - `null`: reads address 0 (nothing is mapped below the program image).
//!
//! The accesses are inline assembly so the compiler cannot reason about
//! them (in Rust, reading a null pointer is undefined behaviour, not a
//! fault). Surviving is a failure: exit code 1. A bad argument exits 2.

#![no_std]
#![no_main]

use core::arch::asm;

use user::{
    abi::{PAGE_SIZE, prot},
    println, sys,
};

user::entry!(main);

fn main(args: &str) -> i32 {
    let mode = args.trim();
    match mode {
        "kernel-read" => read_byte(0xffff_8000_0000_0000),
        "null" => read_byte(0),
        "write-ro" => write_read_only(),
        "exec-data" => execute_data(),
        _ => {
            println!("usage: fault kernel-read|write-ro|exec-data|null, got '{args}'");
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

fn fresh_page() -> *mut u8 {
    sys::mmap_anonymous(PAGE_SIZE as usize, prot::READ | prot::WRITE).expect("mmap")
}

fn write_read_only() {
    let page = fresh_page();
    // Touch it first, so the page really exists when it becomes read-only.
    // SAFETY: `page` is a fresh, writable mapping of ours.
    unsafe { page.write_volatile(1) };
    // SAFETY: no reference into the page exists; only the asm below uses it.
    unsafe { sys::mprotect(page, PAGE_SIZE as usize, prot::READ) }.expect("mprotect");
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
    // executed, `ret` would come straight back; the call clobbers nothing
    // else, but is declared to clobber everything the ABI allows.
    // SAFETY: a call to a one-instruction function that returns at once.
    unsafe { asm!("call {0}", in(reg) page, clobber_abi("C")) };
}
