//! # shootdown: a teaching kernel for TLB shootdown
//!
//! This is the kernel as a library; its two images are thin binaries around
//! [`boot::kernel_main`]: `kernel` (`src/main.rs`), which `cargo run` boots,
//! and `kernel-tests` (`src/ktest/main.rs`), which adds the in-kernel test
//! suites and is what `cargo test` boots. The kernel boots through the
//! `bootloader` crate on one CPU, sets up its descriptor tables, memory and
//! console, reads its command line, prints what hardware it found, and runs
//! the selected workload: the guided demo, a program, or (in the test image)
//! the in-kernel tests.
//!
//! Layout (the crate has no `unsafe`: every instruction is in the `hal`
//! crate, every TLB decision in `mm`):
//! - [`boot`]: the boot order, for the boot CPU and the others;
//! - [`memory`]: the heap and its budget (frames are `hal`'s);
//! - [`acpi`], [`smp`], [`interrupts`]: finding the other CPUs, the CPUs
//!   as `mm`'s CPU sets, and what each interrupt does;
//! - [`exceptions`], [`fatal`], [`backtrace`] and [`symbols`]: how faults
//!   and panics are reported, down to the names of the functions involved;
//! - [`cmdline`]: the options, read from QEMU's fw_cfg (or, without it, the
//!   image's command-line slot);
//!
//! The decisions about TLBs live in the separate, host-testable `mm` crate.
//!
//! Two kinds of modules: the *pure* ones (parsers of the kernel's input, the
//! TLB mode rules, the latency histogram) run no instruction and are also
//! built for the host, where `cargo test` runs their unit tests; the rest
//! run only on the machine (`target_os = "none"`) and are tested by the
//! in-kernel suites of the `kernel-tests` image.

// The host build (`cargo test -p kernel`) runs the pure modules' unit tests
// with the standard library; the machine build has none.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

extern crate alloc;

// Pure: built and unit-tested on the host too.
pub mod acpi;
pub mod cmdline;
pub mod cpu_features;
pub mod elf;
pub mod histogram;
pub mod initrd;
pub mod profile;
pub mod symbols;
pub mod tlb_mode;

/// Declares modules that run only on the machine: they reach the hardware
/// through `hal`, which is built only for the kernel's target.
macro_rules! on_the_machine {
    ($($module:ident),* $(,)?) => {
        $(
            #[cfg(target_os = "none")]
            pub mod $module;
        )*
    };
}

on_the_machine!(
    backtrace, banner, boot, demo, exceptions, fatal, interrupts, logger, memory, profiler, smp,
    task, tlb,
);
