//! # shootdown: a teaching kernel for TLB shootdown
//!
//! This is the kernel binary. It boots through the `bootloader` crate on one
//! CPU, sets up its descriptor tables, memory and console, reads its command
//! line, prints what hardware it found, and runs the selected workload: the
//! guided demo, or the in-kernel tests.
//!
//! Layout (the crate has no `unsafe`: every instruction is in the `hal`
//! crate, every TLB decision in `mm`):
//! - [`boot`]: the boot order, for the boot CPU and the others;
//! - [`memory`]: the heap and its budget (frames are `hal`'s);
//! - [`acpi`], [`smp`], [`interrupts`]: finding the other CPUs, the CPUs
//!   as `mm`'s CPU sets, and what each interrupt does;
//! - [`exceptions`], [`fatal`], [`backtrace`] and [`symbols`]: how faults
//!   and panics are reported, down to the names of the functions involved;
//! - [`cmdline`]: the options, read from QEMU's fw_cfg;
//! - [`ktest`]: the in-kernel test framework.
//!
//! The decisions about TLBs live in the separate, host-testable `mm` crate.

#![no_std]
#![no_main]
#![forbid(unsafe_code)]

extern crate alloc;

mod acpi;
mod backtrace;
mod banner;
mod boot;
mod cmdline;
mod cpu_features;
mod demo;
mod elf;
mod exceptions;
mod fatal;
mod initrd;
mod interrupts;
mod ktest;
mod logger;
mod memory;
mod smp;
mod symbols;
mod task;
mod tlb;
mod tlb_broadcast;
mod tlb_latency;

// The macro defines the `_start` symbol the bootloader jumps to; its
// exported-symbol attribute is the bootloader crate's, not this crate's code.
bootloader_api::entry_point!(boot::kernel_main, config = &boot::BOOTLOADER_CONFIG);
